/*
 * scaler.c - dynamic loss scaling for fp16 training (dt_scaler, see "mixed precision: loss
 * scaling" in dtrain.h).
 *
 * fp16 gradients below 2^-24 flush to zero, so the loss is multiplied by a large scale before
 * backward and the gradients divided by it afterwards. Too large a scale overflows to inf/nan
 * instead: such a step is skipped and the scale backs off; a run of good steps lets it grow again.
 * This is torch.cuda.amp.GradScaler's rule with Megatron's hysteresis (several overflows tolerated
 * before backing off). Every rank feeds the same verdict (the gradients are reduced first), so the
 * state machine moves identically everywhere without any communication.
 *
 * A run that keeps overflowing is diverging, not unlucky: instead of skipping steps forever the
 * scaler gives up with DT_ERR_NUMERIC when an overflow arrives at the floor (min_scale) or when too
 * many of the recent updates (a ring of `window` flags) overflowed. The message carries the last few
 * scale changes (a ring of 8) so the log shows how the run got there.
 */
#include "dtrain.h"
#include "runtime/model/model_internal.h"
#include "base/status.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Scale changes quoted in the give-up message (besides the start value): 8 entries of at most
 * ~32 characters keep the whole message well inside the 2 KiB last-error buffer. */
#define SCALER_HISTORY 8

typedef struct scaler_change {
    double scale;
    long step; /* the update (1-based) that made the change */
} scaler_change;

struct dt_scaler {
    dt_scaler_config cfg;
    double scale;
    int good_steps;      /* consecutive good steps since the last overflow or growth */
    int hysteresis_left; /* overflows still tolerated before backing off; 0 = back off at each */
    long updates, skipped;
    /* The last `cfg.window` verdicts: 1 = overflow. */
    unsigned char *ring;
    int ring_pos;       /* where the next verdict goes */
    int ring_filled;    /* verdicts held, at most cfg.window */
    int ring_overflows; /* ones among them */
    /* Scale history for the give-up message. */
    double start_scale;
    long start_step; /* 0: the initial scale; else the update count a set_state restored */
    scaler_change hist[SCALER_HISTORY];
    long nchanges; /* changes ever recorded; the newest min(nchanges, SCALER_HISTORY) are in hist */
};

void dt_scaler_defaults(dt_scaler_config *c)
{
    if (!c) return;
    memset(c, 0, sizeof *c);
    c->dynamic = 1;
    c->init_scale = 65536.0;
    c->growth_factor = 2.0;
    c->backoff_factor = 0.5;
    c->growth_interval = 2000;
    c->hysteresis = 1;
    c->min_scale = 1.0;
    c->max_scale = 16777216.0;
    c->window = 100;
    c->max_overflow_fraction = 0.5;
}

/* The comparisons are written so that NaN fails them all (!(x > 0) rather than x <= 0). The scale
 * is handed out as a float, so both bounds must be representable as a normal float. */
