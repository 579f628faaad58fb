/*
 * loader.c - the background batch loader (dt_loader_* in dtrain.h), for training steps and, in
 * its eval mode, for the batches of one pass over a rank's shard (dt_evaluate).
 *
 * A ring of `depth` slots; the batch of step s lives in slot s % depth. A slot goes FREE ->
 * FILLING (a worker fixed its sample indices, in step order, since that may make a new epoch's
 * permutation) -> READY (every chunk of its samples made) -> HELD (returned by dt_loader_next) ->
 * FREE (at the next dt_loader_next). Workers take chunks of the batch being filled, so all of them
 * work on one batch at a time and a batch is ready as soon as possible; the indices are copied
 * into the slot, so a chunk never reads the dataset's permutation, which the next batch may
 * replace. Chunks write disjoint rows, with the scratch of their worker.
 *
 * On the device (synthetic data on a GPU, dt_dataset_set_synthetic_on): no workers and one slot
 * of device memory; dt_loader_next plans the batch's indices and queues the backend's
 * synth_batch into the slot on the stream. The stream's order keeps the slot safe: the next
 * batch's kernel is queued after the work the caller queued on this one.
 */
#include "runtime/data/loader.h"
#include "runtime/data/dataset.h"
#include "kernels/backend.h"
#include "kernels/synth.h"
#include "runtime/test_hooks.h"
#include "base/clock.h"
#include "base/status.h"
#include "base/thread_stack.h"
#include "base/log.h"
#include "base/trace.h"
#include "collectives/ctx_comm.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SLOT_FREE, SLOT_FILLING, SLOT_READY, SLOT_HELD };

typedef struct lslot {
    float *x;
    int32_t *labels;
    uint32_t *idx;
    long step, epoch;
    int n; /* samples in the batch (eval mode's last batch may be short) */
    int state;
    int next_chunk, chunks_left;
} lslot;

typedef struct worker {
    struct dt_loader *l;
    float *scratch;
    pthread_t th;
    int started;
} worker;

struct dt_loader {
    dt_dataset *d;
    int rank, world, batch, depth, nthreads, chunk, nchunks;
    backend *mem_be;   /* whose host_alloc holds the batches: the CUDA one pins them for its copies */
    int device;        /* batches made on mem_be's device: slot buffers from its alloc (above) */
    synth_spec syn;    /* on the device: the generator, its arrays in device memory (owned) */
    uint32_t *syn_idx; /* on the device: the slot's indices in the split (through the view) */
    int eval;          /* eval mode: item k is batch k of samples rank, rank + world, ... */
    long items;        /* eval mode: the batches of the pass */
    size_t in_sz;
    lslot *slot;
    worker *w;
    long next_fill, next_out;
    int fill; /* the slot whose chunks are being handed out, or -1 */
    int held; /* the slot the caller holds, or -1 */
    int stop;
    dt_status err;
    long err_item;      /* the item whose making failed (or the first not planned) */
    status_kept errmsg; /* the failure's message, from the thread that met it */
    double wait_s;
    float *scratch;    /* no workers: the caller's */
    FILE *sample_log;  /* test hook DTRAIN_TEST_SAMPLE_LOG (loader.h) */
    const dt_ctx *ctx; /* whose trace records the waits and the chunks (training mode), or NULL */
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_ready;
};

/* Test hook: the step and the dataset indices of each training batch handed out. */
static void log_samples(dt_loader *l, const lslot *sl)
{
    fprintf(l->sample_log, "%ld", sl->step);
    for (int j = 0; j < sl->n; j++) fprintf(l->sample_log, " %u", l->d->view ? l->d->view[sl->idx[j]] : sl->idx[j]);
    fprintf(l->sample_log, "\n");
    fflush(l->sample_log);
}

/* The sample indices (and epoch, count) of item k into slot sl. */
static dt_status plan(dt_loader *l, long k, lslot *sl)
{
    if (!l->eval) {
        sl->n = l->batch;
        return dataset_plan(l->d, k, l->rank, l->world, l->batch, sl->idx, &sl->epoch);
    }
    const size_t n = l->d->n, W = (size_t)l->world, first = (size_t)k * (size_t)l->batch;
    const size_t mine = n > (size_t)l->rank ? (n - (size_t)l->rank + W - 1) / W : 0;
    sl->epoch = 0;
    sl->n = (int)(mine - first < (size_t)l->batch ? mine - first : (size_t)l->batch);
    for (int j = 0; j < sl->n; j++) sl->idx[j] = (uint32_t)((size_t)l->rank + (first + (size_t)j) * W);
    return DT_OK;
}

