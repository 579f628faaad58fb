/*
 * backend.h - the whole interface between the runtime and a compute backend, in the manner of
 * ggml's ggml_backend_i: one table of functions (backend_ops) that every backend fills, each entry
 * taking the backend first. The runtime knows only this table and the precision it computes in; it
 * never asks which device it runs on (the few capabilities that change what it allocates are
 * fields of the table: host_memory, keeps_params16, grads16).
 *
 * Two backends exist: the CPU one (kernels/cpu/, always built, the oracle of the CUDA one) and the
 * CUDA one (kernels/cuda/, only in CUDA builds). Which one a build has is decided by its source
 * list alone: backend_cuda() is declared here for every build and defined either by the CUDA
 * files or by kernels/cpu/no_cuda.c, which says the build has no CUDA.
 *
 * Conventions:
 *   - Layouts are row-major and NCHW; every pointer is memory of the backend (host memory for the
 *     CPU backend, device memory for CUDA) unless an entry says otherwise.
 *   - Entries that can fail return dt_status with dt_last_error() set (what failed, the CUDA or
 *     cuBLAS error, what to check). There is no error state to poll afterwards. A CUDA kernel's
 *     execution error can only show at a later synchronizing entry (sync, a reduction that returns
 *     a host value, a copy to the host), which then returns it.
 *   - Ops launch on the backend's stream and return without waiting, except where an entry
 *     returns a host value (the non-finite counts, sums of squares, copies). The loss is queued
 *     too (softmax_xent, layer_loss) and collected by loss_wait, so a training pass asks the
 *     device for its loss once backward is queued behind it, not between forward and backward.
 *   - Gradient outputs are overwritten, not accumulated. `ws` is convolution scratch of at least
 *     conv_ws_floats floats for the shape (callers own it; a workspace for a shape also serves the
 *     same shape with any smaller batch).
 *   - 16-bit values are uint16_t bit patterns of type t (DT_F16 or DT_BF16).
 */
#ifndef DT_KERNELS_BACKEND_H
#define DT_KERNELS_BACKEND_H

#include "dtrain.h"
#include "kernels/ops.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct backend backend;
typedef struct backend_ops backend_ops;
struct synth_spec; /* kernels/synth.h */

/* A backend: its table and its state (the CUDA stream and cuBLAS handle; NULL for the CPU). */
struct backend {
    const backend_ops *ops;
    void *state;
};

/* The buffers a layer entry of a pass uses besides its tensors: the convolution workspace, and
 * the fp32 scratch and 16-bit copies of a 16-bit pass, sized by scratch16 (NULL in fp32 passes). */
typedef struct pass_args {
    dt_dtype prec;        /* storage of activations and of the gradients flowing backward */
    dt_dtype grad_t;      /* parameter gradients: DT_F32, or prec (backends with grads16) */
    float *ws;            /* convolution workspace */
    float *sx, *sy, *sdy; /* activation-sized fp32 scratch */
    float *sw, *sg, *st;  /* weight-sized fp32 scratch: widened weights, weight gradients, sums */
    uint16_t *x16;        /* the model input rounded to 16 bits (backends with keeps_params16) */
} pass_args;

/* One parameter layer's tensors: the fp32 master weights (O, I) or (O, C, k, k) and bias (O),
 * their 16-bit copy when the backend keeps one (keeps_params16; else NULL), and the gradients, of
 * pass_args.grad_t, overwritten; relu_mask, an fc layer's buffer of fc_relu_mask_bytes for the
 * ReLU fused into its forward (NULL where the backend keeps none, or the layer has no relu). */
typedef struct layer_params {
    const float *w, *b;
    const uint16_t *w16, *b16;
    void *dw, *db;
    void *relu_mask;
    /* Backward entries, when not NULL: grads_ready(grads_ready_ctx) may be called once dw and db
     * are queued and before dx is (the pass then steps the layer's parameters beside the data
     * gradient, writing another 16-bit copy: dx must read only w16, never w or b, which the step
     * rewrites; the pass sets it only where the entry's dx reads w16). A backend that does not
     * call it (the CPU's conv, every fp32 entry) leaves it to the pass, after the entry returns.
     * Its error is the entry's. */
    dt_status (*grads_ready)(void *ctx);
    void *grads_ready_ctx;
} layer_params;

