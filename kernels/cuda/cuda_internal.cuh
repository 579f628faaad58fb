/*
 * cuda_internal.cuh - what the files of the CUDA backend share: the 16-bit conversions, launch
 * geometry, the device scratch of reductions that return a host value, the backend's state and
 * its checks (backend_cuda.cu), and the entries of the table each file defines.
 *
 * Errors: every helper and entry returns dt_status, DT_OK or the failure with dt_last_error()
 * set (what failed, the CUDA or cuBLAS error, what to check); TRY returns a failure at once.
 * Nothing is recorded for later polling.
 */
#ifndef DT_KERNELS_CUDA_CUDA_INTERNAL_CUH
#define DT_KERNELS_CUDA_CUDA_INTERNAL_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/status.h"
#include "kernels/amp.h" /* relu16, relu16_positive, inf16_bits: the CPU's definitions */
#include "kernels/backend.h"
#include "kernels/cast.h"
#include "kernels/cuda/amp16.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

/* 16-bit values are uint16_t bit patterns; bf selects bf16 over fp16 (see the mixed-precision
 * section below). */
static __device__ __forceinline__ float wide16(int bf, uint16_t v)
{
    return bf ? __bfloat162float(__ushort_as_bfloat16(v)) : __half2float(__ushort_as_half(v));
}

static __device__ __forceinline__ uint16_t narrow16(int bf, float f)
{
    return bf ? __bfloat16_as_ushort(__float2bfloat16_rn(f)) : __half_as_ushort(__float2half_rn(f));
}

/* An element as fp32, for kernels templated on fp32 or 16-bit storage. */
static __device__ __forceinline__ float as32(float v, int) { return v; }
static __device__ __forceinline__ float as32(uint16_t v, int bf) { return wide16(bf, v); }

/* Indices below 2^31 (the bias-gradient slices) take 32-bit arithmetic. */
#define IDX32_LIMIT ((size_t)1 << 31)

/* Row kernels: work split into `rows` rows of at most 2^31 elements each (an image plane, a row
 * of a column matrix); a block takes a row at a time and works out the row's coordinates once,
 * its threads walk the row's elements (32-bit, one division at most per element). Small rows get
 * smaller blocks (a multiple of a warp) so fewer threads idle; at most OPS_ROW_MAX_BLOCKS blocks
 * (a few waves of an H100/H200), each looping over rows, so short rows cost no block launch each. */
#define OPS_ROW_MAX_BLOCKS 4096u
static inline unsigned int row_threads(size_t per_row)
{
    const size_t t = (per_row + 31) / 32 * 32;
    return (unsigned int)(t < 32 ? 32 : t > 256 ? 256 : t);
}
#define LAUNCH_ROWS(kernel, rows, per_row, ...)                                                                        \
    kernel<<<(unsigned int)((rows) < OPS_ROW_MAX_BLOCKS ? (rows) : OPS_ROW_MAX_BLOCKS), row_threads(per_row), 0,       \
             g_stream>>>(__VA_ARGS__)

#define OPS_BLOCK 256 /* threads per block of every elementwise / gather kernel */
#define OPS_MAX_BLOCKS 65535
#define OPS_WARPS (OPS_BLOCK / 32)
#define OPS_MAX_PARTS 1024 /* blocks of the reductions that end in per-block partials */
#define OPS_DB_PARTS 16384 /* partial sums of the convolution bias gradient */
#define OPS_DB_BLOCKS 1056 /* blocks it aims for (8 per multiprocessor of an H100/H200) */

/* Convolution groups: as many images per GEMM as keep im2col's columns plus the (O, g*P) copy of
 * dy under this many floats (64 MiB), at least one image, at most 4096. */
#define CONV_WS_CAP ((size_t)1 << 24)
#define CONV_MAX_GROUP 4096

/* ---------------------------------------------------------------- state and errors */

#define TRY(expr)                                                                                                      \
    do {                                                                                                               \
        const dt_status try_s_ = (expr);                                                                               \
        if (try_s_ != DT_OK) return try_s_;                                                                            \
    } while (0)

