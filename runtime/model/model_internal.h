/*
 * model_internal.h - the inside of dt_model, shared by model.c (buffers), model_pass.c (the
 * forward and backward pass in any precision), model_sync.c (gradient buckets), model_step.c,
 * model_precision.c, model_clip.c, model_eval.c, model_profile.c and optimizer.c.
 */
#ifndef DT_RUNTIME_MODEL_MODEL_INTERNAL_H
#define DT_RUNTIME_MODEL_MODEL_INTERNAL_H

#include "runtime/model/model.h"
#include "kernels/backend.h"

/* A recorded pass (model_graph.c) and its key: the buffers, batch and grad_scale it was recorded
 * with. used: when it was last asked for (0: the entry is empty); exec NULL until recorded. */
#define MODEL_GRAPHS 4
/* What a recorded optimizer step holds fixed (optimizer_baked): its rule, hyper-parameters and
 * state buffers; its learning rate and count are read at each launch. A graph is replayed only
 * for a step that would queue the same, so an optimizer freed and another made at its address
 * (with other state, or another rule) never runs the first one's recording. */
typedef struct optim_baked {
    const float *s1, *s2;
    size_t n;
    int kind;
    float momentum, weight_decay, beta1, beta2, eps;
} optim_baked;
/* graph_find compares keys with memcmp, and a struct's copy need not copy its padding: none here. */
_Static_assert(sizeof(optim_baked) == 2 * sizeof(const float *) + sizeof(size_t) + sizeof(int) + 5 * sizeof(float),
               "optim_baked has no padding");

/* A step's tail that a step graph may hold after the pass (dt_model_train_step sets it for one
 * pass, model_graph.c records it): the optimizer step of o (NULL: none; baked: what its recording
 * holds), behind the loss scaler's queued finite check when verdict, reading the gradients with
 * the pending unscale inv_scale. */
typedef struct model_tail {
    dt_optimizer *o;
    optim_baked baked;
    int verdict;
    float inv_scale;
} model_tail;

typedef struct model_graph {
    void *exec;
    const float *x;
    const int32_t *labels;
    int batch;
    float grad_scale;
    model_tail tail;
    long used;
} model_graph;

/* A host batch whose copy dt_model_stage_batch queued into a slot (on 1) ahead of its pass. */
typedef struct model_ahead {
    const float *x;
    const int32_t *labels;
    int batch, slot, on;
} model_ahead;

