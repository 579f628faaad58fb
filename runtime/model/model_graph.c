/*
 * model_graph.c - step graphs (dt_model_set_graphs): a forward/backward pass recorded once by the
 * backend (graph_begin..graph_end, CUDA Graphs on a GPU) and replayed as one launch, so that a
 * small model's pass costs the host one launch instead of a launch and a decision per layer.
 *
 * A graph is the pass as model_pass_body queues it for one key: the input and labels buffers,
 * the batch and the loss's grad_scale (everything else it holds, the model's buffers and layer
 * shapes, changes only with the activation pool, which drops every graph). The first pass with a
 * key runs as usual and only remembers it (it loads the kernels and lets the libraries settle
 * their choices); the second records the pass and launches the recording; every later one
 * launches it. What a pass does on the host besides queueing kernels is done around the launch:
 * the 16-bit parameter copy cast before it when stale, each layer's input pointers and each
 * parameter layer's gradients handed to the reducer (in backward order) after it. Passes that
 * need the host between layers never record (graph_allowed).
 *
 * A step graph also holds the step's tail when dt_model_train_step offers one (model_tail: one
 * rank, nothing between the pass and the optimizer that needs the host): the scaler's queued
 * finite check and the optimizer step, after the pass, so the whole step is one launch. The step's
 * learning rate and count change from launch to launch: the host writes them (optim_consts) into
 * pinned memory before each launch, and the graph's first node copies them to the device, where
 * the recorded step reads them (optim_grads.live). The host writes them again only after the last
 * launch's loss_wait, which comes after that copy, so no launch reads another step's values. The
 * tail is part of the key (a graph without it, or with another optimizer or unscale, is another),
 * and so is what its recording holds of the optimizer (optim_baked: its state buffers and rule),
 * since a freed optimizer's address may come back for another one.
 */
#include "runtime/model/model_internal.h"
#include "base/log.h"
#include "base/status.h"
#include "base/trace.h"
#include "collectives/ctx_comm.h"
#include "runtime/test_hooks.h"

#include <stdio.h>
#include <string.h>

void dt_model_set_graphs(dt_model *m, dt_graphs mode)
{
    if (m) m->graphs = mode == DT_GRAPHS_OFF || mode == DT_GRAPHS_ON ? mode : DT_GRAPHS_AUTO;
}

dt_graphs dt_model_graphed(const dt_model *m) { return m && m->graphed ? DT_GRAPHS_ON : DT_GRAPHS_OFF; }

void model_graph_drop(dt_model *m)
{
    for (int i = 0; i < MODEL_GRAPHS; i++) {
        if (m->graph[i].exec) m->be->ops->graph_free(m->be, m->graph[i].exec);
        memset(&m->graph[i], 0, sizeof m->graph[i]);
    }
}

long model_test_graph_records(const dt_model *m) { return m->graph_records; }

/* Whether this pass may run as a graph: the setting, a backend that records, and nothing that
 * needs the host between layers. */
static int graph_allowed(const dt_model *m)
{
    const int on =
        m->graphs == DT_GRAPHS_ON || (m->graphs == DT_GRAPHS_AUTO && m->spec.num_params < DT_GRAPHS_AUTO_PARAMS);
    return on && !m->graphs_failed && m->be->ops->graph_begin && m->accum_steps == 1 && !m->check_group &&
           !m->inject_inf && !m->layer_opt && !m->prof && !trace_active(ctx_trace(m->ctx));
}

/* The graph of this key, or NULL after remembering the key in the least recently used entry
 * (freeing what that entry held). */
