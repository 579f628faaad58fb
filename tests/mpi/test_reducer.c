/*
 * test_reducer.c - the gradient reducer on the caller's host buffers, at any rank count.
 *
 * Results: per-range ready() with overlap, any ready order on any rank, plans by size with slices
 * across buckets and one ending inside a bucket (which waits for the rest), overlap off, fp16/bf16
 * wire and 16-bit buffers, DT_SUM: each equals dt_allreduce of the whole buffer bit for bit.
 * No-sync steps leave the buffer local. Bad input: ranges that
 * overlap, leave a gap or run past the buffer, ready twice, a slice that is no range, a range
 * never ready (on every rank, and on one rank only: no hang either way, not counted as a step, and
 * the next step works),
 * host memory given as device memory, a plan that differs between ranks. The buffer utilities:
 * unscale and finite check, norms local and across ranks, clipping, checksums.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include "mpi_check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { N = 10007 }; /* not a multiple of any rank count: uneven parts */

/* Five "layers" in forward order; backward gives them last first. */
static const dt_range layers[5] = {{0, 4000}, {4000, 7}, {4007, 3000}, {7007, 1000}, {8007, 2000}};

static void fill(float *g, size_t n, int r, int step)
{
    for (size_t i = 0; i < n; i++) g[i] = (float)sin(0.001 * (double)(i + 1) * (r + 1) + step) * (float)(1 + (i % 7));
}

static dt_reducer *make(dt_ctx *ctx, void *g, size_t n, const dt_range *r, int nr, const dt_reducer_config *c)
{
    dt_reducer *red = NULL;
    CHECK(dt_reducer_create(ctx, g, n, r, nr, c, &red) == DT_OK && red, "create");
    return red;
}

/* One step over the five layers in backward order (reverse 0: forward order instead). */
static dt_status step_layers(dt_reducer *red, int reverse)
{
    for (int k = 0; k < 5; k++) {
        const dt_range *l = &layers[reverse ? 4 - k : k];
        dt_status s = dt_reducer_ready(red, l->offset, l->count);
        if (s) return s;
    }
    return dt_reducer_wait(red);
}

