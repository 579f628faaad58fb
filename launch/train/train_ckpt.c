/*
 * train_ckpt.c - the checkpoints of `dtrain train` (train_run.h): each saved with the data block
 * (the data position and the normalization) and the run record (train_record.h), the older ones
 * then pruned to --keep-checkpoints; and --resume auto, which loads the newest sound one, checks
 * its run record against this run and puts the data back where it was.
 */
#include "launch/train/train_run.h"

#include "base/log.h"
#include "runtime/checkpoint/ckpt_extra.h"
#include "runtime/checkpoint/ckpt_format.h"
#include "runtime/checkpoint/ckpt_prune.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

/* A --metrics file removed while the run writes it (its directory deleted, say) takes every later
 * record into a file that no name reaches, lost at the run's end: said once, at a checkpoint, where
 * a resume can pick the run up again. */
static void metrics_check_linked(train_run *r)
{
    struct stat sb;
    if (r->rank != 0 || !r->metrics || r->metrics_gone || fstat(fileno(r->metrics), &sb) != 0 || sb.st_nlink > 0)
        return;
    r->metrics_gone = 1;
    fprintf(stderr,
            "dtrain: warning: --metrics %s was removed while this run writes it: its records from now on are lost "
            "when the run ends; to keep them, stop the run (SIGTERM saves a checkpoint) and resume it with its "
            "directory made again\n",
            r->t.metrics);
}

dt_status train_ckpt_save(train_run *r, long step)
{
    const train_opts *t = &r->t;
    const train_data *d = &r->data;
    const int world = r->world, batch = t->batch, accum = t->accum_steps;
    dt_ckpt_data cd = {0};
    dt_status s = dt_dataset_position(d->train, step * accum, world, batch, &cd.epoch, &cd.offset);
    if (s) return s;
    const float *mean, *std;
    cd.normalize = (int)dt_dataset_normalization(d->train, &mean, &std);
    if (mean && std) {
        int h, w;
        dt_dataset_shape(d->train, &cd.channels, &h, &w);
        cd.mean = (float *)mean, cd.std = (float *)std;
    }
    const ckpt_extra rec = {TRAIN_RECORD_SECTION, &d->rec, sizeof d->rec};
    if ((s = ckpt_save_model_with(r->ctx, t->ckpt_dir, r->m, r->opt, r->sc, &cd, step, &rec))) return s;
    /* Every rank knows the file is committed; rank 0 alone touches the directory. */
    if (t->keep_ckpts > 0 && r->rank == 0 && ckpt_prune(t->ckpt_dir, step, t->keep_ckpts, NULL))
        log_msg(LOG_LEVEL_WARN, "--keep-checkpoints %d: %s; the older checkpoints stay", t->keep_ckpts,
                dt_last_error());
    metrics_check_linked(r);
    return DT_OK;
}

void train_ckpt_report_unsaved(const train_run *r, long step)
{
    if (r->rank != 0 || !r->t.ckpt_dir) return;
    /* The newest file of an earlier step: the writer's commit is atomic, so the files it named are
     * whole; a later step's file would be one a resume skipped as damaged, not where it goes on. */
    ckpt_entry *e = NULL;
    size_t n = 0;
    long kept = 0;
    if (ckpt_list(r->t.ckpt_dir, &e, &n) == DT_OK) {
        for (size_t i = 0; i < n && !kept; i++)
            if (e[i].step < step) kept = e[i].step;
        ckpt_list_free(e, n);
    }
    if (kept > 0)
        fprintf(stderr,
                "dtrain: the checkpoint of step %ld is not saved, so the run ends here: the newest in %s is of step "
                "%ld, where --resume auto goes on (steps %ld to %ld run again)\n",
                step, r->t.ckpt_dir, kept, kept + 1, step);
    else
        fprintf(stderr,
                "dtrain: the checkpoint of step %ld is not saved, so the run ends here: %s holds no earlier one, so "
                "--resume auto starts again at step 0\n",
                step, r->t.ckpt_dir);
}

/* The loaded checkpoint's run record against this run's (train_record_check). A record that cannot
 * be read leaves the run unchecked, said: the model state it came with passed every check. */
