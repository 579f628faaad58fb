/*
 * test_cuda_ops_optim.c - the CUDA table's optimizers against the CPU table: SGD with and
 * without momentum (first step and later), AdamW at steps 1 and 7; each also with the 16-bit
 * parameter copy written in the same pass (fp16 and bf16): the parameters and state bit for bit
 * those of the step without it, the copy bit for bit the cast of the parameters it wrote; and on
 * 16-bit gradients with the pending unscale and clip factors, against the CPU.
 *
 * Tolerances: SGD p and buf within 1 ulp (expected exact: both round each operation separately).
 * AdamW on fp32 gradients bit for bit (the GPU and every CPU path take the same fused multiply-adds
 * and correctly rounded sqrt and division); on 16-bit gradients with factors, m and v within 1 ulp
 * and p within 2.
 */
#include "cuda_ops_fixture.h"

/* ---------------------------------------------------------------- optimizers */

static void check_sgd(void)
{
    const size_t n = 100003;
    /* Momentum 0 twice: without a buffer (NULL, as the model passes it) and with one, which the
     * step must leave as it was. */
    const struct {
        float momentum, wd;
        int first, no_buf;
    } cfg[] = {{0.0f, 5e-4f, 0, 1}, {0.0f, 5e-4f, 0, 0}, {0.9f, 5e-4f, 1, 0},
               {0.9f, 5e-4f, 0, 0}, {0.9f, 0.0f, 0, 0},  {0.5f, 1e-2f, 1, 0}};
    float *p = fmalloc(n), *gr = fmalloc(n), *buf = fmalloc(n), *gp = fmalloc(n), *gb = fmalloc(n);
    for (size_t z = 0; z < sizeof cfg / sizeof *cfg; z++) {
        fill(p, n, 1.0f), fill(gr, n, 0.1f), fill(buf, n, 0.3f); /* buf: garbage for a first step */
        float *d_p = dcopy(p, n), *d_g = dcopy(gr, n), *d_b = dcopy(buf, n);
        const int plain = cfg[z].momentum == 0.0f, no_buf = cfg[z].no_buf;
        CPU(sgd, p, &(optim_grads){gr, DT_F32, 1.0f, 1.0f, NULL, NULL}, no_buf ? NULL : buf, n, 0.1f, cfg[z].momentum,
            cfg[z].wd, cfg[z].first, DT_F32, NULL);
        GPU(sgd, d_p, &(optim_grads){d_g, DT_F32, 1.0f, 1.0f, NULL, NULL}, no_buf ? NULL : d_b, n, 0.1f,
            cfg[z].momentum, cfg[z].wd, cfg[z].first, DT_F32, NULL);
        ops_ok("sgd");
        down(gp, d_p, n * sizeof *gp);
        down(gb, d_b, n * sizeof *gb);
        char what[96];
        snprintf(what, sizeof what, "sgd momentum %g wd %g%s%s p", cfg[z].momentum, cfg[z].wd,
                 cfg[z].first ? " first" : "", no_buf ? " no buffer" : "");
        cmp_ulp(what, gp, p, n, 1);
        if (!no_buf) { /* without one, p above is the check */
            snprintf(what, sizeof what, "sgd momentum %g wd %g%s buf%s", cfg[z].momentum, cfg[z].wd,
                     cfg[z].first ? " first" : "", plain ? " (untouched)" : "");
            cmp_ulp(what, gb, buf, n, plain ? 0 : 1);
        }
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
        CPU(adamw, p, &(optim_grads){gr, DT_F32, 1.0f, 1.0f, NULL, NULL}, m, v, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, t,
            DT_F32, NULL);
        GPU(adamw, d_p, &(optim_grads){d_g, DT_F32, 1.0f, 1.0f, NULL, NULL}, d_m, d_v, n, 1e-3f, 0.9f, 0.999f, 1e-8f,
            0.01f, t, DT_F32, NULL);
        ops_ok("adamw");
        down(gp, d_p, n * sizeof *gp);
        down(gm, d_m, n * sizeof *gm);
        down(gv, d_v, n * sizeof *gv);
        char what[64];
        snprintf(what, sizeof what, "adamw step %d p", t);
        cmp_ulp(what, gp, p, n, 0);
        snprintf(what, sizeof what, "adamw step %d m", t);
        cmp_ulp(what, gm, m, n, 0);
        snprintf(what, sizeof what, "adamw step %d v", t);
        cmp_ulp(what, gv, v, n, 0);
        cudaFree(d_p), cudaFree(d_g), cudaFree(d_m), cudaFree(d_v);
    }
    free(p), free(gr), free(m), free(v), free(gp), free(gm), free(gv);
}

/* One step of SGD (momentum, not first) or AdamW (step 3) on the GPU twice from the same start,
 * without and with the copy of type t: p and state must agree bit for bit, and the copy must be
 * the host cast of the p it came with. */
