/*
 * test_checkpoint.c - dt_model's checkpoint reader trusts nothing in a file of the fixed layout
 * (format versions 1 to 3, which users still have on disk; ckpt_v3.h lays them out): CRC-valid
 * crafted files, one per header and section field, are refused with a message naming the field and
 * both values, and leave the model untouched; FIFOs and directories named like checkpoints are
 * skipped without blocking; a file-size limit is an error, not a SIGXFSZ death; weights-only save
 * and load; and the round-trip property of ckpt_roundtrip.h (the fuzz harness's) over seeded
 * random states. The named-section files of version 4 are test_ckpt_sections.c's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "block_guard.h"
#include "ckpt_roundtrip.h"
#include "ckpt_v3.h"

#include "runtime/checkpoint/ckpt_format.h"
#include "dtrain.h"

#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
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

static char *path_in(const fixture *f, const char *name)
{
    static char p[256];
    snprintf(p, sizeof p, "%s/%s", f->dir, name);
    return p;
}

static void write_whole(const char *path, const void *p, size_t len)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(p, 1, len, fp), len);
    fclose(fp);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/dtckpt-XXXXXX");
    if (!mkdtemp(f->dir)) return -1;
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

static int teardown(void **state)
{
    fixture *f = *state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
    if (system(cmd) != 0) return -1;
    dt_model_free(f->m);
    dt_optimizer_free(f->o);
    dt_scaler_free(f->sc);
    free(f->img);
    free(f);
    return 0;
}

static ckpt_header *hdr(unsigned char *img) { return (ckpt_header *)(void *)img; }
static ckpt_scaler *scl(unsigned char *img) { return (ckpt_scaler *)(void *)(img + sizeof(ckpt_header)); }
static float *section(unsigned char *img, int i)
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
static void expect_refused(fixture *f, unsigned char *img, size_t len, dt_status want, ...)
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
static unsigned char *copy7(const fixture *f)
{
    /* Zeroed slack: tests that claim a longer file (f->len + 4) write and checksum those bytes, which
     * were uninitialised heap before (valgrind: crc32_z and write(2) over uninitialised bytes). */
    unsigned char *c = calloc(1, f->len + 4096 * sizeof(float));
    assert_non_null(c);
    memcpy(c, f->img, f->len);
    hdr(c)->step = 7;
    return c;
}

static void test_sound_file_loads(void **state)
{
    fixture *f = *state;
    unsigned char *c = copy7(f);
    ckpt_seal(c, f->len);
    const char *p = path_in(f, "ckpt-0000000007.dtc");
    write_whole(p, c, f->len);
    long step = -1;
    int world = -1;
    assert_int_equal(ckpt_read_file(p, 7, f->m, f->o, f->sc, &step, &world), DT_OK);
    assert_int_equal(step, 7);
    assert_int_equal(world, 1);
    assert_memory_equal(dt_model_params(f->m), section(f->img, 0), sizeof f->before);
    memcpy(dt_model_params(f->m), f->before, sizeof f->before);
    unlink(p);
    free(c);
}

/* The audit's reproduction: section 0 claims the model's count + 4096, and 4096 zero floats are
 * appended, CRCs valid. Before the fix the reader copied them past the parameter buffer. */
static void test_section0_longer(void **state)
{
    fixture *f = *state;
    unsigned char *c = malloc(f->len + 4096 * sizeof(float));
    size_t s0 = sizeof(ckpt_header) + sizeof(ckpt_scaler);
    size_t p0 = 9 * sizeof(float);
    memcpy(c, f->img, s0 + p0);
    memset(c + s0 + p0, 0, 4096 * sizeof(float));
    memcpy(c + s0 + p0 + 4096 * sizeof(float), f->img + s0 + p0, f->len - s0 - p0);
    hdr(c)->step = 7;
    hdr(c)->section_n[0] += 4096;
    expect_refused(f, c, f->len + 4096 * sizeof(float), DT_ERR_CORRUPT, "section 0 (parameters) claims 4105 floats",
                   "the model has 9", NULL);
    /* The same with nparams raised too. */
    hdr(c)->nparams += 4096;
    expect_refused(f, c, f->len + 4096 * sizeof(float), DT_ERR_CORRUPT, "nparams is 4105", "9 parameters", NULL);
    free(c);
}

