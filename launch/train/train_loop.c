/*
 * train_loop.c - the steps of `dtrain train` (train_run.h). Each optimizer step: --accum-steps
 * batches of this rank's share of the global batch, forward + backward (the gradient of the mean
 * loss over the global batch), the gradients summed over the ranks, the optimizer step. Between
 * steps: the stop requests the ranks agree on (train_stop.c), the checkpoints, and every --log-every steps and at
 * each checkpoint step the loss, accuracy and waits averaged over the ranks (rank 0 prints them,
 * train_report.c), with an evaluation on the held-out set every --eval-every steps and at the end.
 */
#include "launch/train/train_run.h"

#include "launch/cli.h"
#include "base/clock.h"
#include "base/status.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The held-out figures after `step` steps, and the line that says them (len bytes). Collective. */
static dt_status run_eval(const train_run *r, long step, double *loss, double *acc, char *line, size_t len)
{
    dt_eval_result e = {0};
    dt_status s = dt_evaluate(r->ctx, r->m, r->data.eval, r->t.batch, r->read_threads, &e);
    if (s) return s;
    *loss = e.count ? e.loss_sum / (double)e.count : 0;
    *acc = e.count ? (double)e.correct / (double)e.count : 0;
    /* --bad-samples skip leaves an undecodable held-out sample out of the figures: said, as the
     * count no longer matches the held-out line's. */
    const long left_out = (long)dt_dataset_size(r->data.eval) - e.count;
    char why[96] = "";
    if (left_out > 0)
        snprintf(why, sizeof why, "; %ld undecodable sample%s left out", left_out, left_out == 1 ? "" : "s");
    /* fabs: glibc prints a NaN with its sign bit as "-nan", which reads as a value (the record's
     * loss stays as it is: JSON writes any NaN as null). */
    snprintf(line, len, "eval %6ld/%ld  held-out loss %.4f  acc %.4f  (%ld of %ld correct%s)\n", step, r->t.steps,
             isnan(*loss) ? fabs(*loss) : *loss, *acc, e.correct, e.count, why);
    return DT_OK;
}

/* What a log interval adds up over its steps, on this rank. */
typedef struct interval {
    double loss, comm_s, t_begin, wait_mark;
    long correct, steps, skipped;
} interval;

/* The save of `step` failed (s): its error, then what --checkpoint-dir still holds and where a
 * resume goes on (rank 0), so the message says what the failure lost. The exit code. */
static int save_failed(train_run *r, long step, dt_status s)
{
    progress_clear(&r->prog);
    const int rc = train_status_error(s);
    train_ckpt_report_unsaved(r, step);
    return rc;
}

/* The evaluation after `step` steps failed (s: a held-out image that does not decode, which the
 * evaluation is the first to read). When every rank got it (dt_evaluate's verdict), with `save`,
 * no training is lost: after the last step the run finishes (its checkpoint, --dump-params) and
 * exits 1 (r->final_eval_failed; EXIT_OK here), and before it the steps are saved in the
 * --checkpoint-dir before the run ends. The exit code after printing why. */
static int eval_failed(train_run *r, long step, dt_status s, int save)
{
    const int shared = status_shared(s) || r->world == 1;
    if (save && shared && step == r->t.steps) {
        train_status_error(s);
        r->final_eval_failed = 1;
        const char *kept = r->t.ckpt_dir && r->t.dump ? " (its checkpoint and --dump-params written)"
                           : r->t.ckpt_dir            ? " (its checkpoint written)"
                           : r->t.dump                ? " (--dump-params written)"
                                                      : "";
        if (r->rank == 0)
            fprintf(stderr,
                    "dtrain: the final evaluation failed; the run finishes without it%s and exits 1: fix or replace "
                    "the held-out file named, then dtrain eval evaluates the model\n",
                    kept);
        return EXIT_OK;
    }
    status_kept k;
    status_keep(&k);
    dt_status sv = DT_OK;
    /* Collective: only when every rank got the failure, or the save would wait on a rank gone. */
    save = save && shared && r->t.ckpt_dir && step > r->first_step;
    if (save && (sv = train_ckpt_save(r, step))) save_failed(r, step, sv);
    const int rc = train_status_error(status_restore(s, &k));
    if (save && !sv && r->rank == 0)
        fprintf(stderr,
                "dtrain: the evaluation after step %ld failed; the %ld steps are saved in %s: fix or replace the "
                "held-out file named (or give --bad-samples skip), then --resume auto goes on from there; dtrain "
                "eval --checkpoint-dir %s evaluates them\n",
                step, step, r->t.ckpt_dir, r->t.ckpt_dir);
    return rc;
}