static dt_status check_record(dt_ctx *ctx, const char *dir, const train_data *d, long step, long epoch, long offset,
                              int scaler_fresh)
{
    train_record saved;
    size_t found = 0;
    if (ckpt_read_extra(ctx, dir, step, TRAIN_RECORD_SECTION, &saved, sizeof saved, &found)) {
        log_msg0(LOG_LEVEL_WARN,
                 "--resume: the checkpoint's run record could not be read (%s): the data order, "
                 "precision and batch are not compared",
                 dt_last_error());
        return DT_OK;
    }
    if (found == 0) { /* written before the record existed, or by the library's dt_checkpoint_save */
        log_msg0(LOG_LEVEL_WARN,
                 "--resume: the checkpoint of step %ld keeps no run record (written before dtrain kept one, or "
                 "by dt_checkpoint_save): that this run's --seed, --shuffle, training set, precision and batch are "
                 "the ones it was written with is not checked",
                 step);
        return DT_OK;
    }
    if (found != sizeof saved) {
        log_msg0(LOG_LEVEL_WARN,
                 "--resume: the checkpoint's run record is %zu bytes, this dtrain reads %zu: the data order, "
                 "precision and batch are not compared",
                 found, sizeof saved);
        return DT_OK;
    }
    return train_record_check(&saved, &d->rec, step, epoch, offset, scaler_fresh);
}

dt_status train_ckpt_peek(const train_run *r, train_figures *out)
{
    const train_opts *t = &r->t;
    *out = (train_figures){.step = -1};
    /* The flags alone decide, alike on every rank: all join the collective or none. */
    if (!t->resume || !t->ckpt_dir || !t->data || t->norm.n ||
        (t->normalize >= 0 && t->normalize != DT_NORMALIZE_STANDARD))
        return DT_OK;
    return ckpt_peek_figures(r->ctx, t->ckpt_dir, &out->step, &out->channels, &out->figures);
}

dt_status train_ckpt_resume(train_run *r)
{
    dt_ctx *ctx = r->ctx;
    const char *dir = r->t.ckpt_dir;
    train_data *d = &r->data;
    const int accum = r->t.accum_steps;
    long *first_step = &r->first_step;
    int C, H, W;
    dt_dataset_shape(d->train, &C, &H, &W);
    float *buf = malloc(2 * (size_t)C * sizeof *buf);
    if (!buf) return DT_ERR_NOMEM;
    dt_ckpt_data cd = {.channels = C, .mean = buf, .std = buf + C};
    dt_status s = dt_checkpoint_load_latest(ctx, dir, r->m, r->opt, r->sc, &cd, first_step);
    const int rank0 = dt_rank(ctx) == 0;
    /* A scaler with no steps counted after a load of step > 0 was restarted by it: the checkpoint
     * held no state for it (or none this run's settings take), and the load said so. */
    const int scaler_fresh = r->sc && dt_scaler_updates(r->sc) == 0;
    if (!s && cd.present && *first_step > 0)
        s = check_record(ctx, dir, d, *first_step, cd.epoch, cd.offset, scaler_fresh);
    if (!s && cd.present && cd.normalize >= 0) {
        const float *mean, *std;
        const dt_normalize now = dt_dataset_normalization(d->train, &mean, &std);
        int same = (int)now == cd.normalize;
        for (int c = 0; same && now == DT_NORMALIZE_STANDARD && c < C; c++)
            same = mean[c] == cd.mean[c] && std[c] == cd.std[c];
        if (!same) {
            if ((s = dt_dataset_set_normalization(d->train, (dt_normalize)cd.normalize, cd.mean, cd.std)) ||
                (d->eval && (s = dt_dataset_set_normalization(d->eval, (dt_normalize)cd.normalize, cd.mean, cd.std)))) {
                free(buf);
                return s;
            }
            /* A warning, said under --quiet too: this run's --normalize or data gives way to the
             * checkpoint's figures. */
            if (rank0)
                fprintf(stderr, "dtrain: warning: normalize: the checkpoint's figures, which differ from this run's "
                                "(the data changed, or --normalize did): training goes on as it started\n");
        }
    }
    /* The open took the figures of a newer file that the load then skipped as damaged, and the one
     * loaded keeps none: those figures stay, said (the pass they replaced would have given the
     * data's own). */
    if (!s && d->figures_of >= 0 && d->figures_of != *first_step && !(cd.present && cd.normalize >= 0) && rank0)
        fprintf(stderr,
                "dtrain: warning: normalize: the checkpoint of step %ld keeps no figures; the run uses those of the "
                "damaged checkpoint of step %ld, which it skipped\n",
                *first_step, d->figures_of);
    if (!s && cd.present && *first_step > 0) {
        s = dt_dataset_set_position(d->train, *first_step * accum, cd.epoch, cd.offset);
        if (!s && rank0 && !r->t.quiet)
            printf("data: resuming in epoch %ld after %ld of its samples\n", cd.epoch, cd.offset);
    }
    free(buf);
    return s;
}