static void test_section0_shorter(void **state)
{
    fixture *f = *state;
    unsigned char *c = malloc(f->len);
    const size_t s0 = (size_t)((unsigned char *)section(f->img, 0) - f->img);
    memcpy(c, f->img, s0 + 5 * sizeof(float));
    memcpy(c + s0 + 5 * sizeof(float), f->img + s0 + 9 * sizeof(float), f->len - s0 - 9 * sizeof(float));
    hdr(c)->step = 7;
    hdr(c)->section_n[0] = 5;
    expect_refused(f, c, f->len - 4 * sizeof(float), DT_ERR_CORRUPT, "claims 5 floats", "the model has 9", NULL);
    free(c);
}

/* A huge count is refused from the header alone, before any allocation (the fuzzer saw a 6 GB
 * malloc for this 9-parameter model; the old reader then failed on the read, not on the field). */
static void test_huge_count_no_alloc(void **state)
{
    fixture *f = *state;
    unsigned char *c = copy7(f);
    hdr(c)->section_n[0] = 1500000000ull;
    expect_refused(f, c, f->len, DT_ERR_CORRUPT, "claims 1500000000 floats", NULL);
    free(c);
}

static void test_step_fields(void **state)
{
    fixture *f = *state;
    unsigned char *c = copy7(f);
    hdr(c)->step = (int64_t)1 << 62;
    expect_refused(f, c, f->len, DT_ERR_CORRUPT, "step is 4611686018427387904", "file name says step 7", NULL);
    hdr(c)->step = -1;
    expect_refused(f, c, f->len, DT_ERR_CORRUPT, "step is -1", "step 7", NULL);
    hdr(c)->step = 7;
    hdr(c)->optim_t = INT_MIN;
    expect_refused(f, c, f->len, DT_ERR_CORRUPT, "optim_t", "-2147483648", ">= 0", NULL);
    free(c);
}

static void test_header_fields(void **state)
{
    fixture *f = *state;
    unsigned char *c = copy7(f);
    hdr(c)->world = 0;
    expect_refused(f, c, f->len, DT_ERR_CORRUPT, "world is 0", "1 to 16777216", NULL);
    hdr(c)->world = 1u << 30;
    expect_refused(f, c, f->len, DT_ERR_CORRUPT, "world is 1073741824", NULL);
    hdr(c)->world = 1;
    hdr(c)->optim_kind = 7;
    expect_refused(f, c, f->len, DT_ERR_CORRUPT, "optim_kind is 7", NULL);
    hdr(c)->optim_kind = DT_OPTIM_ADAMW;
    hdr(c)->reserved = 3;
    expect_refused(f, c, f->len, DT_ERR_CORRUPT, "reserved", "3", NULL);
    hdr(c)->reserved = 0;
    hdr(c)->section_n[2] = 10;
    expect_refused(f, c, f->len + 4, DT_ERR_CORRUPT, "section 2", "claims 10 floats", NULL);
    hdr(c)->section_n[2] = 9;
    hdr(c)->fingerprint ^= 1;
    expect_refused(f, c, f->len, DT_ERR_INVALID_ARG, "another model", NULL);
    hdr(c)->fingerprint ^= 1;
    hdr(c)->version = CKPT_VERSION + 1;
    expect_refused(f, c, f->len, DT_ERR_INVALID_ARG, "format version 5, written by a newer dtrain",
                   "reads versions 1 to 4", "move the file out", NULL);
    hdr(c)->version = 0;
    expect_refused(f, c, f->len, DT_ERR_CORRUPT, "version 0", "versions 1 to 4", NULL);
    free(c);
}

static void test_scaler_fields(void **state)
{
    fixture *f = *state;
    unsigned char *c = copy7(f);
    scl(c)->scale = NAN;
    expect_refused(f, c, f->len, DT_ERR_CORRUPT, "scaler field scale is nan", NULL);
    scl(c)->scale = -4;
    expect_refused(f, c, f->len, DT_ERR_CORRUPT, "scale is -4", NULL);
    scl(c)->scale = 1024;
    scl(c)->present = 2;
    expect_refused(f, c, f->len, DT_ERR_CORRUPT, "present is 2", NULL);
    scl(c)->present = 1;
    scl(c)->updates = 3;
    scl(c)->skipped = 4;
    expect_refused(f, c, f->len, DT_ERR_CORRUPT, "updates 3 and skipped 4", NULL);
    scl(c)->skipped = 0;
    scl(c)->good_steps = -1;
    expect_refused(f, c, f->len, DT_ERR_CORRUPT, "good_steps -1", NULL);
    free(c);
}

