/*
 * cmd_model_perf.c - `dtrain model-perf`: the step-time model (perfmodel.h) on measured inputs.
 * For each model (a `bench step --profile` output, or a synthetic one) and each scale it prints
 * the predicted step, what communication leaves exposed, the efficiency against one rank, and the
 * bucket cap that maximizes it; --plot draws efficiency and best cap against ranks (gnuplot).
 *
 * The network is two levels: the link within a node (default NVLink on an H100/H200 node) and a
 * node's links to the others (default 4 x 400 Gb/s InfiniBand), or one level fitted from a `bench
 * allreduce` output (--allreduce), which then stands for both.
 *
 * --engine-curve SIZES is another mode: no model, the engine's host allreduce (host_model.h) per
 * bucket size over the scales, on a CPU cluster's network by default (engine_curve.c).
 */
#include "launch/cli.h"
#include "launch/plot/gnuplot.h"
#include "launch/perfmodel/model_source.h"
#include "launch/perfmodel/perfmodel_plot.h"
#include "launch/perfmodel/engine_curve.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Defaults, with their sources in docs/model-perf.md. */
#define MP_NVLINK_BUSBW 370e9 /* H100/H200 nccl-tests all_reduce busbw within a node */
#define MP_NVLINK_ALPHA 1e-6
#define MP_NET_BUSBW 200e9 /* 4 x 400 Gb/s a node */
#define MP_NET_ALPHA 5e-6
#define MP_CALL 10e-6 /* NCCL's base latency (tuning.cc baseLat, 6.8-14 us) with the launch */
/* --engine-curve's: a CPU cluster (docs/performance.md, "The engine's algorithms at scale"). */
#define MP_CPU_PER_NODE 8
#define MP_CPU_NET_BW 12.5e9   /* 100 Gb/s Ethernet, a node's link each way */
#define MP_CPU_NET_ALPHA 10e-6 /* a hop through the kernel's TCP stack and a switch */
#define MP_CPU_SHM_BW 10e9     /* a rank's shared-memory copies */
#define MP_CPU_SHM_ALPHA 1e-6
#define MP_CPU_MSG 1e-6 /* MPI's host work to post, match and complete one message */
#define MP_CURVE_MAX_BYTES (64ULL << 30)
#define MP_MAX_MODELS 8
#define MP_MAX_SCALES 32

static const double mp_caps[] = {0, 0.25, 0.5, 1, 2, 4, 8, 16, 25, 32, 64, 128, 256};
enum { MP_NCAPS = sizeof mp_caps / sizeof *mp_caps };

typedef struct mp_opts {
    const char *src[MP_MAX_MODELS];
    mp_source kind[MP_MAX_MODELS];
    mp_flops model_flops[MP_MAX_MODELS]; /* each model's: the --input, --name, ... given before it */
    int nmodels;
    const char *allreduce, *plot;
    mp_flops flops;                                             /* --input, --name, --batch, --tflops */
    double alpha_us, busbw_gbs, net_alpha_us, net_gbs, call_us; /* < 0: not given */
    int per_node, world;
    int scales[MP_MAX_SCALES], nscales, scales_given;
    pm_sync sync;
    dt_dtype wire;
    /* --engine-curve: its sizes, the host model's own flags (msg_us < 0, seg_bytes 0: not given),
     * the last flag given that only the step model reads (refused in that mode) and the last one
     * given that only this mode reads (refused without it). */
    double curve[MP_CURVE_MAX_SIZES];
    int ncurve, per_node_given;
    double msg_us, seg_bytes;
    const char *step_flag, *curve_flag;
} mp_opts;

enum {
    OPT_PROFILE = 256,
    OPT_SYNTH,
    OPT_SPEC,
    OPT_NAME,
    OPT_BATCH,
    OPT_TFLOPS,
    OPT_INPUT,
    OPT_ALLREDUCE,
    OPT_ALPHA,
    OPT_BUSBW,
    OPT_NET_ALPHA,
    OPT_NET_GBS,
    OPT_CALL,
    OPT_PER_NODE,
    OPT_WORLD,
    OPT_SCALES,
    OPT_BUCKET,
    OPT_FIRST,
    OPT_NO_OVERLAP,
    OPT_ALGO,
    OPT_WIRE,
    OPT_PLOT,
    OPT_CURVE,
    OPT_MSG,
    OPT_SEGMENT
};

