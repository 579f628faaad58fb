/*
 * graph_recorder.c - a CPU table that records step graphs, for tests of dt_model_set_graphs on a
 * machine without a GPU (graph_recorder.h).
 */
#include "graph_recorder.h"
#include "base/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RECS 64

typedef enum {
    R_FC_FWD,
    R_FC_BWD,
    R_CONV_FWD,
    R_CONV_BWD,
    R_POOL_FWD,
    R_POOL_BWD,
    R_RELU_FWD,
    R_RELU_BWD,
    R_LOSS,
    R_COPY,      /* to_device_async */
    R_FOUND_INF, /* found_inf_queue */
    R_SGD,
    R_ADAMW
} rec_op;

/* One recorded call: every argument by value (the structs the model passes by pointer live on its
 * stack only during the call). */
typedef struct rec {
    rec_op op;
    pass_args a;
    layer_params lp, below; /* below: layer_fc_bwd's, when has_below */
    int has_below;
    conv_shape cs;
    const void *x, *dy, *relu_y;
    void *y, *dx;
    int x_f32, relu, batch, in, out, c, h, w, k;
    int32_t *idx;
    const int32_t *labels;
    size_t n;
    float grad_scale;
    double *loss;
    int *correct;
    /* the copy, the finite check, the optimizer steps */
    void *dst;
    const void *src;
    size_t bytes;
    dt_dtype t;
    int *flag;
    optim_grads og;
    float *p, *s1, *s2;
    float lr, mom, wd, b1, b2, eps;
    int first, step;
    dt_dtype copy_t;
    uint16_t *copy;
} rec;

typedef struct graph {
    rec r[MAX_RECS];
    int n;
} graph;

static struct {
    const backend_ops *cpu;
    graph cur;
} g;
static graph_recorder st;
static backend_ops g_ops;
static backend g_recorder = {&g_ops, NULL};

graph_recorder *graph_recorder_state(void) { return &st; }

static void misuse(const char *what)
{
    st.misuses++;
    fprintf(stderr, "graph recorder: %s\n", what);
}

static void not_recording(const char *entry)
{
    if (!st.recording) return;
    char what[96];
    snprintf(what, sizeof what, "%s called while recording", entry);
    misuse(what);
}

static dt_status note(const rec *r)
{
    if (g.cur.n == MAX_RECS) {
        misuse("a recording of more than MAX_RECS calls");
        return DT_ERR_INTERNAL;
    }
    g.cur.r[g.cur.n++] = *r;
    if (st.fail_op) return status_set_error(DT_ERR_DEVICE, "test: an op that cannot be recorded");
    return DT_OK;
}

static dt_status run_rec(backend *be, const rec *r)
{
    const backend_ops *k = g.cpu;
    switch (r->op) {
        case R_FC_FWD:
            return k->layer_fc_fwd(be, &r->a, &r->lp, r->x, r->x_f32, r->y, r->relu, r->batch, r->in, r->out);
        case R_FC_BWD:
            return k->layer_fc_bwd(be, &r->a, &r->lp, r->x, r->x_f32, r->dy, r->dx, r->batch, r->in, r->out,
                                   r->has_below ? &r->below : NULL);
        case R_CONV_FWD: return k->layer_conv_fwd(be, &r->a, &r->lp, &r->cs, r->x, r->x_f32, r->y, r->relu);
        case R_CONV_BWD: return k->layer_conv_bwd(be, &r->a, &r->lp, &r->cs, r->x, r->x_f32, r->dy, r->dx);
        case R_POOL_FWD:
            return k->layer_pool_fwd(be, &r->a, r->x, r->x_f32, r->y, r->idx, r->batch, r->c, r->h, r->w, r->k);
        case R_POOL_BWD:
            return k->layer_pool_bwd(be, &r->a, r->dy, r->idx, r->dx, r->batch, r->c, r->h, r->w, r->k, r->relu_y);
        case R_RELU_FWD: return k->layer_relu_fwd(be, &r->a, r->x, r->x_f32, r->y, r->n);
        case R_RELU_BWD: return k->layer_relu_bwd(be, &r->a, r->x, r->dy, r->dx, r->n);
        case R_LOSS:
            return k->layer_loss(be, &r->a, r->x, r->labels, r->dx, r->batch, r->c, r->grad_scale, r->loss, r->correct);
        case R_COPY: return k->to_device_async(be, r->dst, r->src, r->bytes);
        case R_FOUND_INF: return k->found_inf_queue(be, r->t, r->src, r->n, r->flag);
        case R_SGD: return k->sgd(be, r->p, &r->og, r->s1, r->n, r->lr, r->mom, r->wd, r->first, r->copy_t, r->copy);
        case R_ADAMW:
            return k->adamw(be, r->p, &r->og, r->s1, r->s2, r->n, r->lr, r->b1, r->b2, r->eps, r->wd, r->step,
                            r->copy_t, r->copy);
    }
    return DT_ERR_INTERNAL;
}