/* The interval's figures over the ranks, in one allreduce: red[0..2] the summed loss, correct
 * count and communication wait; *data_s this rank's wait for the loader per step; with more than
 * one rank each rank's row of seconds per step goes to rank 0's straggler verdict (*sv). Collective.
 * EXIT_OK or the exit code after printing why. */
static int reduce_interval(train_run *r, interval *iv, float red3[3], double *data_s, straggler_verdict *sv)
{
    /* This rank's own seconds per step, before the collective below waits for the others. */
    const double own_step_s = (clock_now_s() - iv->t_begin) / (double)iv->steps;
    /* This rank's wait for the loader in the interval: input is the bottleneck when it grows. */
    const double wait_now = dt_loader_wait_s(r->ld);
    *data_s = (wait_now - iv->wait_mark) / (double)iv->steps;
    iv->wait_mark = wait_now;
    /* One allreduce: summed loss, correct count, communication wait, then with more than one rank
     * a W x STRAGGLER_NCOLS array where each rank fills its own row (zeros elsewhere), for the
     * straggler report. */
    const size_t nred = 3 + (r->world > 1 ? (size_t)r->world * STRAGGLER_NCOLS : 0);
    float *red = calloc(nred, sizeof *red);
    if (!red) {
        cli_error("out of memory for the log interval's %zu figures", nred);
        return EXIT_FAIL;
    }
    red[0] = (float)iv->loss, red[1] = (float)iv->correct, red[2] = (float)iv->comm_s;
    if (r->world > 1) {
        float *row = red + 3 + (size_t)r->rank * STRAGGLER_NCOLS;
        row[STRAGGLER_STEP] = (float)own_step_s;
        row[STRAGGLER_DATA] = (float)*data_s;
        row[STRAGGLER_COMM] = (float)(iv->comm_s / (double)iv->steps);
    }
    dt_status s = dt_allreduce(r->ctx, red, nred, DT_F32, DT_SUM);
    if (s) {
        free(red);
        return train_status_error(s);
    }
    if (r->world > 1 && r->rank == 0) straggler_assess(red + 3, r->world, r->t.straggler_threshold, &r->strag, sv);
    memcpy(red3, red, 3 * sizeof *red);
    free(red);
    return EXIT_OK;
}

/* The run's end when an interval's mean loss is not finite: its record (loss null) and the error,
 * on every rank (the mean came out of one allreduce: every rank is here on it, rank 0 says it). */
static int diverged(train_run *r, const metrics_record *rec)
{
    const train_opts *t = &r->t;
    /* The interval that diverged is the record a plot of the run most needs: its loss is null. */
    if (r->rank == 0) train_report_record(r, rec);
    /* fabs: glibc prints a NaN with its sign bit as "-nan", which reads as a value. */
    const double shown = isnan(rec->loss) ? fabs(rec->loss) : rec->loss;
    /* In fp16 the forward pass itself can overflow (65504 is fp16's largest value): the loss
     * scaler only scales the backward pass, so it cannot help, while bf16 has fp32's range and
     * trains the same weights on. Advice to lower the learning rate alone would mislead there. */
    const char *fp16 = t->precision == DT_F16 ? "in fp16 a layer's output or the loss passed 65504, fp16's "
                                                "largest value, which loss scaling cannot prevent (it scales "
                                                "the backward pass only): use --precision bf16 (fp32's range) "
                                                "or fp32, or "
                                              : "";
    return train_shared_error(r, EXIT_FAIL, "the loss became %g at step %ld: %slower --lr (now %g)", shown, rec->step,
                              fp16, (double)t->optim.lr);
}

/* The end of a log interval after `step` steps: the figures averaged over the ranks, the
 * evaluation when due (its failure saving the steps first when save_if_eval_fails: eval_failed),
 * rank 0's line and record. Collective. EXIT_OK or the exit code after printing why. */
