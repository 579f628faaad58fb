/*
 * test_cuda_ops_pool.c - the CUDA table's ReLU (NaN, inf, -0, subnormals, in place) and max
 * pooling (random inputs, ties, NaNs, windows that do not fit) against the CPU table, the 16-bit
 * pooling of mixed precision, and both pooling backwards running a relu layer's backward too.
 *
 * Tolerances: ReLU and max pooling (values, argmax, backward): exact, bit for bit (NaN payloads
 * included). 16-bit pooling: bit for bit against the CPU's fp32 op on the widened values (a NaN
 * maximum as a NaN).
 */
#include "cuda_ops_fixture.h"

/* ---------------------------------------------------------------- ReLU and pooling */

static void check_relu(void)
{
    const size_t n = 100003;
    float *x = fmalloc(n), *y = fmalloc(n), *dy = fmalloc(n), *dx = fmalloc(n), *g = fmalloc(n);
    fill(x, n, 2.0f);
    fill(dy, n, 1.0f);
    const float special[] = {bits_f(0x7fc00000u), bits_f(0xffc00001u), INFINITY, -INFINITY, -0.0f, 0.0f,
                             bits_f(0x00000001u), bits_f(0x80000001u), FLT_MAX,  -FLT_MAX};
    for (size_t i = 0; i < sizeof special / sizeof *special; i++)
        x[i * 997 % n] = special[i], x[n - 1 - i] = special[i];
    float *d_x = dcopy(x, n), *d_y = dfloats(n), *d_dy = dcopy(dy, n), *d_dx = dfloats(n);

    CPU(relu_fwd, x, y, n);
    GPU(relu_fwd, d_x, d_y, n);
    ops_ok("relu_fwd");
    down(g, d_y, n * sizeof *g);
    cmp_bits("relu_fwd (NaN, inf, -0, subnormals)", g, y, n, 4);
    GPU(relu_fwd, d_x, d_x, n); /* in place */
    ops_ok("relu_fwd in place");
    down(g, d_x, n * sizeof *g);
    cmp_bits("relu_fwd in place", g, y, n, 4);

    CPU(relu_bwd, y, dy, dx, n);
    GPU(relu_bwd, d_y, d_dy, d_dx, n);
    ops_ok("relu_bwd");
    down(g, d_dx, n * sizeof *g);
    cmp_bits("relu_bwd", g, dx, n, 4);
    GPU(relu_bwd, d_y, d_dy, d_dy, n); /* dx aliases dy */
    ops_ok("relu_bwd in place");
    down(g, d_dy, n * sizeof *g);
    cmp_bits("relu_bwd in place", g, dx, n, 4);
    cudaFree(d_x), cudaFree(d_y), cudaFree(d_dy), cudaFree(d_dx);
    free(x), free(y), free(dy), free(dx), free(g);
}