/* Under mu: starts filling the next step's slot when it is free. 1 if a batch is being filled. */
static int begin_fill(dt_loader *l)
{
    if (l->fill >= 0) return 1;
    if (l->err || l->stop) return 0;
    const int i = (int)(l->next_fill % l->depth);
    lslot *sl = &l->slot[i];
    if (sl->state != SLOT_FREE || (l->eval && l->next_fill >= l->items)) return 0;
    dt_status s = plan(l, l->next_fill, sl);
    if (s) {
        l->err = s;
        l->err_item = l->next_fill;
        status_keep(&l->errmsg);
        pthread_cond_broadcast(&l->cv_ready);
        return 0;
    }
    sl->step = l->next_fill++;
    sl->state = SLOT_FILLING;
    sl->next_chunk = 0;
    sl->chunks_left = l->nchunks;
    l->fill = i;
    return 1;
}

/* The trace of a training loader, when one records now; NULL otherwise (and in eval mode). */
static trace_rec *loader_trace(const dt_loader *l) { return l->eval ? NULL : trace_active(ctx_trace(l->ctx)); }

/* Chunk c of the batch in slot sl, by worker `who`; a failure is kept (the first one) for
 * dt_loader_next. */
static void make_chunk(dt_loader *l, lslot *sl, int c, float *scratch, int who)
{
    const int i0 = c * l->chunk, n = sl->n - i0 < l->chunk ? sl->n - i0 : l->chunk;
    if (n <= 0) return;
    trace_rec *tr = loader_trace(l);
    const uint64_t t0 = tr ? trace_now_ns() : 0;
    dt_status s = dataset_fill(l->d, sl->idx + i0, sl->epoch, n, !l->eval, sl->x + (size_t)i0 * l->in_sz,
                               sl->labels + i0, scratch);
    /* Named after the data step the chunk belongs to (1-based, as the step lines count). */
    if (tr) {
        char name[64]; /* cut to TRACE_NAME_LEN by the recorder */
        snprintf(name, sizeof name, "batch %ld chunk %d", sl->step + 1, c);
        trace_rec_add(tr, name, TRACE_CAT_DATA, TRACE_TRACK_LOADER + who, t0, trace_now_ns(), n, -1);
    }
    if (s) {
        pthread_mutex_lock(&l->mu);
        if (!l->err) {
            l->err = s;
            l->err_item = sl->step;
            status_keep(&l->errmsg);
        }
        pthread_mutex_unlock(&l->mu);
    }
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    dt_loader *l = w->l;
    /* Its own alternate signal stack: a stack overflow here is then reported like one on the main
     * thread (the dtrain command's crash handler runs SA_ONSTACK). */
    if (thread_altstack_install() != DT_OK)
        log_msg(LOG_LEVEL_WARN, "loader thread: %s; a crash on it may go unreported", dt_last_error());
    pthread_mutex_lock(&l->mu);
    while (!l->stop) {
        if (!begin_fill(l)) {
            pthread_cond_wait(&l->cv_work, &l->mu);
            continue;
        }
        lslot *sl = &l->slot[l->fill];
        const int c = sl->next_chunk++;
        if (sl->next_chunk == l->nchunks) {
            l->fill = -1;
            pthread_cond_broadcast(&l->cv_work); /* idle workers may start the next batch */
        }
        pthread_mutex_unlock(&l->mu);
        make_chunk(l, sl, c, w->scratch, (int)(w - l->w));
        pthread_mutex_lock(&l->mu);
        if (--sl->chunks_left == 0) {
            sl->state = SLOT_READY;
            pthread_cond_broadcast(&l->cv_ready);
        }
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

void dt_loader_free(dt_loader *l)
{
    if (!l) return;
    if (l->w) {
        pthread_mutex_lock(&l->mu);
        l->stop = 1;
        pthread_cond_broadcast(&l->cv_work);
        pthread_mutex_unlock(&l->mu);
        for (int t = 0; t < l->nthreads; t++) {
            if (l->w[t].started) pthread_join(l->w[t].th, NULL);
            free(l->w[t].scratch);
        }
        free(l->w);
    }
    backend *be = l->mem_be;
    /* A GPU's copies may still read a batch handed out (a model's staged ahead, dt_model_stage_batch,
     * or one an error path left queued): they land before the memory goes. */
    if (be && !be->ops->host_memory) (void)be->ops->settle(be);
    void (*release)(backend *, void *) = l->device ? be->ops->free : be->ops->host_free;
    for (int i = 0; l->slot && i < l->depth; i++) {
        release(be, l->slot[i].x);
        release(be, l->slot[i].labels);
        free(l->slot[i].idx);
    }
    if (l->device) {
        be->ops->free(be, (void *)l->syn.w1);
        be->ops->free(be, (void *)l->syn.w2);
        be->ops->free(be, (void *)l->syn.mul);
        be->ops->free(be, (void *)l->syn.add);
    }
    free(l->syn_idx);
    free(l->slot);
    if (l->d) atomic_fetch_sub_explicit(&l->d->loaders, 1, memory_order_relaxed);
    free(l->scratch);
    if (l->sample_log) fclose(l->sample_log);
    pthread_cond_destroy(&l->cv_work);
    pthread_cond_destroy(&l->cv_ready);
    pthread_mutex_destroy(&l->mu);
    ctx_unhold(l->ctx, CTX_HELD_LOADER);
    free(l);
}

/* Test hook (runtime/test_hooks.h): the CPU backend stands in for a device. */
static int g_device_on_cpu = -1; /* -1: DTRAIN_TEST_SYNTH_DEVICE not read yet */

void loader_test_device_on_cpu(int on) { g_device_on_cpu = on; }

static int device_on_cpu(void)
{
    if (g_device_on_cpu < 0) {
        const char *e = getenv("DTRAIN_TEST_SYNTH_DEVICE");
        g_device_on_cpu = e && !strcmp(e, "1");
    }
    return g_device_on_cpu;
}

/* Whether a training loader makes d's batches on be's device (be NULL: ctx is not on a GPU), and
 * then *sp, their generator in host memory; a request it cannot honour fails naming why. */
static dt_status choose_device(const dt_dataset *d, backend *be, int *device, synth_spec *sp)
{
    *device = 0;
    if (d->synth_on == DT_SYNTHETIC_HOST) return DT_OK;
    char why[256];
    const int able = dataset_synth_spec(d, sp, why, sizeof why);
    if (d->synth_on == DT_SYNTHETIC_DEVICE && (!be || !able))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "synthetic batches cannot be made on the device: %s (make them on "
                                "the host: --synthetic-on host or auto)",
                                !be ? "the run is placed on the CPU" : why);
    *device = be && able;
    return DT_OK;
}

/* Copies n floats of the host array src to new memory of be's at *dst (NULL stays NULL). */
static dt_status upload(backend *be, const float *src, size_t n, const char *what, const float **dst)
{
    *dst = NULL;
    if (!src) return DT_OK;
    void *p = NULL;
    dt_status s = be->ops->alloc(be, n * sizeof(float), what, &p);
    if (!s) s = be->ops->to_device(be, p, src, n * sizeof(float));
    if (s)
        be->ops->free(be, p);
    else
        *dst = p;
    return s;
}

/* The device's part of the loader: its copy of the generator (host: choose_device's) and its slot. */
static dt_status device_start(dt_loader *l, int batch, const synth_spec *host)
{
    backend *be = l->mem_be;
    const size_t in = synth_input_size(host), C = (size_t)host->c;
    l->syn = *host;
    l->syn.w1 = l->syn.w2 = l->syn.mul = l->syn.add = NULL;
    dt_status s = upload(be, host->w1, SYNTH_TEACHER_HIDDEN * in, "the synthetic data's teacher", &l->syn.w1);
    if (!s)
        s = upload(be, host->w2, (size_t)host->classes * SYNTH_TEACHER_HIDDEN, "the synthetic data's teacher",
                   &l->syn.w2);
    if (!s) s = upload(be, host->mul, C, "the normalization", &l->syn.mul);
    if (!s) s = upload(be, host->add, C, "the normalization", &l->syn.add);
    lslot *sl = &l->slot[0];
    if (!s) s = be->ops->alloc(be, (size_t)batch * in * sizeof(float), "a batch of inputs", (void **)&sl->x);
    if (!s) s = be->ops->alloc(be, (size_t)batch * sizeof(int32_t), "a batch of labels", (void **)&sl->labels);
    if (!s && (!(sl->idx = malloc((size_t)batch * sizeof *sl->idx)) ||
               !(l->syn_idx = malloc((size_t)batch * sizeof *l->syn_idx))))
        s = status_set_error(DT_ERR_NOMEM, "out of memory for the loader");
    return s;
}

/* On the device: the batch of slot sl's indices, queued on the stream. */
static dt_status make_on_device(dt_loader *l, const lslot *sl)
{
    for (int j = 0; j < sl->n; j++) l->syn_idx[j] = l->d->view ? l->d->view[sl->idx[j]] : sl->idx[j];
    return l->mem_be->ops->synth_batch(l->mem_be, &l->syn, l->syn_idx, sl->n, sl->x, sl->labels);
}

/* The arguments of dt_loader_create / dt_loader_create_eval checked. */
static dt_status check_args(const dt_dataset *d, int rank, int world, int batch, long first, int threads, int depth)
{
    if (!d) return status_null_arg("dt_loader_create", "d", "pass the dataset the loader reads");
    if (batch < 1 || world < 1 || rank < 0 || rank >= world || first < 0)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "dt_loader_create: batch %d, rank %d of %d, first step %ld: the batch and world "
                                "must be at least 1, the rank from 0 to world - 1, the first step at least 0",
                                batch, rank, world, first);
    if (threads < 0 || threads > 256)
        return status_set_error(DT_ERR_INVALID_ARG, "loader threads %d must be from 0 to 256", threads);
    if (threads > 0 && (depth < 2 || depth > 64))
        return status_set_error(DT_ERR_INVALID_ARG, "loader depth %d must be from 2 to 64 batches", depth);
    return DT_OK;
}

