/*
 * evaluate.c - dt_evaluate: a model's loss and accuracy over a whole dataset, sharded over the
 * ranks and summed, so the figures are exact and the same whatever the rank count.
 *
 * Rank r evaluates samples r, r + W, ... (every sample once, none padded), read ahead by the
 * loader's eval mode. The sums travel through dt_allreduce in fp32, where an integer is exact
 * only below 2^24: each count is sent as two parts, count / 4096 and count % 4096, whose sums
 * stay exact for counts up to 2^36 over up to 4096 ranks. The loss sum is sent as a float
 * and its remainder, so it keeps about 48 bits.
 */
#include "runtime/data/dataset.h"
#include "runtime/data/loader.h"
#include "base/status.h"

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

dt_status dt_evaluate(dt_ctx *ctx, dt_model *m, dt_dataset *d, int batch, int threads, dt_eval_result *r)
{
    if (!ctx || !m || !d || !r)
        return status_set_error(DT_ERR_INVALID_ARG, "dt_evaluate: context, model, dataset and result are required");
    const int K = dt_model_num_classes(m);
    if (d->classes > K)
        return status_set_error(DT_ERR_INVALID_ARG, "%s has %d classes, the model only %d outputs", d->split->source,
                                d->classes, K);
    if ((size_t)d->input_size != dt_model_input_size(m))
        return status_set_error(DT_ERR_INVALID_ARG, "%s's samples are %dx%dx%d (%zu values), the model takes %zu",
                                d->split->source, d->c, d->h, d->w, d->input_size, dt_model_input_size(m));
    const int rank = dt_rank(ctx), world = dt_world_size(ctx);
    /* Per-class figures: correct and count per class, the confusion matrix, then the totals. */
    const size_t ncls = (size_t)K, nconf = r->confusion ? ncls * ncls : 0, nc = 2 * ncls + nconf + 2;
    long *cnt = calloc(nc, sizeof *cnt);
    float *wire = calloc(2 * nc + 2, sizeof *wire);
    int32_t *pred = malloc((size_t)batch * sizeof *pred);
    dt_loader *ld = NULL;
    long batches = 0;
    double loss = 0;
    dt_status s = !cnt || !wire || !pred ? status_set_error(DT_ERR_NOMEM, "out of memory for evaluation") : DT_OK;
    if (!s) s = loader_create_eval(ctx, d, rank, world, batch, threads, EVAL_DEPTH, &batches, &ld);
    long *cls_ok = cnt, *cls_n = cnt + ncls, *conf = cnt + 2 * ncls, *tot = cnt + 2 * ncls + nconf;
    for (long b = 0; !s && b < batches; b++) {
        const float *x;
        const int32_t *y;
        long item;
        int n, ok;
        double l;
        if ((s = loader_next_n(ld, &item, &x, &y, &n)) || (s = dt_model_evaluate(m, x, y, n, &l, &ok, pred))) break;
        loss += l;
        tot[0] += ok, tot[1] += n;
        for (int i = 0; i < n; i++) {
            cls_n[y[i]]++;
            cls_ok[y[i]] += pred[i] == y[i];
            if (nconf) conf[(size_t)y[i] * ncls + (size_t)pred[i]]++;
        }
    }
    dt_loader_free(ld);
    /* Every rank takes part in the sum, even one that failed, so none waits forever: a failed
     * rank sends a flag that fails them all. */
    counts_out(cnt, nc, wire);
    const float lhi = (float)loss;
    wire[2 * nc] = lhi;
    wire[2 * nc + 1] = (float)(loss - (double)lhi);
    status_kept why;
    if (s) status_keep(&why);
    float failed = s ? 1.0f : 0.0f;
    dt_status cs = world > 1 ? dt_allreduce(ctx, &failed, 1, DT_F32, DT_SUM) : DT_OK;
    if (!cs && failed == 0 && world > 1) cs = dt_allreduce(ctx, wire, 2 * nc + 2, DT_F32, DT_SUM);
    if (!s && !cs && failed > 0)
        s = status_set_error(DT_ERR_IO, "evaluation failed on %g other rank%s (see their messages)", (double)failed,
                             failed == 1 ? "" : "s");
    else if (s)
        s = status_restore(s, &why);
    else if (cs)
        s = cs;
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
    return s;
}