/* The gradients an optimizer step reads: element i is g[i] of type t (fp32, or 16-bit widened),
 * multiplied by m1 and then by m2 in fp32, each product rounded on its own (two roundings, not one
 * by m1 * m2) and skipped when its factor is 1: the loss scaler's pending unscale, then clipping's
 * coefficient, as PyTorch multiplies the unscaled .grad. A step on them gives the bits of a step
 * on fp32 gradients widened and multiplied so beforehand. */
/* One optimizer step's values that change from step to step, derived on the host from the
 * learning rate and the step count t (optim_consts_sgd / optim_consts_adamw below), in double as
 * every backend derives them from its entry's arguments: SGD's lr and whether t is its first step;
 * AdamW's 1 - lr*wd, lr / (1 - b1^t) and 1 / sqrt(1 - b2^t). */
typedef struct optim_consts {
    float lr;
    int first;
    float decay, step, inv_bc2;
} optim_consts;

typedef struct optim_grads {
    const void *g;
    dt_dtype t;
    float m1, m2;
    /* NULL, or a flag in backend memory (found_inf_queue's) that the step reads as it runs, in
     * the backend's order: nonzero, and the step changes nothing (parameters, state, copy). So an
     * optimizer step can be queued behind a finite check before the host knows its verdict. */
    const int *skip;
    /* NULL, or the step's optim_consts in backend memory, read as the step runs in place of those
     * derived from the entry's lr, first and t arguments (then ignored): a step recorded into a
     * step graph replays with the values the host wrote there for the step it runs in. */
    const optim_consts *live;
} optim_grads;

optim_consts optim_consts_sgd(float lr, int first);
optim_consts optim_consts_adamw(float lr, float b1, float b2, float wd, int t);

/* The optimizer entries' argument checks, shared by every backend (kernels/optim_args.c):
 * DT_ERR_INVALID_ARG naming op when g's type is not DT_F32, DT_F16 or DT_BF16, or when copy is
 * given with a copy_t that is not DT_F16 or DT_BF16; DT_OK otherwise. */
dt_status optim_args_check(const char *op, const optim_grads *g, dt_dtype copy_t, const uint16_t *copy);

/* What scratch16 is told of one layer of a model. */
typedef enum { BE_LAYER_FC, BE_LAYER_CONV, BE_LAYER_RELU, BE_LAYER_POOL, BE_LAYER_LOSS } be_layer_kind;
typedef struct layer_need {
    be_layer_kind kind;
    size_t in_n, out_n; /* per sample (loss: the classes) */
    int fc_in, fc_out;  /* fc: features in and out */
    size_t np;          /* parameters (weights and bias) */
    int first;          /* the first layer that computes: it reads the fp32 model input */
    int pointwise;      /* conv: 1x1, stride 1, no padding (its input is its own column matrix) */
} layer_need;
/* Floats of each scratch buffer of pass_args (x16: halves), grown by scratch16 layer by layer. */
typedef struct scratch_sizes {
    size_t sx, sy, sdy, sw, st, x16;
} scratch_sizes;

struct backend_ops {
    const char *name;   /* "cpu", "cuda" */
    int host_memory;    /* its memory is host memory: a caller's host buffer serves in place */
    int keeps_params16; /* 16-bit passes read a 16-bit copy of the parameters (cast_to16 of them) */
    int grads16;        /* parameter gradients may be kept in 16 bits */