/* A layer entry: noted while recording, run (and counted) otherwise. */
#define RECORD_OR_RUN(...)                                                                                             \
    do {                                                                                                               \
        const rec r_ = {__VA_ARGS__};                                                                                  \
        if (st.recording) return note(&r_);                                                                            \
        st.live_layer_calls++;                                                                                         \
        return run_rec(be, &r_);                                                                                       \
    } while (0)

static dt_status fc_fwd(backend *be, const pass_args *a, const layer_params *lp, const void *x, int x_f32, void *y,
                        int relu, int batch, int in, int out)
{
    RECORD_OR_RUN(.op = R_FC_FWD, .a = *a, .lp = *lp, .x = x, .x_f32 = x_f32, .y = y, .relu = relu, .batch = batch,
                  .in = in, .out = out);
}

static dt_status fc_bwd(backend *be, const pass_args *a, const layer_params *lp, const void *x, int x_f32,
                        const void *dy, void *dx, int batch, int in, int out, const layer_params *below)
{
    RECORD_OR_RUN(.op = R_FC_BWD, .a = *a, .lp = *lp, .x = x, .x_f32 = x_f32, .dy = dy, .dx = dx, .batch = batch,
                  .in = in, .out = out, .below = below ? *below : (layer_params){0}, .has_below = below != NULL);
}

static dt_status conv_fwd(backend *be, const pass_args *a, const layer_params *lp, const conv_shape *s, const void *x,
                          int x_f32, void *y, int relu)
{
    RECORD_OR_RUN(.op = R_CONV_FWD, .a = *a, .lp = *lp, .cs = *s, .x = x, .x_f32 = x_f32, .y = y, .relu = relu);
}

static dt_status conv_bwd(backend *be, const pass_args *a, const layer_params *lp, const conv_shape *s, const void *x,
                          int x_f32, const void *dy, void *dx)
{
    RECORD_OR_RUN(.op = R_CONV_BWD, .a = *a, .lp = *lp, .cs = *s, .x = x, .x_f32 = x_f32, .dy = dy, .dx = dx);
}

static dt_status pool_fwd(backend *be, const pass_args *a, const void *x, int x_f32, void *y, int32_t *idx, int batch,
                          int c, int h, int w, int k)
{
    RECORD_OR_RUN(.op = R_POOL_FWD, .a = *a, .x = x, .x_f32 = x_f32, .y = y, .idx = idx, .batch = batch, .c = c, .h = h,
                  .w = w, .k = k);
}

static dt_status pool_bwd(backend *be, const pass_args *a, const void *dy, const int32_t *idx, void *dx, int batch,
                          int c, int h, int w, int k, const void *relu_y)
{
    RECORD_OR_RUN(.op = R_POOL_BWD, .a = *a, .dy = dy, .idx = (int32_t *)idx, .dx = dx, .batch = batch, .c = c, .h = h,
                  .w = w, .k = k, .relu_y = relu_y);
}

static dt_status relu_fwd(backend *be, const pass_args *a, const void *x, int x_f32, void *y, size_t n)
{
    RECORD_OR_RUN(.op = R_RELU_FWD, .a = *a, .x = x, .x_f32 = x_f32, .y = y, .n = n);
}

