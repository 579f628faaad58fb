/*
 * ckpt_v3_fixture.h - the fixture of the tests of dt_model's checkpoint files of the fixed layout
 * (test_checkpoint.c: crafted files refused; test_ckpt_state.c: what a checkpoint keeps and gives
 * back): a model, an optimizer and a scaler with one sound version-3 checkpoint of step 5 in a
 * fresh directory, and the helpers that craft and read its copies.
 */
#ifndef DT_TEST_CKPT_V3_FIXTURE_H
#define DT_TEST_CKPT_V3_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ckpt_v3.h"

#include "runtime/checkpoint/ckpt_format.h"
#include "dtrain.h"
#include "tmp_dir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A 9-parameter model (fc:3 on 2 inputs), AdamW (both moment sections), a scaler; one sound
 * version-3 checkpoint of step 5 in dir, and its bytes in img. */
typedef struct fixture {
    char dir[64];
    dt_model *m;
    dt_optimizer *o;
    dt_scaler *sc;
    unsigned char *img;
    size_t len;
    float before[9]; /* the parameters the crafted files must leave alone */
} fixture;

static inline char *path_in(const fixture *f, const char *name)
{
    static char p[256];
    snprintf(p, sizeof p, "%s/%s", f->dir, name);
    return p;
}

static inline void write_whole(const char *path, const void *p, size_t len)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(p, 1, len, fp), len);
    fclose(fp);
}

static inline int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f || tmp_dir_make(f->dir, sizeof f->dir, "dtckpt")) return -1;
    if (dt_model_create(NULL, "fc:3", "2", 7, 4, &f->m)) return -1;
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    oc.kind = DT_OPTIM_ADAMW;
    if (dt_optimizer_create(&oc, dt_model_num_params(f->m), &f->o)) return -1;
    dt_scaler_config scc;
    dt_scaler_defaults(&scc);
    if (dt_scaler_create(&scc, &f->sc)) return -1;
    /* Some optimizer state worth saving. */
    float g[9];
    for (int i = 0; i < 9; i++) g[i] = 0.1f * (float)(i + 1);
    if (dt_optimizer_step(f->o, dt_model_params(f->m), g)) return -1;
    if (!(f->img = ckpt_v3_image(f->m, f->o, f->sc, NULL, 5, &f->len))) return -1;
    write_whole(path_in(f, "ckpt-0000000005.dtc"), f->img, f->len);
    /* The parameters move on, so a load that happens shows in them. */
    for (int i = 0; i < 9; i++) dt_model_params(f->m)[i] += 1.0f;
    memcpy(f->before, dt_model_params(f->m), sizeof f->before);
    *state = f;
    return 0;
}

static inline int teardown(void **state)
{
    fixture *f = *state;
    if (tmp_dir_remove(f->dir)) return -1;
    dt_model_free(f->m);
    dt_optimizer_free(f->o);
    dt_scaler_free(f->sc);
    free(f->img);
    free(f);
    return 0;
}

static inline ckpt_header *hdr(unsigned char *img) { return (ckpt_header *)(void *)img; }
static inline ckpt_scaler *scl(unsigned char *img) { return (ckpt_scaler *)(void *)(img + sizeof(ckpt_header)); }
static inline float *section(unsigned char *img, int i)
{
    size_t off = sizeof(ckpt_header) + sizeof(ckpt_scaler);
    if (hdr(img)->version >= 3) {
        ckpt_data cd;
        memcpy(&cd, img + off, sizeof cd);
        off += sizeof cd + 2 * (size_t)cd.channels * sizeof(float);
    }
    for (int k = 0; k < i; k++) off += hdr(img)->section_n[k] * sizeof(float);
    return (float *)(void *)(img + off);
}

/* Writes img (len bytes, re-sealed) as ckpt-0000000007.dtc, reads it, and expects status `want`
 * with every one of the NULL-terminated substrings in the message, and the model untouched. */
static inline void expect_refused(fixture *f, unsigned char *img, size_t len, dt_status want, ...)
{
    ckpt_seal(img, len);
    const char *p = path_in(f, "ckpt-0000000007.dtc");
    write_whole(p, img, len);
    long step = -1;
    int world = -1;
    dt_status s = ckpt_read_file(p, 7, f->m, f->o, f->sc, &step, &world);
    if (s != want) fail_msg("status %d (want %d): %s", (int)s, (int)want, dt_last_error());
    va_list ap;
    va_start(ap, want);
    for (const char *must; (must = va_arg(ap, const char *));)
        if (!strstr(dt_last_error(), must)) fail_msg("message '%s' lacks '%s'", dt_last_error(), must);
    va_end(ap);
    assert_memory_equal(dt_model_params(f->m), f->before, sizeof f->before);
    assert_int_equal(step, -1);
    unlink(p);
}

/* A fresh copy of the sound image with the step of its new name (7). */
static inline unsigned char *copy7(const fixture *f)
{
    /* Zeroed slack: tests that claim a longer file (f->len + 4) write and checksum those bytes, which
     * were uninitialised heap before (valgrind: crc32_z and write(2) over uninitialised bytes). */
    unsigned char *c = calloc(1, f->len + 4096 * sizeof(float));
    assert_non_null(c);
    memcpy(c, f->img, f->len);
    hdr(c)->step = 7;
    return c;
}

#endif
