/*
 * model_source.c - the models `dtrain model-perf` predicts, turned into pm_model: a `bench step
 * --profile` output (its per-layer backward times over the parameter layout of the model it
 * names, from the model grammar) or a uniform synthetic model for published comparisons
 * (NAME:PARAMS_M:LAYERS:COMPUTE_MS, a third of the compute forward, two thirds backward).
 */
#include "launch/perfmodel/model_source.h"
#include "launch/perfmodel/perfmodel_input.h"
#include "runtime/model/model.h"
#include "base/status.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static dt_status read_file(const char *path, char **text)
{
    FILE *f = fopen(path, "rb");
    if (!f) return status_set_error(DT_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (size_t r; buf && (r = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += r;
        if (n + 1 == cap) {
            char *g = cap < (64u << 20) ? realloc(buf, cap *= 2) : NULL;
            if (!g) free(buf);
            buf = g;
        }
    }
    fclose(f);
    if (!buf) return status_set_error(DT_ERR_NOMEM, "'%s' is too large to read (64 MiB at most)", path);
    buf[n] = 0;
    *text = buf;
    return DT_OK;
}

/* Scales every compute time of m so forward + backward + after is total_s. */
static void scale_compute(mp_model *m, double total_s)
{
    double now = m->forward_s + m->after_s;
    for (int i = 0; i < m->nlayers; i++) now += m->layers[i].bwd_s;
    const double k = now > 0 ? total_s / now : 0;
    m->forward_s *= k, m->after_s *= k;
    for (int i = 0; i < m->nlayers; i++) m->layers[i].bwd_s *= k;
}

/* "PATH" or "PATH:MS": the compute rescaled to MS a step (a colon followed by a number only). */
static void split_ms(const char *arg, char *path, size_t n, double *ms)
{
    *ms = 0;
    snprintf(path, n, "%s", arg);
    char *c = strrchr(path, ':'), *end;
    if (!c) return;
    const double v = strtod(c + 1, &end);
    if (end != c + 1 && !*end && v > 0) *ms = v, *c = 0;
}

static dt_status from_profile(const char *arg, const char *input, mp_model *m)
{
    char path[1024];
    double ms;
    split_ms(arg, path, sizeof path, &ms);
    char *text;
    dt_status s = read_file(path, &text);
    if (s) return s;
    pm_profile *p = calloc(1, sizeof *p);
    if (!p) s = status_set_error(DT_ERR_NOMEM, "out of memory reading '%s'", path);
    if (!s) s = pm_read_step_profile(text, p);
    free(text);
    if (s) {
        free(p);
        return status_set_error(s, "%s: %s", path, dt_last_error());
    }
    const char *in = input ? input : model_preset_input(p->model);
    if (!in) {
        s = status_set_error(DT_ERR_INVALID_ARG, "%s: model '%s' is not a preset: give its input shape with --input",
                             path, p->model);
        free(p);
        return s;
    }
    model_spec spec;
    s = model_spec_parse(p->model, in, &spec);
    if (s) {
        s = status_set_error(s, "%s: model '%s' with input '%s': %s", path, p->model, in, dt_last_error());
        free(p);
        return s;
    }
    if (p->nlayers > spec.n || spec.n > PM_MAX_LAYERS) {
        s = status_set_error(DT_ERR_INVALID_ARG,
                             "%s: the profile lists layer %d but model '%s' has %d layers: is --input right?", path,
                             p->nlayers - 1, p->model, spec.n);
    } else {
        snprintf(m->name, sizeof m->name, "%s", p->model);
        m->nlayers = spec.n;
        m->count = spec.num_params;
        double sum = 0;
        for (int i = 0; i < spec.n; i++) sum += p->bwd_ms[i];
        /* The phase is what backward took; the layers' own times miss the gaps between them, so
         * they are scaled to it (uniformly when the profile lists none). */
        for (int i = 0; i < spec.n; i++) {
            const layer *l = &spec.layers[i];
            const double share = sum > 0 ? p->bwd_ms[i] / sum : 1.0 / spec.n;
            m->layers[i] = (pm_layer){share * p->backward_ms * 1e-3, l->w_off, l->w_n + l->b_n};
        }
        m->forward_s = (p->input_ms + p->forward_ms + p->loss_ms) * 1e-3;
        m->after_s = (p->check_ms + p->optimizer_ms) * 1e-3;
        m->measured_ms = p->step_ms;
        m->measured_ranks = p->ranks;
        if (ms > 0) scale_compute(m, ms * 1e-3);
    }
    model_spec_free(&spec);
    free(p);
    return s;
}

static dt_status from_synthetic(const char *arg, mp_model *m)
{
    char name[64];
    double params_m, ms;
    int nl, used = 0;
    if (sscanf(arg, "%63[^:]:%lf:%d:%lf%n", name, &params_m, &nl, &ms, &used) != 4 || arg[used])
        return status_set_error(DT_ERR_INVALID_ARG,
                                "--synthetic '%s' is not NAME:PARAMS_M:LAYERS:COMPUTE_MS (resnet101:44.5:101:470)",
                                arg);
    if (!(params_m > 0 && params_m < 1e6) || nl < 1 || nl > PM_MAX_LAYERS || !(ms > 0))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "--synthetic '%s': parameters (millions) must be in (0, 1e6), layers in 1..%d, "
                                "compute ms > 0",
                                arg, PM_MAX_LAYERS);
    snprintf(m->name, sizeof m->name, "%s", name);
    m->nlayers = nl;
    m->count = (size_t)(params_m * 1e6);
    for (int i = 0; i < nl; i++) {
        const size_t lo = m->count * (size_t)i / (size_t)nl, hi = m->count * (size_t)(i + 1) / (size_t)nl;
        m->layers[i] = (pm_layer){ms * 1e-3 * 2.0 / 3.0 / nl, lo, hi - lo};
    }
    m->forward_s = ms * 1e-3 / 3.0;
    m->after_s = 0;
    m->measured_ms = 0;
    m->measured_ranks = 0;
    return DT_OK;
}

dt_status mp_model_load(const char *arg, int synthetic, const char *input, mp_model *m)
{
    memset(m, 0, sizeof *m);
    return synthetic ? from_synthetic(arg, m) : from_profile(arg, input, m);
}

pm_model mp_model_view(const mp_model *m, size_t wire_bytes)
{
    return (pm_model){m->layers, m->nlayers, m->count, 4, wire_bytes, m->forward_s, m->after_s};
}

dt_status mp_read_allreduce(const char *path, pm_link *link, int *ranks)
{
    char *text;
    dt_status s = read_file(path, &text);
    if (s) return s;
    pm_allreduce_rows *rows = calloc(1, sizeof *rows);
    if (!rows) s = status_set_error(DT_ERR_NOMEM, "out of memory reading '%s'", path);
    if (!s) s = pm_read_allreduce(text, rows);
    if (!s) s = pm_fit_ring(rows->ranks, rows->bytes, rows->secs, rows->n, link);
    if (!s) *ranks = rows->ranks;
    free(text);
    free(rows);
    return s ? status_set_error(s, "%s: %s", path, dt_last_error()) : DT_OK;
}
