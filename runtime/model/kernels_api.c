/*
 * kernels_api.c - the kernel entry points include/dtrain.h offers custom models: the CPU
 * backend's GEMM (OpenBLAS) and softmax cross-entropy, the same code dt_model runs on the CPU.
 */
#include "dtrain.h"
#include "kernels/backend.h"

void dt_sgemm(int trans_a, int trans_b, int m, int n, int kk, float alpha, const float *a, int lda, const float *b,
              int ldb, float beta, float *c, int ldc)
{
    backend *be = backend_cpu();
    (void)be->ops->gemm(be, trans_a, trans_b, m, n, kk, alpha, a, lda, b, ldb, beta, c, ldc); /* cannot fail */
}

double dt_softmax_xent(const float *logits, const int32_t *labels, float *dlogits, int batch, int classes,
                       float grad_scale, int *correct)
{
    backend *be = backend_cpu();
    double loss = 0;
    (void)be->ops->softmax_xent(be, logits, labels, dlogits, batch, classes, grad_scale, &loss, correct);
    (void)be->ops->loss_wait(be); /* the CPU's values are there already: cannot fail */
    return loss;
}