    /* ------------------------------------------------------------ memory */
    /* bytes of zeroed memory into *out; DT_ERR_NOMEM naming `what`, the bytes, what is free on a
     * device, and the fix. free accepts NULL. */
    dt_status (*alloc)(backend *be, size_t bytes, const char *what, void **out);
    void (*free)(backend *be, void *p);
    /* Host memory for staging data on its way to this backend (the loader's batches): page-locked
     * on CUDA (cudaHostAlloc, portable to every context) so that to_device_async from it runs
     * asynchronously at full speed; plain malloc on the CPU. Not zeroed, on either. DT_ERR_NOMEM
     * naming `what`, the bytes and the fix (CUDA: the locked-memory limit). Free it with host_free
     * of the same backend, which accepts NULL. */
    dt_status (*host_alloc)(backend *be, size_t bytes, const char *what, void **out);
    void (*host_free)(backend *be, void *p);
    /* Synchronous copies from and to host memory (memcpy on the CPU). */
    dt_status (*to_device)(backend *be, void *dst, const void *src, size_t bytes);
    dt_status (*to_host)(backend *be, void *dst, const void *src, size_t bytes);
    /* Host (or this backend's own) memory to backend memory on the stream, asynchronous when src
     * is pinned or the device's; src must stay unchanged until the stream has passed the copy. */
    dt_status (*to_device_async)(backend *be, void *dst, const void *src, size_t bytes);
    /* Input batches staged on a copy stream of their own, so that the copy of the next batch runs
     * beside the work still queued on the stream instead of in line before it (NULL where the
     * ops run at once: to_device_async serves). Two slots of device buffers take turns: copy_in
     * queues the copy of src (host_alloc memory, unchanged until the stream waited for the copy)
     * into dst, a buffer of `slot` (0 or 1), behind the stream's last use of that slot;
     * copy_in_join makes the stream's later work wait for the slot's copies; copy_in_release
     * marks the point on the stream after which the slot's buffers may be written again. The
     * host never waits. DT_ERR_DEVICE when a copy, stream or event call fails. */
    dt_status (*copy_in)(backend *be, int slot, void *dst, const void *src, size_t bytes);
    dt_status (*copy_in_join)(backend *be, int slot);
    dt_status (*copy_in_release)(backend *be, int slot);
    /* Waits for the stream (sync) or for all work on the device, any stream (settle). */
    dt_status (*sync)(backend *be);
    dt_status (*settle)(backend *be);
    /* A failure the device already reported, without waiting (cudaPeekAtLastError); DT_OK if none. */
    dt_status (*last_status)(backend *be);
    /* The stream the ops launch on (a cudaStream_t as void *; NULL: the default stream, and always
     * NULL on the CPU), and setting it (DT_ERR_DEVICE when the handle cannot follow it). */
    void *(*stream)(backend *be);
    dt_status (*set_stream)(backend *be, void *stream);
    /* A side stream for work that may run beside the ops queued after it (the optimizer step of
     * the layers backward is done with, beside the backward of the layers before them):
     * side_begin makes the ops from here on launch on the side stream, after everything queued
     * on the stream so far; side_end makes them launch on the stream again, without waiting
     * for the side stream; side_join makes the stream's later work wait for the side stream's
     * (on the device: the host never waits). Begin and end pair up, with nothing between them
     * that the side work does not own. NULL where ops run at once (the CPU): nothing to do.
     * DT_ERR_DEVICE when a stream or event call fails. */
    dt_status (*side_begin)(backend *be);
    dt_status (*side_end)(backend *be);
    dt_status (*side_join)(backend *be);
    /* Free and total bytes of the device now (0 and 0 on the CPU or when unknown; the CPU's test
     * limit, backend_cpu_set_limit, makes it report one). The sizing entries, mem_info,
     * conv_ws_floats and scratch16, need no state: a memory plan calls them with be->state NULL,
     * before any device is set up. */
    void (*mem_info)(backend *be, size_t *free_bytes, size_t *total_bytes);
    /* 1 when p points into this backend's own device memory (never on the CPU). */
    int (*owns)(backend *be, const void *p);