struct dt_model {
    dt_ctx *ctx;
    model_spec spec;
    /* The backend every buffer below lives on and every op runs on (kernels/backend.h). The model
     * asks it only for its capabilities (host_memory, keeps_params16, grads16), never its device. */
    backend *be;
    int max_batch;
    float *params, *grads; /* grads: fp32 parameter gradients (NULL while g16 holds them) */
    /* Per layer, in the storage of prec (4 or 2 bytes a value): */
    void **act;         /* act[i]: output of layer i (batch, out size); NULL for flatten */
    const void **in;    /* in[i]: input of layer i in the current pass; the fp32 input x itself for
                           the first layers (x_in), which a 16-bit pass rounds as it reads it */
    const float *x_in;  /* the input batch of the current pass, on the backend */
    int32_t **pool_idx; /* pool_idx[i]: argmax of pooling layer i, else NULL */
    void **relu_mask;   /* relu_mask[i]: fc layer i's fused ReLU mask (fc_relu_mask_bytes), else NULL */
    void *dbuf[2];      /* gradients flowing backward */
    float *ws;          /* convolution workspace */
    void *pool;         /* the activation pool: one allocation holding the buffers above that a
                           step uses (act, dbuf, pool_idx, ws, the 16-bit scratch) */
    size_t pool_bytes;
    /* Gradient synchronization: the reducer over the gradient buffer, its ranges the parameter
     * layers in backward order (model_sync.c); NULL without a context. */
    dt_sync_config sync;
    dt_reducer *red;
    int unreduced; /* the gradients of the last backward are this rank's own: more than one
                           rank, and dt_model_sync_grads has not completed since */
    /* Precision (dt_model_set_precision): activations and the gradients flowing backward are
     * stored in prec; the parameter gradients in grad_t (g16 when 16-bit, else grads). In 16 bits
     * the backend's layer entries widen into the fp32 scratch below (or multiply 16-bit values on
     * tensor cores, reading the 16-bit parameter copy p16 and the rounded input x16), accumulate
     * in fp32 and round each output once. */
    dt_dtype prec, grad_t;
    uint16_t *g16;        /* the gradients when kept in 16 bits */
    float *sx, *sy, *sdy; /* activation-sized fp32 scratch of 16-bit passes */
    float *sw, *sg, *st;  /* weight-sized fp32 scratch (widened weights, weight gradients, sums) */
    uint16_t *p16, *x16;  /* the 16-bit parameter copy and input */
    /* p16 holds the parameters rounded to prec: written by the optimizer step in the same pass
     * as the parameters (the backend's fused copy), or by the cast at a forward that found it
     * stale. Every other write of the parameters clears it (model_params_changed), so a forward
     * casts only after those: at most once per optimizer step, never per micro-batch. */
    int p16_current;
    /* A 16-bit step layer by layer (model_overlap.c) steps each layer as soon as its parameter
     * gradients are final, beside the layer's data gradient, which still reads p16: the step
     * writes the new copy into p16_spare, and the two swap once every layer has stepped. The
     * spare is allocated at the first such step (p16_spare_own: that allocation, wherever the
     * swaps put it) and freed with the activation pool; p16_spare_failed: it could not be had, so
     * the layers step after their data gradients, into p16, until the pool is made again.
     * step_early: this pass steps so. */
    uint16_t *p16_spare, *p16_spare_own;
    int p16_spare_failed, step_early;
    float inv_scale;     /* the unscale the optimizer step applies as it reads the gradients: 16-bit
                        ones, or fp32 ones that dt_model_train_step only checked (1 otherwise) */
    int pending32;       /* fp32 gradients whose clip coefficient is left pending (applied by the
                        optimizer step and the norm as they read them, as for 16-bit ones): set
                        by dt_model_train_step before clipping, cleared at each forward/backward */
    int check_local;     /* dt_model_set_nonfinite_check's mode (DT_NONFINITE_CHECK_*) */
    int check_group;     /* the current accumulation group looks layer by layer: its mode, and for
                        AT_RISK what dt_model_train_step found of its scaler */
    int *dflags;         /* per layer (backend memory), the pass (fb_count) that first found it
                            non-finite in its accumulation group; read only when asked. One more
                            int after the layers': the loss scaler's queued verdict */
    const int *opt_skip; /* while dt_model_train_step queues the optimizer step behind that
                            verdict: the flag (optim_grads.skip); NULL otherwise */
    int verdict_sync;    /* testing (model_test_verdict_sync): the host takes every verdict
                            before queueing the step */
    int fb_count;        /* forward/backward passes taken */
    int group_pass;      /* the fb_count of the first pass of the current accumulation group */
    int inject_inf;      /* testing: put an inf into the next backward's first gradient */
    float grad_mul;      /* the same gradients: the clip coefficient the optimizer step applies
                            after inv_scale (1 when not clipping) */
    /* dt_model_set_deferred_verdict: a queued verdict may be left for later (model_step.c). The
     * step that left it: its optimizer and scaler, and what the host must put back should the
     * verdict say overflow (the optimizer's step count, whether the 16-bit copy was current). */
    int defer_verdict;
    struct model_verdict {
        int pending;
        dt_optimizer *o;
        dt_scaler *sc;
        int t_was, p16_was;
    } verdict;
    /* Gradient accumulation (model_step.c): micro-batches per optimizer step, those of the current
     * group already taken, and the running sum of the group's earlier micro-batches (fp32, on the
     * backend; NULL while accum_steps is 1). accum_last: the pass under way ends a group. */
    int accum_steps, accum_pos, accum_last;
    float *gacc;
    /* The optimizer step layer by layer (model_step.c): with step_overlap on (a dt_step_overlap;
     * AUTO turns it on for large models), a group's last pass whose step needs nothing of the whole gradient (no scaler's verdict, no
     * clipping, no other rank's gradients) steps each parameter layer the moment backward is done
     * with it, on the backend's side stream, beside the backward of the layers before it.
     * layer_opt is the optimizer during such a pass (NULL otherwise); side_used says the pass
     * put work on the side stream, which the end of backward joins; layers_stepped counts the
     * layers it stepped. */
    int step_overlap;
    int overlapped; /* dt_model_step_overlapped: the last step that stepped was overlapped */
    dt_optimizer *layer_opt;
    int side_used, layers_stepped;
    double clip_norm; /* dt_model_set_clip_grad_norm: 0 off, +inf report only */
    long comm_starts; /* gradient collectives started (buckets, or the whole buffer): what tests
                            count to prove that accumulation's micro-batches send nothing */
    /* A backend whose memory is not host memory gets each batch copied into xdev and ldev.
     * Gradient buckets are allreduced by the context's NCCL backend on its own stream as backward
     * completes them (the reducer); a build without NCCL reduces the whole buffer after backward
     * through host memory. */
    float *xdev;
    int32_t *ldev;
    /* A backend with copy_in stages batches on its copy stream into two slots that take turns
     * (slot 1: xdev2, ldev2), so the copy of one batch runs beside the last one's work; in_slot
     * is the slot of the next copy. ahead: the batch dt_model_stage_batch copied ahead of its
     * pass (model_input.c). */
    float *xdev2;
    int32_t *ldev2;
    int in_slot;
    model_ahead ahead;
    /* Where a pass's queued loss lands (host_alloc: pinned on a GPU, so the copy back runs behind
     * the kernels): layer_loss writes it, model_forward_backward reads it after loss_wait, once
     * backward is queued, so the host never waits between forward and backward. The count right
     * after the sum: the CUDA backend then copies both back in one copy. */
    struct model_loss {
        double loss;
        int correct;
    } * lossh;
    /* Step graphs (dt_model_set_graphs, model_graph.c): the setting (a dt_graphs), whether a
     * recording failed (off for good), whether the last pass ran as a graph, whether a pass is
     * being recorded (model_backward hands no gradients to the reducer then: that happens after
     * the launch), the recorded passes, the clock of their use, and how many were recorded. */
    int graphs, graphs_failed, graphed, recording;
    /* dt_model_set_fused_relu: an fc or conv layer's forward runs the relu layer after it. */
    int fused_relu;
    /* The tail the next pass's graph may hold (model_tail), whether the last launched graph held
     * it (the optimizer then stepped in it), and the optimizer's per-step values: written by the
     * host into live_host (host_alloc) before each launch, copied by the graph's first node into
     * live_dev (backend memory, after the flags in dflags' buffer), where its step reads them. */
    model_tail tail;
    int tail_ran;
    optim_consts *live_host, *live_dev;
    model_graph graph[MODEL_GRAPHS];
    long graph_clock, graph_records;
    /* dt_model_set_profile: per-layer seconds, the step's phases, and the clock of the last mark. */
    int prof;
    double *prof_fwd, *prof_bwd;
    dt_step_profile prof_step;
    double prof_t;
};

