/*
 * cmd_bench_step.c - `dtrain bench step`: training steps per second of one model in each of the
 * given precisions, side by side in one run, on the device the placement chose (or --device).
 *
 * Each precision gets a fresh model (same seed), its optimizer (SGD, momentum 0.9) and, for fp16,
 * a dynamic loss scaler; then --warmup untimed steps and --steps timed ones, each the whole
 * training step of `dtrain train`: the synthetic batch (from the background loader, as in
 * train; "data ms" is how long a step waited for it), forward and backward, the gradient
 * allreduce, the finite check, clipping with --clip-grad-norm, and the optimizer. On a GPU every
 * step waits for its loss once its backward is queued; the clock stops once the device has
 * finished the last step (dt_model_synchronize), so every row times the same work whether or not
 * a verdict made it wait. Rank 0 prints samples/s over all
 * ranks, the step time, dtrain's memory summary, and the ratio to the first row. --zero 0,1 runs
 * each precision with the optimizer state replicated and sharded (ZeRO-1), side by side, with the
 * bytes each rank sends per step by the engine's algorithm: 2 (W-1)/W of the gradients for the
 * allreduce, (W-1)/W of the gradients plus (W-1)/W of the fp32 parameters at --zero 1.
 * --profile N then takes one untimed profiled step (the kernel-by-kernel path's first use) and N
 * more with dt_model_set_profile, and prints rank 0's split of a step into its phases and layers,
 * the first phase the wait for the batch (the loader's, as the data column), which the model's own
 * profile cannot see.
 * The clock starts, as it stops, with the device idle and every verdict taken, and the skipped
 * column counts the timed steps' skips alone. The timed steps are also cut into up to
 * SPREAD_WINDOWS windows of consecutive steps, whose fastest and slowest step time end the row: one
 * mean over one window hid a run that swung. The inner edges read the host's clock without
 * waiting for the device (a wait would change what is timed); every step waits for its loss, so
 * the host runs at most a step or two ahead of the device and an edge is off by at most that.
 */
#include "launch/bench/bench_step.h"
#include "launch/cli.h"
#include "launch/oom_report.h"
#include "runtime/model/model.h"
#include "base/status.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    OPT_MODEL = 256,
    OPT_INPUT,
    OPT_BATCH,
    OPT_STEPS,
    OPT_WARMUP,
    OPT_PRECISION,
    OPT_LOADER,
    OPT_PROFILE,
    OPT_ZERO,
    OPT_OPTIM,
    OPT_CLIP,
    OPT_OVERLAP,
    OPT_GRAPHS,
    OPT_SYNTHETIC_ON,
    OPT_DEFER_VERDICT,
    OPT_FUSED_RELU
};

static const struct option step_options[] = {
    {"model", required_argument, NULL, OPT_MODEL},
    {"input", required_argument, NULL, OPT_INPUT},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"steps", required_argument, NULL, OPT_STEPS},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"precision", required_argument, NULL, OPT_PRECISION},
    {"loader-threads", required_argument, NULL, OPT_LOADER},
    {"profile", required_argument, NULL, OPT_PROFILE},
    {"zero", required_argument, NULL, OPT_ZERO},
    {"optim", required_argument, NULL, OPT_OPTIM},
    {"clip-grad-norm", required_argument, NULL, OPT_CLIP},
    {"step-overlap", required_argument, NULL, OPT_OVERLAP},
    {"graphs", required_argument, NULL, OPT_GRAPHS},
    {"synthetic-on", required_argument, NULL, OPT_SYNTHETIC_ON},
    {"defer-verdict", required_argument, NULL, OPT_DEFER_VERDICT},
    {"fused-relu", required_argument, NULL, OPT_FUSED_RELU},
    {NULL, 0, NULL, 0},
};

static int add_precision(const char *item, void *ud)
{
    step_opts *o = ud;
    dt_dtype t;
    const int rc = cli_float_dtype("--precision", item, &t);
    if (!rc) o->prec[o->nprec++] = t;
    return rc;
}

static int parse_precisions(const char *arg, step_opts *o)
{
    o->nprec = 0;
    return cli_list("--precision", arg, 3, add_precision, o);
}

