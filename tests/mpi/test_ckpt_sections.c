/*
 * test_ckpt_sections.c - checkpoints of named sections across ranks (run at np 2 and 3): the file
 * holds rank 0's bytes of a plain section and every rank's own blob of a per-rank one; every rank
 * reads the same bytes back (a section of 65 MiB + 3 bytes crosses the 64 MiB broadcast chunk at
 * an odd length), and its own blob. Every failure reaches every rank, with the cause,
 * and no rank is left waiting: sections that differ between ranks, a read of another section on
 * one rank, a missing section, data missing on one rank, a file-size limit on rank 0, a directory
 * that cannot be made, a dt_model whose rank 0 holds a NaN parameter (the readers would skip that
 * file, so dt_checkpoint_save refuses it on every rank).
 */
#define _GNU_SOURCE /* mkdtemp */
#include "dtrain.h"
#include "mpi_check.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* s must be want with every substring in the message. */
static void expect(dt_status s, dt_status want, const char *a, const char *b, const char *what)
{
    CHECK(s == want && (!a || strstr(dt_last_error(), a)) && (!b || strstr(dt_last_error(), b)),
          "%s: status %d (want %d): %s", what, (int)s, (int)want, dt_last_error());
}

#define BIG (((size_t)65 << 20) + 3)

static unsigned char pattern(size_t i, int who) { return (unsigned char)(i * 131 + (size_t)who * 17 + (i >> 20)); }

/* Step `step` of dir: "a" (rank 0's pattern; other ranks pass their own or NULL), "big", and the
 * per-rank "rng" (each rank's 24 bytes). */
static dt_status write_step(dt_ctx *ctx, const char *dir, long step, unsigned char *big)
{
    unsigned char a[1003], rng[24];
    for (size_t i = 0; i < sizeof a; i++) a[i] = pattern(i, rank);
    for (size_t i = 0; i < sizeof rng; i++) rng[i] = pattern(i, 100 + rank);
    for (size_t i = 0; i < BIG; i++) big[i] = pattern(i, rank + (int)step);
    dt_ckpt_writer *w;
    dt_status s = dt_ckpt_begin(ctx, dir, step, &w);
    if (s) return s;
    if ((s = dt_ckpt_add(w, "a", rank % 2 ? NULL : a, sizeof a)) || (s = dt_ckpt_add(w, "big", big, BIG)) ||
        (s = dt_ckpt_add_per_rank(w, "rng", rng, sizeof rng))) {
        dt_ckpt_discard(w);
        return s;
    }
    return dt_ckpt_commit(w);
}

static void test_round_trip(dt_ctx *ctx, const char *dir)
{
    unsigned char *big = malloc(BIG);
    CHECK(write_step(ctx, dir, 10, big) == DT_OK, "write: %s", dt_last_error());
    dt_ckpt_reader *r;
    long step = -1;
    CHECK(dt_ckpt_open_latest(ctx, dir, &r, &step) == DT_OK && r, "open: %s", dt_last_error());
    if (!r) {
        free(big);
        return;
    }
    CHECK(step == 10 && dt_ckpt_num_sections(r) == 3 && dt_ckpt_saved_world(r) == world,
          "table: step %ld, %d "
          "sections, world %d",
          step, dt_ckpt_num_sections(r), dt_ckpt_saved_world(r));
    size_t bytes = 0;
    CHECK(dt_ckpt_section_size(r, "rng", &bytes) == DT_OK && bytes == 24 * (size_t)world, "rng is %zu bytes", bytes);
    unsigned char a[1003], rng[24];
    memset(big, 0, BIG);
    CHECK(dt_ckpt_read(r, "a", a, sizeof a) == DT_OK, "read a: %s", dt_last_error());
    CHECK(dt_ckpt_read(r, "big", big, BIG) == DT_OK, "read big: %s", dt_last_error());
    CHECK(dt_ckpt_read_rank(r, "rng", rng, sizeof rng) == DT_OK, "read rng: %s", dt_last_error());
    size_t bad = 0;
    for (size_t i = 0; i < sizeof a; i++) bad += a[i] != pattern(i, 0);
    for (size_t i = 0; i < BIG; i++) bad += big[i] != pattern(i, 0 + 10);
    CHECK(bad == 0, "%zu bytes differ from rank 0's", bad);
    for (size_t i = 0; i < sizeof rng; i++) bad += rng[i] != pattern(i, 100 + rank);
    CHECK(bad == 0, "this rank's blob differs");

    /* One rank asks for another section: every rank fails, then all read on in step. */
    dt_status s = rank == 1 ? dt_ckpt_read(r, "rng", a, 24 * (size_t)world) : dt_ckpt_read(r, "a", a, sizeof a);
    expect(s, DT_ERR_INVALID_ARG,
           rank == 1 ? "rank 1 reads section \"rng\"" : "rank 1: ", "every rank reads the same sections",
           "read of another section");
    expect(dt_ckpt_read(r, "missing", a, 4), DT_ERR_INVALID_ARG, "no section \"missing\"", "\"a\", \"big\", \"rng\"",
           "missing section");
    CHECK(dt_ckpt_read(r, "a", a, sizeof a) == DT_OK && a[5] == pattern(5, 0), "read after the errors: %s",
          dt_last_error());
    dt_ckpt_close(r);
    free(big);
}

