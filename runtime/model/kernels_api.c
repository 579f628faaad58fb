/*
 * kernels_api.c - the kernel entry points include/dtrain.h offers custom models: the CPU
 * backend's GEMM (OpenBLAS) and softmax cross-entropy, the same code dt_model runs on the CPU.
 */
#include "dtrain.h"
#include "kernels/backend.h"
#include "base/status.h"

#include <math.h>

/* The row-major CBLAS rules dt_sgemm's header states: what OpenBLAS would otherwise only print
 * ("parameter N had an illegal value"), and NULL buffers it would read. */
static int sgemm_args_ok(int trans_a, int trans_b, int m, int n, int kk, const float *a, int lda, const float *b,
                         int ldb, const float *c, int ldc)
{
    const char *bad = NULL;
    int v = 0, min = 0;
    const int lda_min = (trans_a ? m : kk) > 1 ? (trans_a ? m : kk) : 1;
    const int ldb_min = (trans_b ? kk : n) > 1 ? (trans_b ? kk : n) : 1, ldc_min = n > 1 ? n : 1;
    if (m < 0)
        bad = "m", v = m;
    else if (n < 0)
        bad = "n", v = n;
    else if (kk < 0)
        bad = "k", v = kk;
    else if (lda < lda_min)
        bad = "lda", v = lda, min = lda_min;
    else if (ldb < ldb_min)
        bad = "ldb", v = ldb, min = ldb_min;
    else if (ldc < ldc_min)
        bad = "ldc", v = ldc, min = ldc_min;
    if (bad) {
        status_set_error(DT_ERR_INVALID_ARG,
                         "dt_sgemm: %s %d must be at least %d (dimensions >= 0; each leading dimension at least the "
                         "row length of its matrix as stored, and 1): C is unchanged",
                         bad, v, min);
        return 0;
    }
    if (m && n && ((kk && (!a || !b)) || !c)) {
        status_set_error(DT_ERR_INVALID_ARG, "dt_sgemm: %s is NULL with m %d, n %d, k %d: C is unchanged",
                         !c   ? "c"
                         : !a ? "a"
                              : "b",
                         m, n, kk);
        return 0;
    }
    return 1;
}

void dt_sgemm(int trans_a, int trans_b, int m, int n, int kk, float alpha, const float *a, int lda, const float *b,
              int ldb, float beta, float *c, int ldc)
{
    if (!sgemm_args_ok(trans_a, trans_b, m, n, kk, a, lda, b, ldb, c, ldc)) return;
    /* OpenBLAS would spin for ever where its buffer cannot be mapped: refused instead (C unchanged). */
    if (m && n && backend_cpu_blas_reserve()) return;
    backend *be = backend_cpu();
    (void)be->ops->gemm(be, trans_a, trans_b, m, n, kk, alpha, a, lda, b, ldb, beta, c, ldc); /* cannot fail */
}

double dt_softmax_xent(const float *logits, const int32_t *labels, float *dlogits, int batch, int classes,
                       float grad_scale, int *correct)
{
    /* A label outside 0..classes-1 would be read and written outside the rows: refused, with
     * nothing written (the CUDA kernel gives NaN for one; this entry point checks first). */
    if (!logits || !labels || batch < 0 || classes < 1) {
        status_set_error(DT_ERR_INVALID_ARG, "dt_softmax_xent: NULL buffer, batch %d or classes %d", batch, classes);
        return NAN;
    }
    for (int i = 0; i < batch; i++)
        if (labels[i] < 0 || labels[i] >= classes) {
            status_set_error(DT_ERR_INVALID_ARG, "dt_softmax_xent: label %d of sample %d is outside 0..%d",
                             (int)labels[i], i, classes - 1);
            return NAN;
        }
    backend *be = backend_cpu();
    double loss = 0;
    (void)be->ops->softmax_xent(be, logits, labels, dlogits, batch, classes, grad_scale, &loss, correct);
    (void)be->ops->loss_wait(be); /* the CPU's values are there already: cannot fail */
    return loss;
}