static const struct option mp_options[] = {
    {"profile", required_argument, NULL, OPT_PROFILE},
    {"synthetic", required_argument, NULL, OPT_SYNTH},
    {"spec", required_argument, NULL, OPT_SPEC},
    {"name", required_argument, NULL, OPT_NAME},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"tflops", required_argument, NULL, OPT_TFLOPS},
    {"input", required_argument, NULL, OPT_INPUT},
    {"allreduce", required_argument, NULL, OPT_ALLREDUCE},
    {"alpha-us", required_argument, NULL, OPT_ALPHA},
    {"busbw-gbs", required_argument, NULL, OPT_BUSBW},
    {"net-alpha-us", required_argument, NULL, OPT_NET_ALPHA},
    {"net-gbs", required_argument, NULL, OPT_NET_GBS},
    {"call-us", required_argument, NULL, OPT_CALL},
    {"gpus-per-node", required_argument, NULL, OPT_PER_NODE},
    {"world", required_argument, NULL, OPT_WORLD},
    {"scales", required_argument, NULL, OPT_SCALES},
    {"bucket-mb", required_argument, NULL, OPT_BUCKET},
    {"first-bucket-mb", required_argument, NULL, OPT_FIRST},
    {"no-overlap", no_argument, NULL, OPT_NO_OVERLAP},
    {"algo", required_argument, NULL, OPT_ALGO},
    {"wire", required_argument, NULL, OPT_WIRE},
    {"plot", required_argument, NULL, OPT_PLOT},
    {"engine-curve", required_argument, NULL, OPT_CURVE},
    {"msg-us", required_argument, NULL, OPT_MSG},
    {"segment-bytes", required_argument, NULL, OPT_SEGMENT},
    {NULL, 0, NULL, 0},
};

static int add_scale(const char *item, void *ud)
{
    mp_opts *o = ud;
    return cli_int("--scales", item, 1, 1 << 20, &o->scales[o->nscales++]);
}

/* A byte count (cli_bytes), 1 to 64G. */
static int mp_bytes(const char *flag, const char *arg, double *out)
{
    unsigned long long v;
    const int rc = cli_bytes(flag, arg, MP_CURVE_MAX_BYTES, "64000, 1M, 16M", &v);
    if (rc == EXIT_OK) *out = (double)v;
    return rc;
}

static int add_curve(const char *item, void *ud)
{
    mp_opts *o = ud;
    return mp_bytes("--engine-curve", item, &o->curve[o->ncurve++]);
}

/* The flags that only the step model reads, by name; NULL for the others. */
static const char *step_only(int c)
{
    switch (c) {
        case OPT_PROFILE: return "--profile";
        case OPT_SYNTH: return "--synthetic";
        case OPT_SPEC: return "--spec";
        case OPT_NAME: return "--name";
        case OPT_BATCH: return "--batch";
        case OPT_TFLOPS: return "--tflops";
        case OPT_INPUT: return "--input";
        case OPT_ALLREDUCE: return "--allreduce";
        case OPT_CALL: return "--call-us";
        case OPT_BUCKET: return "--bucket-mb";
        case OPT_FIRST: return "--first-bucket-mb";
        case OPT_NO_OVERLAP: return "--no-overlap";
        case OPT_ALGO: return "--algo";
        case OPT_WIRE: return "--wire";
    }
    return NULL;
}

static int positive(const char *flag, const char *arg, double *out)
{
    float v;
    const int rc = cli_float(flag, arg, 0, 1e9, &v);
    *out = v;
    return rc;
}