static dt_status relu_bwd(backend *be, const pass_args *a, const void *y, const void *dy, void *dx, size_t n)
{
    RECORD_OR_RUN(.op = R_RELU_BWD, .a = *a, .x = y, .dy = dy, .dx = dx, .n = n);
}

static dt_status loss(backend *be, const pass_args *a, const void *logits, const int32_t *labels, void *dlogits,
                      int batch, int classes, float grad_scale, double *l, int *correct)
{
    RECORD_OR_RUN(.op = R_LOSS, .a = *a, .x = logits, .labels = labels, .dx = dlogits, .batch = batch, .c = classes,
                  .grad_scale = grad_scale, .loss = l, .correct = correct);
}

/* Entries that wait, copy to or from the host, return a host value or step: never while recording. */
static dt_status loss_wait(backend *be)
{
    not_recording("loss_wait");
    return g.cpu->loss_wait(be);
}
static dt_status sync(backend *be)
{
    not_recording("sync");
    return g.cpu->sync(be);
}
static dt_status to_host(backend *be, void *dst, const void *src, size_t bytes)
{
    not_recording("to_host");
    return g.cpu->to_host(be, dst, src, bytes);
}
static dt_status to_device(backend *be, void *dst, const void *src, size_t bytes)
{
    not_recording("to_device");
    return g.cpu->to_device(be, dst, src, bytes);
}
static dt_status cast_to16(backend *be, dt_dtype t, const float *in, uint16_t *out, size_t n)
{
    not_recording("cast_to16");
    return g.cpu->cast_to16(be, t, in, out, n);
}
static dt_status scale_count(backend *be, dt_dtype t, void *buf, size_t n, float mul, size_t *bad)
{
    not_recording("scale_count");
    return g.cpu->scale_count(be, t, buf, n, mul, bad);
}
/* Queued entries a step graph records after the pass (its optimizer step and the scaler's
 * queued check) and before it (the copy of the step's constants): noted while recording, run
 * otherwise. */
static dt_status found_inf_queue(backend *be, dt_dtype t, const void *buf, size_t n, int *flag)
{
    const rec r = {.op = R_FOUND_INF, .t = t, .src = buf, .n = n, .flag = flag};
    return st.recording ? note(&r) : run_rec(be, &r);
}
static dt_status to_device_async(backend *be, void *dst, const void *src, size_t bytes)
{
    const rec r = {.op = R_COPY, .dst = dst, .src = src, .bytes = bytes};
    return st.recording ? note(&r) : run_rec(be, &r);
}
static dt_status found_inf_wait(backend *be, const int *flag, int *found)
{
    not_recording("found_inf_wait");
    return g.cpu->found_inf_wait(be, flag, found);
}
static dt_status flag_nonfinite(backend *be, dt_dtype t, const void *buf, size_t n, int *flag, int stamp, int since)
{
    not_recording("flag_nonfinite");
    return g.cpu->flag_nonfinite(be, t, buf, n, flag, stamp, since);
}
static dt_status sum_squares(backend *be, dt_dtype t, const void *buf, size_t n, float m1, float m2, double *out)
{
    not_recording("sum_squares");
    return g.cpu->sum_squares(be, t, buf, n, m1, m2, out);
}
static dt_status accum_grads(backend *be, dt_dtype t, void *gr, float *acc, size_t n, int add, int store)
{
    not_recording("accum_grads");
    return g.cpu->accum_grads(be, t, gr, acc, n, add, store);
}
/* An optimizer entry: noted while recording, run (and counted) otherwise. A recorded step must
 * read its per-step values where the host writes them for each launch (optim_grads.live):
 * recorded without, it would replay the recording step's lr and t. */
