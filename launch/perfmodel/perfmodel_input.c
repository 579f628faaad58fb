/*
 * perfmodel_input.c - parsers of `bench step --profile` and `bench allreduce` output (see
 * perfmodel_input.h). They read the lines those commands print (cmd_bench_step.c, cmd_bench.c) and
 * skip everything else, so a log with other lines around the output still reads.
 */
#include "launch/perfmodel/perfmodel_input.h"
#include "base/status.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The next line of *text into buf (truncated to n - 1), advancing *text; 0 at the end. */
static int next_line(const char **text, char *buf, size_t n)
{
    if (!**text) return 0;
    const char *e = strchr(*text, '\n');
    const size_t len = e ? (size_t)(e - *text) : strlen(*text);
    const size_t k = len < n - 1 ? len : n - 1;
    memcpy(buf, *text, k);
    buf[k] = 0;
    *text += len + (e ? 1 : 0);
    return 1;
}

/* The phases of a profile line: "data X, input X, ..."; or, as bench step printed them before it
 * recorded the wait for the batch, "input X, ..." (has_data 0). */
/* A time the bench printed: finite and >= 0; anything else is a damaged or edited file, which
 * would give a prediction of negative or no-number compute. */
static dt_status check_ms(const char *what, double v, int lineno, const char *line)
{
    if (isfinite(v) && v >= 0) return DT_OK;
    return status_set_error(DT_ERR_INVALID_ARG,
                            "line %d: %s %g ms is not a time (finite, >= 0): a damaged bench step output? '%.120s'",
                            lineno, what, v, line);
}

static dt_status read_phases(const char *line, int lineno, pm_profile *o)
{
    const char *p = strstr(line, "): ");
    o->has_data = p && sscanf(p,
                              "): data %lf, input %lf, forward %lf, loss %lf, backward %lf, allreduce %lf, "
                              "check %lf, optimizer %lf",
                              &o->data_ms, &o->input_ms, &o->forward_ms, &o->loss_ms, &o->backward_ms, &o->allreduce_ms,
                              &o->check_ms, &o->optimizer_ms) == 8;
    if (!o->has_data) o->data_ms = 0;
    if (o->has_data ||
        (p && sscanf(p, "): input %lf, forward %lf, loss %lf, backward %lf, allreduce %lf, check %lf, optimizer %lf",
                     &o->input_ms, &o->forward_ms, &o->loss_ms, &o->backward_ms, &o->allreduce_ms, &o->check_ms,
                     &o->optimizer_ms) == 7)) {
        const struct {
            const char *name;
            double v;
        } ph[] = {{"data", o->data_ms},   {"input", o->input_ms},        {"forward", o->forward_ms},
                  {"loss", o->loss_ms},   {"backward", o->backward_ms},  {"allreduce", o->allreduce_ms},
                  {"check", o->check_ms}, {"optimizer", o->optimizer_ms}};
        for (size_t i = 0; i < sizeof ph / sizeof *ph; i++) {
            dt_status s = check_ms(ph[i].name, ph[i].v, lineno, line);
            if (s) return s;
        }
        return DT_OK;
    }
    return status_set_error(DT_ERR_INVALID_ARG,
                            "profile line %d does not read as 'data X, input X, forward X, loss X, backward X, "
                            "allreduce X, check X, optimizer X': '%.120s'",
                            lineno, line);
}

/* The bench step header at h ("# dtrain bench step: model M[, input S], N rank(s) x batch B, ...")
 * into out's model, input, ranks and batch. */
static dt_status read_header(const char *h, int lineno, const char *line, pm_profile *out)
{
    /* The model may be a layer list with commas: it ends at the ", N rank(s) x batch B". */
    const char *m = h + strlen("# dtrain bench step: model "), *r = strstr(m, " ranks x batch ");
    if (!r) r = strstr(m, " rank x batch ");
    const char *e = r;
    while (e && e > m && !(e[0] == ',' && e[1] == ' ')) e--;
    if (!r || e <= m || (size_t)(e - m) >= sizeof out->model || sscanf(e + 2, "%d", &out->ranks) != 1 ||
        sscanf(strstr(r, " x batch ") + strlen(" x batch "), "%d", &out->batch) != 1)
        return status_set_error(DT_ERR_INVALID_ARG, "line %d: the bench step header does not parse: '%.120s'", lineno,
                                line);
    if (out->ranks < 1 || out->batch < 1)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "line %d: the bench step header says %d rank(s) x batch %d; both must be "
                                ">= 1: '%.120s'",
                                lineno, out->ranks, out->batch, line);
    memcpy(out->model, m, (size_t)(e - m));
    out->model[e - m] = 0;
    /* "model M, input S": the input shape, which headers before it was recorded lack. A model holds
     * no ", " (its layer list is commas alone). */
    char *in = strstr(out->model, ", input ");
    out->input[0] = 0;
    if (in) {
        snprintf(out->input, sizeof out->input, "%s", in + strlen(", input "));
        *in = 0;
    }
    return DT_OK;
}

/* A layer line of the kept profile (" layer I (kind) forward F backward B") into out when line is
 * one (*read set), checked. */
static dt_status read_layer(const char *line, int lineno, pm_profile *out, int *read)
{
    int idx;
    double f, b;
    *read = sscanf(line, " layer %d (%*[^)]) forward %lf backward %lf", &idx, &f, &b) == 3;
    if (!*read) return DT_OK;
    if (idx < 0 || idx >= PM_MAX_LAYERS)
        return status_set_error(DT_ERR_INVALID_ARG, "line %d: layer %d is outside 0..%d", lineno, idx,
                                PM_MAX_LAYERS - 1);
    dt_status s = check_ms("forward", f, lineno, line);
    if (!s) s = check_ms("backward", b, lineno, line);
    if (s) return s;
    out->fwd_ms[idx] = f, out->bwd_ms[idx] = b;
    if (idx + 1 > out->nlayers) out->nlayers = idx + 1;
    return DT_OK;
}