/* The parameters were written other than by the optimizer's fused copy (initialized, loaded,
 * broadcast, gathered, or handed out for writing): the 16-bit copy is stale until the next cast. */
static inline void model_params_changed(dt_model *m) { m->p16_current = 0; }

/* Profiling: when on, waits for the device and returns the seconds since the previous mark
 * (0 when off; a failed wait is left for the step's own error check). */
double model_prof_mark(dt_model *m);

static inline size_t layer_out_n(const layer *l) { return (size_t)l->out_c * l->out_h * l->out_w; }
static inline size_t layer_in_n(const layer *l) { return (size_t)l->in_c * l->in_h * l->in_w; }

/* Backward is done with layer i's parameter gradients: fault injection, the local finite check,
 * and starting its bucket's allreduce when the bucket is complete (model.c). */
dt_status model_grads_done(dt_model *m, int i);

/* 1 when one more overflow makes the scaler give up (DT_ERR_NUMERIC at dt_scaler_update): its scale
 * is at the floor of a dynamic scaler, or the window holds as many overflows as it tolerates
 * (scaler.c). */
int scaler_overflow_ends_run(const dt_scaler *s);

/* Accumulation (model_step.c): layer i's gradients of this pass are done; adds the group's
 * earlier sum into them and keeps the new sum for the next micro-batch. *ends = 1 when the pass
 * ends its group (the allreduce may start), 0 on the group's other micro-batches. */
dt_status model_accum_layer(dt_model *m, int i, int *ends);
/* DT_OK at a group boundary, else DT_ERR_INVALID_ARG naming fn and the position in the group. */
dt_status model_group_complete(const dt_model *m, const char *fn);
/* dt_model_unscale_grads that leaves fp32 gradients as they are and their unscale pending
 * (model_precision.c): what dt_model_train_step uses. */
dt_status model_unscale_deferred(dt_model *m, float inv_scale, int *found_inf);
/* Whether the unscale by inv_scale can be left to the optimizer step, which applies it as it reads
 * the gradients: always for 16-bit gradients; for fp32 ones where inv_scale <= 1, so that a finite
 * gradient times it stays finite and a check of the unscaled buffer counts what the step reads. */
static inline int model_unscale_can_defer(const dt_model *m, float inv_scale) { return m->g16 || inv_scale <= 1.0f; }
/* The forward and backward pass itself (model_pass.c): dt_model_forward_backward's contract,
 * which model_step.c wraps with the accumulation bookkeeping. */
