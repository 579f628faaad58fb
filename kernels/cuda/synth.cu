/*
 * synth.cu - the CUDA table's synth_batch (backend.h): the synthetic samples of kernels/synth.h
 * made on the device, the bits of the CPU's (kernels/cpu/synth.c), so that a GPU's synthetic
 * batches take no host core and no copy of the inputs (only the batch's indices travel).
 *
 * One block per sample, SYNTH_TEACHER_HIDDEN x SYNTH_DOT_LANES threads: first the values, each
 * thread its share (an image pixel reads its four grid values, each one hash); then the teacher's
 * hidden unit u is the 16 threads (u, k), lane k of synth.h's dot product each, so the order of
 * every sum is the CPU's; then the classes, a thread's share each, the first maximum kept and the
 * block's reduced with ties going to the lower class; last the normalization. Every product and
 * sum is an explicit __fmul_rn / __fadd_rn, which nvcc never contracts into an FMA, as the CPU's C11
 * build without FMA never does.
 *
 * The indices go through a ring of SYNTH_RING pinned and device buffers of this file: a call
 * waits only for the kernel of the call SYNTH_RING before it (long done when steps are queued one
 * at a time). The ring is the training thread's: synth_batch is called by the loader's
 * dt_loader_next alone.
 */
#include "kernels/cuda/cuda_internal.cuh"
#include "kernels/synth.h"
#include "base/rng.h"

#include <limits.h>

#define SYNTH_THREADS (SYNTH_TEACHER_HIDDEN * SYNTH_DOT_LANES)
#define SYNTH_RING 4

static __device__ __forceinline__ float grid_value(uint64_t key, uint64_t cell)
{
    return rng_uniform_pm1(rng_mix(key + cell));
}

/* The CPU's bilinear expression, term by term in C's order. */
static __device__ __forceinline__ float pixel(const synth_spec &sp, uint64_t key, size_t v, size_t hw)
{
    const int c = (int)(v / hw), rem = (int)(v % hw), y = rem / sp.w, xx = rem % sp.w;
    const float fy = __fdiv_rn((float)y, (float)SYNTH_IMAGE_CELL), fx = __fdiv_rn((float)xx, (float)SYNTH_IMAGE_CELL);
    const int y0 = (int)fy, x0 = (int)fx;
    const float ty = __fsub_rn(fy, (float)y0), tx = __fsub_rn(fx, (float)x0);
    const uint64_t g = (uint64_t)c * sp.gh * sp.gw + (uint64_t)y0 * sp.gw + (uint64_t)x0;
    const float g00 = grid_value(key, g), g01 = grid_value(key, g + 1);
    const float g10 = grid_value(key, g + sp.gw), g11 = grid_value(key, g + sp.gw + 1);
    const float rx = __fsub_rn(1.0f, tx), ry = __fsub_rn(1.0f, ty);
    const float top = __fadd_rn(__fmul_rn(rx, g00), __fmul_rn(tx, g01));
    const float bottom = __fadd_rn(__fmul_rn(rx, g10), __fmul_rn(tx, g11));
    return __fadd_rn(__fmul_rn(ry, top), __fmul_rn(ty, bottom));
}