static int add_zero(const char *item, void *ud)
{
    step_opts *o = ud;
    if (strcmp(item, "0") && strcmp(item, "1")) {
        cli_error("--zero '%s' is not supported: use 0 (replicated optimizer state), 1 (ZeRO-1, sharded) or 0,1 (both, "
                  "side by side)",
                  item);
        return EXIT_USAGE;
    }
    o->zero[o->nzero++] = item[0] == '1';
    return EXIT_OK;
}

static int add_overlap(const char *item, void *ud)
{
    step_opts *o = ud;
    return cli_step_overlap(item, &o->overlap[o->noverlap++]);
}

static int add_graphs(const char *item, void *ud)
{
    step_opts *o = ud;
    return cli_graphs(item, &o->graphs[o->ngraphs++]);
}

static int add_synth(const char *item, void *ud)
{
    step_opts *o = ud;
    return cli_synthetic_on(item, &o->synth[o->nsynth++]);
}

/* The data column: where --synthetic-on said, and for auto where the loader made the batches. */
static const char *synth_text(dt_synthetic_on set, int on_device)
{
    if (set == DT_SYNTHETIC_AUTO) return on_device ? "auto>dev" : "auto>host";
    return set == DT_SYNTHETIC_HOST ? "host" : "device";
}

/* The overlap and graphs columns: the setting, then what it came to ("auto>on": overlapped, or
 * replayed as a graph; "1>off": a scaler, clipping or ZeRO-1 kept the step after backward, or the
 * CPU, profiling or a failed recording kept the pass launched kernel by kernel). Both enums are
 * OFF 0, ON 1, AUTO 2. */
static const char *setting_text(int set, int ran)
{
    if (set == 2) return ran ? "auto>on" : "auto>off";
    if (set == 1) return ran ? "1>on" : "1>off";
    return "0>off";
}

static int step_handle(int val, const char *arg, void *ud)
{
    step_opts *o = ud;
    switch (val) {
        case OPT_MODEL: o->model = arg; return EXIT_OK;
        case OPT_INPUT: o->input = arg; return EXIT_OK;
        case OPT_BATCH: return cli_int("--batch", arg, 1, 1 << 20, &o->batch);
        case OPT_STEPS: return cli_int("--steps", arg, 1, 1 << 24, &o->steps);
        case OPT_WARMUP: return cli_int("--warmup", arg, 0, 1 << 24, &o->warmup);
        case OPT_PRECISION: return parse_precisions(arg, o);
        case OPT_LOADER: return cli_loader_threads(arg, &o->loader_threads);
        case OPT_PROFILE: return cli_int("--profile", arg, 0, 1 << 20, &o->profile);
        case OPT_ZERO: o->nzero = 0; return cli_list("--zero", arg, 2, add_zero, o);
        case OPT_OPTIM:
            if (strcmp(arg, "sgd") && strcmp(arg, "adamw")) {
                cli_error("--optim '%s' is not one of sgd, adamw", arg);
                return EXIT_USAGE;
            }
            o->optim = arg[0] == 'a' ? DT_OPTIM_ADAMW : DT_OPTIM_SGD;
            return EXIT_OK;
        case OPT_OVERLAP: o->noverlap = 0; return cli_list("--step-overlap", arg, 3, add_overlap, o);
        case OPT_GRAPHS: o->ngraphs = 0; return cli_list("--graphs", arg, 3, add_graphs, o);
        case OPT_SYNTHETIC_ON: o->nsynth = 0; return cli_list("--synthetic-on", arg, 3, add_synth, o);
        case OPT_DEFER_VERDICT:
            return cli_int("--defer-verdict (1: queue the next step before the last's verdict, 0: wait)", arg, 0, 1,
                           &o->defer_verdict);
        case OPT_FUSED_RELU: return cli_fused_relu(arg, &o->fused_relu);
        case OPT_CLIP: return cli_clip_grad_norm(arg, &o->clip);
    }
    return EXIT_USAGE;
}

/* Precision o->prec[failed] ran out of memory (bench_step_run freed its model): the error, the
 * summary over every precision of the run (the batch it suggests fits them all), the job ended. */