dt_status model_forward_backward(dt_model *m, const float *x, const int32_t *labels, int batch, float grad_scale,
                                 double *loss_sum, int *correct);
/* A host batch on its way to a device model (model_input.c). model_input_place points *x and
 * *labels at the device slot (*slot) holding the batch: the one staged ahead when it is this
 * batch, else a copy queued now (and a batch staged ahead but not this one dropped).
 * model_input_done, after the pass that read it (s: how the pass went): the slot released, and on
 * a failure the copy waited for, s and its message kept. model_input_drop: a batch staged ahead is
 * given up (its copy waited for, its slot released); DT_OK when there is none. */
dt_status model_input_place(dt_model *m, const float **x, const int32_t **labels, int batch, int *slot);
dt_status model_input_done(dt_model *m, int slot, dt_status s);
dt_status model_input_drop(dt_model *m);
/* After a call failed with s: a batch staged ahead and not read is dropped; returns s, its message
 * kept. */
dt_status model_input_abandon(dt_model *m, dt_status s);
/* The arguments every call that takes a batch refuses first, before anything runs (model_input.c):
 * m, x and labels, then with sums 1 loss_sum and correct (dt_model_forward_backward's and
 * dt_model_evaluate's outputs). DT_ERR_INVALID_ARG naming fn, the first NULL one and what to pass. */
dt_status model_batch_args(const char *fn, const dt_model *m, const float *x, const int32_t *labels, int sums,
                           const double *loss_sum, const int *correct);
/* The pass itself after its batch is on the backend (model_pass.c): forward, the loss queued
 * into lossh, backward, the side stream joined; no wait for the loss. What a graph records. */
dt_status model_pass_body(dt_model *m, const float *x, const int32_t *labels, int batch, float grad_scale);
/* Sets m->x_in and each layer's input pointer m->in[i] as a forward pass on x does. */
void model_pass_inputs(dt_model *m, const float *x);
/* Casts the parameters into their 16-bit copy when the copy is stale (no copy: nothing). */
dt_status model_params16_ready(dt_model *m);
/* Step graphs (model_graph.c): runs the pass (its batch on the backend) as a graph when it may
 * (*ran 1: recorded now or before, launched, its gradients handed to the reducer); *ran 0: the
 * caller runs it as usual (graphs off or not allowed for this pass, the key's first pass, or a
 * recording that failed, which turned graphs off with a warning). model_graph_drop frees every
 * graph (the buffers they hold are about to change). */
dt_status model_graph_pass(dt_model *m, const float *x, const int32_t *labels, int batch, float grad_scale, int *ran);
void model_graph_drop(dt_model *m);
/* The tail of a step graph (model_step.c): queued while recording, after the pass body: the
 * scaler's queued check when m->tail.verdict, then the optimizer step reading its per-step values
 * from m->live_dev. */
dt_status model_tail_queue(dt_model *m);
/* Gradient collectives started since the model was made (tests). */
long model_comm_starts(const dt_model *m);

/* The optimizer step overlapped (model_overlap.c): whether the pass about to run steps layer by
 * layer as backward finishes each (one rank; it ends its group), whether the group just ended
 * steps bucket by bucket as each bucket's allreduce lands (ranks on host buckets), and that step:
 * the optimizer counted, then each bucket waited for and stepped in index order, then the
 * reducer's step ended. *comm_wait_s grows by the time spent waiting for buckets. */
int model_overlap_layers(const dt_model *m, const dt_optimizer *o, const dt_scaler *sc);
int model_overlap_buckets(const dt_model *m, const dt_optimizer *o, const dt_scaler *sc);
dt_status model_step_by_bucket(dt_model *m, dt_optimizer *o, double *comm_wait_s);
/* A pass that steps layer by layer in 16 bits: whether each layer may step before its data
 * gradient, the spare 16-bit copy allocated now if need be (0 when the model keeps no copy, or
 * the spare cannot be had: said once). After every layer has stepped,
 * model_spare16_swap makes the spare the copy the next forward reads (dropping step graphs, which
 * hold the old one). Where the copy the steps write goes: the spare during such a pass. (Not
 * tried again after a failure until the activation pool is made again.) */
int model_spare16_ready(dt_model *m);
void model_spare16_swap(dt_model *m);
uint16_t *model_step16_target(const dt_model *m);

/* The optimizer step layer by layer (optimizer.c): optimizer_layers_begin checks and counts the
 * step as dt_model_optimizer_step does (and brings the state to the device); then
 * optimizer_step_layer steps elements [off, off + cnt) of the parameters and their 16-bit copy,
 * each element with the arithmetic of a whole-buffer step. Not for a sharded optimizer. */
