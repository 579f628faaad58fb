/*
 * test_cuda_ops_nonfinite.c - the CUDA non-finite counters (scale_count) against
 * cpu_count_nonfinite / cpu_unscale_count_nonfinite, with infs and NaNs at the tail of the counted
 * buffers and sizes past one grid of blocks.
 *
 * Tolerances: counts exact; the unscaled buffer bit for bit, except NaN payloads (a GPU multiply
 * returns the canonical NaN; it is still a NaN).
 */
#include "cuda_ops_fixture.h"

/* The non-finite count of d[0..n) on the GPU, times mul first when mul is not 1 (in place). */
static size_t gcount(float *d, size_t n, float mul)
{
    size_t bad = SIZE_MAX;
    st_ok("scale_count", gpu_be->ops->scale_count(gpu_be, DT_F32, d, n, mul, &bad));
    return bad;
}

/* ---------------------------------------------------------------- non-finite counters */

static void check_nonfinite(void)
{
    const size_t sizes[] = {1, 5, 1000, ((size_t)1 << 20) + 7}; /* the last > 1024 blocks x 256 threads */
    for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++) {
        const size_t n = sizes[z];
        float *x = fmalloc(n), *c = fmalloc(n), *g = fmalloc(n);
        fill(x, n, 1.0f);
        /* the tail: inf, -inf, NaN, -NaN; values that overflow when scaled by 4; one NaN inside */
        const float tail[] = {INFINITY, -INFINITY, bits_f(0x7fc00000u), bits_f(0xffc00123u), 1e38f, -2e38f};
        for (size_t i = 0; i < sizeof tail / sizeof *tail && i < n; i++) x[n - 1 - i] = tail[i];
        if (n > 100) x[n / 2] = bits_f(0x7f800001u);
        float *d = dcopy(x, n);
        const size_t want = cpu_count_nonfinite(x, n), got = gcount(d, n, 1.0f);
        ops_ok("cuda_count_nonfinite");
        check(got == want, "cuda_count_nonfinite n %zu: %zu (cpu %zu)", n, got, want);
        memcpy(c, x, n * sizeof *c);
        const size_t want2 = cpu_unscale_count_nonfinite(c, n, 4.0f), got2 = gcount(d, n, 4.0f);
        ops_ok("cuda_unscale_count_nonfinite");
        down(g, d, n * sizeof *g);
        check(got2 == want2, "cuda_unscale_count_nonfinite n %zu x4: %zu (cpu %zu)", n, got2, want2);
        char what[64];
        snprintf(what, sizeof what, "cuda_unscale_count_nonfinite n %zu data", n);
        cmp_bits_nan(what, g, c, n);
        cudaFree(d);
        free(x), free(c), free(g);
    }
}

int main(void)
{
    const cuda_check_fn checks[] = {check_nonfinite};
    return cuda_ops_main(NULL, checks, sizeof checks / sizeof *checks);
}