static void test_section_values_and_size(void **state)
{
    fixture *f = *state;
    unsigned char *c = copy7(f);
    section(c, 0)[3] = NAN;
    expect_refused(f, c, f->len, DT_ERR_CORRUPT, "section 0 holds nan at index 3", NULL);
    memcpy(c, f->img, f->len);
    hdr(c)->step = 7;
    section(c, 2)[8] = -1.0f;
    expect_refused(f, c, f->len, DT_ERR_CORRUPT, "section 2 holds -1 at index 8", ">= 0", NULL);
    memcpy(c, f->img, f->len);
    hdr(c)->step = 7;
    expect_refused(f, c, f->len - 4, DT_ERR_CORRUPT, "truncated", NULL);
    memset(c + f->len, 0, 4);
    expect_refused(f, c, f->len + 4, DT_ERR_CORRUPT, "data after its last section", NULL);
    free(c);
}

static void test_names(void **state)
{
    (void)state;
    long st = -1;
    assert_true(ckpt_name_step("ckpt-0000000005.dtc", &st) && st == 5);
    assert_true(ckpt_name_step("ckpt-12345678901.dtc", &st) && st == 12345678901L);
    assert_true(ckpt_name_step("ckpt-999999999999999999.dtc", &st) && st == 999999999999999999L);
    /* One name per step: the writer's. */
    const char *bad[] = {"ckpt-5.dtc",   "ckpt-00000000005.dtc", "ckpt-+5.dtc",
                         "ckpt- 5.dtc",  "ckpt--5.dtc",          "ckpt-0000000005.dtc.tmp.123",
                         "ckpt-.dtc",    "ckpt-0000000005.dtcx", "ckpt-1000000000000000000.dtc",
                         "ckpt-0x5.dtc", "xckpt-0000000005.dtc"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (ckpt_name_step(bad[i], &st)) fail_msg("'%s' taken as a checkpoint name", bad[i]);
}

/* A FIFO and a directory named like newer checkpoints are skipped without blocking: the sound
 * step-5 file loads. */
static void test_fifo_and_directory(void **state)
{
    fixture *f = *state;
    assert_int_equal(mkfifo(path_in(f, "ckpt-0000000009.dtc"), 0644), 0);
    assert_int_equal(mkdir(path_in(f, "ckpt-0000000008.dtc"), 0755), 0);
    long step = -1;
    int world = -1;
    assert_int_equal(ckpt_read_file(path_in(f, "ckpt-0000000008.dtc"), 8, f->m, f->o, f->sc, &step, &world),
                     DT_ERR_CORRUPT);
    assert_non_null(strstr(dt_last_error(), "is a directory, not a checkpoint file"));
    block_guard_start(20);
    assert_int_equal(ckpt_read_file(path_in(f, "ckpt-0000000009.dtc"), 9, f->m, f->o, f->sc, &step, &world),
                     DT_ERR_CORRUPT);
    assert_non_null(strstr(dt_last_error(), "is a FIFO"));
    assert_int_equal(dt_checkpoint_load_latest(NULL, f->dir, f->m, f->o, f->sc, NULL, &step), DT_OK);
    block_guard_stop();
    assert_int_equal(step, 5);
    unlink(path_in(f, "ckpt-0000000009.dtc"));
    rmdir(path_in(f, "ckpt-0000000008.dtc"));
    memcpy(dt_model_params(f->m), f->before, sizeof f->before);
}

/* The load falls back over a crafted newer file to the sound one. */
static void test_load_latest_skips_crafted(void **state)
{
    fixture *f = *state;
    unsigned char *c = copy7(f);
    hdr(c)->section_n[0] = 9 + 4096;
    ckpt_seal(c, f->len);
    write_whole(path_in(f, "ckpt-0000000007.dtc"), c, f->len);
    long step = -1;
    assert_int_equal(dt_checkpoint_load_latest(NULL, f->dir, f->m, f->o, f->sc, NULL, &step), DT_OK);
    assert_int_equal(step, 5);
    unlink(path_in(f, "ckpt-0000000007.dtc"));
    memcpy(dt_model_params(f->m), f->before, sizeof f->before);
    free(c);
}

/* A newer dtrain's file (format version 5) is refused, not skipped: taking the older sound file
 * would resume behind the newer run's state and, later, write over its file of the same step. */
static void test_load_latest_refuses_newer(void **state)
{
    fixture *f = *state;
    unsigned char *c = copy7(f);
    hdr(c)->version = CKPT_VERSION + 1;
    write_whole(path_in(f, "ckpt-0000000007.dtc"), c, f->len);
    long step = -1;
    assert_int_equal(dt_checkpoint_load_latest(NULL, f->dir, f->m, f->o, f->sc, NULL, &step), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "ckpt-0000000007.dtc has format version 5, written by a newer dtrain"));
    assert_memory_equal(dt_model_params(f->m), f->before, sizeof f->before);
    /* Moved away, as the message says, the older file loads. */
    char newer[256];
    snprintf(newer, sizeof newer, "%s", path_in(f, "newer.dtc")); /* path_in's buffer is static */
    assert_int_equal(rename(path_in(f, "ckpt-0000000007.dtc"), newer), 0);
    assert_int_equal(dt_checkpoint_load_latest(NULL, f->dir, f->m, f->o, f->sc, NULL, &step), DT_OK);
    assert_int_equal(step, 5);
    unlink(newer);
    memcpy(dt_model_params(f->m), f->before, sizeof f->before);
    /* A version no dtrain will write soon (a flipped high bit): damage, skipped for the older file. */
    hdr(c)->version = CKPT_VERSION_NEWER_MAX + 1;
    write_whole(path_in(f, "ckpt-0000000007.dtc"), c, f->len);
    assert_int_equal(dt_checkpoint_load_latest(NULL, f->dir, f->m, f->o, f->sc, NULL, &step), DT_OK);
    assert_int_equal(step, 5);
    memcpy(dt_model_params(f->m), f->before, sizeof f->before);
    free(c);
}