dt_status pm_read_step_profile(const char *text, pm_profile *out)
{
    memset(out, 0, sizeof *out);
    char line[1024];
    int lineno = 0, nprofiles = 0;
    /* The precision row last read, which the profile lines after it belong to (bench step prints
     * a row, then its profile); "" before the first row. */
    char row_prec[16] = "";
    double row_ms = 0, row_data_ms = 0;
    char found[256] = ""; /* the profiled rows' precisions, for the refusal */
    while (next_line(&text, line, sizeof line)) {
        lineno++;
        const char *h = strstr(line, "# dtrain bench step: model ");
        if (h) {
            dt_status s = read_header(h, lineno, line, out);
            if (s) return s;
            row_prec[0] = 0;
            continue;
        }
        if (strstr(line, "profile, ms per step")) {
            if (!row_prec[0])
                return status_set_error(DT_ERR_INVALID_ARG,
                                        "profile line %d follows no precision row (fp32, bf16, fp16): is this the "
                                        "output of dtrain bench step?",
                                        lineno);
            const size_t u = strlen(found);
            snprintf(found + u, sizeof found - u, "%s%s", u ? ", " : "", row_prec);
            /* Every profile is read (each is checked), but one is kept: more is refused below. */
            if (nprofiles++) continue;
            dt_status s = read_phases(line, lineno, out);
            if (s) return s;
            out->step_ms = row_ms; /* the row this profile belongs to, not another precision's */
            out->row_data_ms = row_data_ms;
            snprintf(out->precision, sizeof out->precision, "%s", row_prec);
            continue;
        }
        int layer = 0;
        if (nprofiles == 1) {
            dt_status s = read_layer(line, lineno, out, &layer);
            if (s) return s;
        }
        if (layer) continue;
        char prec[16];
        double sps, ms, data_ms;
        const int got = out->ranks ? sscanf(line, " %15s %lf %lf %lf", prec, &sps, &ms, &data_ms) : 0;
        if (got >= 3 && (!strcmp(prec, "fp32") || !strcmp(prec, "fp16") || !strcmp(prec, "bf16"))) {
            dt_status s = check_ms("step", ms, lineno, line);
            if (!s && got == 4) s = check_ms("data", data_ms, lineno, line);
            if (s) return s;
            snprintf(row_prec, sizeof row_prec, "%s", prec);
            row_ms = ms;
            row_data_ms = got == 4 ? data_ms : 0;
        }
    }
    if (!out->ranks)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "no '# dtrain bench step: model ...' header: is this the output of dtrain bench step?");
    if (!nprofiles)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "the bench step output has no profile: run dtrain bench step with --profile 10");
    if (nprofiles > 1)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "%d profiled rows (%s), and the model takes one: run dtrain bench step --profile N "
                                "with one --precision (and one value of --zero, --step-overlap, --graphs, "
                                "--synthetic-on), or keep the header, one row and its profile lines",
                                nprofiles, found);
    return DT_OK;
}

dt_status pm_read_allreduce(const char *text, pm_allreduce_rows *out)
{
    memset(out, 0, sizeof *out);
    char line[1024];
    int lineno = 0;
    while (next_line(&text, line, sizeof line)) {
        lineno++;
        const char *h = strstr(line, "# dtrain bench allreduce: ");
        if (h) {
            if (sscanf(h, "# dtrain bench allreduce: %d ranks", &out->ranks) != 1 || out->ranks < 1)
                return status_set_error(DT_ERR_INVALID_ARG,
                                        "line %d: the bench allreduce header does not read as '# dtrain bench "
                                        "allreduce: N ranks' with N >= 1: '%.120s'",
                                        lineno, line);
            continue;
        }
        if (line[0] == '#' || !out->ranks) continue;
        double size, count, us;
        char type[16];
        if (sscanf(line, " %lf %lf %15s %lf", &size, &count, type, &us) != 4) continue;
        /* A 16-bit wire's times hold the engine's conversions to and from fp32, not the link alone,
         * and its sizes are the 16-bit bytes: fitted as a link, they would price every byte of
         * --wire fp32 (the default) and of --wire fp16 alike at that run's cost. */
        if (strcmp(type, "float") != 0)
            return status_set_error(DT_ERR_INVALID_ARG,
                                    "line %d: a row of type %s, from bench allreduce --dtype fp16|bf16: the fit "
                                    "models the link from fp32 allreduces, whose times hold no conversion; run bench "
                                    "allreduce without --dtype (model-perf --wire sets the bytes each bucket sends)",
                                    lineno, type);
        if (out->n == PM_MAX_ROWS)
            return status_set_error(DT_ERR_INVALID_ARG, "line %d: more than %d allreduce rows", lineno, PM_MAX_ROWS);
        out->bytes[out->n] = size, out->secs[out->n] = us * 1e-6;
        out->n++;
    }
    if (!out->ranks)
        return status_set_error(
            DT_ERR_INVALID_ARG,
            "no '# dtrain bench allreduce: N ranks' header: is this the output of dtrain bench allreduce?");
    if (!out->n) return status_set_error(DT_ERR_INVALID_ARG, "the bench allreduce output has a header but no rows");
    return DT_OK;
}