static int step_oom(dt_ctx *ctx, const step_opts *o, int failed, int zero, int gpu, int shared)
{
    cli_status_error(dt_dtype_name(o->prec[failed]), DT_ERR_NOMEM);
    dt_optim_config oc; /* bench_step_run's optimizer */
    dt_optim_defaults(&oc);
    oc.kind = o->optim;
    dt_memory_plan_config pc[3];
    for (int i = 0; i < o->nprec; i++) {
        dt_memory_plan_defaults(&pc[i]);
        pc[i].spec = o->model;
        pc[i].input = o->input;
        pc[i].batch = o->batch;
        pc[i].compute = o->prec[i];
        pc[i].grads = o->prec[i] != DT_F32 && !gpu ? o->prec[i] : DT_F32; /* as bench_step_run keeps them */
        pc[i].optim = &oc;
        if (zero) { /* the failed row's --zero: this rank's shard at bench_step_run's default caps */
            pc[i].zero_world = dt_world_size(ctx);
            pc[i].zero_rank = dt_rank(ctx);
        }
    }
    const oom_case c = {.command = "bench step", .plans = pc, .n_plans = o->nprec, .failed = failed};
    oom_report(ctx, &c);
    return cli_end_failed(ctx, EXIT_FAIL, shared);
}

/* Rank 0's header: the model, the ranks, the steps, the device (the CPU's OpenBLAS threads), a note
 * on 16-bit rows on a CPU, and the columns. */
static void print_header(const step_opts *o, const dt_placement *pl, int world)
{
    char clip[64] = "";
    if (o->clip > 0) snprintf(clip, sizeof clip, ", clipping at norm %g", o->clip);
    /* The input shape too, so that model-perf --profile needs no --input for a model that is
     * not a preset. */
    const char *in = o->input ? o->input : model_preset_input(o->model);
    /* On the CPU the step's speed is OpenBLAS's threads (--blas-threads, the pinning): say them. */
    char blas[320] = "";
    if (pl->device != DT_DEVICE_CUDA)
        snprintf(blas, sizeof blas, " (OpenBLAS, %d thread%s on cores %s)", pl->blas_threads, cli_s(pl->blas_threads),
                 pl->cores);
    printf("# dtrain bench step: model %s%s%s, %d rank%s x batch %d, %d timed step%s after %d, %s%s, "
           "device %s%s%s, %d loader thread%s%s%s%s\n",
           o->model, in ? ", input " : "", in ? in : "", world, cli_s(world), o->batch, o->steps, cli_s(o->steps),
           o->warmup, o->optim == DT_OPTIM_ADAMW ? "AdamW" : "SGD momentum 0.9", clip,
           pl->device == DT_DEVICE_CUDA ? "cuda:" : "cpu", pl->device == DT_DEVICE_CUDA ? pl->gpu : "", blas,
           o->loader_threads, cli_s(o->loader_threads),
           pl->device == DT_DEVICE_CUDA ? " for the rows whose batches the host makes" : "",
           o->defer_verdict ? "" : ", each fp16 step waiting for its verdict",
           o->fused_relu ? "" : ", every relu layer a kernel of its own");
    /* A user from GPU AMP expects 16-bit rows to be faster; on the CPU they cannot be (no 16-bit
     * GEMM in OpenBLAS: every op widens its inputs to fp32), so the ratio column would be read
     * wrongly without this line. What they do save is memory and bytes sent. */
    int any16 = 0;
    for (int i = 0; i < o->nprec; i++) any16 |= o->prec[i] != DT_F32;
    if (pl->device != DT_DEVICE_CUDA && any16)
        printf("# cpu: fp16 and bf16 are stored in 16 bits but computed in fp32 (OpenBLAS has no 16-bit GEMM: "
               "each op widens its inputs): expect about fp32's speed, not a GPU's 16-bit speed-up; they save "
               "memory and bytes sent\n");
    printf("# %-9s %12s %9s %9s %8s %10s %10s %10s %12s %10s %8s %5s %13s %8s %8s %9s %9s %9s\n", "precision",
           "samples/s", "step ms", "data ms", "ratio", "params MiB", "grads MiB", "optim MiB", "activ. MiB", "work MiB",
           "skipped", "zero", "sent MiB/step", "overlap", "graphs", "data", "min ms", "max ms");
    fflush(stdout);
}

/* Rank 0's row of precision p in setting rs: its figures f, the ratio to the first row's base,
 * what the engine sends, the clipping line and the profile. */