static __global__ void __launch_bounds__(SYNTH_THREADS)
    synth_kernel(synth_spec sp, const uint32_t *__restrict__ idx, float *__restrict__ x, int32_t *__restrict__ labels,
                 size_t in)
{
    __shared__ float lanes[SYNTH_TEACHER_HIDDEN][SYNTH_DOT_LANES];
    __shared__ float hidden[SYNTH_TEACHER_HIDDEN];
    __shared__ float best_v[SYNTH_THREADS];
    __shared__ int best_c[SYNTH_THREADS];
    const int t = threadIdx.x;
    float *row = x + (size_t)blockIdx.x * in;
    const uint64_t key = rng_mix(sp.seed ^ rng_mix(SYNTH_STREAM_SAMPLE + (uint64_t)idx[blockIdx.x]));
    const size_t hw = (size_t)sp.h * sp.w;
    if (sp.h > 1 || sp.w > 1)
        for (size_t v = t; v < in; v += SYNTH_THREADS) row[v] = pixel(sp, key, v, hw);
    else
        for (size_t v = t; v < in; v += SYNTH_THREADS) row[v] = rng_uniform_pm1(rng_mix(key + v));
    __syncthreads();

    /* Hidden unit u, lane k: terms k, k + 16, ... of the whole 16-blocks. */
    const int u = t / SYNTH_DOT_LANES, k = t % SYNTH_DOT_LANES;
    const float *w = sp.w1 + (size_t)u * in;
    const size_t whole = in - in % SYNTH_DOT_LANES;
    float lane = 0;
    for (size_t j = k; j < whole; j += SYNTH_DOT_LANES) lane = __fadd_rn(lane, __fmul_rn(w[j], row[j]));
    lanes[u][k] = lane;
    __syncthreads();
    if (k == 0) {
        float sum = 0;
        for (size_t j = whole; j < in; j++) sum = __fadd_rn(sum, __fmul_rn(w[j], row[j]));
        for (int q = 0; q < SYNTH_DOT_LANES; q++) sum = __fadd_rn(sum, lanes[u][q]);
        hidden[u] = sum > 0 ? sum : 0;
    }
    __syncthreads();

    /* Class c's score: the 32 hidden units are two whole 16-blocks, no leftover terms. */
    float mine = -INFINITY;
    int mine_c = INT_MAX;
    for (int c = t; c < sp.classes; c += SYNTH_THREADS) {
        const float *w2 = sp.w2 + (size_t)c * SYNTH_TEACHER_HIDDEN;
        float sum = 0;
        for (int q = 0; q < SYNTH_DOT_LANES; q++) {
            float l = __fadd_rn(0.0f, __fmul_rn(w2[q], hidden[q]));
            for (int b = SYNTH_DOT_LANES; b < SYNTH_TEACHER_HIDDEN; b += SYNTH_DOT_LANES)
                l = __fadd_rn(l, __fmul_rn(w2[b + q], hidden[b + q]));
            sum = __fadd_rn(sum, l);
        }
        if (sum > mine) mine = sum, mine_c = c;
    }
    best_v[t] = mine;
    best_c[t] = mine_c;
    __syncthreads();
    for (int half = SYNTH_THREADS / 2; half > 0; half /= 2) {
        if (t < half) {
            const float ov = best_v[t + half];
            const int oc = best_c[t + half];
            if (ov > best_v[t] || (ov == best_v[t] && oc < best_c[t])) best_v[t] = ov, best_c[t] = oc;
        }
        __syncthreads();
    }
    /* No score above -inf (a NaN or inf in the teacher): class 0, as the host's argmax leaves it. */
    if (t == 0) labels[blockIdx.x] = best_c[0] == INT_MAX ? 0 : best_c[0];

    if (sp.mul)
        for (size_t v = t; v < in; v += SYNTH_THREADS) {
            const int c = (int)(v / hw);
            row[v] = __fadd_rn(__fmul_rn(row[v], sp.mul[c]), sp.add[c]);
        }
}

/* One entry of the ring: the indices' pinned and device buffers, and the event after the kernel
 * that read them. */
typedef struct synth_stage {
    uint32_t *host, *dev;
    size_t cap;
    cudaEvent_t done;
    int queued;
} synth_stage;

static synth_stage g_ring[SYNTH_RING];
static int g_ring_next;

static dt_status stage_grow(synth_stage *st, size_t n)
{
    if (n <= st->cap) return DT_OK;
    cudaFreeHost(st->host);
    cudaFree(st->dev);
    st->host = st->dev = NULL;
    st->cap = 0;
    const size_t cap = (n + 1023) / 1024 * 1024;
    cudaError_t e = cudaMallocHost((void **)&st->host, cap * sizeof(uint32_t));
    if (e == cudaSuccess) e = cudaMalloc((void **)&st->dev, cap * sizeof(uint32_t));
    if (e != cudaSuccess) {
        cudaGetLastError();
        cudaFreeHost(st->host);
        st->host = NULL;
        return status_set_error(DT_ERR_NOMEM,
                                "synth_batch: no memory for the indices of %zu synthetic samples: %s (a smaller "
                                "--batch)",
                                n, cudaGetErrorString(e));
    }
    st->cap = cap;
    return DT_OK;
}

dt_status cuda_synth_batch(backend *be, const synth_spec *sp, const uint32_t *idx, int n, float *x, int32_t *labels)
{
    (void)be;
    if (n <= 0) return DT_OK;
    synth_stage *st = &g_ring[g_ring_next];
    /* Its last kernel (SYNTH_RING calls ago) must have read the buffers before they change. */
    if (st->queued) TRY(cuda_err(cudaEventSynchronize(st->done), "synth_batch", "waiting for an earlier batch"));
    st->queued = 0;
    if (!st->done)
        TRY(cuda_err(cudaEventCreateWithFlags(&st->done, cudaEventDisableTiming), "synth_batch", "making an event"));
    TRY(stage_grow(st, (size_t)n));
    memcpy(st->host, idx, (size_t)n * sizeof *idx);
    dt_status s =
        cuda_err(cudaMemcpyAsync(st->dev, st->host, (size_t)n * sizeof *idx, cudaMemcpyHostToDevice, g_stream),
                 "synth_batch", "copying the batch's indices");
    if (!s) {
        synth_kernel<<<(unsigned int)n, SYNTH_THREADS, 0, g_stream>>>(*sp, st->dev, x, labels, synth_input_size(sp));
        s = check_launch("synth_batch", "synth_kernel", (size_t)n);
    }
    if (!s) s = cuda_err(cudaEventRecord(st->done, g_stream), "synth_batch", "marking the batch");
    if (s) {
        /* No event marks this slot: the copy may still be reading its pinned buffer, which the
         * next call would then overwrite (or stage_grow free). Let the stream pass it first. */
        (void)cudaStreamSynchronize(g_stream);
        return s;
    }
    st->queued = 1;
    g_ring_next = (g_ring_next + 1) % SYNTH_RING;
    return DT_OK;
}