static void check_copy_one(int adam, dt_dtype t)
{
    const size_t n = 100003;
    float *p = fmalloc(n), *gr = fmalloc(n), *s1 = fmalloc(n), *s2 = fmalloc(n);
    float *h[2][3];
    uint16_t *copy = xmalloc(n * sizeof *copy), *cast = xmalloc(n * sizeof *cast);
    fill(p, n, 1.0f), fill(gr, n, 0.1f), fill(s1, n, 0.01f);
    for (size_t i = 0; i < n; i++) s2[i] = s1[i] * s1[i];
    uint16_t *d_copy = dmalloc(n * sizeof *d_copy);
    for (int with = 0; with < 2; with++) {
        float *d_p = dcopy(p, n), *d_g = dcopy(gr, n), *d_1 = dcopy(s1, n), *d_2 = dcopy(s2, n);
        uint16_t *c = with ? d_copy : NULL;
        if (adam)
            GPU(adamw, d_p, &(optim_grads){d_g, DT_F32, 1.0f, 1.0f, NULL, NULL}, d_1, d_2, n, 1e-3f, 0.9f, 0.999f,
                1e-8f, 0.01f, 3, with ? t : DT_F32, c);
        else
            GPU(sgd, d_p, &(optim_grads){d_g, DT_F32, 1.0f, 1.0f, NULL, NULL}, d_1, n, 0.1f, 0.9f, 5e-4f, 0,
                with ? t : DT_F32, c);
        ops_ok(adam ? "adamw with copy" : "sgd with copy");
        float *src[3] = {d_p, d_1, d_2};
        for (int k = 0; k < 3; k++) {
            h[with][k] = fmalloc(n);
            down(h[with][k], src[k], n * sizeof(float));
        }
        cudaFree(d_p), cudaFree(d_g), cudaFree(d_1), cudaFree(d_2);
    }
    down(copy, d_copy, n * sizeof *copy);
    cpu_cast_f32_to_16(t, h[1][0], cast, n);
    char what[64];
    const char *name = adam ? "adamw" : "sgd", *tn = t == DT_BF16 ? "bf16" : "fp16";
    snprintf(what, sizeof what, "%s with a %s copy: p as without", name, tn);
    cmp_bits(what, h[1][0], h[0][0], n, sizeof(float));
    snprintf(what, sizeof what, "%s with a %s copy: state as without", name, tn);
    cmp_bits(what, h[1][1], h[0][1], n, sizeof(float));
    if (adam) cmp_bits(what, h[1][2], h[0][2], n, sizeof(float));
    snprintf(what, sizeof what, "%s %s copy = cast of p", name, tn);
    cmp_bits(what, copy, cast, n, sizeof *copy);
    for (int w = 0; w < 2; w++)
        for (int k = 0; k < 3; k++) free(h[w][k]);
    cudaFree(d_copy);
    free(p), free(gr), free(s1), free(s2), free(copy), free(cast);
}

/* 16-bit gradients with the pending factors, read by the step itself: the GPU against the CPU
 * table on the same kept gradients (p within the tolerances above, state likewise). */
static void check_grads16_one(int adam, dt_dtype t)
{
    const size_t n = 100003;
    const float m1 = 1.0f / 2048.0f, m2 = 0.37f;
    float *p = fmalloc(n), *gr = fmalloc(n), *s1 = fmalloc(n), *s2 = fmalloc(n), *gp = fmalloc(n), *g1 = fmalloc(n),
          *g2 = fmalloc(n);
    uint16_t *g16 = xmalloc(n * sizeof *g16);
    fill(p, n, 1.0f), fill(gr, n, 100.0f), fill(s1, n, 0.01f);
    for (size_t i = 0; i < n; i++) s2[i] = s1[i] * s1[i];
    cpu_cast_f32_to_16(t, gr, g16, n);
    float *d_p = dcopy(p, n), *d_1 = dcopy(s1, n), *d_2 = dcopy(s2, n);
    uint16_t *d_g = dmalloc(n * sizeof *d_g);
    up(d_g, g16, n * sizeof *g16);
    const optim_grads hg = {g16, t, m1, m2, NULL, NULL}, dg = {d_g, t, m1, m2, NULL, NULL};
    if (adam) {
        CPU(adamw, p, &hg, s1, s2, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 3, DT_F32, NULL);
        GPU(adamw, d_p, &dg, d_1, d_2, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 3, DT_F32, NULL);
    } else {
        CPU(sgd, p, &hg, s1, n, 0.1f, 0.9f, 5e-4f, 0, DT_F32, NULL);
        GPU(sgd, d_p, &dg, d_1, n, 0.1f, 0.9f, 5e-4f, 0, DT_F32, NULL);
    }
    ops_ok(adam ? "adamw on 16-bit gradients" : "sgd on 16-bit gradients");
    down(gp, d_p, n * sizeof *gp);
    down(g1, d_1, n * sizeof *g1);
    down(g2, d_2, n * sizeof *g2);
    char what[80];
    const char *name = adam ? "adamw" : "sgd", *tn = t == DT_BF16 ? "bf16" : "fp16";
    snprintf(what, sizeof what, "%s on %s gradients x %g x %g: p", name, tn, (double)m1, (double)m2);
    cmp_ulp(what, gp, p, n, adam ? 2 : 1);
    snprintf(what, sizeof what, "%s on %s gradients: state", name, tn);
    cmp_ulp(what, g1, s1, n, 1);
    if (adam) cmp_ulp(what, g2, s2, n, 1);
    cudaFree(d_p), cudaFree(d_1), cudaFree(d_2), cudaFree(d_g);
    free(p), free(gr), free(s1), free(s2), free(gp), free(g1), free(g2), free(g16);
}