/* RLIMIT_FSIZE below the checkpoint's size: an error naming the limit, no temporary file left,
 * the previous checkpoint intact, and this process alive (SIGXFSZ used to kill it). */
static void test_file_size_limit(void **state)
{
    fixture *f = *state;
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 100;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    dt_status s = dt_checkpoint_save(NULL, f->dir, f->m, f->o, f->sc, NULL, 6);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    assert_int_equal(s, DT_ERR_IO);
    assert_non_null(strstr(dt_last_error(), "File too large"));
    assert_non_null(strstr(dt_last_error(), "limit 100 bytes"));
    assert_non_null(strstr(dt_last_error(), "ulimit -f"));
    char tmp[320];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path_in(f, "ckpt-0000000006.dtc"), (int)getpid());
    assert_int_equal(access(tmp, F_OK), -1);
    assert_int_equal(access(path_in(f, "ckpt-0000000006.dtc"), F_OK), -1);
    sigset_t pend;
    sigpending(&pend);
    assert_false(sigismember(&pend, SIGXFSZ));
    long step = -1;
    assert_int_equal(dt_checkpoint_load_latest(NULL, f->dir, f->m, f->o, f->sc, NULL, &step), DT_OK);
    assert_int_equal(step, 5);
    memcpy(dt_model_params(f->m), f->before, sizeof f->before);
}

/* Save and load without an optimizer: weights only, what inference needs. */
static void test_weights_only(void **state)
{
    fixture *f = *state;
    char wdir[128];
    snprintf(wdir, sizeof wdir, "%s/weights", f->dir);
    assert_int_equal(dt_checkpoint_save(NULL, wdir, f->m, NULL, NULL, NULL, 3), DT_OK);
    for (int i = 0; i < 9; i++) dt_model_params(f->m)[i] = 0;
    long step = -1;
    assert_int_equal(dt_checkpoint_load_latest(NULL, wdir, f->m, NULL, NULL, NULL, &step), DT_OK);
    assert_int_equal(step, 3);
    assert_memory_equal(dt_model_params(f->m), f->before, sizeof f->before);
    /* A weights-only file cannot resume an optimizer. */
    assert_int_equal(dt_checkpoint_load_latest(NULL, wdir, f->m, f->o, NULL, NULL, &step), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "weights only"));
    /* A full checkpoint loads its weights without an optimizer. */
    assert_int_equal(dt_checkpoint_load_latest(NULL, f->dir, f->m, NULL, NULL, NULL, &step), DT_OK);
    assert_int_equal(step, 5);
    assert_memory_equal(dt_model_params(f->m), section(f->img, 0), sizeof f->before);
    memcpy(dt_model_params(f->m), f->before, sizeof f->before);
    assert_int_equal(dt_checkpoint_save(NULL, wdir, NULL, NULL, NULL, NULL, 3), DT_ERR_INVALID_ARG);
    assert_int_equal(dt_checkpoint_save(NULL, wdir, f->m, NULL, NULL, NULL, -1), DT_ERR_INVALID_ARG);
}