static void test_results(dt_ctx *ctx)
{
    float *g = malloc(N * sizeof *g), *want = malloc(N * sizeof *want);
    dt_range back[5];
    for (int k = 0; k < 5; k++) back[k] = layers[4 - k];
    dt_reducer_config c;
    dt_reducer_defaults(&c);
    c.first_bucket_mb = c.bucket_mb = 8000.0 / 1048576; /* 2000 floats: several buckets */
    dt_reducer *red = make(ctx, g, N, back, 5, &c);
    CHECK(dt_reducer_num_buckets(red) >= 3, "%d buckets", dt_reducer_num_buckets(red));
    for (int step = 0; step < 3; step++) {
        fill(g, N, rank, step);
        fill(want, N, rank, step);
        CHECK(dt_allreduce(ctx, want, N, DT_F32, DT_AVG) == DT_OK, "allreduce");
        /* Odd ranks mark the ranges in another order than the plan's: buckets still start in index
         * order on every rank, so the collectives pair up. */
        CHECK(step_layers(red, !(rank & 1)) == DT_OK, "step %d", step);
        CHECK(memcmp(g, want, N * sizeof *g) == 0, "step %d: reducer == dt_allreduce bit for bit", step);
    }
    dt_reducer_stats st;
    dt_reducer_get_stats(red, &st);
    CHECK(st.steps == 3, "%ld steps", st.steps);
    if (world > 1) CHECK(st.starts == 3L * dt_reducer_num_buckets(red), "%ld starts", st.starts);
    dt_reducer_free(red);

    /* Plans by size, slices across buckets in any order; overlap off; DT_SUM; a 16-bit wire. */
    for (int variant = 0; variant < 3; variant++) {
        dt_reducer_defaults(&c);
        c.first_bucket_mb = 1000.0 / 1048576;
        c.bucket_mb = 9000.0 / 1048576;
        if (variant == 1) c.overlap = 0, c.op = DT_SUM;
        if (variant == 2) c.wire = DT_BF16;
        red = make(ctx, g, N, NULL, 0, &c);
        fill(g, N, rank, 7);
        fill(want, N, rank, 7);
        if (variant == 2 && world > 1) { /* a bf16 wire: each rank's values rounded, the sum rounded
                                              (in a world of one nothing travels: nothing is rounded) */
            uint16_t *w16 = malloc(N * sizeof *w16);
            for (size_t i = 0; i < N; i++) { /* round to bf16 (RNE) by hand, the test's own oracle */
                uint32_t u;
                memcpy(&u, &want[i], 4);
                w16[i] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
            }
            CHECK(dt_allreduce(ctx, w16, N, DT_BF16, DT_AVG) == DT_OK, "bf16 allreduce");
            for (size_t i = 0; i < N; i++) {
                uint32_t u = (uint32_t)w16[i] << 16;
                memcpy(&want[i], &u, 4);
            }
            free(w16);
        } else {
            CHECK(dt_allreduce(ctx, want, N, DT_F32, c.op) == DT_OK, "allreduce");
        }
        /* As backward writes them: the first bucket (the last 250 floats) holds NaN past a slice that
         * ends inside it until that slice is ready, which must not start the bucket; 10 ms lets a
         * bucket started early carry the NaN. */
        float rest[150];
        memcpy(rest, g + N - 150, sizeof rest);
        for (int i = 0; i < 150; i++) g[N - 150 + i] = NAN;
        CHECK(dt_reducer_ready(red, N - 250, 100) == DT_OK, "slice inside the first bucket");
        nanosleep(&(struct timespec){0, 10000000}, NULL);
        memcpy(g + N - 150, rest, sizeof rest);
        CHECK(dt_reducer_ready(red, N - 150, 150) == DT_OK, "its rest");
        CHECK(dt_reducer_ready(red, 5000, N - 250 - 5000) == DT_OK, "slice across buckets");
        CHECK(dt_reducer_ready(red, 0, 3000) == DT_OK, "slice");
        CHECK(dt_reducer_ready(red, 4000, 1500) == DT_ERR_INVALID_ARG, "overlapping slice refused");
        CHECK(strstr(dt_last_error(), "ready twice") != NULL, "names it: %s", dt_last_error());
        CHECK(dt_reducer_ready(red, 3000, 2000) == DT_OK, "the gap filled");
        CHECK(dt_reducer_wait(red) == DT_OK, "wait");
        CHECK(memcmp(g, want, N * sizeof *g) == 0, "variant %d: reducer == dt_allreduce bit for bit", variant);
        dt_reducer_free(red);
    }

    /* A 16-bit buffer travels in its type: the same as dt_allreduce of it. */
    uint16_t *h = malloc(N * sizeof *h), *hw = malloc(N * sizeof *hw);
    for (size_t i = 0; i < N; i++) h[i] = hw[i] = (uint16_t)(0x3c00u + (uint16_t)((i * 7 + (size_t)rank * 13) % 1000));
    CHECK(dt_allreduce(ctx, hw, N, DT_F16, DT_AVG) == DT_OK, "fp16 allreduce");
    dt_reducer_defaults(&c);
    c.dtype = c.wire = DT_F16;
    c.first_bucket_mb = c.bucket_mb = 4000.0 / 1048576;
    red = make(ctx, h, N, back, 5, &c);
    CHECK(step_layers(red, 1) == DT_OK, "fp16 step");
    CHECK(memcmp(h, hw, N * sizeof *h) == 0, "fp16 buffer: reducer == dt_allreduce bit for bit");
    dt_reducer_free(red);
    free(h), free(hw);

    /* No sync: the buffer keeps this rank's values; sync again: reduced. */
    dt_reducer_defaults(&c);
    red = make(ctx, g, N, back, 5, &c);
    CHECK(dt_reducer_set_sync(red, 0) == DT_OK, "no sync");
    fill(g, N, rank, 9);
    fill(want, N, rank, 9);
    CHECK(step_layers(red, 1) == DT_OK, "no-sync step");
    CHECK(memcmp(g, want, N * sizeof *g) == 0, "no-sync step left the buffer alone");
    CHECK(dt_reducer_ready(red, layers[4].offset, layers[4].count) == DT_OK, "ready");
    CHECK(dt_reducer_set_sync(red, 1) == DT_ERR_INVALID_ARG, "sync cannot change mid-step");
    CHECK(dt_reducer_wait(red) == DT_ERR_INVALID_ARG, "the other ranges were missing");
    CHECK(dt_reducer_set_sync(red, 1) == DT_OK, "sync again");
    CHECK(dt_allreduce(ctx, want, N, DT_F32, DT_AVG) == DT_OK, "allreduce");
    CHECK(step_layers(red, 1) == DT_OK, "sync step");
    CHECK(memcmp(g, want, N * sizeof *g) == 0, "synced step reduced");
    dt_reducer_free(red);
    free(g), free(want);
}