static void test_failures(dt_ctx *ctx, const char *dir)
{
    /* Sections that differ on rank 1: every rank fails, naming it, and nothing is written. */
    dt_ckpt_writer *w;
    CHECK(dt_ckpt_begin(ctx, dir, 20, &w) == DT_OK, "begin");
    dt_ckpt_add(w, "a", "x", 1);
    dt_ckpt_add(w, rank == 1 ? "opt" : "rng", "yy", 2);
    expect(dt_ckpt_commit(w), DT_ERR_INVALID_ARG,
           rank == 1 ? "" : "rank 1: ", "section 1 is \"opt\" (2 bytes) on rank 1 but \"rng\" (2 bytes) on rank 0",
           "lists that differ");
    /* Data missing on rank 1's per-rank section. */
    CHECK(dt_ckpt_begin(ctx, dir, 21, &w) == DT_OK, "begin");
    dt_ckpt_add_per_rank(w, "rng", rank == 1 ? NULL : "abcd", 4);
    expect(dt_ckpt_commit(w), DT_ERR_INVALID_ARG, "has no data (NULL) on rank 1",
           rank == 1 ? NULL : "rank 1: ", "NULL data on rank 1");
    /* A file-size limit on rank 0 only: every rank gets the IO error and its cause. */
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 1 << 20;
    if (rank == 0) setrlimit(RLIMIT_FSIZE, &lim);
    unsigned char *big = malloc(BIG);
    dt_status s = write_step(ctx, dir, 30, big);
    if (rank == 0) setrlimit(RLIMIT_FSIZE, &old);
    expect(s, DT_ERR_IO, "File too large (limit 1048576 bytes",
           rank == 0 ? "ulimit -f" : "rank 0: ", "file-size limit on rank 0");
    free(big);
    /* The previous checkpoint is still the newest, and neither step 20, 21 nor 30 was written. */
    char path[300];
    for (int st = 20; rank == 0 && st <= 30; st++) {
        snprintf(path, sizeof path, "%s/ckpt-%010d.dtc", dir, st);
        CHECK(access(path, F_OK) != 0, "%s was written", path);
    }
    dt_ckpt_reader *r;
    long step = -1;
    CHECK(dt_ckpt_open_latest(ctx, dir, &r, &step) == DT_OK && step == 10, "newest after the failures: %ld (%s)", step,
          dt_last_error());
    dt_ckpt_close(r);
    /* A directory that cannot be made: its parent is a regular file (on rank 0, the only one that
     * looks). */
    char sub[300];
    snprintf(sub, sizeof sub, "%s/a-file", dir);
    if (rank == 0) {
        FILE *f = fopen(sub, "w");
        CHECK(f && fclose(f) == 0, "cannot make %s", sub);
    }
    snprintf(sub, sizeof sub, "%s/a-file/ck", dir);
    CHECK(dt_ckpt_begin(ctx, sub, 1, &w) == DT_OK, "begin");
    dt_ckpt_add(w, "a", "x", 1);
    expect(dt_ckpt_commit(w), DT_ERR_IO, "cannot create checkpoint directory",
           rank == 0 ? NULL : "rank 0: ", "unmakeable directory");
}

/* Only rank 0's values reach the file, so only rank 0's NaN counts; every rank hears of it, and a
 * sound save goes on afterwards (no rank was left inside a collective). */
static void test_model_nan(dt_ctx *ctx, const char *dir)
{
    char sub[300], path[340];
    snprintf(sub, sizeof sub, "%s/model", dir);
    snprintf(path, sizeof path, "%s/ckpt-%010d.dtc", sub, 40);
    dt_model *m = NULL;
    CHECK(dt_model_create(ctx, "fc:3", "2", 7, 4, &m) == DT_OK, "model: %s", dt_last_error());
    float *p = dt_model_params(m);
    const float keep = p[4];
    if (rank == 0) p[4] = NAN;
    expect(dt_checkpoint_save(ctx, sub, m, NULL, NULL, NULL, 40), DT_ERR_NUMERIC, rank == 0 ? "params[4] is nan" : NULL,
           rank == 0 ? NULL : "rank 0: ", "a NaN parameter on rank 0");
    CHECK(rank != 0 || access(path, F_OK) != 0, "%s was written", path);
    p[4] = keep;
    CHECK(dt_checkpoint_save(ctx, sub, m, NULL, NULL, NULL, 40) == DT_OK, "sound save: %s", dt_last_error());
    CHECK(rank != 0 || access(path, F_OK) == 0, "%s was not written", path);
    dt_model_free(m);
}

int main(void)
{
    dt_ctx *ctx = mpi_check_init("test_ckpt_sections");
    /* Rank 0's temporary directory, by name to every rank (which never touch it). */
    char dir[64] = "/tmp/dtsec-mpi-XXXXXX";
    if (rank == 0 && !mkdtemp(dir)) dir[0] = '\0';
    if (dt_broadcast(ctx, dir, sizeof dir, DT_U8, 0)) {
        fprintf(stderr, "broadcasting the directory name: %s\n", dt_last_error());
        dt_abort_job(ctx, 1);
    }
    if (!dir[0]) {
        fprintf(stderr, "cannot make a temporary directory\n");
        dt_abort_job(ctx, 1);
    }
    test_round_trip(ctx, dir);
    test_failures(ctx, dir);
    test_model_nan(ctx, dir);
    if (rank == 0) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        CHECK(system(cmd) == 0, "%s", cmd);
    }
    int rc = mpi_check_finish(ctx, "test_ckpt_sections");
    dt_finalize(ctx);
    return rc;
}
