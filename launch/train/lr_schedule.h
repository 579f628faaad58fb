/*
 * lr_schedule.h - learning-rate schedules of `dtrain train --lr-schedule`: pure functions from the
 * spec and the step to the rate, which the train loop hands to dt_optimizer_set_lr before each
 * optimizer step. The rate depends on the step and the schedule's placement alone, and the
 * placement on the data position alone (train_epochs.c), so a resumed run continues the schedule
 * without saving anything.
 *
 * Steps count optimizer steps from 0 (the rate used by step s); total = the run's optimizer steps.
 * The formulas below read s, total and W as the schedule's steps: the run's, unless the schedule
 * is placed (an --epochs run resumed at another global batch, whose checkpoint's step counts steps
 * of another size): then s is the run's data position in steps of its global batch and total the
 * steps of that batch to the last epoch, so the cosine and linear progress t / T is the share of
 * the data taken and goes on where the saving run left it. W stays --warmup-steps steps of the
 * present batch: the warmup keeps its data, and the decay its progress, when W is scaled with the
 * global batch (half the batch, twice the steps); unscaled, the decay after it shifts by the
 * warmup's change in data. An --steps run is never placed: its rate follows the step count, so a
 * resume at another batch goes on from the checkpoint's step and ends at step --steps.
 * Milestones are never mapped: they count the run's steps (epoch milestones are placed as such).
 * With W warmup steps (0 <= W < total):
 *   warmup, s < W:  lr = base * (s + 1) / W  (linear from base / W, reaching base at step W - 1:
 *                   PyTorch's LinearLR with start_factor 1 / W over W - 1 steps; no step at lr 0)
 *   after it, t = s - W over T = total - W steps:
 *   constant        lr = base
 *   cosine          lr = min + (base - min) * (1 + cos(pi * t / T)) / 2   (CosineAnnealingLR, T_max T)
 *   linear          lr = base + (min - base) * t / T    (LinearLR, total_iters T: min is reached after the
 *                   last step, so a decay to --min-lr 0 never steps at rate 0, which the optimizer refuses)
 *   step:M..:G      lr = max(min, base * G^k), k = milestones <= s        (MultiStepLR; the milestones
 *                   count from step 0, warmup included, and during warmup its factor multiplies too)
 * A milestone is a whole number of steps (30) or epochs (30e: epoch 30 starts at step 30 * steps
 * per epoch); milestones increase strictly; 0 < G <= 1.
 */
#ifndef DT_LAUNCH_LR_SCHEDULE_H
#define DT_LAUNCH_LR_SCHEDULE_H

#include <stddef.h>

#define LR_MAX_MILESTONES 64

typedef enum lr_kind { LR_CONSTANT = 0, LR_COSINE, LR_LINEAR, LR_STEP } lr_kind;

typedef struct lr_schedule {
    lr_kind kind;
    int n;                             /* milestones (LR_STEP) */
    long milestone[LR_MAX_MILESTONES]; /* in optimizer steps, strictly increasing, >= 1 */
    long epoch[LR_MAX_MILESTONES];     /* the epoch a milestone was given in (30e), 0: given in steps */
    double gamma;                      /* LR_STEP: factor at each milestone, (0, 1] */
    /* The placement (lr_schedule_place; place_total 0: none, the schedule's steps are the run's):
     * the run's step place_from is the schedule's step place_at, the run's end its place_total,
     * and the steps between are spread evenly over the schedule's. Milestones stay in run steps
     * (train_epochs.c places those in epochs itself). */
    long place_from, place_total;
    double place_at;
} lr_schedule;

/* Parses spec ("constant", "cosine", "linear", "step:M1,M2,...:GAMMA"); steps_per_epoch converts
 * milestones given in epochs (0 when unknown: an epoch milestone is then an error). 0 on success,
 * else -1 with a message in err (errlen bytes) naming the bad part and the form expected. */
int lr_schedule_parse(const char *spec, long steps_per_epoch, lr_schedule *out, char *err, size_t errlen);

/* Checks the figures a schedule is used with: base_lr > 0, 0 <= min_lr <= base_lr, 0 <= warmup <
 * total_steps. 0 when sound, else -1 with the message in err. */
int lr_schedule_check(const lr_schedule *s, double base_lr, double min_lr, long warmup, long total_steps, char *err,
                      size_t errlen);

/* Places the schedule for a run resumed at step `from` whose data position is the schedule's step
 * `at` (a fraction when the position falls inside a step), of `total` schedule steps in all
 * (what a run started at the present global batch would take). */
void lr_schedule_place(lr_schedule *s, long from, double at, long total);

/* The schedule's steps in all for a run of total_steps: place_total when placed, else total_steps.
 * --warmup-steps counts these steps. */
long lr_schedule_total(const lr_schedule *s, long total_steps);

/* The rate of optimizer step `step` of a run of total_steps (0-based; steps past the end keep the
 * last step's rate). warmup: in the schedule's steps. */
double lr_at(const lr_schedule *s, double base_lr, double min_lr, long step, long total_steps, long warmup);

/* The spec's canonical name ("cosine", "step"), for step lines and metrics. */
const char *lr_schedule_name(const lr_schedule *s);

#endif