    /* ------------------------------------------------------------ fp32 ops */
    /* C(M,N) = alpha * op(A) * op(B) + beta * C; op(X) = X or X^T when trans_x. */
    dt_status (*gemm)(backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                      const float *b, int ldb, float beta, float *c, int ldc);
    /* y(B,OUT) = x(B,IN) * W(OUT,IN)^T + b(OUT). */
    dt_status (*linear_fwd)(backend *be, const float *x, const float *w, const float *b, float *y, int batch, int in,
                            int out);
    /* dW(OUT,IN) = dy^T x, db(OUT) = column sums of dy, dx(B,IN) = dy W (skipped when dx is NULL). */
    dt_status (*linear_bwd)(backend *be, const float *x, const float *w, const float *dy, float *dx, float *dw,
                            float *db, int batch, int in, int out);
    /* Convolution: x (B,C,H,W), w (O,C,k,k), b (O) or NULL, y (B,O,Ho,Wo). */
    size_t (*conv_ws_floats)(backend *be, const conv_shape *s);
    dt_status (*conv_fwd)(backend *be, const conv_shape *s, const float *x, const float *w, const float *b, float *y,
                          float *ws);
    /* dx (B,C,H,W) from dy and w. */
    dt_status (*conv_bwd_data)(backend *be, const conv_shape *s, const float *dy, const float *w, float *dx, float *ws);
    /* dw (O,C,k,k) and db (O, NULL to skip) from x and dy. */
    dt_status (*conv_bwd_filter)(backend *be, const conv_shape *s, const float *x, const float *dy, float *dw,
                                 float *db, float *ws);
    /* y = max(x, 0) (NaN passes; in place allowed); dx = dy where y > 0 else 0 (dx may alias dy). */
    dt_status (*relu_fwd)(backend *be, const float *x, float *y, size_t n);
    dt_status (*relu_bwd)(backend *be, const float *y, const float *dy, float *dx, size_t n);
    /* Max pooling, window and stride k, no padding: x (B,C,H,W) -> y (B,C,H/k,W/k); idx the argmax
     * (offset within the input plane); backward: dx = 0 except dx[argmax] = dy. */
    dt_status (*maxpool_fwd)(backend *be, const float *x, float *y, int32_t *idx, int batch, int c, int h, int w,
                             int k);
    dt_status (*maxpool_bwd)(backend *be, const float *dy, const int32_t *idx, float *dx, int batch, int c, int h,
                             int w, int k);
    /* Softmax cross-entropy over logits (B,C), labels in [0,C): *loss the summed loss (host),
     * *correct (host, may be NULL) the count of argmax == label, dlogits (may be NULL) =
     * (softmax - onehot) * grad_scale. Queued: *loss and *correct hold the values once loss_wait
     * returns (on a GPU they are copied back behind the kernels: asynchronously into host_alloc
     * memory, which must stay allocated until then; into other host memory before returning). */
    dt_status (*softmax_xent)(backend *be, const float *logits, const int32_t *labels, float *dlogits, int batch,
                              int classes, float grad_scale, double *loss, int *correct);
    /* Waits until the values of every softmax_xent (and layer_loss) queued before it are in their
     * host memory: only for the work up to them, not for what was queued after (a training pass
     * calls it with backward queued behind the loss, so the device never runs dry while the host
     * waits). Returns a failure of any earlier kernel the wait finds. The CPU's values are there
     * at once (DT_OK). */
    dt_status (*loss_wait)(backend *be);
    /* The optimizers, over n parameters p (fp32, updated) and their gradients grad (what the step
     * reads of them: optim_grads above, so 16-bit gradients with the pending factors need no pass
     * of their own, and a set skip flag makes the step a no-op). Both also write, when copy is not NULL, the updated p rounded to copy_t
     * (DT_F16 or DT_BF16, as cast_to16 rounds) into copy, in the same pass over the elements: the
     * 16-bit parameter copy of a keeps_params16 backend, so that the next 16-bit forward reads it
     * without casting the parameters again. copy NULL: copy_t is ignored. DT_ERR_INVALID_ARG for
     * a gradient or copy type that is not one of these. */
    /* SGD with momentum and coupled weight decay, PyTorch semantics:
     *   g = grad + wd * p;  buf = first ? g : momentum * buf + g;  p -= lr * buf
     * (momentum 0: p -= lr * g, buf untouched and may be NULL). */
    dt_status (*sgd)(backend *be, float *p, const optim_grads *grad, float *buf, size_t n, float lr, float momentum,
                     float wd, int first, dt_dtype copy_t, uint16_t *copy);
    /* AdamW, PyTorch semantics, step t >= 1:
     *   p -= lr * wd * p;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
     *   p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) */
    dt_status (*adamw)(backend *be, float *p, const optim_grads *grad, float *m, float *v, size_t n, float lr, float b1,
                       float b2, float eps, float wd, int t, dt_dtype copy_t, uint16_t *copy);