static dt_status scaler_check_config(const dt_scaler_config *c)
{
    if (c->dynamic != 0 && c->dynamic != 1)
        return status_set_error(DT_ERR_INVALID_ARG, "loss scale dynamic %d must be 0 (static) or 1 (dynamic)",
                                c->dynamic);
    if (!(c->min_scale >= (double)FLT_MIN && c->min_scale <= (double)FLT_MAX))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "loss scale min_scale %g must be > 0 (and a normal float, in [%g, %g])", c->min_scale,
                                (double)FLT_MIN, (double)FLT_MAX);
    if (!(c->max_scale >= c->min_scale && c->max_scale <= (double)FLT_MAX))
        return status_set_error(DT_ERR_INVALID_ARG, "loss scale max_scale %g must be in [min_scale %g, %g]",
                                c->max_scale, c->min_scale, (double)FLT_MAX);
    if (!(c->init_scale >= c->min_scale && c->init_scale <= c->max_scale))
        return status_set_error(DT_ERR_INVALID_ARG, "loss scale init_scale %g must be in [min_scale %g, max_scale %g]",
                                c->init_scale, c->min_scale, c->max_scale);
    if (!(c->growth_factor > 1.0 && isfinite(c->growth_factor)))
        return status_set_error(DT_ERR_INVALID_ARG, "loss scale growth_factor %g must be > 1 (and finite)",
                                c->growth_factor);
    if (!(c->backoff_factor > 0.0 && c->backoff_factor < 1.0))
        return status_set_error(DT_ERR_INVALID_ARG, "loss scale backoff_factor %g must be in (0, 1)",
                                c->backoff_factor);
    if (c->growth_interval < 1)
        return status_set_error(DT_ERR_INVALID_ARG, "loss scale growth_interval %d must be >= 1", c->growth_interval);
    if (c->hysteresis < 1)
        return status_set_error(DT_ERR_INVALID_ARG, "loss scale hysteresis %d must be >= 1", c->hysteresis);
    if (c->window < 1) return status_set_error(DT_ERR_INVALID_ARG, "loss scale window %d must be >= 1", c->window);
    if (!(c->max_overflow_fraction > 0.0 && c->max_overflow_fraction <= 1.0))
        return status_set_error(DT_ERR_INVALID_ARG, "loss scale max_overflow_fraction %g must be in (0, 1]",
                                c->max_overflow_fraction);
    return DT_OK;
}

static void scaler_clear_window(dt_scaler *s)
{
    memset(s->ring, 0, (size_t)s->cfg.window);
    s->ring_pos = 0;
    s->ring_filled = 0;
    s->ring_overflows = 0;
}

dt_status dt_scaler_create(const dt_scaler_config *c, dt_scaler **out)
{
    if (!out) return status_null_arg("dt_scaler_create", "out", "pass a dt_scaler * to receive the scaler");
    *out = NULL;
    if (!c) return status_null_arg("dt_scaler_create", "c", "pass a dt_scaler_config filled by dt_scaler_defaults");
    dt_status st = scaler_check_config(c);
    if (st != DT_OK) return st;
    dt_scaler *s = calloc(1, sizeof *s);
    if (!s) return status_set_error(DT_ERR_NOMEM, "out of memory for the loss scaler");
    s->ring = calloc((size_t)c->window, 1);
    if (!s->ring) {
        free(s);
        return status_set_error(DT_ERR_NOMEM, "out of memory for the loss scaler's window of %d updates", c->window);
    }
    s->cfg = *c;
    s->scale = c->init_scale;
    s->hysteresis_left = c->hysteresis;
    s->start_scale = c->init_scale;
    *out = s;
    return DT_OK;
}

void dt_scaler_free(dt_scaler *s)
{
    if (!s) return;
    free(s->ring);
    free(s);
}

float dt_scaler_scale(const dt_scaler *s) { return s ? (float)s->scale : 0.0f; }

long dt_scaler_updates(const dt_scaler *s) { return s ? s->updates : 0; }

long dt_scaler_skipped(const dt_scaler *s) { return s ? s->skipped : 0; }

static void scaler_set_scale(dt_scaler *s, double v)
{
    if (v == s->scale) return; /* clamped at a bound: no change to record */
    s->scale = v;
    s->hist[s->nchanges % SCALER_HISTORY] = (scaler_change){v, s->updates};
    s->nchanges++;
}

/* "65536 (start), 32768 (step 3), 16384 (step 9)"; "..." after the start when older changes fell
 * out of the ring. */
static void scaler_format_history(const dt_scaler *s, char *buf, size_t n)
{
    size_t len = 0;
    int w;
    if (s->start_step == 0)
        w = snprintf(buf, n, "%.8g (start)", s->start_scale);
    else
        w = snprintf(buf, n, "%.8g (restored at step %ld)", s->start_scale, s->start_step);
    if (w < 0 || (size_t)w >= n) return;
    len = (size_t)w;
    long first = s->nchanges > SCALER_HISTORY ? s->nchanges - SCALER_HISTORY : 0;
    if (first > 0) {
        w = snprintf(buf + len, n - len, ", ...");
        if (w < 0 || (size_t)w >= n - len) return;
        len += (size_t)w;
    }
    for (long i = first; i < s->nchanges; i++) {
        const scaler_change *h = &s->hist[i % SCALER_HISTORY];
        w = snprintf(buf + len, n - len, ", %.8g (step %ld)", h->scale, h->step);
        if (w < 0 || (size_t)w >= n - len) return;
        len += (size_t)w;
    }
}

