/*
 * test_cuda_ops_optim.c - the CUDA table's optimizers against the CPU table: SGD with and
 * without momentum (first step and later), AdamW at steps 1 and 7.
 *
 * Tolerances: SGD p and buf within 1 ulp (expected exact: both round each operation separately).
 * AdamW m, v within 1 ulp, p within 2 ulp (the GPU follows the CPU's AVX2 path, FMAs included, and
 * should be exact against it; the CPU's scalar path associates the update differently).
 */
#include "cuda_ops_fixture.h"

/* ---------------------------------------------------------------- optimizers */

static void check_sgd(void)
{
    const size_t n = 100003;
    const struct {
        float momentum, wd;
        int first;
    } cfg[] = {{0.0f, 5e-4f, 0}, {0.9f, 5e-4f, 1}, {0.9f, 5e-4f, 0}, {0.9f, 0.0f, 0}, {0.5f, 1e-2f, 1}};
    float *p = fmalloc(n), *gr = fmalloc(n), *buf = fmalloc(n), *gp = fmalloc(n), *gb = fmalloc(n);
    for (size_t z = 0; z < sizeof cfg / sizeof *cfg; z++) {
        fill(p, n, 1.0f), fill(gr, n, 0.1f), fill(buf, n, 0.3f); /* buf: garbage for a first step */
        float *d_p = dcopy(p, n), *d_g = dcopy(gr, n), *d_b = dcopy(buf, n);
        const int plain = cfg[z].momentum == 0.0f;
        CPU(sgd, p, gr, plain ? NULL : buf, n, 0.1f, cfg[z].momentum, cfg[z].wd, cfg[z].first);
        GPU(sgd, d_p, d_g, plain ? NULL : d_b, n, 0.1f, cfg[z].momentum, cfg[z].wd, cfg[z].first);
        ops_ok("sgd");
        down(gp, d_p, n * sizeof *gp);
        down(gb, d_b, n * sizeof *gb);
        char what[96];
        snprintf(what, sizeof what, "sgd momentum %g wd %g%s p", cfg[z].momentum, cfg[z].wd,
                 cfg[z].first ? " first" : "");
        cmp_ulp(what, gp, p, n, 1);
        snprintf(what, sizeof what, "sgd momentum %g wd %g%s buf%s", cfg[z].momentum, cfg[z].wd,
                 cfg[z].first ? " first" : "", plain ? " (untouched)" : "");
        cmp_ulp(what, gb, buf, n, plain ? 0 : 1);
        cudaFree(d_p), cudaFree(d_g), cudaFree(d_b);
    }
    free(p), free(gr), free(buf), free(gp), free(gb);
}

static void check_adamw(void)
{
    const size_t n = 100003;
    const int steps[] = {1, 7};
    float *p = fmalloc(n), *gr = fmalloc(n), *m = fmalloc(n), *v = fmalloc(n);
    float *gp = fmalloc(n), *gm = fmalloc(n), *gv = fmalloc(n);
    for (size_t z = 0; z < 2; z++) {
        const int t = steps[z];
        fill(p, n, 1.0f), fill(gr, n, 0.1f);
        for (size_t i = 0; i < n; i++) {
            m[i] = t == 1 ? 0.0f : urand() * 0.01f;
            const float u = urand();
            v[i] = t == 1 ? 0.0f : u * u * 1e-3f;
        }
        gr[0] = 0.0f, p[1] = 0.0f; /* a zero gradient (m, v of 0 on step 1) and a zero weight */
        float *d_p = dcopy(p, n), *d_g = dcopy(gr, n), *d_m = dcopy(m, n), *d_v = dcopy(v, n);
        CPU(adamw, p, gr, m, v, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, t);
        GPU(adamw, d_p, d_g, d_m, d_v, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, t);
        ops_ok("adamw");
        down(gp, d_p, n * sizeof *gp);
        down(gm, d_m, n * sizeof *gm);
        down(gv, d_v, n * sizeof *gv);
        char what[64];
        snprintf(what, sizeof what, "adamw step %d p", t);
        cmp_ulp(what, gp, p, n, 2);
        snprintf(what, sizeof what, "adamw step %d m", t);
        cmp_ulp(what, gm, m, n, 1);
        snprintf(what, sizeof what, "adamw step %d v", t);
        cmp_ulp(what, gv, v, n, 1);
        cudaFree(d_p), cudaFree(d_g), cudaFree(d_m), cudaFree(d_v);
    }
    free(p), free(gr), free(m), free(v), free(gp), free(gm), free(gv);
}

int main(void)
{
    const cuda_check_fn checks[] = {check_sgd, check_adamw};
    return cuda_ops_main(NULL, checks, sizeof checks / sizeof *checks);
}
