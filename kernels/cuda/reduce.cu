/*
 * reduce.cu - finite checks, reductions and updates over whole gradient buffers on the GPU (the
 * table's scale_count, found_inf_queue/wait, flag_nonfinite, sum_squares, accum_grads): the non-finite
 * counts and flags of the loss scaler, the fixed-order sum of squares behind the global gradient
 * norm, and the accumulation of micro-batch gradients. They run on the backend's stream; 16-bit
 * buffers are widened into an fp32 scratch a chunk at a time where a kernel wants fp32.
 */
#include "kernels/cuda/cuda_internal.cuh"

/* ---------------------------------------------------------------- non-finite counts (amp.h) */

__device__ static unsigned int nonfinite(float v) { return (__float_as_uint(v) & 0x7fffffffu) >= 0x7f800000u; }

/* The scaled value back into an fp32 buffer; 16-bit buffers are only counted here, never scaled. */
static __device__ __forceinline__ void put_scaled(float *d, size_t i, float v) { d[i] = v; }
static __device__ __forceinline__ void put_scaled(uint16_t *, size_t, float) {}

/* Per-block counts (a fixed tree in shared memory) into part_count of d[i] widened from T (bf:
 * bf16 over fp16); with `scale` (fp32 only), d[i] *= inv_scale first and the product is what is
 * counted (and stored). */
template <typename T>
static __global__ void count_nonfinite_kernel(T *d, int bf, size_t n, int scale, float inv_scale,
                                              unsigned long long *__restrict__ part_count)
{
    __shared__ unsigned long long sh[OPS_BLOCK];
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    unsigned long long c = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float v = as32(d[i], bf);
        if (scale) {
            v = v * inv_scale;
            put_scaled(d, i, v);
        }
        c += nonfinite(v);
    }
    sh[threadIdx.x] = c;
    __syncthreads();
    for (int w = OPS_BLOCK / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) part_count[blockIdx.x] = sh[0];
}

/* The count into s->res.count and, when flag is not NULL (found_inf_queue's verdict), whether it
 * is nonzero into *flag. */
static __global__ void count_final_kernel(ops_scratch *s, int parts, int *flag)
{
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    unsigned long long c = 0;
    for (int i = 0; i < parts; i++) c += s->part_count[i];
    s->res.count = c;
    if (flag) *flag = c != 0;
}

/* Queues the count of d of type t (16-bit ones only counted: scale 0) into s->res.count, and
 * its verdict into *flag when flag is not NULL; n 0 counts nothing (one block, a count of 0). */
static dt_status queue_count(const char *op, dt_dtype t, void *d, size_t n, int scale, float inv_scale, int *flag)
{
    ops_scratch *s;
    TRY(scratch(op, &s));
    const unsigned int parts = grid_for(n, OPS_MAX_PARTS);
    if (t == DT_F32)
        count_nonfinite_kernel<<<parts, OPS_BLOCK, 0, g_stream>>>((float *)d, 0, n, scale, inv_scale, s->part_count);
    else
        count_nonfinite_kernel<<<parts, OPS_BLOCK, 0, g_stream>>>((uint16_t *)d, t == DT_BF16, n, 0, 1.0f,
                                                                  s->part_count);
    TRY(check_launch(op, "the non-finite count", n));
    count_final_kernel<<<1, 32, 0, g_stream>>>(s, (int)parts, flag);
    return check_launch(op, "the count sum", parts);
}

static dt_status count_nonfinite(const char *op, dt_dtype t, void *d, size_t n, int scale, float inv_scale, size_t *bad)
{
    *bad = 0;
    if (n == 0) return DT_OK;
    TRY(queue_count(op, t, d, n, scale, inv_scale, NULL));
    ops_result r;
    TRY(fetch_result(op, &r));
    *bad = (size_t)r.count;
    return DT_OK;
}

/* *flag = stamp when any d[i] is inf or NaN and *flag < since (not found yet in this accumulation
 * group); nothing is written otherwise, so blocks need no agreement (they would all write the same
 * stamp) and the host reads the flags whenever it likes. T is fp32, or 16-bit (bf: bf16). */
template <typename T>
static __global__ void flag_nonfinite_kernel(const T *__restrict__ d, int bf, size_t n, int *flag, int stamp, int since)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    unsigned int bad = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) bad |= nonfinite(as32(d[i], bf));
    if (__syncthreads_or(bad) && threadIdx.x == 0 && *flag < since) *flag = stamp;
}

dt_status cuda_flag_nonfinite(backend *be, dt_dtype t, const void *buf, size_t n, int *flag, int stamp, int since)
{
    (void)be;
    if (n == 0) return DT_OK;
    const unsigned int grid = grid_for(n, OPS_MAX_BLOCKS);
    if (t == DT_F32)
        flag_nonfinite_kernel<<<grid, OPS_BLOCK, 0, g_stream>>>((const float *)buf, 0, n, flag, stamp, since);
    else
        flag_nonfinite_kernel<<<grid, OPS_BLOCK, 0, g_stream>>>((const uint16_t *)buf, t == DT_BF16, n, flag, stamp,
                                                                since);
    return check_launch("flag_nonfinite", "the non-finite flag", n);
}