    /* ------------------------------------------------------------ casts and rounding */
    /* Round to nearest even, as base/half.h; in and out must not overlap (round16: may be equal). */
    dt_status (*cast_to16)(backend *be, dt_dtype t, const float *in, uint16_t *out, size_t n);
    dt_status (*cast_to32)(backend *be, dt_dtype t, const uint16_t *in, float *out, size_t n);
    /* out = in rounded to t and widened back. */
    dt_status (*round16)(backend *be, dt_dtype t, const float *in, float *out, size_t n);

    /* ------------------------------------------------------------ finite checks and reductions */
    /* buf (n values of t): mul 1: *bad = the count of inf and NaN; else buf *= mul (16-bit values
     * widened, multiplied and rounded back) and *bad counts the results. Waits for the result. */
    dt_status (*scale_count)(backend *be, dt_dtype t, void *buf, size_t n, float mul, size_t *bad);
    /* The loss scaler's verdict without waiting for it: queues *flag (backend memory) = 1 when the
     * n values of t in buf hold an inf or NaN, else 0, and the flag's copy back to the host behind
     * it. An optimizer step queued next with optim_grads.skip = flag steps only on a clean verdict,
     * while the host waits for the verdict alone (found_inf_wait), not for the step. */
    dt_status (*found_inf_queue)(backend *be, dt_dtype t, const void *buf, size_t n, int *flag);
    /* *found = the verdict of the last found_inf_queue of flag: waits for the work up to that
     * check only (the CPU's is there at once), also when checks of other flags (other models')
     * were queued since. Returns a failure of an earlier kernel the wait finds. */
    dt_status (*found_inf_wait)(backend *be, const int *flag, int *found);
    /* NULL, or forgets flag before its memory is freed: what the backend keeps per flag for
     * found_inf_wait (the GPU's pinned copy and event) goes to the next flag. */
    void (*found_inf_release)(backend *be, const int *flag);
    /* *flag (backend memory) = stamp when buf holds an inf or NaN and *flag < since; queued without
     * waiting. */
    dt_status (*flag_nonfinite)(backend *be, dt_dtype t, const void *buf, size_t n, int *flag, int stamp, int since);
    /* *out (host) = the sum of v^2 in double over buf, v widened and multiplied by m1 and m2 as an
     * optimizer step reads its gradients (optim_grads), in an order fixed by n (the same values
     * give the same bits on the same hardware). */
    dt_status (*sum_squares)(backend *be, dt_dtype t, const void *buf, size_t n, float m1, float m2, double *out);
    /* Gradient accumulation over n values of t: g += acc when add (in fp32, rounded once for
     * 16-bit g), then acc = g when store. */
    dt_status (*accum_grads)(backend *be, dt_dtype t, void *g, float *acc, size_t n, int add, int store);