static int mp_flag(int c, const char *arg, void *ud)
{
    mp_opts *o = ud;
    float v;
    int rc;
    if (step_only(c)) o->step_flag = step_only(c);
    switch (c) {
        case OPT_PROFILE:
        case OPT_SYNTH:
        case OPT_SPEC:
            if (o->nmodels == MP_MAX_MODELS) {
                cli_error("more than %d models (--profile/--synthetic): run model-perf again for the rest",
                          MP_MAX_MODELS);
                return EXIT_USAGE;
            }
            o->kind[o->nmodels] = c == OPT_SYNTH ? MP_SYNTHETIC : c == OPT_SPEC ? MP_SPEC : MP_PROFILE;
            o->model_flops[o->nmodels] = o->flops;
            o->flops.name = NULL; /* a label names one model */
            o->src[o->nmodels++] = arg;
            return EXIT_OK;
        case OPT_INPUT: o->flops.input = arg; return EXIT_OK;
        case OPT_NAME: o->flops.name = arg; return EXIT_OK;
        case OPT_BATCH: return cli_int("--batch", arg, 1, 1 << 20, &o->flops.batch);
        case OPT_TFLOPS:
            rc = cli_float("--tflops", arg, 1e-6, 1e6, &v);
            o->flops.tflops = v;
            return rc;
        case OPT_ALLREDUCE: o->allreduce = arg; return EXIT_OK;
        case OPT_ALPHA: return positive("--alpha-us", arg, &o->alpha_us);
        case OPT_BUSBW: return positive("--busbw-gbs", arg, &o->busbw_gbs);
        case OPT_NET_ALPHA: return positive("--net-alpha-us", arg, &o->net_alpha_us);
        case OPT_NET_GBS: return positive("--net-gbs", arg, &o->net_gbs);
        case OPT_CALL: return positive("--call-us", arg, &o->call_us);
        case OPT_PER_NODE: o->per_node_given = 1; return cli_int("--gpus-per-node", arg, 1, 1 << 16, &o->per_node);
        case OPT_WORLD: return cli_int("--world", arg, 1, 1 << 20, &o->world);
        case OPT_SCALES:
            o->nscales = 0;
            o->scales_given = 1;
            return cli_list("--scales", arg, MP_MAX_SCALES, add_scale, o);
        case OPT_BUCKET:
            rc = cli_float("--bucket-mb", arg, 0, 1e6, &v);
            o->sync.bucket_mb = v;
            return rc;
        case OPT_FIRST:
            rc = cli_float("--first-bucket-mb", arg, 0, 1e6, &v);
            o->sync.first_bucket_mb = v;
            return rc;
        case OPT_NO_OVERLAP: o->sync.overlap = 0; return EXIT_OK;
        case OPT_ALGO:
            if (!strcmp(arg, "ring"))
                o->sync.algo = PM_RING;
            else if (!strcmp(arg, "tree"))
                o->sync.algo = PM_TREE;
            else if (!strcmp(arg, "auto"))
                o->sync.algo = PM_AUTO;
            else {
                cli_error("--algo '%s' is not ring, tree or auto (auto: the faster per bucket, as NCCL picks)", arg);
                return EXIT_USAGE;
            }
            return EXIT_OK;
        case OPT_WIRE: return cli_float_dtype("--wire", arg, &o->wire);
        case OPT_PLOT: o->plot = arg; return EXIT_OK;
        case OPT_CURVE: o->ncurve = 0; return cli_list("--engine-curve", arg, MP_CURVE_MAX_SIZES, add_curve, o);
        case OPT_MSG: o->curve_flag = "--msg-us"; return positive("--msg-us", arg, &o->msg_us);
        case OPT_SEGMENT: o->curve_flag = "--segment-bytes"; return mp_bytes("--segment-bytes", arg, &o->seg_bytes);
    }
    cli_error("model-perf: unknown option (dtrain model-perf --help lists them)");
    return EXIT_USAGE;
}

/* The network: the defaults, then a fitted one-level link (in *fit, with the ranks of its run in
 * *fit_ranks), then the flags given. Prints nothing but an error: every input is read before any
 * output. */
static int mp_network(const mp_opts *o, pm_net *net, pm_link *fit, int *fit_ranks)
{
    *net = (pm_net){0, o->per_node, {MP_NVLINK_ALPHA, MP_NVLINK_BUSBW}, {MP_NET_ALPHA, MP_NET_BUSBW}, MP_CALL};
    if (o->allreduce) {
        const dt_status s = mp_read_allreduce(o->allreduce, fit, fit_ranks);
        if (s) {
            cli_error("%s", dt_last_error());
            return cli_input_exit(s, o->allreduce);
        }
        net->intra = net->inter = *fit;
        net->call_s = 0; /* the fit's latency holds it */
    }
    if (o->alpha_us >= 0) net->intra.alpha_s = o->alpha_us * 1e-6;
    if (o->busbw_gbs > 0) net->intra.busbw = o->busbw_gbs * 1e9;
    if (o->net_alpha_us >= 0) net->inter.alpha_s = o->net_alpha_us * 1e-6;
    if (o->net_gbs > 0) net->inter.busbw = o->net_gbs * 1e9;
    if (o->call_us >= 0) net->call_s = o->call_us * 1e-6;
    return EXIT_OK;
}