/* A 16-bit buffer goes through an fp32 scratch this many values at a time (16 MiB). */
#define DEV_CHUNK ((size_t)1 << 22)

static dt_status chunk_alloc(const char *op, size_t n, float **tmp)
{
    *tmp = NULL;
    return cuda_err(cudaMalloc((void **)tmp, (n < DEV_CHUNK ? n : DEV_CHUNK) * sizeof(float)), op,
                    "cudaMalloc of the fp32 scratch of a 16-bit buffer");
}

dt_status cuda_scale_count(backend *be, dt_dtype t, void *buf, size_t n, float mul, size_t *bad)
{
    static const char op[] = "scale_count";
    *bad = 0;
    /* fp32 (multiplied in the count's pass), and 16-bit ones only counted (the model's unscale of
     * them is pending, applied by the optimizer step): one pass, no scratch. */
    if (t == DT_F32 || mul == 1.0f) return count_nonfinite(op, t, buf, n, t == DT_F32 && mul != 1.0f, mul, bad);
    /* Widened a chunk at a time, multiplied and counted, and (when multiplied) rounded back. */
    float *tmp;
    dt_status s = chunk_alloc(op, n, &tmp);
    for (size_t off = 0; off < n && !s; off += DEV_CHUNK) {
        const size_t c = n - off < DEV_CHUNK ? n - off : DEV_CHUNK;
        uint16_t *p = (uint16_t *)buf + off;
        size_t b = 0;
        if (!(s = cuda_cast_to32(be, t, p, tmp, c)) && !(s = count_nonfinite(op, DT_F32, tmp, c, 1, mul, &b)))
            *bad += b;
        if (!s && mul != 1.0f) s = cuda_cast_to16(be, t, tmp, p, c);
    }
    if (!s && mul != 1.0f) s = cuda_err(cudaStreamSynchronize(g_stream), op, "waiting for the stream");
    if (tmp) cudaFree(tmp);
    return s;
}

/* ---------------------------------------------------------------- the scaler's queued verdict */

/* Per verdict flag (a model's, in its flags buffer), the pinned int the flag is copied into behind
 * the check and the event that marks its arrival. Per flag, not one for the process: a model may
 * leave its verdict pending (dt_model_set_deferred_verdict) while another queues its own check,
 * and each wait must collect its own model's verdict. A slot is taken by a flag's first check and
 * given back by found_inf_release when the model is freed; its pinned int and event stay for the
 * next flag (a freed model's graphs, which recorded them, are gone by then). */
#define FOUND_SLOTS 64
static struct found_slot {
    const int *flag;
    int *host;
    cudaEvent_t done;
} g_found[FOUND_SLOTS];

static struct found_slot *found_slot_of(const int *flag)
{
    for (int i = 0; i < FOUND_SLOTS; i++)
        if (g_found[i].flag == flag) return &g_found[i];
    return NULL;
}

void cuda_found_inf_release(backend *be, const int *flag)
{
    (void)be;
    struct found_slot *f = flag ? found_slot_of(flag) : NULL;
    if (f) f->flag = NULL;
}

dt_status cuda_found_inf_queue(backend *be, dt_dtype t, const void *buf, size_t n, int *flag)
{
    (void)be;
    static const char op[] = "found_inf_queue";
    struct found_slot *f = found_slot_of(flag);
    if (!f && !(f = found_slot_of(NULL)))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "found_inf_queue: %d models with a loss scaler are alive in this process, the "
                                "most the GPU backend keeps verdicts for; free a model first",
                                FOUND_SLOTS);
    if (!f->host)
        TRY(cuda_err(cudaHostAlloc((void **)&f->host, sizeof *f->host, cudaHostAllocPortable), op,
                     "cudaHostAlloc of the verdict's pinned int"));
    if (!f->done)
        TRY(cuda_err(cudaEventCreateWithFlags(&f->done, cudaEventDisableTiming), op, "creating the verdict's event"));
    f->flag = flag;
    /* Only counted (scale 0: the buffer is not written); n 0 still writes the flag (0). */
    TRY(queue_count(op, t, (void *)buf, n, 0, 1.0f, flag));
    cudaError_t e = cudaMemcpyAsync(f->host, flag, sizeof *flag, cudaMemcpyDeviceToHost, g_stream);
    /* Recorded into a step graph: an external node, which each launch records (as the loss's). */
    if (e == cudaSuccess)
        e = cudaEventRecordWithFlags(f->done, g_stream,
                                     cuda_recording() ? cudaEventRecordExternal : cudaEventRecordDefault);
    return cuda_err(e, op, "queueing the copy of the verdict back");
}