    /* ------------------------------------------------------------ layers, in any precision
     * Activations and the gradients flowing backward are of a->prec (void *); x_f32 = 1 says the
     * input x is fp32 whatever the precision (the model's input, rounded to 16 bits as autocast
     * does). A 16-bit pass widens into fp32 scratch (or multiplies the 16-bit values on tensor
     * cores), accumulates in fp32 and rounds each output once; fp32 passes are the ops above.
     * A backward entry with x_f32 follows the forward of the same layer on the same x and a->x16
     * in its pass, with no other x_f32 forward between: a backend may read the input as that
     * forward rounded it into x16 (CUDA does) instead of rounding it again. */
    /* Grows *sz to what the 16-bit entries below need for a layer at batch `batch`. */
    void (*scratch16)(backend *be, const layer_need *l, int batch, scratch_sizes *sz);
    /* Bytes of the mask a 16-bit fc forward with relu keeps (layer_params.relu_mask) for the
     * backward of the fc layer after the relu, at batch `batch` and `out` outputs; NULL where the
     * backend keeps none (the CPU: its backward reads the relu's output instead). */
    size_t (*fc_relu_mask_bytes)(int batch, int out);
    /* relu 1 (fc and conv forward): y is also passed through ReLU, the result of layer_relu_fwd
     * on the plain output, for the pass to skip the relu layer after (one pass over y less, or
     * none: the GEMM's epilogue). The one difference allowed: an epilogue of a library
     * (cuBLASLt's RELU_BIAS) may give 0 for a NaN, and +0 or -0 for a zero, where the relu layer
     * passes NaN on and makes 16-bit zeros +0. */
    dt_status (*layer_fc_fwd)(backend *be, const pass_args *a, const layer_params *lp, const void *x, int x_f32,
                              void *y, int relu, int batch, int in, int out);
    /* dx NULL: not wanted (the first layer). below not NULL: x is the output of a relu layer that
     * the fc layer `below` ran in its forward (relu 1, with below's params), and this runs that
     * relu's backward too (the pass then skips it): dx passes only where x is positive (bit for
     * bit on the CPU; on a GPU cuBLASLt's DRELU epilogue reads the mask below's forward kept,
     * the sign before the rounding to 16 bits). below's own backward then takes that dx as its dy,
     * its bias gradient included. */
    dt_status (*layer_fc_bwd)(backend *be, const pass_args *a, const layer_params *lp, const void *x, int x_f32,
                              const void *dy, void *dx, int batch, int in, int out, const layer_params *below);
    dt_status (*layer_conv_fwd)(backend *be, const pass_args *a, const layer_params *lp, const conv_shape *s,
                                const void *x, int x_f32, void *y, int relu);
    dt_status (*layer_conv_bwd)(backend *be, const pass_args *a, const layer_params *lp, const conv_shape *s,
                                const void *x, int x_f32, const void *dy, void *dx);
    dt_status (*layer_pool_fwd)(backend *be, const pass_args *a, const void *x, int x_f32, void *y, int32_t *idx,
                                int batch, int c, int h, int w, int k);
    /* relu_y not NULL: the pooled input is a relu layer's output and this runs that layer's
     * backward too (the pass then skips it): dx is what the relu layer's backward would make of
     * the pool's, dy passed only where relu_y, the pool's forward output (the value at the
     * window's argmax), is positive; bit for bit the same. */
    dt_status (*layer_pool_bwd)(backend *be, const pass_args *a, const void *dy, const int32_t *idx, void *dx,
                                int batch, int c, int h, int w, int k, const void *relu_y);
    /* y may be x (in place) unless x_f32. */
    dt_status (*layer_relu_fwd)(backend *be, const pass_args *a, const void *x, int x_f32, void *y, size_t n);
    dt_status (*layer_relu_bwd)(backend *be, const pass_args *a, const void *y, const void *dy, void *dx, size_t n);
    /* The loss in fp32 from logits of a->prec; dlogits (of a->prec) rounded once. Queued like
     * softmax_xent: *loss and *correct hold the values after loss_wait. */
    dt_status (*layer_loss)(backend *be, const pass_args *a, const void *logits, const int32_t *labels, void *dlogits,
                            int batch, int classes, float grad_scale, double *loss, int *correct);
    /* *out = the n logits in fp32: logits itself in fp32, else widened into a->sy. */
    dt_status (*layer_logits32)(backend *be, const pass_args *a, const void *logits, size_t n, const float **out);