static void print_row(const step_opts *o, dt_dtype p, const row_setting *rs, const row_figures *f, double base,
                      int world)
{
    const double M = 1048576.0;
    /* What the engine sends per rank (its algorithm, see the top): 16-bit gradients on a
     * CPU travel in 16 bits, a GPU keeps them in fp32 (its memory summary's parameters
     * include the 16-bit copy, so they cannot tell the count). */
    const double np = (double)rs->nparams, wb = (double)rs->grad_bytes;
    const double sent = (rs->zero ? np * (wb + 4.0) : 2.0 * np * wb) * (world - 1) / world;
    printf("  %-9s %12.1f %9.2f %9.2f %8.2f %10.2f %10.2f %10.2f %12.2f %10.2f %8ld %5d %13.2f %8s %8s "
           "%9s %9.2f %9.2f\n",
           dt_dtype_name(p), f->sps, f->ms, f->wait_ms, f->sps / base, f->mem.params / M, f->mem.grads / M,
           f->mem.optimizer / M, f->mem.activations / M, f->mem.workspace / M, f->skipped, rs->zero, sent / M,
           setting_text((int)rs->overlap, (int)rs->overlapped), setting_text((int)rs->graphs, (int)rs->graphed),
           synth_text(rs->synth, rs->synth_on_device), rs->min_ms, rs->max_ms);
    if (o->clip > 0)
        printf("    clipping: %ld of %ld stepped timed steps over norm %g (norms %.4g to %.4g before "
               "clipping)\n",
               f->cs.clipped, f->cs.steps, o->clip, f->cs.lo, f->cs.hi);
    fputs(f->prof, stdout);
    fflush(stdout);
}

/* A list flag's values as given ("fp32,bf16"): one line, compared as a whole. */
static void list_line(cli_flags_text *a, const char *flag, const char *const *v, int n)
{
    char t[64] = "";
    for (int i = 0; i < n; i++) snprintf(t + strlen(t), sizeof t - strlen(t), ",%s" + !i, v[i]);
    cli_flags_line(a, "%s %s", flag, t);
}

/* Every flag but --loader-threads (the rank's own cores), which every rank must share: the ranks
 * time one training step together. Another --steps, --warmup, --profile or list of rows left ranks
 * waiting in a step the others never took until the watchdog's deadline; another --batch,
 * --optim or --clip-grad-norm was timed under rank 0's header without a word. */
static int step_flags_agree(dt_ctx *ctx, const step_opts *o, int *shared)
{
    static const char *const set[] = {"0", "1", "auto"};        /* dt_step_overlap, dt_graphs: OFF, ON, AUTO */
    static const char *const on[] = {"auto", "host", "device"}; /* dt_synthetic_on */
    const char *prec[3], *zero[2], *over[3], *graphs[3], *synth[3];
    for (int i = 0; i < o->nprec; i++) prec[i] = dt_dtype_name(o->prec[i]);
    for (int i = 0; i < o->nzero; i++) zero[i] = set[o->zero[i] != 0];
    for (int i = 0; i < o->noverlap; i++) over[i] = set[o->overlap[i]];
    for (int i = 0; i < o->ngraphs; i++) graphs[i] = set[o->graphs[i]];
    for (int i = 0; i < o->nsynth; i++) synth[i] = on[o->synth[i]];
    cli_flags_text a = {{0}, 0};
    cli_flags_line(&a, "--batch %d", o->batch);
    cli_flags_line(&a, "--steps %d", o->steps);
    cli_flags_line(&a, "--warmup %d", o->warmup);
    cli_flags_line(&a, "--profile %d", o->profile);
    cli_flags_line(&a, "--optim %s", o->optim == DT_OPTIM_ADAMW ? "adamw" : "sgd");
    cli_flags_line(&a, "--clip-grad-norm %s", CLI_F64_TEXT(o->clip));
    cli_flags_line(&a, "--defer-verdict %d", o->defer_verdict);
    cli_flags_line(&a, "--fused-relu %d", o->fused_relu);
    list_line(&a, "--precision", prec, o->nprec);
    list_line(&a, "--zero", zero, o->nzero);
    list_line(&a, "--step-overlap", over, o->noverlap);
    list_line(&a, "--graphs", graphs, o->ngraphs);
    list_line(&a, "--synthetic-on", synth, o->nsynth);
    cli_flags_line(&a, "--input %s", o->input ? o->input : "(the preset's)");
    cli_flags_line(&a, "--model %s", o->model);
    return cli_flags_agree(ctx, "bench step flags (but --loader-threads), since the ranks time one step together", &a,
                           shared);
}