dt_status cuda_found_inf_wait(backend *be, const int *flag, int *found)
{
    (void)be;
    *found = 0;
    const struct found_slot *f = found_slot_of(flag);
    if (!f || !flag)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "cuda found_inf_wait: no found_inf_queue of this flag came before it");
    TRY(cuda_err(cudaEventSynchronize(f->done), "found_inf_wait", "waiting for the verdict"));
    *found = *f->host != 0; /* its copy, once the event has passed */
    return DT_OK;
}

/* ---------------------------------------------------------------- gradient norms, accumulation */

/* Per-block sums of d[i]^2 in double: each thread's strided share in index order, then a fixed
 * tree in shared memory, so the result depends on n alone (the grid follows from it), never on
 * timing: every rank holding the same gradients gets the same bits, which clipping relies on.
 * d[i] is widened from T (bf: bf16 over fp16) and multiplied by m1 then m2 as optim_grads says
 * (each skipped when 1), so pending factors need no pass of their own and the values squared are
 * those the optimizer step will use. */
template <typename T>
static __global__ void sum_squares_kernel(const T *__restrict__ d, int bf, float m1, float m2, size_t n,
                                          double *__restrict__ part)
{
    __shared__ double sh[OPS_BLOCK];
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    double acc = 0.0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float f = as32(d[i], bf);
        if (m1 != 1.0f) f = __fmul_rn(f, m1);
        if (m2 != 1.0f) f = __fmul_rn(f, m2);
        const double v = (double)f;
        acc = __fma_rn(v, v, acc);
    }
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (int w = OPS_BLOCK / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) sh[threadIdx.x] = __dadd_rn(sh[threadIdx.x], sh[threadIdx.x + w]);
        __syncthreads();
    }
    if (threadIdx.x == 0) part[blockIdx.x] = sh[0];
}

static __global__ void sum_squares_final_kernel(ops_scratch *s, int parts)
{
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    double t = 0.0;
    for (int i = 0; i < parts; i++) t = __dadd_rn(t, s->part_sumsq[i]);
    s->res.sumsq = t;
}

/* The sum of squares of d[0..n) (of type t, on the device, times m1 and m2) into *out. */
static dt_status sum_squares_of(const char *op, dt_dtype t, const void *d, size_t n, float m1, float m2, double *out)
{
    *out = 0.0;
    if (n == 0) return DT_OK;
    ops_scratch *s;
    TRY(scratch(op, &s));
    const unsigned int parts = grid_for(n, OPS_MAX_PARTS);
    if (t == DT_F32)
        sum_squares_kernel<<<parts, OPS_BLOCK, 0, g_stream>>>((const float *)d, 0, m1, m2, n, s->part_sumsq);
    else
        sum_squares_kernel<<<parts, OPS_BLOCK, 0, g_stream>>>((const uint16_t *)d, t == DT_BF16, m1, m2, n,
                                                              s->part_sumsq);
    TRY(check_launch(op, "the sum of squares", n));
    sum_squares_final_kernel<<<1, 32, 0, g_stream>>>(s, (int)parts);
    TRY(check_launch(op, "the sum of the partial sums", parts));
    ops_result r;
    TRY(fetch_result(op, &r));
    *out = r.sumsq;
    return DT_OK;
}

/* One pass over the values as kept, fp32 or 16-bit, with the factors applied in the kernel: no
 * scratch to allocate (cudaMalloc and cudaFree wait for the device) and no widened copy. */
dt_status cuda_sum_squares(backend *be, dt_dtype t, const void *buf, size_t n, float m1, float m2, double *out)
{
    (void)be;
    return sum_squares_of("sum_squares", t, buf, n, m1, m2, out);
}

/* g += acc (add) and then acc = g (store): one pass of gradient accumulation. Exact fp32 adds,
 * as the CPU's loop does them. */
static __global__ void accum_kernel(float *__restrict__ g, float *__restrict__ acc, size_t n, int add, int store)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float v = g[i];
        if (add) {
            v = __fadd_rn(v, acc[i]);
            g[i] = v;
        }
        if (store) acc[i] = v;
    }
}

dt_status cuda_accum_grads(backend *be, dt_dtype t, void *g, float *acc, size_t n, int add, int store)
{
    (void)be;
    if (t != DT_F32)
        return status_set_error(DT_ERR_UNSUPPORTED,
                                "cuda accum_grads: the CUDA backend keeps gradients in fp32 "
                                "(grads16 is 0); %s gradients were given",
                                t == DT_F16 ? "fp16" : "bf16");
    if (n == 0 || (!add && !store)) return DT_OK;
    accum_kernel<<<grid_for(n, OPS_MAX_BLOCKS), OPS_BLOCK, 0, g_stream>>>((float *)g, acc, n, add, store);
    return check_launch("accum_grads", "gradient accumulation", n);
}