    /* ------------------------------------------------------------ tracing
     * Spans timed on the device's own timeline (kernels/cuda/trace_gpu.cu); both NULL on the CPU,
     * whose host spans are its run times already. Used only while a trace records. */
    /* Marks the begin (end 0) or the end (end 1) of a span on the compute stream: an event queued
     * there, so the span covers when the device ran the work between the marks, not when the host
     * queued it. name (copied, cut to 27 bytes), cat (a base/trace.h trace_cat) and arg describe
     * it. Never waits, except once at the first mark of the process (the clock reference); a full
     * pool drops the span (counted at trace_flush). DT_ERR_DEVICE when an event call fails. */
    dt_status (*trace_mark)(backend *be, int end, const char *name, int cat, int64_t arg);
    /* Moves the spans whose end the device has passed into the recorder tr (a struct trace_rec of
     * base/trace.h, recording) as spans on its GPU tracks, and adds the spans dropped since the
     * last flush to tr's drop count; wait 1 first waits for the pending ones (dt_trace_write does;
     * a step never). DT_ERR_DEVICE when an event call fails (its span is dropped). */
    dt_status (*trace_flush)(backend *be, void *tr, int wait);

    /* ------------------------------------------------------------ step graphs
     * A pass recorded once and replayed as one launch (CUDA Graphs), for steps whose host work
     * (a launch and a host decision per layer) takes longer than their kernels. All four NULL on
     * the CPU, whose ops run at once. Between graph_begin and graph_end the ops are recorded, not
     * run: they queue nothing, and their host outputs (the loss's values) are written when a
     * launch of the graph runs, not before (loss_wait after graph_launch waits for them). Only
     * entries that queue work without waiting may be called in between (the layer entries,
     * layer_loss, the casts, the optimizers, found_inf_queue, whose verdict found_inf_wait after
     * the launch waits for, and to_device_async from host_alloc memory, which a launch reads as it
     * is then; not sync, a synchronous copy, a reduction that returns a host value, loss_wait,
     * found_inf_wait, copy_in or the side stream); one that cannot be recorded fails the
     * recording, which graph_end then reports. A recording holds the pointers and scalar
     * arguments it was given: a launch reads the memory they point to as it is then, with the
     * same scalars (an optimizer step's per-step values go through optim_grads.live for that).
     * graph_begin: ops from here on are recorded; DT_ERR_DEVICE when recording cannot start.
     * graph_end: stops recording (always, also after a failure); keep 1: *graph = the recording,
     * ready to launch (graph_free it), keep 0 or a failed recording: discarded, *graph NULL.
     * DT_ERR_DEVICE naming what could not be recorded.
     * graph_launch: queues one run of graph on the stream (asynchronous, like the ops it holds);
     * DT_ERR_DEVICE when the launch fails. graph_free accepts NULL. */
    dt_status (*graph_begin)(backend *be);
    dt_status (*graph_end)(backend *be, int keep, void **graph);
    dt_status (*graph_launch)(backend *be, void *graph);
    void (*graph_free)(backend *be, void *graph);

    /* ------------------------------------------------------------ synthetic data
     * Samples idx[0..n) (the synthetic split's indices) of the synthetic dataset sp (kernels/synth.h,
     * its pointers this backend's memory) into x (n x c*h*w) and labels (n), this backend's memory,
     * bit for bit the CPU's on every backend. idx is host memory, read before it returns. Queued on
     * the stream like the ops (CUDA stages the indices through pinned buffers of its own, never
     * waiting for the stream unless four calls are still queued); never called while recording.
     * DT_ERR_NOMEM for scratch or staging memory, DT_ERR_DEVICE when a copy or launch fails. */
    dt_status (*synth_batch)(backend *be, const struct synth_spec *sp, const uint32_t *idx, int n, float *x,
                             int32_t *labels);
};

/* The CPU backend (CBLAS from OpenBLAS for every GEMM); never NULL. */
backend *backend_cpu(void);