static model_graph *graph_find(dt_model *m, const float *x, const int32_t *labels, int batch, float grad_scale)
{
    model_graph *lru = &m->graph[0];
    const model_tail *t = &m->tail;
    for (int i = 0; i < MODEL_GRAPHS; i++) {
        model_graph *g = &m->graph[i];
        if (g->used && g->x == x && g->labels == labels && g->batch == batch &&
            !memcmp(&g->grad_scale, &grad_scale, sizeof grad_scale) && g->tail.o == t->o &&
            !memcmp(&g->tail.baked, &t->baked, sizeof t->baked) && g->tail.verdict == t->verdict &&
            !memcmp(&g->tail.inv_scale, &t->inv_scale, sizeof t->inv_scale)) {
            g->used = ++m->graph_clock;
            return g;
        }
        if (g->used < lru->used) lru = g;
    }
    if (lru->exec) m->be->ops->graph_free(m->be, lru->exec);
    *lru = (model_graph){
        .x = x, .labels = labels, .batch = batch, .grad_scale = grad_scale, .tail = *t, .used = ++m->graph_clock};
    return NULL;
}

/* Records the pass into g. A failure leaves nothing recorded and the error set. */
static dt_status graph_record(dt_model *m, model_graph *g, const float *x, const int32_t *labels, int batch,
                              float grad_scale)
{
    backend *be = m->be;
    dt_status s = be->ops->graph_begin(be);
    if (s) return s;
    m->recording = 1;
    /* What recording the tail sets on the host (the pending unscale) is set again by the step
     * after the launch; a recording that fails must leave the pass as it found it. */
    const float inv_scale = m->inv_scale;
    const int pending32 = m->pending32;
    /* A tail's per-step values first: the host writes them before each launch, and the launch's
     * loss_wait (after this copy) returns before the host writes the next step's. */
    if (m->tail.o) s = be->ops->to_device_async(be, m->live_dev, m->live_host, sizeof *m->live_host);
    if (!s) s = model_pass_body(m, x, labels, batch, grad_scale);
    if (!s && m->tail.o) s = model_tail_queue(m);
    m->recording = 0;
    m->inv_scale = inv_scale;
    m->pending32 = pending32;
    status_kept why;
    if (s) status_keep(&why);
    void *exec = NULL;
    const dt_status es = be->ops->graph_end(be, s == DT_OK, &exec);
    if (s) return status_restore(s, &why); /* the op that failed says more than graph_end */
    if (es) return es;
    g->exec = exec;
    m->graph_records++;
    log_msg0(LOG_LEVEL_INFO, "step graph %ld recorded (batch %d): later passes with its batch and buffers replay it",
             m->graph_records, batch);
    return DT_OK;
}

dt_status model_graph_pass(dt_model *m, const float *x, const int32_t *labels, int batch, float grad_scale, int *ran)
{
    *ran = 0;
    m->graphed = 0;
    if (!graph_allowed(m)) return DT_OK;
    model_graph *g = graph_find(m, x, labels, batch, grad_scale);
    if (!g) return DT_OK; /* the key's first pass runs as usual */
    /* Outside the graph: the cast happens only after something else wrote the parameters. */
    dt_status s = model_params16_ready(m);
    if (s) return s;
    backend *be = m->be;
    if (m->tail.o) {
        /* The step's lr and step count where the graph's first node copies them from. */
        if (!m->live_host && (s = be->ops->host_alloc(be, sizeof *m->live_host, "a step graph's optimizer values",
                                                      (void **)&m->live_host)))
            return s;
        *m->live_host = optimizer_live_next(m->tail.o);
    }
    if (!g->exec && (s = graph_record(m, g, x, labels, batch, grad_scale))) {
        m->graphs_failed = 1;
        log_msg0(LOG_LEVEL_WARN,
                 "step graphs are off for this model: recording a pass failed (%s); its passes launch their kernels "
                 "one by one (--graphs 0 says so without trying)",
                 dt_last_error());
        model_graph_drop(m);
        status_clear_error();
        return DT_OK;
    }
    if ((s = be->ops->graph_launch(be, g->exec))) return s;
    *ran = 1;
    m->graphed = 1;
    m->tail_ran = m->tail.o != NULL;
    /* What the pass does on the host: the layers' input pointers, and each parameter layer's
     * gradients to the reducer as backward would have handed them (here all after the graph). */
    model_pass_inputs(m, x);
    for (int i = m->spec.n - 1; i >= 0 && !s; i--) {
        const layer_kind k = m->spec.layers[i].kind;
        if (k == LAYER_FC || k == LAYER_CONV) s = model_grads_done(m, i);
    }
    return s;
}