static void test_bad_input(dt_ctx *ctx)
{
    float *g = calloc(N, sizeof *g);
    dt_reducer *red = NULL;
    const dt_range overlap[2] = {{0, 6000}, {5000, N - 5000}}, gap[2] = {{0, 5000}, {5001, N - 5001}};
    const dt_range past[2] = {{0, 5000}, {5000, N}};
    CHECK(dt_reducer_create(ctx, g, N, overlap, 2, NULL, &red) == DT_ERR_INVALID_ARG && !red, "overlap refused");
    CHECK(strstr(dt_last_error(), "ranges 0 [0, 6000) and 1 [5000, 10007) overlap") != NULL, "%s", dt_last_error());
    CHECK(dt_reducer_create(ctx, g, N, gap, 2, NULL, &red) == DT_ERR_INVALID_ARG, "gap refused");
    CHECK(strstr(dt_last_error(), "[5000, 5001)") != NULL, "names the gap: %s", dt_last_error());
    CHECK(dt_reducer_create(ctx, g, N, past, 2, NULL, &red) == DT_ERR_INVALID_ARG, "past the end refused");
    CHECK(strstr(dt_last_error(), "range 1 [5000, 15007) runs past the buffer of 10007") != NULL, "%s",
          dt_last_error());
    dt_reducer_config c;
    dt_reducer_defaults(&c);
    c.memory = DT_MEMORY_DEVICE;
    CHECK(dt_reducer_create(ctx, g, N, NULL, 0, &c, &red) == DT_ERR_INVALID_ARG, "host memory as device refused");
    CHECK(strstr(dt_last_error(), "DT_MEMORY_DEVICE") != NULL, "%s", dt_last_error());
    dt_reducer_defaults(&c);
    c.dtype = DT_F16;
    CHECK(dt_reducer_create(ctx, g, N, NULL, 0, &c, &red) == DT_ERR_INVALID_ARG, "fp16 buffer on an fp32 wire");
    /* Raw bytes (DT_U8, for dt_broadcast) are neither a gradient nor a wire. */
    dt_reducer_defaults(&c);
    c.dtype = DT_U8;
    CHECK(dt_reducer_create(ctx, g, N, NULL, 0, &c, &red) == DT_ERR_INVALID_ARG && !red, "DT_U8 buffer refused");
    dt_reducer_defaults(&c);
    c.wire = DT_U8;
    CHECK(dt_reducer_create(ctx, g, N, NULL, 0, &c, &red) == DT_ERR_INVALID_ARG && !red, "DT_U8 wire refused");
    CHECK(dt_reducer_create(ctx, g, 0, NULL, 0, NULL, &red) == DT_ERR_INVALID_ARG, "empty buffer");
    /* A flag is 0 or 1, as dt_config's are. */
    dt_reducer_defaults(&c);
    c.overlap = 2;
    CHECK(dt_reducer_create(ctx, g, N, NULL, 0, &c, &red) == DT_ERR_INVALID_ARG && !red &&
              strstr(dt_last_error(), "overlap 2 must be 0 or 1"),
          "overlap 2 refused: %s", dt_last_error());
    /* Device memory on a context placed on the CPU: said as that, before any device backend. */
    dt_reducer_defaults(&c);
    c.memory = DT_MEMORY_DEVICE;
    CHECK(dt_reducer_create(ctx, g, N, NULL, 0, &c, &red) == DT_ERR_INVALID_ARG &&
              strstr(dt_last_error(), "on a context placed on the CPU"),
          "device memory on a CPU context: %s", dt_last_error());
    /* A cap under one byte is the smallest cap, not none: one bucket per element is past the
     * bucket limit, and said so, rather than one bucket for the whole buffer. */
    dt_reducer_defaults(&c);
    c.bucket_mb = c.first_bucket_mb = 1e-9;
    CHECK(dt_reducer_create(ctx, g, N, NULL, 0, &c, &red) == DT_ERR_INVALID_ARG && !red &&
              strstr(dt_last_error(), "raise bucket_mb"),
          "a cap of 1e-9 MiB is a cap: %s", dt_last_error());

    dt_range back[5];
    for (int k = 0; k < 5; k++) back[k] = layers[4 - k];
    red = make(ctx, g, N, back, 5, NULL);
    CHECK(dt_reducer_ready(red, layers[4].offset, layers[4].count) == DT_OK, "ready");
    CHECK(dt_reducer_ready(red, layers[4].offset, layers[4].count) == DT_ERR_INVALID_ARG, "ready twice refused");
    CHECK(strstr(dt_last_error(), "range 0 [8007, 10007) was already ready") != NULL, "%s", dt_last_error());
    CHECK(dt_reducer_ready(red, 4001, 10) == DT_ERR_INVALID_ARG, "not a range");
    CHECK(strstr(dt_last_error(), "the nearest is range 3 [4000, 4007)") != NULL, "%s", dt_last_error());
    CHECK(dt_reducer_ready(red, N - 1, 5) == DT_ERR_INVALID_ARG, "past the end");
    /* Every rank forgets layers 0 and 2. */
    CHECK(dt_reducer_ready(red, layers[3].offset, layers[3].count) == DT_OK, "ready");
    CHECK(dt_reducer_ready(red, layers[1].offset, layers[1].count) == DT_OK, "ready");
    CHECK(dt_reducer_wait(red) == DT_ERR_INVALID_ARG, "missing ranges reported");
    CHECK(strstr(dt_last_error(), "2 of the 5 ranges were never marked ready in this step, the first (in backward "
                                  "order) range 2 [4007, 7007)") != NULL,
          "%s", dt_last_error());
    /* Only the last rank forgets one: it is told, the others complete, and nobody hangs. */
    for (int k = 0; k < 5; k++)
        if (!(rank == world - 1 && k == 2))
            CHECK(dt_reducer_ready(red, back[k].offset, back[k].count) == DT_OK, "ready");
    dt_status s = dt_reducer_wait(red);
    CHECK(rank == world - 1 ? s == DT_ERR_INVALID_ARG : s == DT_OK, "only the forgetful rank fails: %d", (int)s);
    /* And the next step is a normal one. */
    float *want = malloc(N * sizeof *want);
    fill(g, N, rank, 3);
    fill(want, N, rank, 3);
    CHECK(dt_allreduce(ctx, want, N, DT_F32, DT_AVG) == DT_OK, "allreduce");
    CHECK(step_layers(red, 1) == DT_OK, "step after the failures");
    CHECK(memcmp(g, want, N * sizeof *g) == 0, "and it reduced");
    /* steps counts the waits that completed: not the two that reported missing ranges. */
    dt_reducer_stats done;
    dt_reducer_get_stats(red, &done);
    CHECK(done.steps == (rank == world - 1 ? 1 : 2), "%ld steps counted", done.steps);
    dt_reducer_free(red);

    /* A plan that differs on the last rank: refused on every rank, naming it. */
    if (world > 1) {
        dt_reducer_defaults(&c);
        c.first_bucket_mb = c.bucket_mb = rank == world - 1 ? 4000.0 / 1048576 : 8000.0 / 1048576;
        s = dt_reducer_create(ctx, g, N, NULL, 0, &c, &red);
        CHECK(s == DT_ERR_INVALID_ARG && !red, "a differing plan refused: %d", (int)s);
        char want_msg[96];
        snprintf(want_msg, sizeof want_msg, "rank %d gave bucket_mb 0.0038147", world - 1);
        CHECK(strstr(dt_last_error(), want_msg) != NULL && strstr(dt_last_error(), "where rank 0 gave 0.00762939"),
              "%s", dt_last_error());
        /* The same buckets with overlap off on the last rank: a setting, refused as one. */
        dt_reducer_defaults(&c);
        c.overlap = rank != world - 1;
        s = dt_reducer_create(ctx, g, N, NULL, 0, &c, &red);
        snprintf(want_msg, sizeof want_msg, "rank %d gave overlap 0 where rank 0 gave 1", world - 1);
        CHECK(s == DT_ERR_INVALID_ARG && !red && strstr(dt_last_error(), want_msg),
              "a differing overlap refused, named with both values: %d", (int)s);
    }
    free(g), free(want);
}