/* OpenBLAS's working buffers (cpu/blas_reserve.c). OpenBLAS maps one of 128 MiB
 * (BLAS_BUFFER_BYTES) per thread, a worker's as it starts and the calling thread's at
 * its first GEMM, and retries a failed map for ever. backend_cpu_blas_reserve makes it map this
 * thread's now, after probing for the room: DT_OK (at once after the first success), or
 * DT_ERR_NOMEM naming the size, the ulimit in force and the fix. Call it before the first GEMM of
 * a thread that runs them (dt_model_create does for CPU models, dt_sgemm for itself).
 * backend_cpu_blas_probe: DT_OK when `buffers` such buffers could be mapped now (mapped and given
 * back), else DT_ERR_NOMEM as above, `why` naming what needs them ("3 new BLAS threads").
 * backend_cpu_blas_set_threads: OpenBLAS's count set to `threads` (*got: the count set). Without a
 * memory limit at once, after a probe for the workers it adds. Under one (ulimit -v or -d), every
 * worker that OpenBLAS has or adds gets its buffer now, in a warm-up GEMM they all take part in,
 * after a probe for their buffers, their stacks and this thread's buffer; DT_ERR_NOMEM when these
 * do not fit, the count then left where no worker without a buffer runs a GEMM (*got, 1 where a
 * pool started at load was never warmed up). Call it from the thread that runs the GEMMs. */
dt_status backend_cpu_blas_reserve(void);
dt_status backend_cpu_blas_probe(int buffers, const char *why);
dt_status backend_cpu_blas_set_threads(int threads, int *got);

/* Testing (runtime/test_hooks.h): the CPU backend's alloc acts as a device of `bytes` memory,
 * failing with DT_ERR_NOMEM once what it holds would pass the limit, and its mem_info reports
 * the limit as the total and what is left as free. 0: no limit. DTRAIN_TEST_MEM_LIMIT=BYTES in
 * the environment sets it at the first allocation. backend_cpu_held: the bytes its alloc holds
 * now (asked for, not counting headers), limit or not. Host staging memory (host_alloc) and
 * memory a program mallocs itself (the host optimizer state) are not counted. */
void backend_cpu_set_limit(size_t bytes);
size_t backend_cpu_held(void);

/* Testing: the CPU backend keeps the 16-bit parameter copy (keeps_params16 = 1) and its 16-bit
 * layer entries widen that copy instead of rounding the fp32 master weights as they use them.
 * The values are the same either way, so a model whose copy is kept current (the optimizers'
 * fused write, the cast when the parameters changed otherwise) computes the same bits as one
 * without a copy, and a stale copy shows in the results: what tests of the copy's validity rules
 * compare on a machine without a GPU. DTRAIN_TEST_CPU_PARAMS16=1 in the environment sets it at
 * the first backend_cpu(); set it before any model exists (the copy is allocated with the pool). */
void backend_cpu_set_keep_params16(int on);

/* The CUDA table without touching the device (to inspect it), or NULL in a build without CUDA. */
const backend_ops *backend_cuda_ops(void);

/* The CUDA backend into *out. The first call makes it ready on the device current then (its stream
 * the default one, one cuBLAS handle bound to it); later calls return the same backend as it is,
 * its stream included. DT_ERR_UNSUPPORTED ("built without CUDA: use --device cpu") in a build
 * without CUDA; DT_ERR_DEVICE when the GPU or cuBLAS cannot be set up. One per process, used from
 * one thread at a time. */
dt_status backend_cuda(backend **out);

/* The CUDA backend when this build has one and it is ready, else NULL; asks nothing of the device
 * (for telling a caller's device pointer from a host one). */
backend *backend_cuda_if_ready(void);

/* 1 when p is memory of the CUDA device (cudaMalloc'd or managed): 0 for host memory, NULL, in a
 * build without CUDA, or when no device is found. */
int backend_is_device_ptr(const void *p);

/* The backend of memory kind mem: the CPU one for DT_MEMORY_HOST, the CUDA one for DT_MEMORY_DEVICE
 * (its error when the build has none). */
dt_status backend_for_memory(dt_memory mem, backend **out);

#ifdef __cplusplus
}
#endif
#endif
