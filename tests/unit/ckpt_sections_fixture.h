/*
 * ckpt_sections_fixture.h - what the tests of section checkpoints share (test_ckpt_sections.c:
 * dt_ckpt_* files; test_ckpt_model_files.c: dt_model's): a fresh directory per test, an error
 * checked by status and message, a file's bytes read, written back and searched for a section.
 */
#ifndef DT_TEST_CKPT_SECTIONS_FIXTURE_H
#define DT_TEST_CKPT_SECTIONS_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/checkpoint/ckpt_format.h"
#include "dtrain.h"
#include "tmp_dir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char dir[64];

static inline const char *at(const char *name)
{
    static char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

static inline int setup(void **state)
{
    (void)state;
    return tmp_dir_make(dir, sizeof dir, "dtsec");
}

static inline int teardown(void **state)
{
    (void)state;
    return tmp_dir_remove(dir);
}

static inline void expect_error(dt_status got, dt_status want, const char *must)
{
    if (got != want) fail_msg("status %d (want %d): %s", (int)got, (int)want, dt_last_error());
    if (must && !strstr(dt_last_error(), must)) fail_msg("message '%s' lacks '%s'", dt_last_error(), must);
}

/* The bytes of a file (64 spare bytes after them), written back, and section name's entry in
 * them with the offset of its data. */
static inline unsigned char *load(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    *len = (size_t)ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *b = malloc(*len + 64);
    assert_int_equal(fread(b, 1, *len, fp), *len);
    fclose(fp);
    return b;
}

static inline void save(const char *path, const void *p, size_t len)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(p, 1, len, fp), len);
    fclose(fp);
}

static inline ckpt4_entry *entry(unsigned char *img, const char *name, size_t *data_off)
{
    ckpt4_header h;
    memcpy(&h, img, sizeof h);
    size_t off = sizeof h + h.nsections * sizeof(ckpt4_entry);
    for (uint32_t i = 0; i < h.nsections; i++) {
        ckpt4_entry *e = (ckpt4_entry *)(void *)(img + sizeof h + i * sizeof *e);
        if (strcmp(e->name, name) == 0) {
            if (data_off) *data_off = off;
            return e;
        }
        off += (size_t)e->bytes;
    }
    fail_msg("no section %s", name);
    return NULL;
}

#endif
