/*
 * lr_schedule.c - parsing --lr-schedule specs and the rate at a step (formulas in lr_schedule.h).
 *
 * Parsing is strict: every part of the spec must be what its place asks for, and a message names
 * the part that is not and shows the form expected, so a typo fails at start rather than training
 * a whole run on a rate nobody asked for.
 */
#include "launch/train/lr_schedule.h"
#include "base/parse.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LR_PI 3.14159265358979323846
#define STEP_FORM "step:M1,M2,...:GAMMA (milestones in steps, or in epochs with an e: step:30e,60e:0.1)"

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* One milestone token (tok, len bytes): digits, optionally followed by 'e'. */
static int parse_milestone(const char *tok, size_t len, long spe, long *out, long *epoch, char *err, size_t errlen)
{
    char buf[32];
    if (len == 0) return fail(err, errlen, "--lr-schedule: an empty milestone; the form is " STEP_FORM);
    if (len >= sizeof buf) return fail(err, errlen, "--lr-schedule: milestone '%.*s...' is too long", 16, tok);
    memcpy(buf, tok, len);
    buf[len] = 0;
    const int epochs = buf[len - 1] == 'e';
    const size_t nd = len - (size_t)epochs;
    int digits = nd > 0;
    for (size_t i = 0; i < nd; i++) digits &= buf[i] >= '0' && buf[i] <= '9';
    if (!digits)
        return fail(err, errlen,
                    "--lr-schedule: milestone '%s' is not a whole number of steps or epochs "
                    "(30 or 30e)",
                    buf);
    errno = 0;
    const unsigned long long v = strtoull(buf, NULL, 10);
    if (errno || v > (unsigned long long)LONG_MAX)
        return fail(err, errlen, "--lr-schedule: milestone '%s' is too large", buf);
    if (v == 0)
        return fail(err, errlen,
                    "--lr-schedule: milestone '%s' is at the start of the run; milestones count from "
                    "1 (the rate of step 0 is --lr)",
                    buf);
    *epoch = 0;
    if (!epochs) {
        *out = (long)v;
        return 0;
    }
    if (spe <= 0)
        return fail(err, errlen,
                    "--lr-schedule: milestone '%s' is in epochs, but the epoch length in steps is not "
                    "known here (a dataset of fixed size gives it); give the milestone in steps",
                    buf);
    if (v > (unsigned long long)(LONG_MAX / spe))
        return fail(err, errlen, "--lr-schedule: milestone '%s' (x %ld steps per epoch) is too large", buf, spe);
    *out = (long)v * spe;
    *epoch = (long)v;
    return 0;
}

static int parse_step(const char *args, long spe, lr_schedule *out, char *err, size_t errlen)
{
    const char *colon = strrchr(args, ':');
    if (!colon || colon == args)
        return fail(err, errlen, "--lr-schedule: 'step:%s' needs milestones and a factor: " STEP_FORM, args);
    const char *g = colon + 1;
    /* parse.h's grammar, as every other number of a flag: no blanks, no hex ("0x1p-1"). */
    double gamma = NAN;
    if (parse_double("--lr-schedule factor", g, -HUGE_VAL, HUGE_VAL, &gamma))
        return fail(err, errlen, "--lr-schedule: factor '%s' is not a number; the form is " STEP_FORM, g);
    if (!(gamma > 0 && gamma <= 1))
        return fail(err, errlen,
                    "--lr-schedule: factor %g must be in (0, 1] (the rate is multiplied by it at each "
                    "milestone, e.g. 0.1)",
                    gamma);
    out->gamma = gamma;
    out->n = 0;
    const char *p = args;
    while (p <= colon) {
        const char *q = p;
        while (q < colon && *q != ',') q++;
        if (memchr(p, ':', (size_t)(q - p)))
            return fail(err, errlen, "--lr-schedule: 'step:%s' has more than two parts; the form is " STEP_FORM, args);
        if (out->n == LR_MAX_MILESTONES)
            return fail(err, errlen, "--lr-schedule: more than %d milestones", LR_MAX_MILESTONES);
        long v = 0, e = 0;
        if (parse_milestone(p, (size_t)(q - p), spe, &v, &e, err, errlen)) return -1;
        if (out->n && v <= out->milestone[out->n - 1])
            return fail(err, errlen,
                        "--lr-schedule: milestone '%.*s' (step %ld) is not after the one before it "
                        "(step %ld); milestones must increase",
                        (int)(q - p), p, v, out->milestone[out->n - 1]);
        out->epoch[out->n] = e;
        out->milestone[out->n++] = v;
        p = q + 1;
    }
    return 0;
}