/* The depth slots of host batches (pinned where the memory backend is CUDA's). */
static dt_status alloc_slots(dt_loader *l, int batch)
{
    for (int i = 0; i < l->depth; i++) {
        lslot *sl = &l->slot[i];
        dt_status s;
        if ((s = l->mem_be->ops->host_alloc(l->mem_be, (size_t)batch * l->in_sz * sizeof(float), "a batch of inputs",
                                            (void **)&sl->x)) ||
            (s = l->mem_be->ops->host_alloc(l->mem_be, (size_t)batch * sizeof(int32_t), "a batch of labels",
                                            (void **)&sl->labels)))
            return s;
        if (!(sl->idx = malloc((size_t)batch * sizeof *sl->idx)))
            return status_set_error(DT_ERR_NOMEM, "out of memory for the loader");
    }
    return DT_OK;
}

/* The worker threads, each with scratch floats of its own; those started are marked, for
 * dt_loader_free to join. */
static dt_status start_workers(dt_loader *l, int threads, size_t scratch)
{
    if (!(l->w = calloc((size_t)threads, sizeof *l->w)))
        return status_set_error(DT_ERR_NOMEM, "out of memory for the loader");
    for (int t = 0; t < threads; t++) {
        l->w[t].l = l;
        if (!(l->w[t].scratch = malloc(scratch * sizeof(float))))
            return status_set_error(DT_ERR_NOMEM, "out of memory for the loader");
        int rc = pthread_create(&l->w[t].th, NULL, worker_main, &l->w[t]);
        if (rc)
            return status_set_error(DT_ERR_NOMEM,
                                    "cannot start loader thread %d of %d (%s): use fewer --loader-threads", t + 1,
                                    threads, strerror(rc));
        l->w[t].started = 1;
    }
    return DT_OK;
}

