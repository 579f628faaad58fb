/*
 * ckpt_roundtrip_base.h - what the checkpoint round-trip property's parts share (ckpt_roundtrip.h
 * describes the property): the input cursor, the first broken promise and RT_CHECK, which records
 * it and leaves through the function's `out` label, and small file helpers.
 */
#ifndef DT_TESTS_CKPT_ROUNDTRIP_BASE_H
#define DT_TESTS_CKPT_ROUNDTRIP_BASE_H

#include "runtime/checkpoint/ckpt_format.h"
#include "runtime/model/model.h"
#include "dtrain.h"

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct ckpt_rt {
    const uint8_t *d;
    size_t size, pos;
    char msg[1024]; /* the first broken promise */
    int failed;
    int saved; /* the writer accepted the model's state */
} ckpt_rt;

static void ckpt_rt_fail(ckpt_rt *rt, const char *file, int line, const char *fmt, ...)
{
    if (rt->failed++) return;
    const char *slash = strrchr(file, '/');
    int n = snprintf(rt->msg, sizeof rt->msg, "%s:%d: ", slash ? slash + 1 : file, line);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rt->msg + n, sizeof rt->msg - (size_t)n, fmt, ap);
    va_end(ap);
}

/* On a broken promise: record it and leave through the function's `out` label. */
#define RT_CHECK(cond, ...)                                                                                            \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            ckpt_rt_fail(rt, __FILE__, __LINE__, __VA_ARGS__);                                                         \
            goto out;                                                                                                  \
        }                                                                                                              \
    } while (0)

static unsigned rt_byte(ckpt_rt *rt) { return rt->pos < rt->size ? rt->d[rt->pos++] : 0; }

static uint64_t rt_bits(ckpt_rt *rt, int bytes)
{
    uint64_t u = 0;
    for (int k = 0; k < bytes; k++) u |= (uint64_t)rt_byte(rt) << (8 * k);
    return u;
}

/* A value: any fp32 bit pattern (raw), else a small finite one from one byte. */
static float rt_value(ckpt_rt *rt, int raw)
{
    if (!raw) return (float)(int8_t)rt_byte(rt) / 8.0f;
    const uint32_t u = (uint32_t)rt_bits(rt, 4);
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* Removes every entry of dir (made if missing); returns how many there were. */
static int rt_clear_dir(const char *dir)
{
    mkdir(dir, 0700);
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    char p[512];
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
        n++;
    }
    closedir(d);
    return n;
}

static unsigned char *rt_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* The two files are equal byte for byte (0), else 1 with why in rt. */
static int rt_same_files(ckpt_rt *rt, const char *a, const char *b)
{
    size_t na = 0, nb = 0;
    unsigned char *fa = rt_slurp(a, &na), *fb = rt_slurp(b, &nb);
    RT_CHECK(fa && fb, "cannot read %s or %s", a, b);
    size_t at = 0;
    while (at < na && at < nb && fa[at] == fb[at]) at++;
    RT_CHECK(na == nb && at == na, "written again from what was read, %s differs from %s at byte %zu (%zu, %zu bytes)",
             b, a, at, na, nb);
out:
    free(fa);
    free(fb);
    return rt->failed;
}

static int rt_same_bits(const float *a, const float *b, size_t n, size_t *at)
{
    for (*at = 0; *at < n; (*at)++)
        if (memcmp(&a[*at], &b[*at], sizeof *a)) return 0;
    return 1;
}

#endif