static int log_interval(train_run *r, interval *iv, long step, int do_eval, int save_if_eval_fails, double lr,
                        double grad_norm)
{
    const train_opts *t = &r->t;
    float red[3] = {0};
    double data_s;
    straggler_verdict sv = {0};
    int rc = reduce_interval(r, iv, red, &data_s, &sv);
    if (rc) return rc;
    const double dt_int = clock_now_s() - iv->t_begin;
    const double samples = (double)iv->steps * r->world * t->batch * t->accum_steps;
    const double mean_loss = red[0] / samples;
    long ep = 0, off = 0;
    dt_dataset_position(r->data.train, step * t->accum_steps, r->world, t->batch, &ep, &off);
    metrics_record rec = {.step = step,
                          .epoch = (double)ep + (double)off / (double)dt_dataset_size(r->data.train),
                          .data_wait_s = data_s,
                          .has_eval = do_eval,
                          .lr = lr,
                          .has_grad_norm = t->clip_grad_norm > 0,
                          .grad_norm = grad_norm,
                          .loss = mean_loss,
                          .accuracy = red[1] / samples,
                          .samples_per_s = samples / dt_int,
                          .step_time_s = dt_int / (double)iv->steps,
                          .comm_wait_s = red[2] / r->world / (double)iv->steps,
                          .precision = train_type_name(t->precision),
                          .loss_scale = r->sc ? (double)dt_scaler_scale(r->sc) : 1.0,
                          .skipped_steps = iv->skipped,
                          .skipped_total = r->sc ? dt_scaler_skipped(r->sc) : 0L,
                          .has_straggler = r->world > 1 && r->rank == 0,
                          .slowest_rank = sv.slowest,
                          .straggler = sv.found,
                          .slowest_busy_s = sv.busy_s,
                          .median_busy_s = sv.median_busy_s,
                          .straggler_phase = straggler_phase_name(sv.phase)};
    char eval_line[256] = "";
    dt_status s;
    if (do_eval && (s = run_eval(r, step, &rec.eval_loss, &rec.eval_accuracy, eval_line, sizeof eval_line))) {
        const int erc = eval_failed(r, step, s, save_if_eval_fails);
        if (erc) return erc;
        rec.has_eval = 0; /* the last step's, which the run finishes without */
        eval_line[0] = '\0';
    }
    /* The progress line gives way to the lines below (the next step redraws it). */
    progress_clear(&r->prog);
    if (!isfinite(mean_loss)) return diverged(r, &rec);
    r->samples_sum += samples;
    r->interval_s_sum += dt_int;
    r->intervals++;
    if (r->rank == 0) train_report_interval(r, &rec, iv->steps, eval_line);
    if (r->rank == 0 && sv.found) train_report_straggler(r, &sv);
    const double wait_mark = iv->wait_mark;
    *iv = (interval){.t_begin = clock_now_s(), .wait_mark = wait_mark};
    return EXIT_OK;
}

/* Takes the verdict of step `stepno` left pending (cmd_train.c defers them: the host queues the
 * next batch and step meanwhile), its skip counted in iv, the interval that step belongs to. */
static train_end settle_step(train_run *r, interval *iv, long stepno, int *rc)
{
    int skipped = 0;
    const dt_status s = dt_model_settle_step(r->m, &skipped);
    iv->skipped += skipped;
    if (!s) return TRAIN_END_DONE;
    progress_clear(&r->prog);
    if (s == DT_ERR_NUMERIC) {
        train_report_numeric_stop(r, stepno);
        return TRAIN_END_NUMERIC;
    }
    *rc = train_status_error(s);
    return TRAIN_END_FAILED;
}

/* The first batch of a step, taken before the ranks agree at the end of the step before it (or
 * before the first step): a batch that fails (an undecodable image, a file gone) is agreed with the
 * stop requests, so every rank stops after the same step and saves it, rather than the failing
 * rank ending the job while the others wait in the step's allreduce and the steps since the last
 * checkpoint are lost. */
typedef struct next_batch {
    const float *x;
    const int32_t *labels;
    int have;           /* x and labels hold the batch */
    dt_status err;      /* its failure on this rank (DT_OK: none) */
    status_kept errmsg; /* and its message */
} next_batch;

static void next_batch_take(train_run *r, next_batch *nb)
{
    long data_step;
    nb->err = dt_loader_next(r->ld, &data_step, &nb->x, &nb->labels);
    nb->have = nb->err == DT_OK;
    if (nb->err) status_keep(&nb->errmsg);
}

/* The ranks agreed that `failures` of them could not make the batch of step done + 1, after the
 * `done` steps were saved (`saved`) or not: each rank ends with the failure's message, its own or
 * a pointer to the rank's that had it. The exit code. */