int lr_schedule_parse(const char *spec, long steps_per_epoch, lr_schedule *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->gamma = 1.0;
    if (!spec || !*spec) return fail(err, errlen, "--lr-schedule: empty; use constant, cosine, linear or " STEP_FORM);
    static const struct {
        const char *name;
        lr_kind kind;
    } plain[] = {{"constant", LR_CONSTANT}, {"cosine", LR_COSINE}, {"linear", LR_LINEAR}};
    for (size_t i = 0; i < sizeof plain / sizeof *plain; i++) {
        const size_t n = strlen(plain[i].name);
        if (strncmp(spec, plain[i].name, n)) continue;
        if (spec[n])
            return fail(err, errlen,
                        "--lr-schedule: '%s' takes no arguments ('%s' after it); set the floor with "
                        "--min-lr and the warmup with --warmup-steps",
                        plain[i].name, spec + n);
        out->kind = plain[i].kind;
        return 0;
    }
    if (!strcmp(spec, "step"))
        return fail(err, errlen, "--lr-schedule: 'step' needs milestones and a factor: " STEP_FORM);
    if (!strncmp(spec, "step:", 5)) {
        out->kind = LR_STEP;
        return parse_step(spec + 5, steps_per_epoch, out, err, errlen);
    }
    return fail(err, errlen, "--lr-schedule: unknown schedule '%s'; use constant, cosine, linear or " STEP_FORM, spec);
}

int lr_schedule_check(const lr_schedule *s, double base_lr, double min_lr, long warmup, long total_steps, char *err,
                      size_t errlen)
{
    if (!(base_lr > 0) || !isfinite(base_lr)) return fail(err, errlen, "--lr %g must be a positive number", base_lr);
    if (!(min_lr >= 0) || !(min_lr <= base_lr))
        return fail(err, errlen, "--min-lr %g must be from 0 to --lr (%g)", min_lr, base_lr);
    if (total_steps < 1) return fail(err, errlen, "the run has %ld optimizer steps; it needs at least 1", total_steps);
    if (warmup < 0 || warmup >= total_steps)
        return fail(err, errlen,
                    "--warmup-steps %ld must be from 0 to %ld (fewer than the run's %ld optimizer steps, "
                    "so the %s schedule has steps of its own)",
                    warmup, total_steps - 1, total_steps, lr_schedule_name(s));
    return 0;
}

void lr_schedule_place(lr_schedule *s, long from, double at, long total)
{
    s->place_from = from;
    s->place_at = at;
    s->place_total = total;
}

long lr_schedule_total(const lr_schedule *s, long total_steps)
{
    return s->place_total > 0 ? s->place_total : total_steps;
}

double lr_at(const lr_schedule *s, double base_lr, double min_lr, long step, long total_steps, long warmup)
{
    if (step < 0) step = 0;
    if (step >= total_steps) step = total_steps - 1;
    /* x: the schedule's step, of n. Unplaced, the run's step exactly (a double holds it exactly, so
     * the rates are the bits they were with integer steps). */
    double x = (double)step, n = (double)total_steps;
    if (s->place_total > 0 && total_steps > s->place_from) {
        n = (double)s->place_total;
        x = s->place_at + (double)(step - s->place_from) * (n - s->place_at) / (double)(total_steps - s->place_from);
        if (x < 0) x = 0;
    }
    /* A placed step may fall inside warmup's last step: the factor stops at 1 there. */
    const double warm = warmup > 0 && x < (double)warmup ? fmin((x + 1.0) / (double)warmup, 1.0) : 1.0;
    if (s->kind == LR_STEP) {
        int k = 0;
        while (k < s->n && s->milestone[k] <= step) k++;
        const double lr = base_lr * pow(s->gamma, k);
        return (lr > min_lr ? lr : min_lr) * warm;
    }
    if (x < (double)warmup) return base_lr * warm;
    const double t = x - (double)warmup, T = n - (double)warmup;
    switch (s->kind) {
        case LR_COSINE: return min_lr + (base_lr - min_lr) * (1.0 + cos(LR_PI * t / T)) / 2.0;
        case LR_LINEAR: return base_lr + (min_lr - base_lr) * t / T;
        default: return base_lr;
    }
}

const char *lr_schedule_name(const lr_schedule *s)
{
    static const char *names[] = {"constant", "cosine", "linear", "step"};
    return (unsigned)s->kind < 4 ? names[s->kind] : "?";
}
