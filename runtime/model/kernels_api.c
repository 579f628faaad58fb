/*
 * kernels_api.c - the kernel entry points include/dtrain.h offers custom models: the CPU
 * backend's GEMM (OpenBLAS) and softmax cross-entropy, the same code dt_model runs on the CPU.
 */
#include "dtrain.h"
#include "kernels/backend.h"
#include "base/status.h"

#include <math.h>

void dt_sgemm(int trans_a, int trans_b, int m, int n, int kk, float alpha, const float *a, int lda, const float *b,
              int ldb, float beta, float *c, int ldc)
{
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
