/*
 * model_source.c - the models `dtrain model-perf` predicts, turned into pm_model: a `bench step
 * --profile` output (its per-layer backward times over the parameter layout of the model it
 * names, from the model grammar) or a uniform synthetic model for published comparisons
 * (NAME:PARAMS_M:LAYERS:COMPUTE_MS, a third of the compute forward, two thirds backward).
 */
#include "launch/perfmodel/model_source.h"
#include "launch/perfmodel/perfmodel_input.h"
#include "runtime/model/model.h"
#include "base/io_error.h"
#include "base/parse.h"
#include "base/status.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* flag names the file in the message ("--profile"), as the user gave it. */
static dt_status read_file(const char *flag, const char *path, char **text)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        const int err = errno;
        char fix[IO_FIX_LEN];
        return status_set_error(DT_ERR_IO, "cannot open %s '%s': %s: %s", flag, path, strerror(err),
                                io_error_fix(err, flag, NULL, fix, sizeof fix));
    }
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
    /* A read that failed (a directory: EISDIR) is not an empty file with no header. */
    const int err = ferror(f) ? errno : 0;
    fclose(f);
    if (err && buf) {
        free(buf);
        char fix[IO_FIX_LEN];
        /* A directory given for the file is bad usage (exit 2), as troubleshooting.md says. */
        return status_set_error(
            err == EISDIR ? DT_ERR_INVALID_ARG : DT_ERR_IO, "cannot read %s '%s': %s: %s", flag, path, strerror(err),
            err == EISDIR ? "give the file, not its directory" : io_error_fix(err, flag, NULL, fix, sizeof fix));
    }
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
    m->forward_s *= k, m->after_s *= k, m->data_s *= k;
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

dt_status mp_model_from_times(const char *spec_text, const char *input, const double *bwd_s, int nt, double backward_s,
                              double forward_s, double after_s, mp_model *m)
{
    model_spec spec;
    dt_status s = model_spec_parse(spec_text, input, &spec);
    if (s) return status_set_error(s, "model '%s' with input '%s': %s", spec_text, input, dt_last_error());
    if (nt > spec.n || spec.n > PM_MAX_LAYERS) {
        s = status_set_error(DT_ERR_INVALID_ARG,
                             "%d layer times for model '%s' of %d layers (at most %d): is the input right?", nt,
                             spec_text, spec.n, PM_MAX_LAYERS);
        model_spec_free(&spec);
        return s;
    }
    snprintf(m->name, sizeof m->name, "%s", spec_text);
    m->nlayers = spec.n;
    m->count = spec.num_params;
    double sum = 0;
    for (int i = 0; i < nt; i++) sum += bwd_s[i];
    /* The phase is what backward took; the layers' own times miss the gaps between them, so they
     * are scaled to it (uniformly when no layer has a time). */
    for (int i = 0; i < spec.n; i++) {
        const layer *l = &spec.layers[i];
        const double share = sum > 0 ? (i < nt ? bwd_s[i] / sum : 0) : 1.0 / spec.n;
        m->layers[i] = (pm_layer){share * backward_s, l->w_off, l->w_n + l->b_n};
    }
    m->forward_s = forward_s;
    m->after_s = after_s;
    model_spec_free(&spec);
    return DT_OK;
}

/* The refusal of a model that needs --input and was given none before it: --input applies to the
 * models after it, so one given later on the line is named as too late. */
static dt_status needs_input(const char *what, const char *late)
{
    if (late)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "%s needs its input shape, and --input %s came after it on the line: --input "
                                "applies to the models after it; put --input %s before the model",
                                what, late, late);
    return status_set_error(DT_ERR_INVALID_ARG,
                            "%s needs its input shape: --input applies to the models after it; put --input N|CxHxW "
                            "(784, 3x224x224) before the model",
                            what);
}

static dt_status from_profile(const char *arg, const mp_flops *fl, mp_model *m)
{
    const char *input = fl->input;
    char path[1024];
    double ms;
    split_ms(arg, path, sizeof path, &ms);
    char *text;
    dt_status s = read_file("--profile", path, &text);
    if (s) return s;
    pm_profile *p = calloc(1, sizeof *p);
    if (!p) s = status_set_error(DT_ERR_NOMEM, "out of memory reading '%s'", path);
    if (!s) s = pm_read_step_profile(text, p);
    free(text);
    const char *in = !s && !input ? model_preset_input(p->model) : input;
    if (!s && !in && p->input[0]) in = p->input; /* the shape bench step recorded */
    char what[320];
    if (!s && !in) {
        snprintf(what, sizeof what, "model '%s', which is not a preset,", p->model);
        s = needs_input(what, fl->late_input);
    }
    /* The measured step beside the prediction includes the wait for the batch (bench step's data
     * column), so the compute does too, before backward: the profile's data phase, or for a
     * profile printed before bench step recorded one, the row's data ms. */
    const double data_ms = !s && p->has_data ? p->data_ms : !s ? p->row_data_ms : 0;
    if (!s) {
        double bwd[PM_MAX_LAYERS];
        for (int i = 0; i < p->nlayers; i++) bwd[i] = p->bwd_ms[i] * 1e-3;
        s = mp_model_from_times(p->model, in, bwd, p->nlayers, p->backward_ms * 1e-3,
                                (data_ms + p->input_ms + p->forward_ms + p->loss_ms) * 1e-3,
                                (p->check_ms + p->optimizer_ms) * 1e-3, m);
    }
    if (!s) {
        m->data_s = data_ms * 1e-3;
        m->data_from_row = !p->has_data;
        m->measured_ms = p->step_ms;
        m->measured_ranks = p->ranks;
        if (ms > 0) scale_compute(m, ms * 1e-3);
    }
    free(p);
    return s ? status_set_error(s, "%s: %s", path, dt_last_error()) : DT_OK;
}