/* Both modes: eval with items batches of the shard, or training from first_step. */
static dt_status loader_start(const dt_ctx *ctx, dt_dataset *d, int rank, int world, int batch, long first, int threads,
                              int depth, int eval, long items, dt_loader **out)
{
    *out = NULL;
    dt_status s = check_args(d, rank, world, batch, first, threads, depth);
    if (s) return s;
    /* A global batch the dataset cannot fill (drop_last) or a first step before the data
     * position's anchor would fail every batch: said here, not by the first dt_loader_next. */
    long epoch;
    size_t offset;
    if (!eval && (s = sampler_locate(&d->smp, first, (size_t)world * (size_t)batch, &epoch, &offset))) return s;
    dt_loader *l = calloc(1, sizeof *l);
    if (!l) return status_set_error(DT_ERR_NOMEM, "out of memory for the loader");
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv_work, NULL);
    pthread_cond_init(&l->cv_ready, NULL);
    dt_placement pl;
    const int cuda = ctx && dt_get_placement(ctx, &pl) == DT_OK && pl.device == DT_DEVICE_CUDA;
    l->mem_be = backend_cpu(); /* until the CUDA one is had: dt_loader_free needs one */
    l->d = d;
    atomic_fetch_add_explicit(&d->loaders, 1, memory_order_relaxed); /* until dt_loader_free */
    l->ctx = ctx;
    ctx_hold(ctx, CTX_HELD_LOADER); /* dt_finalize refuses while the loader lives */
    l->rank = rank, l->world = world, l->batch = batch;
    l->eval = eval, l->items = items;
    l->depth = threads ? depth : 1;
    l->nthreads = threads;
    l->in_sz = d->input_size;
    l->next_fill = l->next_out = first;
    l->fill = l->held = -1;
    /* Chunks small enough for every worker to get several per batch, large enough to amortize
     * taking the lock. */
    l->chunk = threads ? batch / (4 * threads) : batch;
    if (l->chunk < 8) l->chunk = batch < 8 ? batch : 8;
    l->nchunks = (batch + l->chunk - 1) / l->chunk;
    const size_t scratch = dataset_scratch_floats(d) + 1;
    const char *log_path = eval ? NULL : getenv("DTRAIN_TEST_SAMPLE_LOG");
    if (log_path && *log_path) {
        char p[4200];
        snprintf(p, sizeof p, "%s.%d", log_path, rank);
        l->sample_log = fopen(p, "a");
    }
    backend *cuda_be = NULL;
    if (cuda && backend_for_memory(DT_MEMORY_DEVICE, &cuda_be))
        s = status_set_error(DT_ERR_DEVICE, "dt_loader_create: the context is placed on CUDA: %s", dt_last_error());
    if (cuda_be) l->mem_be = cuda_be;
    synth_spec host_spec;
    if (!s && !eval)
        s = choose_device(d, cuda_be ? cuda_be : device_on_cpu() ? l->mem_be : NULL, &l->device, &host_spec);
    if (l->device) threads = l->nthreads = 0, l->depth = 1;
    if (!s && !(l->slot = calloc((size_t)l->depth, sizeof *l->slot)))
        s = status_set_error(DT_ERR_NOMEM, "out of memory for the loader");
    if (!s && l->device) s = device_start(l, batch, &host_spec);
    if (!s && !l->device) s = alloc_slots(l, batch);
    if (!s && !threads && !l->device && !(l->scratch = malloc(scratch * sizeof(float))))
        s = status_set_error(DT_ERR_NOMEM, "out of memory for the loader");
    if (!s && threads) s = start_workers(l, threads, scratch);
    if (s) {
        dt_loader_free(l);
        return s;
    }
    *out = l;
    return DT_OK;
}

