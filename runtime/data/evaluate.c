/*
 * evaluate.c - dt_evaluate: a model's loss and accuracy over a whole dataset, sharded over the
 * ranks and summed, so the figures are exact and the same whatever the rank count.
 *
 * Rank r evaluates samples r, r + W, ... (every sample once, none padded), read ahead by the
 * loader's eval mode; with skip_bad one that cannot be decoded is left out (not replaced by the
 * next, which would count twice), so count says how many were evaluated. The sums travel through
 * dt_allreduce in fp32, where an integer is exact only below 2^24: each count is sent as two
 * parts, count / 4096 and count % 4096, whose sums stay exact for counts up to 2^36 over up to
 * 4096 ranks. The loss sum is sent as a float and its remainder, so it keeps about 48 bits.
 *
 * A rank that fails (a bad argument, a sample that cannot be read, the model's error) still joins
 * the collective verdict that comes before the sums (rank_verdict_status), so no rank waits
 * forever, and every rank learns which rank failed first and with what code.
 */
#include "runtime/data/dataset.h"
#include "runtime/data/loader.h"
#include "runtime/model/model.h"  /* model_max_batch, which bounds `batch` */
#include "collectives/ctx_comm.h" /* ctx_trace */
#include "collectives/rank_verdict.h"
#include "base/status.h"
#include "base/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EVAL_DEPTH 4

/* n counts into 2n exact floats and back after the sum. */
static void counts_out(const long *c, size_t n, float *f)
{
    for (size_t i = 0; i < n; i++) f[2 * i] = (float)(c[i] / 4096), f[2 * i + 1] = (float)(c[i] % 4096);
}

static void counts_in(const float *f, size_t n, long *c)
{
    for (size_t i = 0; i < n; i++) c[i] = (long)f[2 * i] * 4096 + (long)f[2 * i + 1];
}

/* The arguments, checked before anything is allocated; the failure names the argument. */
static dt_status eval_args(const dt_model *m, const dt_dataset *d, int batch, int threads, const dt_eval_result *r)
{
    static const char fn[] = "dt_evaluate";
    if (!m) return status_null_arg(fn, "m", "pass the model to evaluate");
    if (!d) return status_null_arg(fn, "d", "pass the dataset to evaluate on");
    if (!r) return status_null_arg(fn, "r", "pass a dt_eval_result for the figures");
    const int max_batch = model_max_batch(m);
    if (batch < 1 || batch > max_batch)
        return status_set_error(DT_ERR_INVALID_ARG, "dt_evaluate: batch %d must be from 1 to the model's max batch %d",
                                batch, max_batch);
    if (threads < 0 || threads > 256)
        return status_set_error(DT_ERR_INVALID_ARG, "dt_evaluate: threads %d must be from 0 to 256", threads);
    const int K = dt_model_num_classes(m);
    if (d->classes > K)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "%s has labels up to %d (%d classes), the model only %d outputs (labels 0 to %d): "
                                "its predictions could never be right; evaluate on data of the model's classes",
                                d->split->source, d->classes - 1, d->classes, K, K - 1);
    if ((size_t)d->input_size != dt_model_input_size(m))
        return status_set_error(DT_ERR_INVALID_ARG, "%s's samples are %dx%dx%d (%zu values), the model takes %zu",
                                d->split->source, d->c, d->h, d->w, d->input_size, dt_model_input_size(m));
    return DT_OK;
}

dt_status dt_evaluate(dt_ctx *ctx, dt_model *m, dt_dataset *d, int batch, int threads, dt_eval_result *r)
{
    /* Without a context no other rank can be told: this rank fails alone. */
    if (!ctx) return status_null_arg("dt_evaluate", "ctx", "pass the context of dt_init (on every rank)");
    /* The whole evaluation is one span on the training track: its forward passes, inside a step's
     * span, would otherwise read as that step's own forward (a step ten times as long, with no
     * backward to its forwards). */
    trace_rec *tr = trace_active(ctx_trace(ctx));
    const uint64_t t0 = tr ? trace_now_ns() : 0;
    dt_status s = eval_args(m, d, batch, threads, r);
    const int rank = dt_rank(ctx), world = dt_world_size(ctx);
    /* Per-class figures: correct and count per class, the confusion matrix, then the totals. */
    const size_t ncls = s ? 0 : (size_t)dt_model_num_classes(m), nconf = !s && r->confusion ? ncls * ncls : 0;
    const size_t nc = 2 * ncls + nconf + 2;
    long *cnt = NULL;
    float *wire = NULL;
    int32_t *pred = NULL;
    if (!s && (!(cnt = calloc(nc, sizeof *cnt)) || !(wire = calloc(2 * nc + 2, sizeof *wire)) ||
               !(pred = malloc((size_t)batch * sizeof *pred))))
        s = status_set_error(DT_ERR_NOMEM, "out of memory for evaluation");
    dt_loader *ld = NULL;
    long batches = 0;
    double loss = 0;
    if (!s) s = loader_create_eval(ctx, d, rank, world, batch, threads, EVAL_DEPTH, &batches, &ld);
    long *cls_ok = NULL, *cls_n = NULL, *conf = NULL, *tot = NULL;
    if (!s) cls_ok = cnt, cls_n = cnt + ncls, conf = cnt + 2 * ncls, tot = cnt + 2 * ncls + nconf;
    for (long b = 0; !s && b < batches; b++) {
        const float *x;
        const int32_t *y;
        long item;
        int n, ok;
        double l;
        if ((s = loader_next_n(ld, &item, &x, &y, &n))) break;
        if (!n) continue; /* every sample of the batch left out as undecodable */
        if ((s = dt_model_evaluate(m, x, y, n, &l, &ok, pred))) break;
        loss += l;
        tot[0] += ok, tot[1] += n;
        for (int i = 0; i < n; i++) {
            cls_n[y[i]]++;
            cls_ok[y[i]] += pred[i] == y[i];
            if (nconf) conf[(size_t)y[i] * ncls + (size_t)pred[i]]++;
        }
    }
    dt_loader_free(ld);
    /* Every rank takes part in the verdict, even one that failed, so none waits forever; the sums
     * follow only when every rank has them. */
    s = rank_verdict_status(ctx, s, "dt_evaluate", ", so no rank has the figures");
    if (!s) {
        counts_out(cnt, nc, wire);
        const float lhi = (float)loss;
        wire[2 * nc] = lhi;
        wire[2 * nc + 1] = (float)(loss - (double)lhi);
        if (world > 1) s = dt_allreduce(ctx, wire, 2 * nc + 2, DT_F32, DT_SUM);
    }
    if (!s) {
        counts_in(wire, nc, cnt);
        r->loss_sum = (double)wire[2 * nc] + (double)wire[2 * nc + 1];
        r->correct = tot[0], r->count = tot[1];
        if (r->class_correct) memcpy(r->class_correct, cls_ok, ncls * sizeof *cnt);
        if (r->class_count) memcpy(r->class_count, cls_n, ncls * sizeof *cnt);
        if (r->confusion) memcpy(r->confusion, conf, nconf * sizeof *cnt);
    }
    free(cnt);
    free(wire);
    free(pred);
    if (tr) trace_rec_add(tr, "eval", TRACE_CAT_EVAL, TRACE_TRACK_TRAIN, t0, trace_now_ns(), s ? 0 : r->count, -1);
    return s;
}