/* One model over the scales: a table, and its series for the plot. */
static int mp_predict(const mp_opts *o, const mp_model *mm, pm_net net, mp_series *ser)
{
    const pm_model m = mp_model_view(mm, 4, dt_dtype_size(o->wire));
    double bwd = 0;
    for (int i = 0; i < m.nlayers; i++) bwd += m.layers[i].bwd_s;
    printf("# model %s: %.3f M parameters (%.2f MiB of gradients, %s on the wire) in %d layers; compute %.3f ms a "
           "step (data %.3f, forward %.3f, backward %.3f, after %.3f)%s\n",
           mm->name, m.count / 1e6, m.count * 4 / 1048576.0, dt_dtype_name(o->wire), m.nlayers,
           (m.forward_s + bwd + m.after_s) * 1e3, mm->data_s * 1e3, (m.forward_s - mm->data_s) * 1e3, bwd * 1e3,
           m.after_s * 1e3,
           mm->data_from_row ? "; data: the row's data ms, as the profile predates its data phase" : "");
    printf("#  ranks  nodes    step ms  exposed ms    comm ms  efficiency  buckets |  best MiB  best step ms  best "
           "eff%s\n",
           mm->measured_ms > 0 ? " | measured ms  error" : "");
    snprintf(ser->name, sizeof ser->name, "%s", mm->name);
    ser->grad_mb = (double)m.count * (double)m.elem_bytes / 1048576.0;
    ser->n = 0;
    const int one[1] = {o->world};
    const int *sc = o->world ? one : o->scales, nsc = o->world ? 1 : o->nscales;
    for (int k = 0; k < nsc; k++) {
        net.world = sc[k];
        pm_step st, best;
        double best_mb;
        if (pm_step_time(&m, &net, &o->sync, &st) ||
            pm_best_bucket(&m, &net, &o->sync, mp_caps, MP_NCAPS, &best_mb, &best)) {
            cli_error("model %s at %d ranks: %s", mm->name, sc[k], dt_last_error());
            return EXIT_FAIL;
        }
        printf("  %6d %6d %10.3f %11.3f %10.3f %11.3f %8d | %9.4g %13.3f %9.3f", sc[k], pm_nodes(&net), st.step_s * 1e3,
               st.exposed_s * 1e3, st.comm_s * 1e3, st.efficiency, st.nbuckets, best_mb, best.step_s * 1e3,
               best.efficiency);
        if (mm->measured_ms > 0 && mm->measured_ranks == sc[k])
            printf(" | %11.3f %+5.1f%%", mm->measured_ms, 100 * (st.step_s * 1e3 - mm->measured_ms) / mm->measured_ms);
        printf("\n");
        ser->ranks[ser->n] = sc[k], ser->eff[ser->n] = st.efficiency, ser->best_eff[ser->n] = best.efficiency;
        ser->best_mb[ser->n++] = best_mb;
    }
    return EXIT_OK;
}

/* A bandwidth the host model divides by: 0 given is refused (the step model reads 0 as "not given"). */
static int mp_nonzero_bw(const char *flag, double gbs, const char *example)
{
    if (gbs != 0) return EXIT_OK;
    cli_error("%s 0: the engine's model divides by this bandwidth; give one above 0 GB/s (%s)", flag, example);
    return EXIT_USAGE;
}