static dt_status from_synthetic(const char *arg, mp_model *m)
{
    static const char form[] = "NAME:PARAMS_M:LAYERS:COMPUTE_MS (resnet101:44.5:101:470)";
    char buf[256], *field[4];
    int n = 0;
    if (strlen(arg) >= sizeof buf)
        return status_set_error(DT_ERR_INVALID_ARG, "--synthetic '%.40s...' is too long: it is %s", arg, form);
    snprintf(buf, sizeof buf, "%s", arg);
    char *p = buf;
    for (;;) { /* the fields at the colons; p is left at a fifth one's colon, if any */
        field[n++] = p;
        if (!(p = strchr(p, ':')) || n == 4) break;
        *p++ = '\0';
    }
    if (n != 4 || p || !field[0][0])
        return status_set_error(DT_ERR_INVALID_ARG, "--synthetic '%s' is not %s", arg, form);
    /* The numbers by parse.h, as every flag's: sscanf's %lf took "inf" and "1e400" (a table of inf
     * and nan), hex and blanks, and %d a count past an int. */
    double params_m, ms;
    int nl;
    if (parse_double("--synthetic's PARAMS_M (millions of parameters)", field[1], 0, 1e6, &params_m) ||
        parse_int("--synthetic's LAYERS", field[2], 1, PM_MAX_LAYERS, &nl) ||
        parse_double("--synthetic's COMPUTE_MS (ms a step)", field[3], 0, 1e9, &ms))
        return status_set_error(DT_ERR_INVALID_ARG, "--synthetic '%s': %s", arg, dt_last_error());
    if (!(params_m > 0 && params_m < 1e6) || !(ms > 0))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "--synthetic '%s': parameters (millions) must be in (0, 1e6), layers in 1..%d, "
                                "compute ms in (0, 1e9]",
                                arg, PM_MAX_LAYERS);
    snprintf(m->name, sizeof m->name, "%s", field[0]);
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

/* Multiply-adds x 2 of one sample through layer l forward; fc and conv only (the element-wise
 * layers are memory-bound and small beside them, so they count 0). */
static double layer_flops(const layer *l)
{
    if (l->kind == LAYER_FC) return 2.0 * l->in_c * l->in_h * l->in_w * l->out;
    if (l->kind == LAYER_CONV) return 2.0 * l->k * l->k * l->in_c * (double)l->out_c * l->out_h * l->out_w;
    return 0;
}

static dt_status from_spec(const char *spec_text, const mp_flops *fl, mp_model *m)
{
    if (!fl->input) {
        char what[320];
        snprintf(what, sizeof what, "--spec '%.280s'", spec_text);
        return needs_input(what, fl->late_input);
    }
    model_spec spec;
    dt_status s = model_spec_parse(spec_text, fl->input, &spec);
    if (s) return status_set_error(s, "--spec '%s' with input '%s': %s", spec_text, fl->input, dt_last_error());
    if (spec.n > PM_MAX_LAYERS) {
        model_spec_free(&spec);
        return status_set_error(DT_ERR_INVALID_ARG, "--spec '%s' has %d layers, more than %d", spec_text, spec.n,
                                PM_MAX_LAYERS);
    }
    snprintf(m->name, sizeof m->name, "%s", fl->name ? fl->name : spec_text);
    m->nlayers = spec.n;
    m->count = spec.num_params;
    /* Backward computes the input's and the weights' gradients: twice forward's products. */
    const double per_flop = fl->batch / (fl->tflops * 1e12);
    for (int i = 0; i < spec.n; i++) {
        const layer *l = &spec.layers[i];
        const double f = layer_flops(l) * per_flop;
        m->forward_s += f;
        m->layers[i] = (pm_layer){2 * f, l->w_off, l->w_n + l->b_n};
    }
    model_spec_free(&spec);
    return DT_OK;
}

dt_status mp_model_load(const char *arg, mp_source kind, const mp_flops *fl, mp_model *m)
{
    memset(m, 0, sizeof *m);
    if (kind == MP_SYNTHETIC) return from_synthetic(arg, m);
    if (kind == MP_SPEC) return from_spec(arg, fl, m);
    return from_profile(arg, fl, m);
}

pm_model mp_model_view(const mp_model *m, size_t elem_bytes, size_t wire_bytes)
{
    return (pm_model){m->layers, m->nlayers, m->count, elem_bytes, wire_bytes, m->forward_s, m->after_s};
}

dt_status mp_read_allreduce(const char *path, pm_link *link, int *ranks)
{
    char *text;
    dt_status s = read_file("--allreduce", path, &text);
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