static void test_utilities(dt_ctx *ctx)
{
    float g[1000];
    for (int i = 0; i < 1000; i++) g[i] = (float)(i % 10) * 0.5f * (float)(rank + 1);
    double local, across, want_local = 0, want_across = 0;
    for (int i = 0; i < 1000; i++) want_local += (double)g[i] * g[i];
    for (int r = 0; r < world; r++)
        for (int i = 0; i < 1000; i++) {
            const double v = (double)(i % 10) * 0.5 * (r + 1);
            want_across += v * v;
        }
    CHECK(dt_buffer_norm(NULL, g, 1000, DT_F32, DT_MEMORY_HOST, 0, &local) == DT_OK, "local norm");
    CHECK(fabs(local - sqrt(want_local)) < 1e-9 * sqrt(want_local), "local norm %g vs %g", local, sqrt(want_local));
    CHECK(dt_buffer_norm(ctx, g, 1000, DT_F32, DT_MEMORY_HOST, 1, &across) == DT_OK, "norm across ranks");
    CHECK(fabs(across - sqrt(want_across)) < 1e-9 * sqrt(want_across), "across %g vs %g", across, sqrt(want_across));
    CHECK(dt_buffer_norm(NULL, g, 1000, DT_F32, DT_MEMORY_HOST, 1, &across) == DT_ERR_INVALID_ARG, "across needs ctx");
    /* A rank whose own arguments fail still takes part in the sum: the last one passes no norm,
     * and the others fail with its code instead of waiting for it (mpi.joins has the messages). */
    if (world > 1) {
        across = 0;
        const dt_status s = dt_buffer_norm(ctx, g, 1000, DT_F32, DT_MEMORY_HOST, 1, rank == world - 1 ? NULL : &across);
        if (rank == world - 1)
            CHECK(s == DT_ERR_INVALID_ARG && strstr(dt_last_error(), "norm is NULL"), "NULL norm: %s", dt_last_error());
        else
            CHECK(s == DT_ERR_INVALID_ARG && across == 0 && strstr(dt_last_error(), "dt_buffer_norm failed on rank"),
                  "a peer's NULL norm fails this rank too: %d %g", (int)s, across);
    }
    int inf = -1;
    CHECK(dt_buffer_unscale_check(g, 1000, DT_F32, DT_MEMORY_HOST, 0.5f, &inf) == DT_OK && inf == 0, "finite");
    CHECK(g[3] == 0.75f * (float)(rank + 1), "unscaled: %g", (double)g[3]);
    g[999] = INFINITY;
    CHECK(dt_buffer_unscale_check(g, 1000, DT_F32, DT_MEMORY_HOST, 1.0f, &inf) == DT_OK && inf == 1, "inf found");
    uint16_t h[16] = {0x3c00, 0x7c00};
    CHECK(dt_buffer_unscale_check(h, 16, DT_F16, DT_MEMORY_HOST, 1.0f, &inf) == DT_OK && inf == 1, "fp16 inf found");
    CHECK(dt_buffer_unscale_check(h, 16, DT_F16, DT_MEMORY_HOST, 0.5f, &inf) == DT_ERR_INVALID_ARG,
          "fp16 unscale refused");
    CHECK(dt_buffer_unscale_check(h, 16, DT_U8, DT_MEMORY_HOST, 0.5f, &inf) == DT_ERR_INVALID_ARG &&
              strstr(dt_last_error(), "DT_U8"),
          "DT_U8 named before the 16-bit rule: %s", dt_last_error());
    CHECK(dt_buffer_unscale_check(g, 1000, DT_F32, DT_MEMORY_DEVICE, 1.0f, &inf) == DT_ERR_INVALID_ARG,
          "host as device refused");
    h[1] = 0x4000; /* 2.0 */
    CHECK(dt_buffer_scale(h, 2, DT_F16, DT_MEMORY_HOST, 0.5f) == DT_OK && h[0] == 0x3800 && h[1] == 0x3c00,
          "fp16 scaled: %04x %04x", h[0], h[1]);
    CHECK(dt_buffer_scale(h, 2, DT_U8, DT_MEMORY_HOST, 0.5f) == DT_ERR_INVALID_ARG &&
              strstr(dt_last_error(), "DT_U8") != NULL,
          "DT_U8 scale refused: %s", dt_last_error());
    CHECK(dt_buffer_norm(NULL, h, 2, DT_U8, DT_MEMORY_HOST, 0, &local) == DT_ERR_INVALID_ARG, "DT_U8 norm refused");
    uint64_t a = 0, b = 1;
    const char bytes[] = "the same weights";
    CHECK(dt_buffer_checksum(bytes, sizeof bytes, DT_MEMORY_HOST, &a) == DT_OK, "checksum");
    CHECK(dt_buffer_checksum(bytes, sizeof bytes, DT_MEMORY_HOST, &b) == DT_OK && a == b, "checksum stable");
    /* Clipping through a reducer: the reduced norm above 1 is brought to 1. */
    float p[1000];
    for (int i = 0; i < 1000; i++) p[i] = 0.1f;
    dt_reducer *red = make(ctx, p, 1000, NULL, 0, NULL);
    CHECK(dt_reducer_ready(red, 0, 1000) == DT_OK, "ready");
    double before, after;
    CHECK(dt_reducer_grad_norm(red, &before) == DT_ERR_INVALID_ARG, "no norm mid-step");
    CHECK(dt_reducer_wait(red) == DT_OK, "wait");
    CHECK(dt_reducer_clip_grad_norm(red, 1.0, &before) == DT_OK && fabs(before - sqrt(10.0)) < 1e-5, "norm %g", before);
    CHECK(dt_reducer_grad_norm(red, &after) == DT_OK && fabs(after - 1.0) < 1e-5, "clipped to %g", after);
    CHECK(dt_reducer_clip_grad_norm(red, 0, &before) == DT_ERR_INVALID_ARG, "max_norm 0 refused");
    dt_reducer_free(red);
}

int main(void)
{
    dt_ctx *ctx = mpi_check_init("test_reducer");
    test_results(ctx);
    test_bad_input(ctx);
    test_utilities(ctx);
    int rc = mpi_check_finish(ctx, "test_reducer");
    dt_finalize(ctx);
    return rc;
}