#define SCALER_FIX "lower --lr, use --precision bf16 or fp32, or lower --loss-scale-min"

dt_status dt_scaler_update(dt_scaler *s, int found_inf)
{
    if (!s) return status_null_arg("dt_scaler_update", "s", "pass the scaler dt_scaler_create made");
    const dt_scaler_config *c = &s->cfg;
    unsigned char flag = found_inf ? 1 : 0;

    /* Record the verdict: counters and the window ring. */
    s->updates++;
    if (flag) s->skipped++;
    s->ring_overflows += flag - s->ring[s->ring_pos];
    s->ring[s->ring_pos] = flag;
    s->ring_pos = s->ring_pos + 1 == c->window ? 0 : s->ring_pos + 1;
    if (s->ring_filled < c->window) s->ring_filled++;

    char hist[512];
    if (c->dynamic) {
        if (flag) {
            if (s->scale <= c->min_scale) { /* already at the floor: backing off cannot help */
                scaler_format_history(s, hist, sizeof hist);
                return status_set_error(DT_ERR_NUMERIC,
                                        "loss scaling gave up at step %ld: overflow with the scale %.8g already "
                                        "at min_scale (%d of the last %d updates overflowed); loss scale "
                                        "history: %s; " SCALER_FIX,
                                        s->updates, s->scale, s->ring_overflows, s->ring_filled, hist);
            }
            s->good_steps = 0;
            s->hysteresis_left--;
            if (s->hysteresis_left <= 0) {
                s->hysteresis_left = 0; /* stays spent: every further overflow backs off until growth */
                scaler_set_scale(s, fmax(s->scale * c->backoff_factor, c->min_scale));
            }
        } else if (++s->good_steps >= c->growth_interval) {
            scaler_set_scale(s, fmin(s->scale * c->growth_factor, c->max_scale));
            s->good_steps = 0;
            s->hysteresis_left = c->hysteresis;
        }
    }

    /* Give up when more than max_overflow_fraction of the window overflowed. The overflow count is
     * an integer, so compare it with floor(fraction * window); the epsilon keeps e.g. 0.7 * 90
     * (62.99999999999999 in double) from flooring to 62 and tolerating one overflow less than asked. */
    long allowed = (long)floor(c->max_overflow_fraction * (double)c->window + 1e-9);
    if (s->ring_overflows > allowed) {
        scaler_format_history(s, hist, sizeof hist);
        return status_set_error(
            DT_ERR_NUMERIC,
            "loss scaling gave up at step %ld: %d of the last %d updates overflowed (more than "
            "max_overflow_fraction %g of the window of %d), scale %.8g; loss scale history: %s; " SCALER_FIX,
            s->updates, s->ring_overflows, s->ring_filled, c->max_overflow_fraction, c->window, s->scale, hist);
    }
    return DT_OK;
}

int scaler_overflow_ends_run(const dt_scaler *s)
{
    const dt_scaler_config *c = &s->cfg;
    if (c->dynamic && s->scale <= c->min_scale) return 1;
    /* The next verdict replaces the ring's oldest (a 0 while the ring is filling). */
    const long allowed = (long)floor(c->max_overflow_fraction * (double)c->window + 1e-9);
    return s->ring_overflows + 1 - s->ring[s->ring_pos] > allowed;
}