/* The loss's count follows its sum, as in a caller's {double, int} pair: queue_loss_result then
 * copies both back in one copy. */
typedef struct ops_result {
    double loss;
    int correct;
    double sumsq; /* sum_squares */
    unsigned long long count;
} ops_result;
static_assert(offsetof(ops_result, correct) == sizeof(double), "the loss's count right after its sum");

/* Device scratch of the reductions that return a host value. */
typedef struct ops_scratch {
    double part_loss[OPS_MAX_PARTS];
    unsigned long long part_count[OPS_MAX_PARTS];
    double part_sumsq[OPS_MAX_PARTS];
    int part_correct[OPS_MAX_PARTS];
    double part_db[OPS_DB_PARTS]; /* convolution bias gradients: per (channel, slice of the batch) */
    ops_result res;
    /* Blocks of the loss kernel done with their partials: the last one adds them up and puts it
     * back to 0 (zeroed with the scratch). */
    unsigned int loss_blocks_done;
} ops_scratch;

/* backend_cuda.cu: the stream every op launches on (NULL: the default stream), and the checks
 * every op uses. check_launch reports a failed launch (cudaGetLastError); blas gives the one cuBLAS
 * handle of the process, bound to g_stream with that stream's own fixed workspace (bound there
 * at the first GEMM after the stream changed; a stream's workspace is made at its first GEMM, so
 * a recording binds before capture begins); scratch the reduction scratch; fetch_result copies its
 * result back and waits for the stream (queue_loss_result leaves the loss's for loss_wait); cuda_err turns a CUDA error into a status. */
extern cudaStream_t g_stream;
dt_status check_launch(const char *op, const char *kernel, size_t n);
unsigned int grid_for(size_t n, size_t max_blocks);
dt_status blas(const char *op, cublasHandle_t *h);
dt_status scratch(const char *op, ops_scratch **s);
dt_status fetch_result(const char *op, ops_result *r);
/* Queues the copy of the scratch's loss (and count, when correct is not NULL) back to the host and
 * marks its arrival for loss_wait (asynchronous into pinned memory). */
dt_status queue_loss_result(const char *op, double *loss, int *correct);
/* Makes the loss's event if it is not made yet (graph_begin: nothing is created while recording). */
dt_status loss_event_ready(const char *op);
dt_status cuda_err(cudaError_t e, const char *op, const char *what);
const char *cublas_name(cublasStatus_t st);
const char *cublas_text(cublasStatus_t st);

/* The table's entries, each defined in the file named (contracts in kernels/backend.h). */
/* memory.cu: device and pinned memory, copies, the ops' stream and the side stream. */
dt_status cuda_alloc(backend *be, size_t bytes, const char *what, void **out);
void cuda_free(backend *be, void *p);
dt_status cuda_host_alloc(backend *be, size_t bytes, const char *what, void **out);
void cuda_host_free(backend *be, void *p);
dt_status cuda_to_device(backend *be, void *dst, const void *src, size_t bytes);
dt_status cuda_to_host(backend *be, void *dst, const void *src, size_t bytes);
dt_status cuda_to_device_async(backend *be, void *dst, const void *src, size_t bytes);
dt_status cuda_copy_in(backend *be, int slot, void *dst, const void *src, size_t bytes);
dt_status cuda_copy_in_join(backend *be, int slot);
dt_status cuda_copy_in_release(backend *be, int slot);
dt_status cuda_sync(backend *be);
dt_status cuda_settle(backend *be);
dt_status cuda_last_status(backend *be);
void *cuda_stream_of(backend *be);
dt_status cuda_set_stream(backend *be, void *stream);
dt_status cuda_side_begin(backend *be);
dt_status cuda_side_end(backend *be);
dt_status cuda_side_join(backend *be);
void cuda_mem_info(backend *be, size_t *free_bytes, size_t *total_bytes);
int cuda_owns(backend *be, const void *p);
/* gemm.cu: the row-major GEMMs (fp32; 16-bit inputs on the tensor cores with fp32 accumulation, C
 * of type ct), the bias broadcast, the fully connected layer. */