/* A checkpoint without scaler state, or with state this run's settings refuse, leaves the scaler
 * at its initial state, as the header says, whatever it did before the load (a loop that rolls
 * back mid-run): before, it kept its backed-off scale and its window of overflows, and rank 0 (the
 * one that reads the file) then scaled differently from the ranks that took its state. */
static void test_scaler_restarts(void **state)
{
    fixture *f = *state;
    char sdir[128];
    snprintf(sdir, sizeof sdir, "%s/noscaler", f->dir);
    assert_int_equal(dt_checkpoint_save(NULL, sdir, f->m, f->o, NULL, NULL, 4), DT_OK);
    assert_int_equal(dt_scaler_update(f->sc, 1), DT_OK);
    assert_int_equal(dt_scaler_update(f->sc, 1), DT_OK);
    assert_true(dt_scaler_scale(f->sc) < 65536.0f && dt_scaler_skipped(f->sc) == 2);
    long step = -1;
    assert_int_equal(dt_checkpoint_load_latest(NULL, sdir, f->m, f->o, f->sc, NULL, &step), DT_OK);
    assert_int_equal(step, 4);
    dt_scaler_state st;
    dt_scaler_get_state(f->sc, &st);
    assert_true(st.scale == 65536.0 && st.good_steps == 0 && st.updates == 0 && st.skipped == 0);

    /* Saved after 10 good steps; loaded into a scaler that grows every 5 (good_steps 10 is out of
     * its range) after it backed off. */
    char gdir[128];
    snprintf(gdir, sizeof gdir, "%s/grown", f->dir);
    for (int i = 0; i < 10; i++) assert_int_equal(dt_scaler_update(f->sc, 0), DT_OK);
    assert_int_equal(dt_checkpoint_save(NULL, gdir, f->m, f->o, f->sc, NULL, 6), DT_OK);
    dt_scaler_config scc;
    dt_scaler_defaults(&scc);
    scc.growth_interval = 5;
    dt_scaler *other = NULL;
    assert_int_equal(dt_scaler_create(&scc, &other), DT_OK);
    assert_int_equal(dt_scaler_update(other, 1), DT_OK);
    assert_int_equal(dt_checkpoint_load_latest(NULL, gdir, f->m, f->o, other, NULL, &step), DT_OK);
    dt_scaler_get_state(other, &st);
    assert_true(st.scale == 65536.0 && st.good_steps == 0 && st.updates == 0 && st.skipped == 0);
    dt_scaler_free(other);
}

/* A sound checkpoint of another optimizer is refused as a user error, naming both. */
static void test_other_optimizer(void **state)
{
    fixture *f = *state;
    dt_optim_config oc;
    dt_optim_defaults(&oc); /* sgd with momentum */
    dt_optimizer *sgd;
    assert_int_equal(dt_optimizer_create(&oc, 9, &sgd), DT_OK);
    long step = -1;
    assert_int_equal(dt_checkpoint_load_latest(NULL, f->dir, f->m, sgd, NULL, NULL, &step), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "optimizer adamw, this run uses sgd"));
    assert_memory_equal(dt_model_params(f->m), f->before, sizeof f->before);
    dt_optimizer_free(sgd);
}

/* Version 3's data block: the data position and the normalization come back as saved; a block
 * whose figures are crafted is refused, and one of other data (channels) is another dataset's. */