/* --engine-curve: the CPU cluster's network with the flags given over it, then the tables. */
static int mp_curve_run(const mp_opts *o)
{
    if (o->step_flag) {
        cli_error("model-perf --engine-curve models the engine's allreduce alone, not a training step: %s does not "
                  "apply (drop it, or run model-perf without --engine-curve)",
                  o->step_flag);
        return EXIT_USAGE;
    }
    if (mp_nonzero_bw("--net-gbs", o->net_gbs, "12.5 for 100 Gb/s Ethernet") ||
        mp_nonzero_bw("--busbw-gbs", o->busbw_gbs, "a rank's shared-memory copies, e.g. 10"))
        return EXIT_USAGE;
    hm_net net = {0,
                  o->per_node_given ? o->per_node : MP_CPU_PER_NODE,
                  {MP_CPU_SHM_ALPHA, MP_CPU_SHM_BW},
                  {MP_CPU_NET_ALPHA, MP_CPU_NET_BW},
                  MP_CPU_MSG,
                  HM_ENGINE_SEG_BYTES};
    if (o->alpha_us >= 0) net.intra.alpha_s = o->alpha_us * 1e-6;
    if (o->busbw_gbs > 0) net.intra.bw = o->busbw_gbs * 1e9;
    if (o->net_alpha_us >= 0) net.inter.alpha_s = o->net_alpha_us * 1e-6;
    if (o->net_gbs > 0) net.inter.bw = o->net_gbs * 1e9;
    if (o->msg_us >= 0) net.msg_s = o->msg_us * 1e-6;
    if (o->seg_bytes > 0) net.seg_bytes = o->seg_bytes;
    int scales[MP_MAX_SCALES], nscales = 0;
    if (o->world)
        scales[nscales++] = o->world;
    else if (o->scales_given)
        for (; nscales < o->nscales; nscales++) scales[nscales] = o->scales[nscales];
    else
        for (int w = 2; w <= 512; w *= 2) scales[nscales++] = w;
    printf("# defaults (a CPU cluster; docs/performance.md, \"The engine's algorithms at scale\"): %d ranks a node; "
           "100 Gb/s Ethernet, %.4g GB/s a node each way, %.4g us a hop; shared memory %.4g GB/s a rank, %.4g us a "
           "message; %.4g us of MPI's host work a message; the engine's %.0f-byte chain segment\n",
           MP_CPU_PER_NODE, MP_CPU_NET_BW / 1e9, MP_CPU_NET_ALPHA * 1e6, MP_CPU_SHM_BW / 1e9, MP_CPU_SHM_ALPHA * 1e6,
           MP_CPU_MSG * 1e6, HM_ENGINE_SEG_BYTES);
    return mp_engine_curve(o->curve, o->ncurve, scales, nscales, net, o->plot);
}