static int batch_failed(train_run *r, long done, const next_batch *nb, int failures, int saved)
{
    progress_clear(&r->prog);
    dt_status s;
    if (nb->err)
        s = status_restore(nb->err, &nb->errmsg);
    else
        s = status_set_peer_error(DT_ERR_CORRUPT,
                                  "another rank could not make its batch of step %ld (its error says why)", done + 1);
    const int rc = train_status_error(status_mark_shared(s));
    if (r->rank == 0 && saved)
        fprintf(stderr,
                "dtrain: the batch of step %ld failed on %d rank%s; the %ld steps before it are saved in %s: fix or "
                "replace the file named (or pass --bad-samples skip), then --resume auto goes on from step %ld\n",
                done + 1, failures, cli_s(failures), done, r->t.ckpt_dir, done + 1);
    else if (r->rank == 0 && done > r->first_step)
        fprintf(stderr,
                "dtrain: the batch of step %ld failed on %d rank%s; no --checkpoint-dir: the %ld steps before it "
                "are not saved\n",
                done + 1, failures, cli_s(failures), done);
    return rc;
}

/* A stop asked for on some rank, after `done` steps: the checkpoint, and rank 0 says so. `last`:
 * `done` is the run's last step, decided once by the loop, so the report and the loop's finishing
 * the run cannot disagree. */
static int stop_now(train_run *r, long done, int last)
{
    dt_status s;
    progress_clear(&r->prog);
    if (r->t.ckpt_dir && (s = train_ckpt_save(r, done))) return save_failed(r, done, s);
    if (last) {
        r->saved_at = done;
        train_stop_report_last(r, done);
    } else {
        train_stop_report(r, done, 0);
    }
    return EXIT_OK;
}

/* A failure (s) of this rank's: the progress line cleared, the error printed. */
static train_end loop_failed(train_run *r, dt_status s, int *rc)
{
    progress_clear(&r->prog);
    *rc = train_status_error(s);
    return TRAIN_END_FAILED;
}

/* Before the first step: the progress line, --bucket-mb auto, the first batch, and the ranks'
 * agreement on it and on a stop asked for during the set-up. TRAIN_END_DONE: train. */
static train_end loop_begin(train_run *r, interval *iv, next_batch *nb, int *rc)
{
    const train_opts *t = &r->t;
    dt_status s;
    r->strag = (straggler_state){.rank = -1, .run = 0};
    *iv = (interval){.t_begin = clock_now_s()};
    r->t_start = iv->t_begin;
    const double samples_per_step = (double)r->world * t->batch * t->accum_steps;
    progress_start(&r->prog, r->rank == 0 && !t->quiet && progress_wanted(t->progress, stdout) ? stdout : NULL,
                   r->first_step, t->steps, samples_per_step, iv->t_begin);
    if ((s = train_bucket_auto_begin(r))) return loop_failed(r, s, rc);
    /* A stop asked for during the set-up (the data, the model, a resume can take minutes) ends the
     * run before it trains: there is nothing new to save, and a requeue starts where this run did. */
    *nb = (next_batch){0};
    if (r->first_step < t->steps) next_batch_take(r, nb);
    int stop_sig = 0, failures = 0;
    if ((s = train_stop_agree(r, nb->err != DT_OK, &stop_sig, &failures))) return loop_failed(r, s, rc);
    if (failures) {
        *rc = batch_failed(r, r->first_step, nb, failures, 0);
        return TRAIN_END_FAILED;
    }
    if (stop_sig) {
        progress_clear(&r->prog);
        train_stop_report(r, r->first_step, 1);
        return TRAIN_END_STOPPED;
    }
    train_stop_training_begins();
    return TRAIN_END_DONE;
}

/* What the micro-batches of one optimizer step add up to on this rank. */
typedef struct step_sums {
    double loss;
    long correct;
    dt_step_result res; /* the last micro-batch's */
} step_sums;

/* Step `step` + 1's K micro-batches (data steps step * K ..): only the last one communicates and
 * steps. The step before it is settled once this step's first batch is staged. TRAIN_END_DONE, or
 * how the run ends. */