dt_status rm_gemm_batched(const char *op, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                          long long sa, const float *b, int ldb, long long sb, float beta, float *c, int ldc,
                          long long sc, int count);
dt_status rm_gemm16_batched(const char *op, dt_dtype t, int ta, int tb, int m, int n, int k, const void *a, int lda,
                            long long sa, const void *b, int ldb, long long sb, float beta, void *c, dt_dtype ct,
                            int ldc, long long sc, int count);
dt_status bias_broadcast(const char *op, float *y, const float *b, size_t rows, size_t per, size_t outer, int chan);
dt_status cuda_gemm(backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                    const float *b, int ldb, float beta, float *c, int ldc);
dt_status cuda_linear_fwd(backend *be, const float *x, const float *w, const float *b, float *y, int batch, int in,
                          int out);
dt_status cuda_linear_bwd(backend *be, const float *x, const float *w, const float *dy, float *dx, float *dw, float *db,
                          int batch, int in, int out);
/* conv.cu (its 16-bit drivers, the fp32 ones on 16-bit columns, are declared in amp16.h). */
size_t cuda_conv_ws_floats(backend *be, const conv_shape *s);
dt_status cuda_conv_fwd(backend *be, const conv_shape *s, const float *x, const float *w, const float *b, float *y,
                        float *ws);
dt_status cuda_conv_bwd_data(backend *be, const conv_shape *s, const float *dy, const float *w, float *dx, float *ws);
dt_status cuda_conv_bwd_filter(backend *be, const conv_shape *s, const float *x, const float *dy, float *dw, float *db,
                               float *ws);
/* elementwise.cu */
dt_status cuda_relu_fwd(backend *be, const float *x, float *y, size_t n);
dt_status cuda_relu_bwd(backend *be, const float *y, const float *dy, float *dx, size_t n);
dt_status cuda_cast_to16(backend *be, dt_dtype t, const float *in, uint16_t *out, size_t n);
dt_status cuda_cast_to32(backend *be, dt_dtype t, const uint16_t *in, float *out, size_t n);
dt_status cuda_round16(backend *be, dt_dtype t, const float *in, float *out, size_t n);
/* pool.cu */
dt_status cuda_maxpool_fwd(backend *be, const float *x, float *y, int32_t *idx, int batch, int c, int h, int w, int k);
dt_status cuda_maxpool_bwd(backend *be, const float *dy, const int32_t *idx, float *dx, int batch, int c, int h, int w,
                           int k);
/* loss.cu */
dt_status cuda_softmax_xent(backend *be, const float *logits, const int32_t *labels, float *dlogits, int batch,
                            int classes, float grad_scale, double *loss, int *correct);
dt_status cuda_layer_loss(backend *be, const pass_args *a, const void *logits, const int32_t *labels, void *dlogits,
                          int batch, int classes, float grad_scale, double *loss, int *correct);
/* optim.cu */
dt_status cuda_sgd(backend *be, float *p, const optim_grads *g, float *buf, size_t n, float lr, float momentum,
                   float wd, int first, dt_dtype copy_t, uint16_t *copy);
dt_status cuda_adamw(backend *be, float *p, const optim_grads *g, float *m, float *v, size_t n, float lr, float b1,
                     float b2, float eps, float wd, int t, dt_dtype copy_t, uint16_t *copy);
/* reduce.cu */
dt_status cuda_scale_count(backend *be, dt_dtype t, void *buf, size_t n, float mul, size_t *bad);
dt_status cuda_found_inf_queue(backend *be, dt_dtype t, const void *buf, size_t n, int *flag);
dt_status cuda_found_inf_wait(backend *be, const int *flag, int *found);
void cuda_found_inf_release(backend *be, const int *flag);
dt_status cuda_flag_nonfinite(backend *be, dt_dtype t, const void *buf, size_t n, int *flag, int stamp, int since);
/* synth.cu: the synthetic samples of kernels/synth.h made on the device. */
dt_status cuda_synth_batch(backend *be, const struct synth_spec *sp, const uint32_t *idx, int n, float *x,
                           int32_t *labels);
