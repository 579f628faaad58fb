/*
 * test_cuda_ops_nonfinite.c - the CUDA non-finite counters (scale_count) against
 * cpu_count_nonfinite / cpu_unscale_count_nonfinite, with infs and NaNs at the tail of the counted
 * buffers and sizes past one grid of blocks; the loss scaler's queued verdict (found_inf_queue /
 * found_inf_wait) with the optimizer steps queued behind it reading it (optim_grads.skip).
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

/* ---------------------------------------------------------------- the queued verdict */

/* For each gradient type, clean and with one inf or NaN: the verdict queued, SGD and AdamW queued
 * behind it with its flag, then the wait. The verdict is the CPU count's; an overflowed step
 * leaves p and the state as they were, a clean one gives the bits of the same step without a
 * flag. n 0 has a clean verdict. */
static void check_verdict(void)
{
    const size_t n = 300007;
    const dt_dtype types[] = {DT_F32, DT_F16, DT_BF16};
    int *d_flag = dmalloc(sizeof *d_flag), found = -1;
    float *p = fmalloc(n), *s1 = fmalloc(n), *s2 = fmalloc(n), *gw = fmalloc(n), *h = fmalloc(n), *want = fmalloc(n);
    uint16_t *g16 = xmalloc(n * sizeof *g16);
    fill(p, n, 1.0f), fill(s1, n, 0.01f), fill(gw, n, 0.1f);
    for (size_t i = 0; i < n; i++) s2[i] = s1[i] * s1[i];
    for (size_t z = 0; z < sizeof types / sizeof *types; z++) {
        const dt_dtype t = types[z];
        for (int bad = 0; bad < 3; bad++) {
            const float poison = bad == 1 ? INFINITY : bits_f(0x7fc00000u);
            float *g = fmalloc(n);
            memcpy(g, gw, n * sizeof *g);
            if (bad) g[bad == 1 ? n - 1 : n / 3] = poison;
            void *d_g;
            if (t == DT_F32)
                d_g = dcopy(g, n);
            else {
                cpu_cast_f32_to_16(t, g, g16, n);
                d_g = dmalloc(n * sizeof *g16);
                up(d_g, g16, n * sizeof *g16); /* on the ops' stream, which reads it next */
            }
            for (int adam = 0; adam < 2; adam++) {
                float *d_p = dcopy(p, n), *d_1 = dcopy(s1, n), *d_2 = dcopy(s2, n), *d_q = dcopy(p, n);
                float *d_3 = dcopy(s1, n), *d_4 = dcopy(s2, n);
                const optim_grads behind = {d_g, t, 0.5f, 1.0f, d_flag, NULL}, plain = {d_g, t, 0.5f, 1.0f, NULL, NULL};
                GPU(found_inf_queue, t, d_g, n, d_flag);
                if (adam) {
                    GPU(adamw, d_p, &behind, d_1, d_2, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 2, DT_F32, NULL);
                    GPU(adamw, d_q, &plain, d_3, d_4, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 2, DT_F32, NULL);
                } else {
                    GPU(sgd, d_p, &behind, d_1, n, 0.1f, 0.9f, 5e-4f, 0, DT_F32, NULL);
                    GPU(sgd, d_q, &plain, d_3, n, 0.1f, 0.9f, 5e-4f, 0, DT_F32, NULL);
                }
                GPU(found_inf_wait, d_flag, &found);
                ops_ok("found_inf_queue, a step behind it, found_inf_wait");
                check(found == (bad != 0), "found_inf %s bad %d: verdict %d", t == DT_F32 ? "fp32" : "16-bit", bad,
                      found);
                char what[96];
                snprintf(what, sizeof what, "%s behind a verdict of %d (type %d): p", adam ? "adamw" : "sgd", found,
                         (int)t);
                down(h, d_p, n * sizeof *h);
                if (bad)
                    cmp_bits(what, h, p, n, sizeof *h);
                else {
                    down(want, d_q, n * sizeof *want);
                    cmp_bits(what, h, want, n, sizeof *h);
                }
                down(h, d_1, n * sizeof *h);
                if (bad) cmp_bits("the state behind an overflow", h, s1, n, sizeof *h);
                cudaFree(d_p), cudaFree(d_1), cudaFree(d_2), cudaFree(d_q), cudaFree(d_3), cudaFree(d_4);
            }
            cudaFree(d_g);
            free(g);
        }
    }
    GPU(found_inf_queue, DT_F32, NULL, 0, d_flag);
    GPU(found_inf_wait, d_flag, &found);
    check(found == 0, "found_inf of nothing: verdict %d", found);
    /* Two models' verdicts in flight at once (one left pending while the other checks): each wait
     * collects its own flag's, whichever came last; a released flag's slot serves a new one. */
    float bad1 = INFINITY, good1 = 1.0f;
    float *d_bad = dcopy(&bad1, 1), *d_good = dcopy(&good1, 1);
    int *d_flag2 = dmalloc(sizeof *d_flag2), found2 = -1;
    GPU(found_inf_queue, DT_F32, d_bad, 1, d_flag);
    GPU(found_inf_queue, DT_F32, d_good, 1, d_flag2);
    GPU(found_inf_wait, d_flag, &found);
    GPU(found_inf_wait, d_flag2, &found2);
    check(found == 1 && found2 == 0, "two flags in flight: verdicts %d and %d (want 1 and 0)", found, found2);
    gpu_be->ops->found_inf_release(gpu_be, d_flag2);
    int *d_flag3 = dmalloc(sizeof *d_flag3), found3 = -1;
    GPU(found_inf_queue, DT_F32, d_bad, 1, d_flag3);
    GPU(found_inf_wait, d_flag3, &found3);
    GPU(found_inf_wait, d_flag, &found);
    check(found3 == 1 && found == 1, "a new flag after a release: verdicts %d and %d (want 1 and 1)", found3, found);
    gpu_be->ops->found_inf_release(gpu_be, d_flag);
    gpu_be->ops->found_inf_release(gpu_be, d_flag3);
    cudaFree(d_bad), cudaFree(d_good), cudaFree(d_flag2), cudaFree(d_flag3);
    cudaFree(d_flag);
    free(p), free(s1), free(s2), free(gw), free(h), free(want), free(g16);
}

int main(void)
{
    const cuda_check_fn checks[] = {check_nonfinite, check_verdict};
    return cuda_ops_main(NULL, checks, sizeof checks / sizeof *checks);
}
