/*
 * model_internal.h - the inside of dt_model, shared by model.c (buffers, fp32 passes, the step),
 * model_sync.c (gradient buckets), model_precision.c, model_amp.c (the 16-bit forward and
 * backward), model_profile.c and optimizer.c.
 */
#ifndef DT_RUNTIME_MODEL_MODEL_INTERNAL_H
#define DT_RUNTIME_MODEL_MODEL_INTERNAL_H

#include "runtime/model/model.h"

struct dt_model {
    dt_ctx *ctx;
    model_spec spec;
    const kernel_ops *ops;
    int max_batch;
    float *params, *grads;
    float **act;        /* act[i]: output of layer i (batch, out size); NULL for flatten */
    const float **in;   /* in[i]: input of layer i in the current step */
    int32_t **pool_idx; /* pool_idx[i]: argmax of pooling layer i, else NULL */
    float *dbuf[2];     /* gradients flowing backward */
    float *ws;          /* convolution workspace */
    void *pool;         /* the activation pool: one allocation holding the buffers above that a
                           step uses (act, a16, dbuf, d16, pool_idx, ws, the conversion scratch) */
    size_t pool_bytes;
    /* Gradient synchronization: the reducer over the gradient buffer, its ranges the parameter
     * layers in backward order (model_sync.c); NULL without a context. */
    dt_sync_config sync;
    dt_reducer *red;
    int unreduced;      /* the gradients of the last backward are this rank's own: more than one
                           rank, and dt_model_sync_grads has not completed since */
    /* Mixed precision (dt_model_set_precision). With prec fp32 the buffers above are used; with
     * fp16/bf16 the 16-bit ones below replace act, dbuf (and grads when grad_t is 16-bit), and
     * every op widens its inputs into fp32 scratch, computes (GEMMs accumulate in fp32) and
     * rounds its output once. */
    dt_dtype prec, grad_t;
    uint16_t *g16;       /* the gradients when kept in 16 bits */
    uint16_t **a16;      /* a16[i]: output of layer i (the same sharing rules as act) */
    const uint16_t **in16; /* in16[i]: input of layer i; NULL when it is x */
    uint16_t *d16[2];    /* gradients flowing backward */
    float *sx, *sy, *sdy; /* fp32 scratch of model_amp_scratch's act floats each */
    float *sw, *sg, *st; /* fp32 scratch for weights, weight gradients, bias sums / conv chunks */
    float inv_scale;     /* 16-bit gradients: the unscale the optimizer step applies */
    int check_local;     /* look for non-finite gradients layer by layer before the allreduce */
    int bad_layer;       /* the first layer (backward order) found non-finite, else -1 */
    int *dflags;         /* GPU: per layer, the pass number (fb_count) of the last pass that found
                            it non-finite; read only when asked (dt_model_nonfinite_layer) */
    int fb_count;        /* forward/backward passes taken */
    int inject_inf;      /* testing: put an inf into the next backward's first gradient */
    float grad_mul;      /* 16-bit gradients: the clip coefficient the optimizer step applies
                            after inv_scale (1 when not clipping) */
    /* Gradient accumulation (model_step.c): micro-batches per optimizer step, those of the current
     * group already taken, and the running sum of the group's earlier micro-batches (fp32, on the
     * model's device; NULL while accum_steps is 1). accum_last: the pass under way ends a group. */
    int accum_steps, accum_pos, accum_last;
    float *gacc;
    double clip_norm;    /* dt_model_set_clip_grad_norm: 0 off, +inf report only */
    long comm_starts;    /* gradient collectives started (buckets, or the whole buffer): what tests
                            count to prove that accumulation's micro-batches send nothing */
    /* A CUDA model: every buffer above that the ops touch (params, grads, act, dbuf, pool_idx, ws)
     * is device memory, the ops are kernels_cuda(), and each step copies the batch into xdev and
     * ldev. Gradient buckets are allreduced by the context's NCCL backend on its own stream as
 * backward completes them (the reducer); a build without NCCL reduces the whole buffer after backward
 * through host memory. */
    int cuda;
    float *xdev;
    int32_t *ldev;
    /* A 16-bit CUDA model also keeps the parameters rounded to 16 bits (p16, made at each forward,
     * what the tensor-core GEMMs read) and the input batch in 16 bits (x16). */
    uint16_t *p16, *x16;
    /* dt_model_set_profile: per-layer seconds, the step's phases, and the clock of the last mark. */
    int prof;
    double *prof_fwd, *prof_bwd;
    dt_step_profile prof_step;
    double prof_t;
};

/* Profiling: when on, waits for the device and returns the seconds since the previous mark
 * (0 when off; a failed wait is left for the step's own error check). */
double model_prof_mark(dt_model *m);

static inline size_t layer_out_n(const layer *l) { return (size_t)l->out_c * l->out_h * l->out_w; }
static inline size_t layer_in_n(const layer *l) { return (size_t)l->in_c * l->in_h * l->in_w; }

/* Backward is done with layer i's parameter gradients: fault injection, the local finite check,
 * and starting its bucket's allreduce when the bucket is complete (model.c). */
dt_status model_grads_done(dt_model *m, int i);

/* Accumulation (model_step.c): layer i's gradients of this pass are done; adds the group's
 * earlier sum into them and keeps the new sum for the next micro-batch. Returns 1 when the pass
 * ends its group (the allreduce may start), 0 on the group's other micro-batches. */
int model_accum_layer(dt_model *m, int i);
/* DT_OK at a group boundary, else DT_ERR_INVALID_ARG naming fn and the position in the group. */
dt_status model_group_complete(const dt_model *m, const char *fn);
/* The forward and backward pass itself (model.c): dt_model_forward_backward's contract, which
 * model_step.c wraps with the accumulation bookkeeping. */
dt_status model_forward_backward(dt_model *m, const float *x, const int32_t *labels, int batch, float grad_scale,
                                 double *loss_sum, int *correct);
/* Gradient collectives started since the model was made (tests). */
long model_comm_starts(const dt_model *m);

/* Waits for the buckets of the last backward still being reduced and closes its step
 * (model_sync.c). */
dt_status model_wait_inflight(dt_model *m);
/* Points the reducer at the gradient buffer of the model's current precision (model_sync.c). */
dt_status model_sync_rebind(dt_model *m);

/* The activation pool of m->prec: freed, and allocated for the max batch (1, or 0 with the error
 * set: the bytes asked for, and what is free on a GPU) (model.c). */
void model_free_acts(dt_model *m);
int model_alloc_acts(dt_model *m);

/* Floats of each fp32 scratch buffer a 16-bit model needs: sx, sy and sdy, `w` for sw and sg, `t`
 * for st (model_amp.c). */
void model_amp_scratch(const dt_model *m, size_t *sx, size_t *sy, size_t *sdy, size_t *w, size_t *t);

/* The forward passes alone (model.c, model_amp.c), x already on the model's device: the logits
 * (batch, classes) in fp32, on the model's device; the 16-bit one widens its logits into the sy
 * scratch, and returns NULL when no layer computes anything. Used by training and evaluation. */
const float *model_forward32(dt_model *m, const float *x, int batch);
const uint16_t *model_forward16(dt_model *m, const float *x, int batch);
const float *model_forward16_logits32(dt_model *m, const float *x, int batch);

/* Forward and backward of a 16-bit model (model_amp.c); the contract of dt_model_forward_backward
 * after its argument checks. */
dt_status model_fb16(dt_model *m, const float *x, const int32_t *labels, int batch, float grad_scale,
                     double *loss_sum, int *correct);

#endif
