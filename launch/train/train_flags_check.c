/*
 * train_flags_check.c - the flags of `dtrain train` against each other, once all are read: a flag
 * that this run would ignore (a dynamic-scaler flag without the dynamic scaler, an optimizer
 * setting of the other optimizer, --trace-steps without --trace), flags that contradict each other
 * (--quiet with --progress always), and two outputs naming one file.
 */
#include "launch/train/train_flags.h"

#include "launch/cli.h"
#include "launch/train/train_run.h"

#include <string.h>
#include <sys/stat.h>

/* Two outputs naming one file would leave only the one written last (--metrics lost under
 * --dump-params, say), and --init-params, read at the start, would be overwritten by --metrics or
 * --trace before the run ends: refused, naming both flags. --init-params equal to --dump-params is
 * allowed (start from a file, leave the trained parameters in it). A character device such as
 * /dev/null keeps no data, so sharing it loses none. */
static int train_outputs_check(const train_opts *t)
{
    const struct {
        const char *flag, *path;
        int output;
    } f[] = {{"--metrics", t->metrics, 1},
             {"--trace", t->trace, 1},
             {"--dump-params", t->dump, 1},
             {"--init-params", t->init_params, 0}};
    enum { N = sizeof f / sizeof *f };
    for (int i = 0; i < N; i++)
        for (int j = i + 1; j < N && f[i].path; j++) {
            if (!f[j].path || (!f[i].output && !f[j].output)) continue;
            if (!strcmp(f[i].flag, "--dump-params") && !strcmp(f[j].flag, "--init-params")) continue;
            struct stat st;
            if (stat(f[i].path, &st) == 0 && S_ISCHR(st.st_mode)) continue;
            if (!cli_same_file(f[i].path, f[j].path)) continue;
            if (f[j].output)
                cli_error("%s %s and %s %s name the same file, and the one written last would replace the other: "
                          "give each its own file",
                          f[i].flag, f[i].path, f[j].flag, f[j].path);
            else
                cli_error("%s %s would overwrite %s %s, the parameters this run starts from: give %s another file",
                          f[i].flag, f[i].path, f[j].flag, f[j].path, f[i].flag);
            return EXIT_USAGE;
        }
    return EXIT_OK;
}

/* A dynamic-scaler flag where no dynamic scaler runs would be ignored (or, for --loss-scale-init,
 * silently replace a fixed scale): refused. The scaler runs with --loss-scale dynamic, and by
 * default for fp16 only (cmd_train.c: bf16 has fp32's range). */
static int check_scaler_flags(const train_opts *t)
{
    const int dynamic = t->loss_scale < 0 ? t->precision == DT_F16 : t->loss_scale == 1;
    if (dynamic) {
        /* The bounds in the flags' own names (the scaler's check names its config fields). */
        const dt_scaler_config *c = &t->scaler;
        if (c->min_scale > c->max_scale) {
            cli_error("--loss-scale-min %.10g is above --loss-scale-max %.10g: give a minimum at most the maximum",
                      c->min_scale, c->max_scale);
            return EXIT_USAGE;
        }
        if (c->init_scale < c->min_scale || c->init_scale > c->max_scale) {
            cli_error(
                "--loss-scale-init %.10g is outside [--loss-scale-min %.10g, --loss-scale-max %.10g]: give a start "
                "within the bounds, or move the bound%s",
                c->init_scale, c->min_scale, c->max_scale,
                c->init_scale > c->max_scale ? " (--loss-scale-max up to 2^48)" : "");
            return EXIT_USAGE;
        }
        return EXIT_OK;
    }
    if (!t->scaler_flag) return EXIT_OK;
    if (t->loss_scale == 0)
        cli_error("%s tunes the dynamic loss scaler, which --loss-scale none turns off: drop %s, or give "
                  "--loss-scale dynamic",
                  t->scaler_flag, t->scaler_flag);
    else if (t->loss_scale == 2)
        cli_error("%s tunes the dynamic loss scaler, but --loss-scale %s fixes the scale: drop %s, or give "
                  "--loss-scale dynamic (--loss-scale-init then sets its first scale)",
                  t->scaler_flag, t->loss_scale_arg, t->scaler_flag);
    else
        cli_error("%s tunes the dynamic loss scaler, which --precision %s does not run by default (only fp16 "
                  "does): drop %s, or give --loss-scale dynamic",
                  t->scaler_flag, train_type_name(t->precision), t->scaler_flag);
    return EXIT_USAGE;
}

/* A flag of the other optimizer would be ignored (and --momentum printed as if used): refused. */
static int check_optim_flags(const train_opts *t)
{
    static const struct {
        unsigned bit;
        const char *flag;
        dt_optim_kind used_by;
    } flags[] = {{OPTIM_GIVEN_MOMENTUM, "--momentum", DT_OPTIM_SGD},
                 {OPTIM_GIVEN_BETA1, "--beta1", DT_OPTIM_ADAMW},
                 {OPTIM_GIVEN_BETA2, "--beta2", DT_OPTIM_ADAMW},
                 {OPTIM_GIVEN_EPS, "--eps", DT_OPTIM_ADAMW}};
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++)
        if ((t->optim_given & flags[i].bit) && t->optim.kind != flags[i].used_by) {
            const int sgd = t->optim.kind == DT_OPTIM_SGD;
            cli_error("%s is a setting of --optim %s, and this run uses --optim %s%s: drop %s, or give --optim %s",
                      flags[i].flag, sgd ? "adamw" : "sgd", sgd ? "sgd" : "adamw", sgd ? " (the default)" : "",
                      flags[i].flag, sgd ? "adamw" : "sgd");
            return EXIT_USAGE;
        }
    return EXIT_OK;
}

int train_flags_check(const train_opts *t)
{
    if (t->trace_first && !t->trace) {
        cli_error("--trace-steps %ld:%ld needs --trace FILE.json (where to write the trace)", t->trace_first,
                  t->trace_last);
        return EXIT_USAGE;
    }
    if (t->quiet && t->progress == PROGRESS_ALWAYS) {
        cli_error("--quiet prints no progress line and --progress always asks for one: drop one of them");
        return EXIT_USAGE;
    }
    int rc;
    if ((rc = check_scaler_flags(t)) || (rc = check_optim_flags(t))) return rc;
    return train_outputs_check(t);
}