int cmd_bench_step(int argc, char **argv)
{
    step_opts o = {.model = "mlp",
                   .batch = 128,
                   .steps = 50,
                   .warmup = 5,
                   .prec = {DT_F32, DT_BF16, DT_F16},
                   .nprec = 3,
                   .loader_threads = -1,
                   .zero = {0, 1},
                   .nzero = 1,
                   .optim = DT_OPTIM_SGD,
                   .overlap = {DT_STEP_OVERLAP_AUTO},
                   .noverlap = 1,
                   .graphs = {DT_GRAPHS_AUTO},
                   .ngraphs = 1,
                   .synth = {DT_SYNTHETIC_AUTO},
                   .nsynth = 1,
                   .defer_verdict = 1,
                   .fused_relu = 1};
    dt_config cfg;
    cli_extra extra = {step_options, step_handle, &o, NULL};
    cli_job job;
    int rc = cli_start(argc, argv, "bench step", &cfg, &extra, &job);
    if (rc) return rc;
    dt_ctx *ctx = job.ctx;
    const dt_placement pl = job.pl;
    const int rank = job.rank, world = job.world;
    int shared = 0;
    if ((rc = step_flags_agree(ctx, &o, &shared))) return cli_end_failed(ctx, rc, shared);
    o.loader_threads = cli_loader_auto(ctx, o.loader_threads);
    /* A model that cannot be built is refused before the header, not after it with no rows. */
    model_spec spec;
    const dt_status bad_model = model_spec_parse(o.model, o.input, &spec);
    if (!bad_model) model_spec_free(&spec);
    /* Every rank parses the same flags: a refusal is said once, and every rank ends by itself. So
     * is --synthetic-on device on the CPU, which each row's loader would refuse on every rank of a
     * CPU job, each rank then aborting the job. */
    char why[2048] = "";
    if (bad_model) cli_status_text(why, sizeof why, "--model", bad_model);
    rc = bad_model == DT_ERR_INVALID_ARG ? EXIT_USAGE : bad_model ? EXIT_FAIL : EXIT_OK;
    for (int i = 0; !rc && i < o.nsynth; i++) {
        cli_error_capture(why, sizeof why);
        rc = cli_synthetic_on_check(&pl, o.synth[i]);
        cli_error_capture(NULL, 0);
    }
    if ((rc = cli_agree_failure(ctx, rc, why, &shared))) return cli_end_failed(ctx, rc, shared);
    if (rank == 0) print_header(&o, &pl, world);
    double base = 0;
    for (int i = 0; i < o.nprec; i++)
        for (int zvg = 0; zvg < o.nzero * o.noverlap * o.ngraphs * o.nsynth; zvg++) {
            /* Rows in the order of the flags' lists, the last flag's changing fastest. */
            const int di = zvg % o.nsynth, gi = zvg / o.nsynth % o.ngraphs;
            const int v = zvg / (o.nsynth * o.ngraphs) % o.noverlap, z = zvg / (o.nsynth * o.ngraphs * o.noverlap);
            row_figures f = {0};
            row_setting rs = {.zero = o.zero[z], .overlap = o.overlap[v], .graphs = o.graphs[gi], .synth = o.synth[di]};
            dt_status s = bench_step_run(ctx, &o, o.prec[i], &rs, &f);
            /* The summary is the rank's that ran out; a peer's failure reported here is a plain one. */
            if (s == DT_ERR_NOMEM && !status_from_peer())
                return step_oom(ctx, &o, i, o.zero[z], pl.device == DT_DEVICE_CUDA, status_shared(s));
            if (s) return cli_fail(ctx, s, dt_dtype_name(o.prec[i]));
            if (i == 0 && zvg == 0) base = f.sps;
            if (rank == 0) print_row(&o, o.prec[i], &rs, &f, base, world);
        }
    return cli_finish(ctx, EXIT_OK);
}
