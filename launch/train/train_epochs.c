/*
 * train_epochs.c - `dtrain train --epochs N` in optimizer steps, and the learning-rate schedule's
 * epoch milestones: first from the data's steps per epoch (to check the flags before anything
 * runs), then placed exactly from the data position (train_epochs_place): the run ends where epoch
 * N starts, and a milestone Me where epoch M starts. After a resume at another rank count, batch
 * or --accum-steps the checkpoint's step counts the saving run's steps, so only the position says
 * how many steps are left, and how far the cosine or linear schedule (and the warmup) has gone:
 * the schedule is placed at the position, in steps of this run's global batch.
 */
#include "launch/train/train_run.h"
#include "launch/cli.h"
#include "base/status.h"

#include <stdio.h>

/* What --epochs and an epoch milestone cannot count in: an optimizer step longer than an epoch. */
static int no_whole_step(const train_run *r, const char *what)
{
    const train_opts *t = &r->t;
    cli_error("%s: an epoch of %zu samples has no whole optimizer step of %d rank%s x %d x --accum-steps %d: use "
              "a smaller --batch or --accum-steps",
              what, dt_dataset_size(r->data.train), r->world, cli_s(r->world), t->batch, t->accum_steps);
    return EXIT_USAGE;
}

/* --epochs into steps, and the learning-rate schedule, once the data says the steps per epoch. */
int train_steps_and_schedule(train_run *r)
{
    train_opts *t = &r->t;
    /* Optimizer steps per epoch: each takes --accum-steps batches. */
    const long batches = dt_dataset_steps_per_epoch(r->data.train, r->world, t->batch);
    const long steps_per_epoch = batches / t->accum_steps;
    if (t->epochs) {
        /* Batches run on across an epoch's end, so a step may take the last of one epoch and the first
         * of the next: the run ends after the step under way where epoch N starts (train_epochs_place),
         * ceil(N x batches / K) steps from step 0, which the warmup and the messages must count, not
         * N x floor(batches / K). */
        const long steps = (t->epochs * batches + t->accum_steps - 1) / t->accum_steps;
        if (t->steps_set) {
            cli_error("give --epochs or --steps, not both (--epochs %ld is %ld steps here)", t->epochs, steps);
            return EXIT_USAGE;
        }
        if (steps_per_epoch < 1) return no_whole_step(r, "--epochs");
        t->steps = steps;
    }
    char why[512];
    const char *spec = t->lr_schedule ? t->lr_schedule : "constant";
    /* A known epoch shorter than a step: an epoch milestone is refused for that, not for an epoch
     * length the data cannot say (the parser's reading of 0 steps per epoch). */
    if (batches > 0 && steps_per_epoch < 1 && !lr_schedule_parse(spec, 1, &r->sched, why, sizeof why))
        for (int i = 0; i < r->sched.n; i++)
            if (r->sched.epoch[i]) return no_whole_step(r, "--lr-schedule's epoch milestones");
    if (lr_schedule_parse(spec, steps_per_epoch, &r->sched, why, sizeof why) ||
        lr_schedule_check(&r->sched, t->optim.lr, t->min_lr, t->warmup_steps, t->steps, why, sizeof why)) {
        cli_error("--lr-schedule %s: %s", spec, why);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

/* The epoch of optimizer step s (its first batch: data step s x accum), or -1 when the data
 * cannot say (a step before the dataset's anchor). */
static long epoch_at(const train_run *r, long s)
{
    long e = -1, off = 0;
    if (dt_dataset_position(r->data.train, s * r->t.accum_steps, r->world, r->t.batch, &e, &off)) {
        status_clear_error();
        return -1;
    }
    return e;
}

/* Places the schedule of an --epochs run resumed at step `from`: the data position in steps of
 * this run's global batch, the steps a run of it from step 0 would take to epoch N, so
 * progress is the share of the data taken, where the checkpointed run left it. 1 when the
 * placement is not the run's own steps (a resume at another global batch). */
static int place_schedule(train_run *r, long from)
{
    const train_opts *t = &r->t;
    long e = 0, off = 0;
    if (dt_dataset_position(r->data.train, from * t->accum_steps, r->world, t->batch, &e, &off)) {
        status_clear_error();
        return 0;
    }
    /* Data steps (batches of world x batch) per epoch; an optimizer step takes accum of them, and
     * from step 0 step s starts at data step s x accum, so the position is that many steps. */
    const long per = dt_dataset_steps_per_epoch(r->data.train, r->world, t->batch);
    const double at = ((double)e * (double)per + (double)off / ((double)r->world * t->batch)) / t->accum_steps;
    const long total = (t->epochs * per + t->accum_steps - 1) / t->accum_steps;
    if (at == (double)from && total == t->steps) return 0; /* the same steps: the rates stay the same bits */
    lr_schedule_place(&r->sched, from, at, total);
    return 1;
}

/* The first optimizer step from `from` on whose batches begin in epoch `epoch` or later. */
static long start_of_epoch(const train_run *r, long from, long epoch)
{
    long lo = from, hi = from + 1;
    for (long e = epoch_at(r, hi); e >= 0 && e < epoch && hi < (1L << 40); e = epoch_at(r, hi))
        hi = from + 2 * (hi - from);
    while (lo < hi) { /* epoch_at(lo) < epoch <= epoch_at(hi) */
        const long mid = lo + (hi - lo) / 2;
        if (epoch_at(r, mid) >= epoch)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

int train_epochs_place(train_run *r)
{
    train_opts *t = &r->t;
    const long from = r->first_step, now = epoch_at(r, from);
    if (now < 0) return EXIT_OK; /* no position to go by: the steps stay as counted */
    int moved = 0, placed = 0;
    if (t->epochs) {
        const long end = now >= t->epochs ? from : start_of_epoch(r, from, t->epochs);
        moved = end != t->steps;
        t->steps = end;
        placed = from && end > from && place_schedule(r, from);
    }
    /* Milestones in epochs: where the epoch starts from here on; one already begun counts as
     * passed (any step up to `from`, kept increasing). */
    lr_schedule *sc = &r->sched;
    for (int k = 0; sc->kind == LR_STEP && k < sc->n; k++) {
        if (!sc->epoch[k]) continue;
        const long at =
            sc->epoch[k] <= now ? (k ? sc->milestone[k - 1] + 1 : 1) : start_of_epoch(r, from, sc->epoch[k]);
        moved |= at != sc->milestone[k];
        sc->milestone[k] = at;
    }
    if (!moved && !placed) return EXIT_OK;
    /* Epoch milestones moved past ones given in steps (a resume at fewer ranks stretches the
     * epochs): lr_at counts milestones in order, so they must still increase. */
    for (int k = 1; sc->kind == LR_STEP && k < sc->n; k++)
        if (sc->milestone[k] <= sc->milestone[k - 1]) {
            cli_error("--lr-schedule: at this rank count and batch the milestone at step %ld is not after the one "
                      "at step %ld: give the milestones all in epochs (30e) or all in steps",
                      sc->milestone[k], sc->milestone[k - 1]);
            return EXIT_USAGE;
        }
    /* --warmup-steps counts the schedule's steps: against its total, not the run's mixed count. */
    char why[512];
    if (lr_schedule_check(sc, t->optim.lr, t->min_lr, t->warmup_steps, lr_schedule_total(sc, t->steps), why,
                          sizeof why)) {
        cli_error("--lr-schedule after resuming at step %ld: %s", from, why);
        return EXIT_USAGE;
    }
    if (r->rank == 0 && !t->quiet && from && t->epochs) {
        printf("epochs: --epochs %ld ends at step %ld here (%ld steps from the checkpoint's position in epoch %ld)\n",
               t->epochs, t->steps, t->steps - from, now);
        /* Said where it changes a rate: a constant schedule with no warmup has none to move. */
        if (placed && (sc->kind == LR_COSINE || sc->kind == LR_LINEAR || t->warmup_steps))
            printf("lr schedule: the checkpoint's data position is its step %.6g of %ld at this global batch of %ld "
                   "(its rate goes on from there)\n",
                   sc->place_at, sc->place_total, (long)r->world * t->batch * t->accum_steps);
    }
    return EXIT_OK;
}
