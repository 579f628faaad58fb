/*
 * test_cuda_ops_gemm.c - the CUDA table's GEMM (every transpose, padded leading dimensions,
 * alpha and beta) and fully connected layer (with and without bias, dx and db each optional)
 * against the CPU table.
 *
 * Tolerances: gemm, linear y/dx/dW: max |gpu - cpu| <= 1e-4 * max |cpu| over the output; both sides
 * are fp32 (cuBLAS in its default, non-TF32 math) but sum in different orders. linear db: exact
 * (both add the rows in order in fp32).
 */
#include "cuda_ops_fixture.h"

/* ---------------------------------------------------------------- GEMM and fully connected */

static void check_gemm(void)
{
    const int sizes[][3] = {{3, 5, 7}, {1, 17, 33}, {64, 48, 80}, {130, 1, 257}};
    for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                const int m = sizes[z][0], n = sizes[z][1], k = sizes[z][2];
                /* row-major storage with padded leading dimensions */
                const int a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
                const int lda = a_cols + 3, ldb = b_cols + 1, ldc = n + 2;
                const size_t na = (size_t)a_rows * lda, nb = (size_t)b_rows * ldb, nc = (size_t)m * ldc;
                float *a = fmalloc(na), *b = fmalloc(nb), *c = fmalloc(nc), *g = fmalloc(nc);
                fill(a, na, 1.0f);
                fill(b, nb, 1.0f);
                fill(c, nc, 1.0f);
                float *da = dcopy(a, na), *db = dcopy(b, nb), *dc = dcopy(c, nc);
                CPU(gemm, ta, tb, m, n, k, 0.75f, a, lda, b, ldb, 0.5f, c, ldc);
                GPU(gemm, ta, tb, m, n, k, 0.75f, da, lda, db, ldb, 0.5f, dc, ldc);
                ops_ok("gemm");
                down(g, dc, nc * sizeof *g);
                char what[64];
                snprintf(what, sizeof what, "gemm %dx%dx%d trans %d%d (padded ld)", m, n, k, ta, tb);
                cmp_rel(what, g, c, nc, 1e-4);
                cudaFree(da), cudaFree(db), cudaFree(dc);
                free(a), free(b), free(c), free(g);
            }
}

static void check_linear(void)
{
    const struct {
        int batch, in, out, bias, want_dx, want_db;
    } cfg[] = {{1, 33, 10, 1, 1, 1}, {3, 17, 5, 0, 1, 1}, {64, 200, 100, 1, 0, 1}, {7, 9, 130, 1, 1, 0}};
    for (size_t z = 0; z < sizeof cfg / sizeof *cfg; z++) {
        const int B = cfg[z].batch, I = cfg[z].in, O = cfg[z].out;
        const size_t nx = (size_t)B * I, nw = (size_t)O * I, ny = (size_t)B * O;
        float *x = fmalloc(nx), *w = fmalloc(nw), *b = fmalloc(O), *dy = fmalloc(ny);
        float *y = fmalloc(ny), *dx = fmalloc(nx), *dw = fmalloc(nw), *dbias = fmalloc(O);
        float *gy = fmalloc(ny), *gdx = fmalloc(nx), *gdw = fmalloc(nw), *gdb = fmalloc(O);
        fill(x, nx, 1.0f), fill(w, nw, 0.5f), fill(b, O, 1.0f), fill(dy, ny, 1.0f);
        float *d_x = dcopy(x, nx), *d_w = dcopy(w, nw), *d_b = dcopy(b, O), *d_dy = dcopy(dy, ny);
        float *d_y = dfloats(ny), *d_dx = dfloats(nx), *d_dw = dfloats(nw), *d_db = dfloats(O);
        const float *bb = cfg[z].bias ? b : NULL, *d_bb = cfg[z].bias ? d_b : NULL;
        CPU(linear_fwd, x, w, bb, y, B, I, O);
        GPU(linear_fwd, d_x, d_w, d_bb, d_y, B, I, O);
        CPU(linear_bwd, x, w, dy, cfg[z].want_dx ? dx : NULL, dw, cfg[z].want_db ? dbias : NULL, B, I, O);
        GPU(linear_bwd, d_x, d_w, d_dy, cfg[z].want_dx ? d_dx : NULL, d_dw, cfg[z].want_db ? d_db : NULL, B, I, O);
        ops_ok("linear");
        down(gy, d_y, ny * sizeof *gy);
        down(gdw, d_dw, nw * sizeof *gdw);
        char what[80];
        snprintf(what, sizeof what, "linear %dx%d->%d%s y", B, I, O, cfg[z].bias ? "" : " (no bias)");
        cmp_rel(what, gy, y, ny, 1e-4);
        snprintf(what, sizeof what, "linear %dx%d->%d dW", B, I, O);
        cmp_rel(what, gdw, dw, nw, 1e-4);
        if (cfg[z].want_dx) {
            down(gdx, d_dx, nx * sizeof *gdx);
            snprintf(what, sizeof what, "linear %dx%d->%d dx", B, I, O);
            cmp_rel(what, gdx, dx, nx, 1e-4);
        }
        if (cfg[z].want_db) {
            down(gdb, d_db, O * sizeof *gdb);
            snprintf(what, sizeof what, "linear %dx%d->%d db", B, I, O);
            cmp_ulp(what, gdb, dbias, O, 0);
        }
        cudaFree(d_x), cudaFree(d_w), cudaFree(d_b), cudaFree(d_dy);
        cudaFree(d_y), cudaFree(d_dx), cudaFree(d_dw), cudaFree(d_db);
        free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw), free(dbias);
        free(gy), free(gdx), free(gdw), free(gdb);
    }
}

int main(void)
{
    const cuda_check_fn checks[] = {check_gemm, check_linear};
    return cuda_ops_main(NULL, checks, sizeof checks / sizeof *checks);
}