void dt_scaler_get_state(const dt_scaler *s, dt_scaler_state *st)
{
    if (!st) return;
    memset(st, 0, sizeof *st);
    if (!s) return;
    st->scale = s->scale;
    st->good_steps = s->good_steps;
    st->hysteresis_left = s->hysteresis_left;
    st->updates = s->updates;
    st->skipped = s->skipped;
}

void scaler_restart(dt_scaler *s)
{
    s->scale = s->cfg.init_scale;
    s->good_steps = 0;
    s->hysteresis_left = s->cfg.hysteresis;
    s->updates = s->skipped = 0;
    scaler_clear_window(s);
    s->start_scale = s->cfg.init_scale;
    s->start_step = 0;
    s->nchanges = 0;
}

/* The window of recent verdicts is not part of the public state: after set_state it starts empty
 * (scaler_window_set refills it from a checkpoint), and the scale history restarts from the
 * restored scale. */
dt_status dt_scaler_set_state(dt_scaler *s, const dt_scaler_state *st)
{
    if (!s) return status_null_arg("dt_scaler_set_state", "s", "pass the scaler dt_scaler_create made");
    if (!st) return status_null_arg("dt_scaler_set_state", "st", "pass the state to restore (dt_scaler_get_state's)");
    const dt_scaler_config *c = &s->cfg;
    if (!(isfinite(st->scale) && st->scale >= c->min_scale && st->scale <= c->max_scale))
        return status_set_error(DT_ERR_CORRUPT, "loss scaler state: scale %g must be in [min_scale %g, max_scale %g]",
                                st->scale, c->min_scale, c->max_scale);
    if (st->good_steps < 0 || st->good_steps >= c->growth_interval)
        return status_set_error(DT_ERR_CORRUPT, "loss scaler state: good_steps %d must be in [0, growth_interval %d)",
                                st->good_steps, c->growth_interval);
    if (st->hysteresis_left < 0 || st->hysteresis_left > c->hysteresis)
        return status_set_error(DT_ERR_CORRUPT, "loss scaler state: hysteresis_left %d must be in [0, hysteresis %d]",
                                st->hysteresis_left, c->hysteresis);
    if (st->skipped < 0)
        return status_set_error(DT_ERR_CORRUPT, "loss scaler state: skipped %ld must be >= 0", st->skipped);
    if (st->updates < st->skipped)
        return status_set_error(DT_ERR_CORRUPT, "loss scaler state: updates %ld must be >= skipped %ld", st->updates,
                                st->skipped);
    s->scale = st->scale;
    s->good_steps = st->good_steps;
    s->hysteresis_left = st->hysteresis_left;
    s->updates = st->updates;
    s->skipped = st->skipped;
    scaler_clear_window(s);
    s->start_scale = st->scale;
    s->start_step = st->updates > 0 ? st->updates : 0;
    s->nchanges = 0;
    return DT_OK;
}

int scaler_window_len(const dt_scaler *s) { return s ? s->ring_filled : 0; }

int scaler_window_get(const dt_scaler *s, unsigned char *out, int cap)
{
    if (!s || !out || cap <= 0) return 0;
    const int n = s->ring_filled < cap ? s->ring_filled : cap;
    /* The newest verdict is just before ring_pos; the oldest kept n - 1 places before it. */
    for (int i = 0; i < n; i++) {
        int at = s->ring_pos - n + i;
        if (at < 0) at += s->cfg.window;
        out[i] = s->ring[at];
    }
    return n;
}

void scaler_window_set(dt_scaler *s, const unsigned char *flags, int n)
{
    if (!s) return;
    scaler_clear_window(s);
    if (!flags || n <= 0) return;
    /* A shorter window than the one saved (another --loss-scale-window) keeps the newest. */
    const int from = n > s->cfg.window ? n - s->cfg.window : 0;
    for (int i = from; i < n; i++) {
        const unsigned char flag = flags[i] ? 1 : 0;
        s->ring[s->ring_pos] = flag;
        s->ring_overflows += flag;
        s->ring_pos = s->ring_pos + 1 == s->cfg.window ? 0 : s->ring_pos + 1;
        s->ring_filled++;
    }
}