dt_status optimizer_layers_begin(dt_model *m, dt_optimizer *o);
dt_status optimizer_step_layer(dt_model *m, dt_optimizer *o, size_t off, size_t cnt);

/* The optimizer step in a step graph (optimizer.c): optimizer_graph_ready makes the checks of
 * dt_model_optimizer_step and brings the state to the device before a pass that may hold the step
 * (nonzero: it may; 0: it must step outside, as usual, which reports what failed);
 * optimizer_baked what the step queued for m holds fixed; optimizer_live_next the per-step values
 * of the step it would count next; optimizer_queue_whole queues one step over every parameter
 * reading g (its live values and skip flag), counting nothing (for the recording);
 * optimizer_graph_stepped counts a step the graph held, as dt_model_optimizer_step would have. */
int optimizer_graph_ready(dt_model *m, dt_optimizer *o);
void optimizer_baked(const dt_model *m, const dt_optimizer *o, optim_baked *out);
optim_consts optimizer_live_next(const dt_optimizer *o);
dt_status optimizer_queue_whole(dt_model *m, dt_optimizer *o, const optim_grads *g);
void optimizer_graph_stepped(dt_model *m, dt_optimizer *o);

/* Waits for the buckets of the last backward still being reduced and closes its step
 * (model_sync.c). */
dt_status model_wait_inflight(dt_model *m);
/* Waits for the work a GPU model has queued on the device (nothing on the CPU); a failed wait is
 * left to the next call that computes (model.c). */
void model_device_work_done(dt_model *m);
/* Points the reducer at the gradient buffer of the model's current precision (model_sync.c). */
dt_status model_sync_rebind(dt_model *m);

/* The activation pool of m->prec: freed, and allocated for the max batch (1, or 0 with the error
 * set: the bytes asked for, and what is free on a GPU) (model.c). */
void model_free_acts(dt_model *m);
int model_alloc_acts(dt_model *m);

/* The forward pass alone (model_pass.c), x already on the backend: every layer's input and
 * output kept for backward; *logits (batch, classes) of m->prec on the backend. Used by training
 * and evaluation. */
dt_status model_forward(dt_model *m, const float *x, int batch, const void **logits);

/* ZeRO-1 (model_zero.c): 1 when the model's gradients are reduce-scattered (dt_sync_config.zero),
 * so only the owned slice of each bucket (reducer_owned) holds reduced values. */
int model_zero(const dt_model *m);
/* Cuts o's state to the owned slices (at the first sharded step, or when dtrain train sets up). */
dt_status model_zero_shard_optimizer(dt_model *m, dt_optimizer *o);
/* The parameters' owned slices, updated by the optimizer, to every rank. */
dt_status model_zero_allgather_params(dt_model *m);
/* The scaler's check over the owned slices: each multiplied by mul, the non-finite ones counted,
 * and the count summed over the ranks, so every rank takes the same verdict. Collective; own is
 * this rank's failure so far (its arguments: then nothing is counted), with which it still joins
 * the sum, so no rank waits for it: every rank returns the first failing rank's code, the others
 * with a message "<fn> failed on rank R". */
dt_status model_zero_scale_count(dt_model *m, float mul, dt_status own, const char *fn, size_t *bad);
/* The sum of squares of the reduced gradients (16-bit ones with the pending factors): each rank's
 * owned slices, then the ranks' sums added in rank order, so every rank gets the same bits.
 * Collective, own and fn as model_zero_scale_count's. */
dt_status model_zero_sum_squares(const dt_model *m, dt_status own, const char *fn, double *ss);

/* Where the gradients of m are: the buffer (grads or g16), its element type and size. */
static inline void *model_grad_buf(const dt_model *m) { return m->g16 ? (void *)m->g16 : (void *)m->grads; }
static inline dt_dtype model_grad_type(const dt_model *m) { return m->g16 ? m->grad_t : DT_F32; }
static inline size_t model_grad_esize(const dt_model *m) { return m->g16 ? 2 : 4; }
/* The gradients as the optimizer step reads them: where they are kept, with the pending unscale
 * and clip factors (1 for fp32 ones unless pending32: dt_model_unscale_grads and clipping scale
 * those in place). */
static inline optim_grads model_optim_grads(const dt_model *m)
{
    return (optim_grads){model_grad_buf(m), model_grad_type(m), m->inv_scale, m->grad_mul, m->opt_skip, NULL};
}

#endif
