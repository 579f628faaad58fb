/*
 * straggler.c - the straggler verdict of a log interval and its line (straggler.h): pure
 * functions, so the unit test feeds them made-up rows.
 */
#include "launch/train/straggler.h"
#include "base/median.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

const char *straggler_phase_name(straggler_phase p)
{
    return p == PHASE_COMPUTE ? "compute" : p == PHASE_DATA ? "data wait" : "communication";
}

static double clean(float x) { return isfinite(x) && x > 0 ? (double)x : 0.0; }

/* One rank's seconds per step in phase p: compute is what the step spent outside the two waits. */
static double phase_s(const float *row, straggler_phase p)
{
    const double step = clean(row[STRAGGLER_STEP]), data = clean(row[STRAGGLER_DATA]);
    const double comm = clean(row[STRAGGLER_COMM]);
    if (p == PHASE_DATA) return data;
    if (p == PHASE_COMM) return comm;
    const double c = step - data - comm;
    return c > 0 ? c : 0;
}

static double busy_s(const float *row) { return phase_s(row, PHASE_COMPUTE) + phase_s(row, PHASE_DATA); }

/* The median of the world values f(rank) (the mean of the middle two for an even count). The
 * scratch array is on the stack for small worlds, else allocated; 0 when that fails. */
static double median_of(const float *rows, int world, int use_busy, straggler_phase p)
{
    double small[64], *v = world <= 64 ? small : malloc((size_t)world * sizeof *v);
    if (!v) return 0;
    for (int k = 0; k < world; k++) {
        const float *row = rows + (size_t)k * STRAGGLER_NCOLS;
        v[k] = use_busy ? busy_s(row) : phase_s(row, p);
    }
    const double m = median_sort(v, (size_t)world);
    if (v != small) free(v);
    return m;
}

void straggler_assess(const float *rows, int world, double threshold, straggler_state *st, straggler_verdict *v)
{
    *v = (straggler_verdict){.slowest = 0};
    for (int k = 1; k < world; k++)
        if (busy_s(rows + (size_t)k * STRAGGLER_NCOLS) > busy_s(rows + (size_t)v->slowest * STRAGGLER_NCOLS))
            v->slowest = k;
    const float *row = rows + (size_t)v->slowest * STRAGGLER_NCOLS;
    v->busy_s = busy_s(row);
    v->median_busy_s = median_of(rows, world, 1, PHASE_COMPUTE);
    v->ratio = v->median_busy_s > 0 ? v->busy_s / v->median_busy_s : 0;
    v->found = world > 1 && v->median_busy_s > 0 && v->ratio > threshold;
    /* The phase whose excess over its median is the largest explains most of the gap. */
    double best = -INFINITY;
    for (int p = 0; p < PHASE_N; p++) {
        const double mine = phase_s(row, (straggler_phase)p), med = median_of(rows, world, 0, (straggler_phase)p);
        if (mine - med > best) {
            best = mine - med;
            v->phase = (straggler_phase)p;
            v->phase_s = mine;
            v->phase_median_s = med;
        }
    }
    if (!v->found) {
        *st = (straggler_state){.rank = -1, .run = 0};
        return;
    }
    st->run = st->rank == v->slowest ? st->run + 1 : 1;
    st->rank = v->slowest;
    v->run = st->run;
    v->persistent = st->run == STRAGGLER_PERSIST;
}

void straggler_line(const straggler_verdict *v, const char *host, char *buf, size_t n)
{
    char where[80] = "";
    if (host && *host) snprintf(where, sizeof where, " (%.64s)", host);
    snprintf(buf, n, "straggler: rank %d%s busy %.2f ms a step vs median %.2f ms (%.2fx): %s %.2f ms vs %.2f ms",
             v->slowest, where, 1e3 * v->busy_s, 1e3 * v->median_busy_s, v->ratio, straggler_phase_name(v->phase),
             1e3 * v->phase_s, 1e3 * v->phase_median_s);
}