static void test_data_block(void **state)
{
    fixture *f = *state;
    float mean[3] = {0.5f, 0.25f, 0.125f}, sd[3] = {2, 3, 4};
    const dt_ckpt_data in = {
        .epoch = 4, .offset = 1234, .normalize = DT_NORMALIZE_STANDARD, .channels = 3, .mean = mean, .std = sd};
    assert_int_equal(dt_checkpoint_save(NULL, f->dir, f->m, f->o, f->sc, &in, 9), DT_OK);
    float m2[3] = {0}, s2[3] = {0};
    dt_ckpt_data out = {.channels = 3, .mean = m2, .std = s2};
    long step = -1;
    assert_int_equal(dt_checkpoint_load_latest(NULL, f->dir, f->m, f->o, f->sc, &out, &step), DT_OK);
    assert_int_equal(step, 9);
    assert_int_equal(out.present, 1);
    assert_int_equal(out.epoch, 4);
    assert_int_equal(out.offset, 1234);
    assert_int_equal(out.normalize, DT_NORMALIZE_STANDARD);
    assert_memory_equal(m2, mean, sizeof mean);
    assert_memory_equal(s2, sd, sizeof sd);
    /* Other data: 1 channel, not 3. */
    dt_ckpt_data other = {.channels = 1, .mean = m2, .std = s2};
    assert_int_equal(dt_checkpoint_load_latest(NULL, f->dir, f->m, f->o, f->sc, &other, &step), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "3 channels"));
    /* The same block in a version-3 file loads the same. */
    unlink(path_in(f, "ckpt-0000000009.dtc"));
    size_t len;
    unsigned char *img = ckpt_v3_image(f->m, f->o, f->sc, &in, 9, &len);
    write_whole(path_in(f, "ckpt-0000000009.dtc"), img, len);
    memset(m2, 0, sizeof m2);
    memset(&out, 0, sizeof out);
    out.channels = 3, out.mean = m2, out.std = s2;
    assert_int_equal(dt_checkpoint_load_latest(NULL, f->dir, f->m, f->o, f->sc, &out, &step), DT_OK);
    assert_int_equal(step, 9);
    assert_int_equal(out.present, 1);
    assert_int_equal(out.offset, 1234);
    assert_memory_equal(m2, mean, sizeof mean);
    unlink(path_in(f, "ckpt-0000000009.dtc"));
    /* Crafted blocks, sealed with valid CRCs. */
    hdr(img)->step = 7;
    const size_t off = sizeof(ckpt_header) + sizeof(ckpt_scaler);
    ckpt_data *cd = (ckpt_data *)(void *)(img + off);
    float *fl = (float *)(void *)(img + off + sizeof *cd);
    fl[4] = -1; /* std of channel 1 */
    expect_refused(f, img, len, DT_ERR_CORRUPT, "std -1 of channel 1", NULL);
    fl[4] = 3;
    cd->epoch = -2;
    expect_refused(f, img, len, DT_ERR_CORRUPT, "epoch -2", NULL);
    cd->epoch = 4;
    cd->channels = 2000000;
    expect_refused(f, img, len, DT_ERR_CORRUPT, "2000000 channels", NULL);
    cd->channels = 3;
    free(img);
}

/* The round-trip property of ckpt_roundtrip.h (fuzz_ckpt_roundtrip's) over 200 seeded random
 * inputs: every state the writer accepts reads back bit for bit and is written again as the same
 * file; it refuses exactly those the readers would refuse. Both kinds must occur, or the test
 * proves nothing. */
static void test_roundtrip_property(void **state)
{
    (void)state;
    char dir[64], sub[80];
    snprintf(dir, sizeof dir, "/tmp/dtckrt-XXXXXX");
    assert_non_null(mkdtemp(dir));
    uint64_t x = 0x9e3779b97f4a7c15ull;
    int saved = 0, refused = 0, with_sections = 0;
    unsigned char buf[700];
    for (int i = 0; i < 200; i++) {
        for (size_t k = 0; k < sizeof buf; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64 */
            buf[k] = (unsigned char)(x >> 24);
        }
        /* Random 64-bit steps and positions are nearly all out of range: a quarter of the inputs. */
        if (i % 4) buf[0] &= 0x7f;
        const size_t n = 24 + buf[1] * 2u + buf[2];
        char msg[1024];
        int ok = 0;
        if (ckpt_rt_check(buf, n, dir, msg, sizeof msg, &ok)) fail_msg("input %d (mode 0x%02x): %s", i, buf[0], msg);
        saved += ok;
        refused += !ok;
        with_sections += ok && (buf[0] & 0x20);
    }
    print_message("round trip: %d states saved and read back (%d with named sections), %d refused\n", saved,
                  with_sections, refused);
    assert_true(saved >= 60 && refused >= 40 && with_sections >= 20);
    for (const char *d = "abst"; *d; d++) {
        snprintf(sub, sizeof sub, "%s/%c", dir, *d);
        rt_clear_dir(sub);
        rmdir(sub);
    }
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test_setup_teardown(test_sound_file_loads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_section0_longer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_section0_shorter, setup, teardown),
        cmocka_unit_test_setup_teardown(test_huge_count_no_alloc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_step_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(test_header_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scaler_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(test_section_values_and_size, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fifo_and_directory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_latest_skips_crafted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_latest_refuses_newer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_size_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_weights_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_optimizer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scaler_restarts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_data_block, setup, teardown),
        cmocka_unit_test(test_roundtrip_property),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