dt_status dt_loader_create(const dt_ctx *ctx, dt_dataset *d, int rank, int world, int batch, long first_step,
                           int threads, int depth, dt_loader **out)
{
    if (!out) return status_null_arg("dt_loader_create", "out", "pass the address of a dt_loader pointer");
    return loader_start(ctx, d, rank, world, batch, first_step, threads, depth, 0, 0, out);
}

dt_status loader_create_eval(const dt_ctx *ctx, dt_dataset *d, int rank, int world, int batch, int threads, int depth,
                             long *batches, dt_loader **out)
{
    const size_t n = d ? d->n : 0, W = world > 0 ? (size_t)world : 1;
    const size_t mine = rank >= 0 && n > (size_t)rank ? (n - (size_t)rank + W - 1) / W : 0;
    *batches = batch > 0 ? (long)((mine + (size_t)batch - 1) / (size_t)batch) : 0;
    return loader_start(ctx, d, rank, world, batch, 0, threads, depth, 1, *batches, out);
}

/* Eval mode: the samples that could not be decoded (DS_LABEL_BAD) leave the batch, the others
 * moving up in order, so every sample that decodes counts once and a bad one not at all. */
static void drop_bad(const dt_loader *l, lslot *sl)
{
    int k = 0;
    for (int j = 0; j < sl->n; j++) {
        if (sl->labels[j] == DS_LABEL_BAD) continue;
        if (k != j) {
            memcpy(sl->x + (size_t)k * l->in_sz, sl->x + (size_t)j * l->in_sz, l->in_sz * sizeof *sl->x);
            sl->labels[k] = sl->labels[j];
        }
        k++;
    }
    sl->n = k;
}