static void check_copy(void)
{
    for (int adam = 0; adam < 2; adam++) {
        check_copy_one(adam, DT_F16);
        check_copy_one(adam, DT_BF16);
        check_grads16_one(adam, DT_F16);
        check_grads16_one(adam, DT_BF16);
    }
}

/* A step reading its per-step values from device memory (optim_grads.live, as a step graph's
 * replay does) gives the bits of one given lr and t as arguments, whatever the arguments then say:
 * SGD's first and a later step (momentum), AdamW's first, second and tenth. */
static void check_live(void)
{
    const size_t n = 100003;
    float *p = fmalloc(n), *gr = fmalloc(n), *s1 = fmalloc(n), *s2 = fmalloc(n);
    fill(p, n, 1.0f), fill(gr, n, 0.1f), fill(s1, n, 0.01f);
    for (size_t i = 0; i < n; i++) s2[i] = s1[i] * s1[i];
    optim_consts *d_live = dmalloc(sizeof *d_live);
    static const struct {
        int adam, t;
    } cfg[] = {{0, 1}, {0, 4}, {1, 1}, {1, 2}, {1, 10}};
    for (size_t z = 0; z < sizeof cfg / sizeof *cfg; z++) {
        const int adam = cfg[z].adam, t = cfg[z].t;
        const float lr = adam ? 1e-3f : 0.1f;
        const optim_consts k = adam ? optim_consts_adamw(lr, 0.9f, 0.999f, 0.01f, t) : optim_consts_sgd(lr, t == 1);
        up(d_live, &k, sizeof k);
        float *h[2][3];
        for (int live = 0; live < 2; live++) {
            float *d_p = dcopy(p, n), *d_g = dcopy(gr, n), *d_1 = dcopy(s1, n), *d_2 = dcopy(s2, n);
            const optim_grads g = {d_g, DT_F32, 1.0f, 1.0f, NULL, live ? d_live : NULL};
            /* With live values the arguments are ignored: give wrong ones. */
            const float alr = live ? 7.0f : lr;
            const int at = live ? 1000 : t;
            if (adam)
                GPU(adamw, d_p, &g, d_1, d_2, n, alr, 0.9f, 0.999f, 1e-8f, 0.01f, at, DT_F32, NULL);
            else
                GPU(sgd, d_p, &g, d_1, n, alr, 0.9f, 5e-4f, live ? 0 : t == 1, DT_F32, NULL);
            ops_ok(adam ? "adamw live" : "sgd live");
            float *src[3] = {d_p, d_1, d_2};
            for (int j = 0; j < 3; j++) {
                h[live][j] = fmalloc(n);
                down(h[live][j], src[j], n * sizeof(float));
            }
            cudaFree(d_p), cudaFree(d_g), cudaFree(d_1), cudaFree(d_2);
        }
        char what[80];
        snprintf(what, sizeof what, "%s t=%d, live values: p as with arguments", adam ? "adamw" : "sgd", t);
        cmp_bits(what, h[1][0], h[0][0], n, sizeof(float));
        snprintf(what, sizeof what, "%s t=%d, live values: state as with arguments", adam ? "adamw" : "sgd", t);
        cmp_bits(what, h[1][1], h[0][1], n, sizeof(float));
        if (adam) cmp_bits(what, h[1][2], h[0][2], n, sizeof(float));
        for (int w = 0; w < 2; w++)
            for (int j = 0; j < 3; j++) free(h[w][j]);
    }
    cudaFree(d_live);
    free(p), free(gr), free(s1), free(s2);
}

int main(void)
{
    const cuda_check_fn checks[] = {check_sgd, check_adamw, check_copy, check_live};
    return cuda_ops_main(NULL, checks, sizeof checks / sizeof *checks);
}