/* The step model's flags together: none of --engine-curve's alone, and a model to predict. */
static int mp_step_flags_check(const mp_opts *o)
{
    if (o->curve_flag) {
        cli_error("%s belongs to --engine-curve (the engine's host model); the step model's fixed cost of a "
                  "collective is --call-us",
                  o->curve_flag);
        return EXIT_USAGE;
    }
    if (!o->nmodels) {
        cli_error("model-perf: no model: give --profile FILE (the output of dtrain bench step --profile 10) or "
                  "--synthetic NAME:PARAMS_M:LAYERS:COMPUTE_MS");
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

/* The PNG before any work: not a --profile it reads, and writable. files[i]: model i's profile,
 * FILE of FILE:MS when FILE:MS is none. */
static int mp_plot_check(const mp_opts *o, char files[][4096])
{
    const char *inputs[MP_MAX_MODELS];
    int ninputs = 0;
    for (int i = 0; i < o->nmodels; i++) {
        if (o->kind[i] != MP_PROFILE) continue;
        snprintf(files[i], sizeof files[i], "%s", o->src[i]);
        char *colon = strrchr(files[i], ':');
        if (colon && access(files[i], F_OK) != 0) *colon = '\0';
        inputs[ninputs++] = files[i];
    }
    if (o->plot && gnuplot_output_check("model-perf", "--plot", o->plot, inputs, ninputs, "")) return EXIT_USAGE;
    return EXIT_OK;
}

/* Every model into mm (files: their profiles' paths, for the exit code). EXIT_OK, or the exit code
 * after saying why. */
static int mp_load_models(const mp_opts *o, char files[][4096], mp_model *mm)
{
    for (int i = 0; i < o->nmodels; i++) {
        const dt_status s = mp_model_load(o->src[i], o->kind[i], &o->model_flops[i], &mm[i]);
        if (s) {
            cli_error("%s", dt_last_error());
            /* a bad value, or a file not there (exit 2); a file that does not read or parse (1) */
            return o->kind[i] == MP_PROFILE  ? cli_input_exit(s, files[i])
                   : s == DT_ERR_INVALID_ARG ? EXIT_USAGE
                                             : EXIT_FAIL;
        }
    }
    return EXIT_OK;
}

/* The network's lines: the fitted link (--allreduce), then the links and the sync settings. */
static void mp_print_links(const mp_opts *o, const pm_net *net, const pm_link *fit, int fit_ranks)
{
    if (o->allreduce)
        printf("# fitted %s (%d ranks): alpha %.2f us a step, busbw %.4g GB/s\n", o->allreduce, fit_ranks,
               fit->alpha_s * 1e6, fit->busbw / 1e9);
    printf("# links: within a node alpha %.2f us, busbw %.4g GB/s; between nodes alpha %.2f us, busbw %.4g GB/s a "
           "node; %.1f us a call; %d ranks a node; algo %s; overlap %s; buckets %g MiB, first %g MiB\n",
           net->intra.alpha_s * 1e6, net->intra.busbw / 1e9, net->inter.alpha_s * 1e6, net->inter.busbw / 1e9,
           net->call_s * 1e6, net->per_node,
           o->sync.algo == PM_RING   ? "ring"
           : o->sync.algo == PM_TREE ? "tree"
                                     : "auto",
           o->sync.overlap ? "on" : "off", o->sync.bucket_mb, o->sync.first_bucket_mb);
}

int cmd_model_perf(int argc, char **argv)
{
    mp_opts o = {.alpha_us = -1,
                 .busbw_gbs = -1,
                 .net_alpha_us = -1,
                 .net_gbs = -1,
                 .call_us = -1,
                 .msg_us = -1,
                 .per_node = 8,
                 .sync = {25, 1, 1, PM_AUTO},
                 .wire = DT_F32};
    for (int s = 8; s <= 4096; s *= 2) o.scales[o.nscales++] = s;
    dt_config cfg; /* the common flags are taken and ignored: the model runs nothing on the job */
    const cli_extra extra = {mp_options, mp_flag, &o, NULL};
    if (cli_parse(argc, argv, "model-perf", &cfg, &extra)) return EXIT_USAGE;
    if (cli_one_process("model-perf", "print the whole prediction again (it runs nothing on the job)"))
        return EXIT_USAGE;
    /* --input is sticky: the last one given holds at the end, so a model without one saw it only later. */
    for (int i = 0; i < o.nmodels; i++)
        if (!o.model_flops[i].input) o.model_flops[i].late_input = o.flops.input;
    if (o.ncurve && o.plot && gnuplot_output_check("model-perf", "--plot", o.plot, NULL, 0, "")) return EXIT_USAGE;
    if (o.ncurve) return mp_curve_run(&o);
    static char files[MP_MAX_MODELS][4096]; /* model i's profile: FILE of FILE:MS when FILE:MS is none */
    int rc;
    if ((rc = mp_step_flags_check(&o)) || (rc = mp_plot_check(&o, files))) return rc;
    /* Every input is read and checked before the first line of output: a profile that cannot be
     * read fails the command with an empty stdout, not under a header a script would take for a
     * prediction. */
    pm_net net;
    pm_link fit = {0, 0};
    int fit_ranks = 0;
    if ((rc = mp_network(&o, &net, &fit, &fit_ranks))) return rc;
    mp_model *mm = calloc((size_t)o.nmodels, sizeof *mm);
    mp_series *ser = calloc(MP_MAX_MODELS, sizeof *ser);
    rc = mm && ser ? EXIT_OK : EXIT_FAIL;
    if (rc) cli_error("model-perf: out of memory");
    if (!rc) rc = mp_load_models(&o, files, mm);
    if (!rc) mp_print_links(&o, &net, &fit, fit_ranks);
    for (int i = 0; !rc && i < o.nmodels; i++) rc = mp_predict(&o, &mm[i], net, &ser[i]);
    if (!rc && o.plot) rc = mp_plot(o.plot, ser, o.nmodels, &o.sync, &net) ? EXIT_FAIL : EXIT_OK;
    free(mm);
    free(ser);
    return rc;
}