static train_end run_micro_batches(train_run *r, interval *iv, next_batch *nb, long step, float scale, step_sums *sum,
                                   int *rc)
{
    const train_opts *t = &r->t;
    dt_status s;
    sum->loss = 0;
    sum->correct = 0;
    for (int j = 0; j < t->accum_steps; j++) {
        const float *x;
        const int32_t *labels;
        long data_step;
        if (j == 0 && nb->have)
            x = nb->x, labels = nb->labels, nb->have = 0;
        else if ((s = dt_loader_next(r->ld, &data_step, &x, &labels)))
            return loop_failed(r, s, rc);
        /* A host batch's copy to the GPU queued first, so it runs during the wait below. */
        if ((s = dt_model_stage_batch(r->m, x, labels, t->batch))) return loop_failed(r, s, rc);
        /* The last step's verdict, now that its successor's batch is made. */
        train_end e;
        if (j == 0 && (e = settle_step(r, iv, step, rc)) != TRAIN_END_DONE) return e;
        s = dt_model_train_step(r->m, r->opt, r->sc, x, labels, t->batch, scale, &sum->res);
        if (s == DT_ERR_NUMERIC) {
            progress_clear(&r->prog);
            train_report_numeric_stop(r, step + 1);
            return TRAIN_END_NUMERIC;
        }
        if (s == DT_ERR_NOMEM && !status_from_peer()) snprintf(r->oom_at, sizeof r->oom_at, "at step %ld", step + 1);
        if (s) return loop_failed(r, s, rc);
        sum->loss += sum->res.loss_sum;
        sum->correct += sum->res.correct;
        iv->comm_s += sum->res.comm_wait_s;
    }
    return TRAIN_END_DONE;
}

/* The ranks agreed that `failures` of them could not make the batch after step `done`: as a stop,
 * the steps saved, then the interval logged, for the resumed run's records. Always FAILED. */
static train_end batch_failed_after(train_run *r, interval *iv, long done, const next_batch *nb, int failures,
                                    double lr, double grad_norm, int *rc)
{
    dt_status s;
    if (r->t.ckpt_dir && (s = train_ckpt_save(r, done))) {
        *rc = save_failed(r, done, s);
        return TRAIN_END_FAILED;
    }
    if ((*rc = log_interval(r, iv, done, 0, 0, lr, grad_norm)) == EXIT_OK)
        *rc = batch_failed(r, done, nb, failures, r->t.ckpt_dir != NULL);
    return TRAIN_END_FAILED;
}

/* A stop the ranks agreed on after step `done`. A stop on a log or evaluation step saves first (an
 * evaluation may take longer than the grace before a SIGKILL), then logs the step: the resumed run
 * starts after it, so its record and held-out figures would otherwise be lost. A stop logs its
 * interval on any step, not only a log step: the resumed run starts after it, so the steps since
 * the last record would be in none (their loss and skips lost). TRAIN_END_DONE: `done` was the
 * last step and the run finishes. */
static train_end stop_after(train_run *r, interval *iv, long done, int eval_step, double lr, double grad_norm, int *rc)
{
    /* The last step's evaluation failing finishes the run without it, as without a stop. */
    const int last = done == r->t.steps;
    const double t_save = clock_now_s();
    if ((*rc = stop_now(r, done, last))) return TRAIN_END_FAILED;
    iv->t_begin += clock_now_s() - t_save; /* a save is no step's time, as an evaluation is not */
    if ((*rc = log_interval(r, iv, done, eval_step, last, lr, grad_norm))) return TRAIN_END_FAILED;
    /* A stop that came with the last step has nothing left to stop: the run finishes (the
     * parameters' check, --dump-params, exit 0) rather than exit 75 and have a requeue wait
     * in the queue for a job that would only write the dump. Saved first all the same, as
     * the evaluation may outlast the grace before a SIGKILL. */
    return last ? TRAIN_END_DONE : TRAIN_END_STOPPED;
}

/* The --checkpoint-every save after step `done`, and a stop asked for while it was written.
 * TRAIN_END_DONE: train on. */
static train_end checkpoint_after(train_run *r, interval *iv, long done, int *rc)
{
    dt_status s;
    const double t_save = clock_now_s();
    if ((s = train_ckpt_save(r, done))) {
        *rc = save_failed(r, done, s);
        return TRAIN_END_FAILED;
    }
    iv->t_begin += clock_now_s() - t_save;
    /* A stop asked for while the checkpoint was written: that checkpoint holds what the
     * stop would save, so stop now rather than run a step more and save again (twice the
     * time to stop, under a kill deadline). The ranks agree on it here, after the save. */
    int stop = 0;
    if ((s = train_stop_agree(r, 0, &stop, NULL))) return loop_failed(r, s, rc);
    if (stop) {
        progress_clear(&r->prog);
        train_stop_report(r, done, 0);
        return TRAIN_END_STOPPED;
    }
    return TRAIN_END_DONE;
}