static void check_maxpool(void)
{
    const struct {
        int b, c, h, w, k, mode; /* mode 0: random; 1: few levels (ties) and NaNs; 2: all equal */
    } cfg[] = {{2, 3, 9, 10, 2, 1},  {1, 2, 11, 11, 3, 1}, {3, 1, 8, 8, 4, 2},
               {3, 5, 28, 28, 2, 0}, {2, 2, 7, 13, 3, 0},  {1, 1, 2, 3, 5, 0} /* no whole window: empty output */};
    for (size_t z = 0; z < sizeof cfg / sizeof *cfg; z++) {
        const int B = cfg[z].b, C = cfg[z].c, H = cfg[z].h, W = cfg[z].w, k = cfg[z].k;
        const size_t nx = (size_t)B * C * H * W, ny = (size_t)B * C * (H / k) * (W / k);
        float *x = fmalloc(nx), *y = fmalloc(ny), *gy = fmalloc(ny), *dy = fmalloc(ny), *dx = fmalloc(nx),
              *gdx = fmalloc(nx);
        int32_t *idx = xmalloc(ny * sizeof *idx + 4), *gidx = xmalloc(ny * sizeof *gidx + 4);
        fill(x, nx, 1.0f);
        fill(dy, ny, 1.0f);
        size_t nans = 0;
        if (cfg[z].mode == 1)
            for (size_t i = 0; i < nx; i++) {
                x[i] = floorf(x[i] * 2.0f); /* -2..1: many ties */
                if (rng_next() % 23 == 0) x[i] = bits_f(0x7fc00000u | (uint32_t)(i & 0xffff)), nans++;
            }
        if (cfg[z].mode == 1 && nx > 2 * (size_t)W) /* two NaNs in the first window: the last one wins */
            x[1] = bits_f(0x7fc00001u), x[W] = bits_f(0xffc00002u), nans += 2;
        if (cfg[z].mode == 2)
            for (size_t i = 0; i < nx; i++) x[i] = 0.5f;
        float *d_x = dcopy(x, nx), *d_y = dfloats(ny), *d_dy = dcopy(dy, ny), *d_dx = dfloats(nx);
        int32_t *d_idx = dmalloc(ny * sizeof *d_idx);
        CPU(maxpool_fwd, x, y, idx, B, C, H, W, k);
        GPU(maxpool_fwd, d_x, d_y, d_idx, B, C, H, W, k);
        CPU(maxpool_bwd, dy, idx, dx, B, C, H, W, k);
        GPU(maxpool_bwd, d_dy, d_idx, d_dx, B, C, H, W, k);
        ops_ok("maxpool");
        down(gy, d_y, ny * sizeof *gy);
        down(gidx, d_idx, ny * sizeof *gidx);
        down(gdx, d_dx, nx * sizeof *gdx);
        char what[96];
        snprintf(what, sizeof what, "maxpool %dx%dx%dx%d k%d%s y", B, C, H, W, k,
                 cfg[z].mode == 1   ? " ties+NaN"
                 : cfg[z].mode == 2 ? " all ties"
                                    : "");
        cmp_bits(what, gy, y, ny, 4);
        snprintf(what, sizeof what, "maxpool %dx%dx%dx%d k%d argmax", B, C, H, W, k);
        cmp_bits(what, gidx, idx, ny, 4);
        snprintf(what, sizeof what, "maxpool %dx%dx%dx%d k%d dx", B, C, H, W, k);
        cmp_bits(what, gdx, dx, nx, 4);
        /* The pool running the backward of a relu layer before it (its input taken as that
         * layer's output): the CPU's pool backward then relu backward on x, bit for bit. */
        float *rdx = fmalloc(nx);
        CPU(relu_bwd, x, dx, rdx, nx);
        G16(cuda_maxpool_relu_bwd(d_dy, d_idx, d_y, d_dx, B, C, H, W, k));
        ops_ok("maxpool relu");
        down(gdx, d_dx, nx * sizeof *gdx);
        snprintf(what, sizeof what, "maxpool %dx%dx%dx%d k%d relu dx", B, C, H, W, k);
        cmp_bits(what, gdx, rdx, nx, 4);
        free(rdx);
        /* The 16-bit pooling of mixed precision: the fp32 op on the widened values, rounded back
         * (exact: the maximum is an input, the gradient a copy of dy or +0); NaNs as NaNs. */
        float *x0 = fmalloc(nx), *dy0 = fmalloc(ny + 1), *xr = fmalloc(nx), *dyr = fmalloc(ny + 1);
        memcpy(x0, x, nx * sizeof *x);
        memcpy(dy0, dy, ny * sizeof *dy);
        for (int bf = 0; bf <= 1; bf++) {
            const dt_dtype t = bf ? DT_BF16 : DT_F16;
            /* ny may be 0 (no whole window): dx is then all +0. */
            uint16_t *x16 = xmalloc(nx * 2), *y16 = xmalloc(ny * 2 + 2), *gy16 = xmalloc(ny * 2 + 2),
                     *dy16 = xmalloc(ny * 2 + 2), *dx16 = xmalloc(nx * 2), *gdx16 = xmalloc(nx * 2);
            cpu_cast_f32_to_16(t, x0, x16, nx); /* from the same fp32 values for each type */
            cpu_cast_16_to_f32(t, x16, xr, nx);
            cpu_cast_f32_to_16(t, dy0, dy16, ny);
            cpu_cast_16_to_f32(t, dy16, dyr, ny);
            CPU(maxpool_fwd, xr, y, idx, B, C, H, W, k);
            cpu_cast_f32_to_16(t, y, y16, ny);
            CPU(maxpool_bwd, dyr, idx, dx, B, C, H, W, k);
            cpu_cast_f32_to_16(t, dx, dx16, nx);
            memset(gdx16, 0xff, nx * 2); /* poisoned: every element must be written */
            uint16_t *d_x16 = dmalloc(nx * 2), *d_y16 = dmalloc(ny * 2 + 2), *d_dy16 = dmalloc(ny * 2 + 2),
                     *d_dx16 = dmalloc(nx * 2);
            up(d_dx16, gdx16, nx * 2);
            up(d_x16, x16, nx * 2);
            up(d_dy16, dy16, ny * 2);
            G16(cuda_maxpool16_fwd(t, d_x16, d_y16, d_idx, B, C, H, W, k));
            G16(cuda_maxpool16_bwd(t, d_dy16, d_idx, NULL, d_dx16, B, C, H, W, k));
            ops_ok("maxpool16");
            down(gy16, d_y16, ny * 2);
            down(gidx, d_idx, ny * sizeof *gidx);
            down(gdx16, d_dx16, nx * 2);
            /* With a relu layer's backward before it: the relu16 backward on x16 of the above. */
            uint16_t *rdx16 = xmalloc(nx * 2), *grdx16 = xmalloc(nx * 2);
            cpu_relu16_bwd(t, x16, dx16, rdx16, nx);
            G16(cuda_maxpool16_bwd(t, d_dy16, d_idx, d_y16, d_dx16, B, C, H, W, k));
            ops_ok("maxpool16 relu");
            down(grdx16, d_dx16, nx * 2);
            snprintf(what, sizeof what, "maxpool16 %s %dx%dx%dx%d k%d relu dx", bf ? "bf16" : "fp16", B, C, H, W, k);
            cmp_bits(what, grdx16, rdx16, nx, 2);
            free(rdx16), free(grdx16);
            const uint16_t inf = bf ? 0x7f80u : 0x7c00u;
            size_t bad = 0;
            for (size_t i = 0; i < ny; i++) {
                const int n1 = (gy16[i] & 0x7fffu) > inf, n2 = (y16[i] & 0x7fffu) > inf;
                bad += n1 != n2 || (!n1 && gy16[i] != y16[i]) || gidx[i] != idx[i];
            }
            for (size_t i = 0; i < nx; i++) bad += gdx16[i] != dx16[i];
            check(bad == 0,
                  "maxpool16 %s %dx%dx%dx%d k%d: y, argmax and dx as the fp32 op on widened values "
                  "(%zu differ)",
                  bf ? "bf16" : "fp16", B, C, H, W, k, bad);
            cudaFree(d_x16), cudaFree(d_y16), cudaFree(d_dy16), cudaFree(d_dx16);
            free(x16), free(y16), free(gy16), free(dy16), free(dx16), free(gdx16);
        }
        free(x0), free(dy0), free(xr), free(dyr);
        cudaFree(d_x), cudaFree(d_y), cudaFree(d_dy), cudaFree(d_dx), cudaFree(d_idx);
        free(x), free(y), free(gy), free(dy), free(dx), free(gdx), free(idx), free(gidx);
    }
}

int main(void)
{
    const cuda_check_fn checks[] = {check_relu, check_maxpool};
    return cuda_ops_main(NULL, checks, sizeof checks / sizeof *checks);
}
