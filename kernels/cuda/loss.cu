/*
 * loss.cu - softmax cross-entropy of the CUDA backend: one row per warp, partial sums in a fixed
 * order, the loss and correct count copied back; on fp32 logits, or on 16-bit ones with a 16-bit
 * gradient (the layer entry of a 16-bit pass) in the same kernel.
 */
#include "kernels/cuda/cuda_internal.cuh"

/* ---------------------------------------------------------------- softmax cross-entropy */

/* Does (v, j) beat the current (m, am) (am < 0: none yet) as the CPU's argmax? The CPU starts from
 * element 0 and takes strictly greater values in order: a NaN at 0 is kept (nothing is greater),
 * a NaN elsewhere is never taken, ties keep the first index. */
__device__ static bool xent_beats(float v, int j, float m, int am)
{
    if (v != v) return j == 0;
    if (am < 0) return true;
    if (m != m) return false; /* the NaN at index 0 */
    return v > m || (v == m && j < am);
}

/* One warp per row (rows strided over all warps of the grid). Per row: m, argmax; s = sum of
 * e_j = expf(x_j - m) in double; loss = log(s) - (x[label] - m); dlogits = e_j * (float)(gs / s),
 * minus gs at the label (each step rounded as on the CPU). Lane 0 of each warp adds its rows' loss
 * and correct flags in row order; thread 0 adds the warps in order into this block's partial, and
 * the block that finishes last adds the partials in block order into s->res (one kernel: the order
 * of the sums does not depend on which block is last). A label outside [0, classes) gives a NaN
 * loss and no label term.
 * TI: fp32 logits, or 16-bit ones (of bf16 when bf, else fp16) widened as they are read; TO: fp32
 * dlogits (e_j kept in them between the two passes), or 16-bit ones, e_j computed again in the
 * second pass (the same expf of the same value) and the result rounded once: the bits of widening
 * the logits, the fp32 loss and casting its gradient (pass_common.c's layer_loss), in one kernel. */
template <typename TI, typename TO>
static __global__ void xent_rows_kernel(const TI *__restrict__ logits, const int32_t *__restrict__ labels,
                                        TO *__restrict__ dlogits, int bf, int batch, int classes, float gs,
                                        ops_scratch *s)
{
    constexpr bool keep_e = sizeof(TO) == sizeof(float);
    __shared__ double sh_loss[OPS_WARPS];
    __shared__ int sh_correct[OPS_WARPS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nwarps = gridDim.x * OPS_WARPS;
    double wloss = 0.0;
    int wcorrect = 0;
    for (int r = blockIdx.x * OPS_WARPS + warp; r < batch; r += nwarps) {
        const TI *row = logits + (size_t)r * classes;
        float m = 0.0f;
        int am = -1;
        for (int j = lane; j < classes; j += 32) {
            const float v = as32(row[j], bf);
            if (xent_beats(v, j, m, am)) m = v, am = j;
        }
        for (int off = 16; off > 0; off >>= 1) {
            const float v = __shfl_xor_sync(0xffffffffu, m, off);
            const int j = __shfl_xor_sync(0xffffffffu, am, off);
            if (j >= 0 && xent_beats(v, j, m, am)) m = v, am = j;
        }
        TO *d = dlogits ? dlogits + (size_t)r * classes : NULL;
        double sum = 0.0;
        for (int j = lane; j < classes; j += 32) {
            const float e = expf(__fsub_rn(as32(row[j], bf), m));
            if constexpr (keep_e) {
                if (d) d[j] = e;
            }
            sum += (double)e;
        }
        for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
        const int label = labels[r];
        const bool valid = label >= 0 && label < classes;
        if (d) {
            const float scale = (float)((double)gs / sum);
            for (int j = lane; j < classes; j += 32) {
                float v;
                if constexpr (keep_e)
                    v = __fmul_rn(d[j], scale);
                else
                    v = __fmul_rn(expf(__fsub_rn(as32(row[j], bf), m)), scale);
                if (j == label) v = __fsub_rn(v, gs);
                if constexpr (keep_e)
                    d[j] = v;
                else
                    d[j] = narrow16(bf, v);
            }
        }
        if (lane == 0) {
            wloss += valid ? log(sum) - ((double)as32(row[label], bf) - (double)m) : nan("");
            wcorrect += valid && am == label;
        }
    }
    if (lane == 0) {
        sh_loss[warp] = wloss;
        sh_correct[warp] = wcorrect;
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    double l = 0.0;
    int c = 0;
    for (int i = 0; i < OPS_WARPS; i++) l += sh_loss[i], c += sh_correct[i];
    s->part_loss[blockIdx.x] = l;
    s->part_correct[blockIdx.x] = c;
    /* The partial is visible to every block before this one is counted done. */
    __threadfence();
    if (atomicAdd(&s->loss_blocks_done, 1u) != gridDim.x - 1) return;
    /* The last block: every partial is written; read them past this SM's L1 (__ldcg), in order. */
    l = 0.0;
    c = 0;
    for (unsigned i = 0; i < gridDim.x; i++) l += __ldcg(&s->part_loss[i]), c += __ldcg(&s->part_correct[i]);
    s->res.loss = l;
    s->res.correct = c;
    s->loss_blocks_done = 0; /* for the next loss, a later kernel in stream order */
}

/* The loss of logits of type t (fp32 or 16-bit; dlogits of the same type), queued: the loss and
 * the count reach the host behind the kernels (loss_wait). */
static dt_status xent(const char *op, dt_dtype t, const void *logits, const int32_t *labels, void *dlogits, int batch,
                      int classes, float grad_scale, double *loss, int *correct)
{
    if (correct) *correct = 0;
    *loss = 0.0;
    if (batch <= 0) return DT_OK;
    if (classes <= 0)
        return status_set_error(DT_ERR_INVALID_ARG, "cuda %s: %d classes; there must be at least one", op, classes);
    ops_scratch *s;
    TRY(scratch(op, &s));
    const int want = (batch + OPS_WARPS - 1) / OPS_WARPS, parts = want < OPS_MAX_PARTS ? want : OPS_MAX_PARTS;
    if (t == DT_F32)
        xent_rows_kernel<<<parts, OPS_BLOCK, 0, g_stream>>>((const float *)logits, labels, (float *)dlogits, 0, batch,
                                                            classes, grad_scale, s);
    else
        xent_rows_kernel<<<parts, OPS_BLOCK, 0, g_stream>>>((const uint16_t *)logits, labels, (uint16_t *)dlogits,
                                                            t == DT_BF16, batch, classes, grad_scale, s);
    TRY(check_launch(op, "the loss", (size_t)batch * classes));
    return queue_loss_result(op, loss, correct);
}

dt_status cuda_softmax_xent(backend *be, const float *logits, const int32_t *labels, float *dlogits, int batch,
                            int classes, float grad_scale, double *loss, int *correct)
{
    (void)be;
    return xent("softmax_xent", DT_F32, logits, labels, dlogits, batch, classes, grad_scale, loss, correct);
}

/* The layer entry: 16-bit logits read and their gradient written in the one kernel (no widened
 * copy of the logits, no fp32 gradient to cast back); fp32 as softmax_xent. */
dt_status cuda_layer_loss(backend *be, const pass_args *a, const void *logits, const int32_t *labels, void *dlogits,
                          int batch, int classes, float grad_scale, double *loss, int *correct)
{
    (void)be;
    return xent("layer_loss", a->prec, logits, labels, dlogits, batch, classes, grad_scale, loss, correct);
}