dt_status loader_next_n(dt_loader *l, long *item, const float **x, const int32_t **labels, int *n)
{
    if (l->eval && l->next_out >= l->items)
        return status_set_error(DT_ERR_INVALID_ARG, "the evaluation pass has only %ld batches", l->items);
    if (!l->nthreads) {
        /* No workers: the caller makes the batch. */
        lslot *sl = &l->slot[0];
        const double t0 = clock_now_s();
        trace_rec *tr = loader_trace(l);
        const uint64_t t0_ns = tr ? trace_now_ns() : 0;
        dt_status s = plan(l, l->next_out, sl);
        if (!s)
            s = l->device ? make_on_device(l, sl)
                          : dataset_fill(l->d, sl->idx, sl->epoch, sl->n, !l->eval, sl->x, sl->labels, l->scratch);
        l->wait_s += clock_now_s() - t0;
        if (tr)
            trace_rec_add(tr, "data wait", TRACE_CAT_DATA, TRACE_TRACK_TRAIN, t0_ns, trace_now_ns(), l->next_out + 1,
                          -1);
        if (s) return s;
        if (l->eval) drop_bad(l, sl);
        sl->step = l->next_out;
        if (l->sample_log) log_samples(l, sl);
        *item = l->next_out++;
        *x = sl->x;
        *labels = sl->labels;
        *n = sl->n;
        return DT_OK;
    }
    pthread_mutex_lock(&l->mu);
    if (l->held >= 0) {
        l->slot[l->held].state = SLOT_FREE;
        l->held = -1;
        pthread_cond_broadcast(&l->cv_work);
    }
    lslot *sl = &l->slot[l->next_out % l->depth];
    const double t0 = clock_now_s();
    trace_rec *tr = loader_trace(l);
    const uint64_t t0_ns = tr ? trace_now_ns() : 0;
    /* A failure of a later batch waits until the batches before it are handed out. */
    while (!(sl->state == SLOT_READY && sl->step == l->next_out) && !(l->err && l->err_item <= l->next_out))
        pthread_cond_wait(&l->cv_ready, &l->mu);
    l->wait_s += clock_now_s() - t0;
    /* The training thread's wait for this batch (short when the loader keeps ahead). */
    if (tr)
        trace_rec_add(tr, "data wait", TRACE_CAT_DATA, TRACE_TRACK_TRAIN, t0_ns, trace_now_ns(), l->next_out + 1, -1);
    if (l->err && l->err_item <= l->next_out) {
        dt_status err = l->err;
        pthread_mutex_unlock(&l->mu);
        return status_restore(err, &l->errmsg);
    }
    sl->state = SLOT_HELD;
    l->held = (int)(sl - l->slot);
    if (l->eval) drop_bad(l, sl);
    if (l->sample_log) log_samples(l, sl);
    *item = l->next_out++;
    *x = sl->x;
    *labels = sl->labels;
    *n = sl->n;
    pthread_mutex_unlock(&l->mu);
    return DT_OK;
}

dt_status dt_loader_next(dt_loader *l, long *step, const float **x, const int32_t **labels)
{
    static const char fn[] = "dt_loader_next";
    if (!l) return status_null_arg(fn, "l", "pass the loader of dt_loader_create");
    if (!step) return status_null_arg(fn, "step", "pass the address of a long for the batch's step");
    if (!x) return status_null_arg(fn, "x", "pass the address of a const float pointer for the inputs");
    if (!labels) return status_null_arg(fn, "labels", "pass the address of a const int32_t pointer for the labels");
    int n;
    return loader_next_n(l, step, x, labels, &n);
}

double dt_loader_wait_s(const dt_loader *l) { return l ? l->wait_s : 0; }

int dt_loader_on_device(const dt_loader *l) { return l && l->device; }