/* Rank 0's progress line after step `done` (loss: the step's summed loss on this rank). */
static void progress_after(train_run *r, long done, double loss)
{
    const train_opts *t = &r->t;
    long ep = 0, off = 0;
    dt_dataset_position(r->data.train, done * t->accum_steps, r->world, t->batch, &ep, &off);
    progress_step(&r->prog, done, (double)ep + (double)off / (double)dt_dataset_size(r->data.train),
                  loss / ((double)t->batch * t->accum_steps), clock_now_s());
}

train_end train_loop(train_run *r, int *rc)
{
    const train_opts *t = &r->t;
    /* The gradient of the mean loss over the K x W x B samples of an optimizer step, so summing
     * over the ranks is the average: one pass over the gradients fewer than averaging after the sum. */
    const float scale = 1.0f / ((float)t->accum_steps * (float)t->batch * (float)r->world);
    double grad_norm = NAN;
    dt_status s = DT_OK;
    interval iv;
    next_batch nb;
    train_end e;
    if ((e = loop_begin(r, &iv, &nb, rc)) != TRAIN_END_DONE) return e;
    for (long step = r->first_step; step < t->steps; step++) {
        fault_maybe(&r->flt, r->rank, step + 1, r->m);
        dt_trace_step(r->ctx, step + 1); /* a no-op without --trace */
        const double lr = lr_at(&r->sched, t->optim.lr, t->min_lr, step, t->steps, t->warmup_steps);
        if ((s = dt_optimizer_set_lr(r->opt, (float)lr))) return loop_failed(r, s, rc);
        step_sums sum;
        if ((e = run_micro_batches(r, &iv, &nb, step, scale, &sum, rc)) != TRAIN_END_DONE) return e;
        iv.skipped += sum.res.skipped;
        grad_norm = sum.res.grad_norm;
        if (step == r->first_step) train_report_step_overlap(r);
        /* Choosing the cap (timing the link, rebuilding the reducer) is no step's time, as a save
         * is not: without this, the first interval's steps of a small model read 70x slower. */
        const double t_auto = clock_now_s();
        if ((s = train_bucket_auto_after_step(r, step + 1 - r->first_step))) return loop_failed(r, s, rc);
        iv.t_begin += clock_now_s() - t_auto;
        /* Stop requests are agreed by all ranks at the same step (a signal reaches ranks at
         * different times, or only some of them). */
        if (step + 1 < t->steps) next_batch_take(r, &nb);
        int stop = 0, failures = 0;
        if ((s = train_stop_agree(r, nb.err != DT_OK, &stop, &failures))) return loop_failed(r, s, rc);
        const int ckpt_step = t->ckpt_every && (step + 1) % t->ckpt_every == 0 && step + 1 < t->steps;
        /* An evaluation step is a log step too, so its record carries the held-out figures. So is
         * a checkpoint step: a run resumed from it starts a fresh interval there, so an interval
         * running across it would leave the steps before it in no record after a crash (the record
         * that held them is of a step that runs again), and the resumed run's records would differ
         * from an uninterrupted run's. */
        const int eval_step =
            r->data.eval && ((t->eval_every && (step + 1) % t->eval_every == 0) || step + 1 == t->steps);
        const int log_step = (step + 1) % t->log_every == 0 || step + 1 == t->steps || eval_step || ckpt_step;
        /* What a checkpoint saves and a log line reports counts this step's verdict. */
        if ((stop > 0 || failures || log_step) && (e = settle_step(r, &iv, step + 1, rc)) != TRAIN_END_DONE) return e;
        iv.loss += sum.loss;
        iv.correct += sum.correct;
        iv.steps++;
        if (failures) return batch_failed_after(r, &iv, step + 1, &nb, failures, lr, grad_norm, rc);
        if (stop > 0) {
            if ((e = stop_after(r, &iv, step + 1, eval_step, lr, grad_norm, rc)) != TRAIN_END_DONE) return e;
            break;
        }
        if (log_step && (*rc = log_interval(r, &iv, step + 1, eval_step, 1, lr, grad_norm))) return TRAIN_END_FAILED;
        if (ckpt_step && (e = checkpoint_after(r, &iv, step + 1, rc)) != TRAIN_END_DONE) return e;
        if (r->prog.out) progress_after(r, step + 1, sum.loss);
    }
    /* The last lines take the progress line's place: what stays on the screen is the step lines. */
    progress_clear(&r->prog);
    r->t_end = clock_now_s();
    return TRAIN_END_DONE;
}