static dt_status optim_record_or_run(backend *be, const rec *r)
{
    if (st.recording) {
        if (!r->og.live) misuse("an optimizer step recorded without its live constants");
        return note(r);
    }
    st.live_optim_calls++;
    return run_rec(be, r);
}
static dt_status sgd(backend *be, float *p, const optim_grads *gr, float *buf, size_t n, float lr, float mom, float wd,
                     int first, dt_dtype copy_t, uint16_t *copy)
{
    const rec r = {.op = R_SGD,
                   .p = p,
                   .og = *gr,
                   .s1 = buf,
                   .n = n,
                   .lr = lr,
                   .mom = mom,
                   .wd = wd,
                   .first = first,
                   .copy_t = copy_t,
                   .copy = copy};
    return optim_record_or_run(be, &r);
}
static dt_status adamw(backend *be, float *p, const optim_grads *gr, float *m, float *v, size_t n, float lr, float b1,
                       float b2, float eps, float wd, int t, dt_dtype copy_t, uint16_t *copy)
{
    const rec r = {.op = R_ADAMW,
                   .p = p,
                   .og = *gr,
                   .s1 = m,
                   .s2 = v,
                   .n = n,
                   .lr = lr,
                   .b1 = b1,
                   .b2 = b2,
                   .eps = eps,
                   .wd = wd,
                   .step = t,
                   .copy_t = copy_t,
                   .copy = copy};
    return optim_record_or_run(be, &r);
}

static dt_status graph_begin(backend *be)
{
    (void)be;
    not_recording("graph_begin");
    st.recording = 1;
    g.cur.n = 0;
    st.begins++;
    return DT_OK;
}

static dt_status graph_end(backend *be, int keep, void **out)
{
    (void)be;
    if (!st.recording) misuse("graph_end without graph_begin");
    st.recording = 0;
    *out = NULL;
    if (st.fail_end) return status_set_error(DT_ERR_DEVICE, "test: the recording failed");
    if (!keep) return DT_OK;
    graph *gr = malloc(sizeof *gr);
    if (!gr) return status_set_error(DT_ERR_NOMEM, "graph recorder: out of memory");
    *gr = g.cur;
    *out = gr;
    return DT_OK;
}

static dt_status graph_launch(backend *be, void *p)
{
    not_recording("graph_launch");
    const graph *gr = p;
    st.launches++;
    for (int i = 0; i < gr->n; i++) {
        const dt_status s = run_rec(be, &gr->r[i]);
        if (s) return s;
    }
    return DT_OK;
}

static void graph_free(backend *be, void *p)
{
    (void)be;
    if (p) st.frees++;
    free(p);
}

backend *graph_recorder_init(void)
{
    memset(&g, 0, sizeof g);
    memset(&st, 0, sizeof st);
    g.cpu = backend_cpu()->ops;
    g_ops = *g.cpu;
    g_ops.layer_fc_fwd = fc_fwd;
    g_ops.layer_fc_bwd = fc_bwd;
    g_ops.layer_conv_fwd = conv_fwd;
    g_ops.layer_conv_bwd = conv_bwd;
    g_ops.layer_pool_fwd = pool_fwd;
    g_ops.layer_pool_bwd = pool_bwd;
    g_ops.layer_relu_fwd = relu_fwd;
    g_ops.layer_relu_bwd = relu_bwd;
    g_ops.layer_loss = loss;
    g_ops.loss_wait = loss_wait;
    g_ops.sync = sync;
    g_ops.to_host = to_host;
    g_ops.to_device = to_device;
    g_ops.cast_to16 = cast_to16;
    g_ops.scale_count = scale_count;
    g_ops.found_inf_queue = found_inf_queue;
    g_ops.to_device_async = to_device_async;
    g_ops.found_inf_wait = found_inf_wait;
    g_ops.flag_nonfinite = flag_nonfinite;
    g_ops.sum_squares = sum_squares;
    g_ops.accum_grads = accum_grads;
    g_ops.sgd = sgd;
    g_ops.adamw = adamw;
    g_ops.graph_begin = graph_begin;
    g_ops.graph_end = graph_end;
    g_ops.graph_launch = graph_launch;
    g_ops.graph_free = graph_free;
    return &g_recorder;
}