dt_status cuda_sum_squares(backend *be, dt_dtype t, const void *buf, size_t n, float m1, float m2, double *out);
dt_status cuda_accum_grads(backend *be, dt_dtype t, void *g, float *acc, size_t n, int add, int store);
/* layers.cu: the layer entries in any precision. */
void cuda_scratch16(backend *be, const layer_need *l, int batch, scratch_sizes *sz);
dt_status cuda_layer_fc_fwd(backend *be, const pass_args *a, const layer_params *lp, const void *x, int x_f32, void *y,
                            int relu, int batch, int in, int out);
dt_status cuda_layer_fc_bwd(backend *be, const pass_args *a, const layer_params *lp, const void *x, int x_f32,
                            const void *dy, void *dx, int batch, int in, int out, const layer_params *below);
dt_status cuda_layer_conv_fwd(backend *be, const pass_args *a, const layer_params *lp, const conv_shape *s,
                              const void *x, int x_f32, void *y, int relu);
dt_status cuda_layer_conv_bwd(backend *be, const pass_args *a, const layer_params *lp, const conv_shape *s,
                              const void *x, int x_f32, const void *dy, void *dx);
dt_status cuda_layer_pool_fwd(backend *be, const pass_args *a, const void *x, int x_f32, void *y, int32_t *idx,
                              int batch, int c, int h, int w, int k);
dt_status cuda_layer_pool_bwd(backend *be, const pass_args *a, const void *dy, const int32_t *idx, void *dx, int batch,
                              int c, int h, int w, int k, const void *relu_y);
dt_status cuda_layer_relu_fwd(backend *be, const pass_args *a, const void *x, int x_f32, void *y, size_t n);
dt_status cuda_layer_relu_bwd(backend *be, const pass_args *a, const void *y, const void *dy, void *dx, size_t n);
/* gemm_lt.cu: the 16-bit fully connected GEMMs with fused epilogues (cuBLASLt). Forward: y =
 * x16 W16^T + b16 rounded once into y (type t), relu: max(y, 0) too (RELU_BIAS), and with a mask
 * (fc_relu_mask_bytes of device memory) its ReLU bit mask kept there (RELU_AUX_BIAS). Weight
 * gradient: dw = dy16^T x16 and db = the column sums of dy16, both fp32. Data gradient through
 * the ReLU of the layer below: dx = (dy16 W16) where that layer's kept mask says positive, rounded
 * into 16 bits (DRELU; only when the forward kept the mask). 1 when done; 0 when cuBLASLt has no
 * plan for the shape or refused it (nothing queued: run the unfused GEMM and kernels). */
size_t cuda_fc_relu_mask_bytes(int batch, int out);
int cuda_lt_fc_fwd16(dt_dtype t, const uint16_t *x16, const uint16_t *w16, const uint16_t *b16, uint16_t *y, int relu,
                     void *mask, int batch, int in, int out);
int cuda_lt_fc_wgrad16(dt_dtype t, const uint16_t *x16, const uint16_t *dy16, float *dw, float *db, int batch, int in,
                       int out);
int cuda_lt_fc_dgrad_relu16(dt_dtype t, const uint16_t *dy16, const uint16_t *w16, uint16_t *dx, const void *mask,
                            int batch, int in, int out);
/* graph.cu: step graphs; cuda_recording says whether a recording is under way (ops that mark
 * an event a launch must record, as queue_loss_result does, record it as an external node). */
int cuda_recording(void);
dt_status cuda_graph_begin(backend *be);
dt_status cuda_graph_end(backend *be, int keep, void **graph);
dt_status cuda_graph_launch(backend *be, void *graph);
void cuda_graph_free(backend *be, void *graph);
/* trace_gpu.cu: GPU spans on the compute stream (and, through trace_gpu.h, on any stream). */
dt_status cuda_trace_mark(backend *be, int end, const char *name, int cat, int64_t arg);
dt_status cuda_trace_flush(backend *be, void *tr, int wait);

#endif
