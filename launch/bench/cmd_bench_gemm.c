/*
 * cmd_bench_gemm.c - `dtrain bench gemm`: C = A B for square n x n matrices, in TFLOP/s on the CPU
 * (OpenBLAS sgemm on all the cores this rank is bound to) and on the GPU (cuBLAS cublasGemmEx in
 * fp32, tf32, bf16 and fp16), and the GPU/CPU ratio: the comparison users run first.
 *
 * Both sides multiply the same seeded matrices (uniform in [-1, 1)). A product's time is the mean
 * over timed repetitions after a warm-up one, repeated until --iters or about --max-seconds; each
 * row says how many (reps), and the CPU's, each timed alone, its fastest and slowest (a GPU's run
 * back to back between two events, the only way to time it without a gap between products). Each
 * result is checked: 16 sampled entries of C against fp64 sums over the inputs as the GEMM saw them
 * (rounded to bf16/fp16/tf32), relative to sum |a_ik b_kj|; the tolerance is by type (fp32 1e-5,
 * tf32 5e-3, bf16 1e-2, fp16 2e-3: the input rounding plus the output rounding of the 16-bit
 * types, and accumulation-order slack), and a larger error prints WRONG and fails the command.
 * OpenBLAS 0.3.21 (Debian 12) has no 16-bit or tf32 GEMM, so the CPU runs fp32 only and every
 * GPU/CPU ratio is against CPU fp32, as such comparisons usually are. The largest --n's matrices
 * must fit this rank's host budget before any is made (gemm_memory_check).
 *
 * At several ranks every rank runs every product, and a barrier starts each size's CPU side and
 * each GPU type together: without it a rank still on the previous size (or its fp64 check) shares
 * the node's memory bandwidth and cores with another's timed products, an unnamed contention in
 * that rank's figure. A row is then the slowest rank's (merge_ranks), what a data-parallel job
 * waits for, where rank 0's own figure hid a slow rank.
 */
#include "launch/bench/bench_gemm.h"
#include "launch/cli.h"
#include "launch/doctor/doctor_memory.h"
#include "base/clock.h"
#include "base/host_budget.h"

#include <cblas.h>
#include <getopt.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/backend.h"

static const char *type_name[GEMM_NTYPES] = {"fp32", "tf32", "bf16", "fp16"};
static const double type_tol[GEMM_NTYPES] = {1e-5, 5e-3, 1e-2, 2e-3};

#define GEMM_MAX_SIZES 16

typedef struct gemm_opts {
    size_t n[GEMM_MAX_SIZES];
    int nn;
    int types[GEMM_NTYPES];
    int warmup, iters;
    double max_s;
    int cpu, gpu;
} gemm_opts;

enum { OPT_N = 256, OPT_DTYPE, OPT_ITERS, OPT_WARMUP, OPT_MAXS, OPT_NO_CPU, OPT_NO_GPU };

static const struct option gemm_options[] = {
    {"n", required_argument, NULL, OPT_N},
    {"dtype", required_argument, NULL, OPT_DTYPE},
    {"iters", required_argument, NULL, OPT_ITERS},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"max-seconds", required_argument, NULL, OPT_MAXS},
    {"no-cpu", no_argument, NULL, OPT_NO_CPU},
    {"no-gpu", no_argument, NULL, OPT_NO_GPU},
    {NULL, 0, NULL, 0},
};

static int add_size(const char *item, void *ud)
{
    gemm_opts *o = ud;
    long v;
    if (cli_long("--n (a comma-separated list of sizes)", item, 1, 65536, &v)) return EXIT_USAGE;
    o->n[o->nn++] = (size_t)v;
    return EXIT_OK;
}

static int add_type(const char *item, void *ud)
{
    gemm_opts *o = ud;
    int k = 0;
    while (k < GEMM_NTYPES && strcmp(item, type_name[k])) k++;
    if (k == GEMM_NTYPES) {
        cli_error("--dtype '%s' is not one of fp32, tf32, bf16, fp16", item);
        return EXIT_USAGE;
    }
    o->types[k] = 1;
    return EXIT_OK;
}

static int parse_sizes(const char *arg, gemm_opts *o)
{
    o->nn = 0;
    return cli_list("--n", arg, GEMM_MAX_SIZES, add_size, o);
}

static int parse_types(const char *arg, gemm_opts *o)
{
    memset(o->types, 0, sizeof o->types);
    return cli_list("--dtype", arg, GEMM_NTYPES * 4, add_type, o);
}

static int gemm_handle(int val, const char *arg, void *ud)
{
    gemm_opts *o = ud;
    switch (val) {
        case OPT_N: return parse_sizes(arg, o);
        case OPT_DTYPE: return parse_types(arg, o);
        case OPT_ITERS: return cli_int("--iters", arg, 1, 100000, &o->iters);
        case OPT_WARMUP: return cli_int("--warmup", arg, 0, 100000, &o->warmup);
        case OPT_MAXS: {
            float v;
            int rc = cli_float("--max-seconds", arg, 0.01, 3600, &v);
            o->max_s = v;
            return rc;
        }
        case OPT_NO_CPU: o->cpu = 0; return EXIT_OK;
        case OPT_NO_GPU: o->gpu = 0; return EXIT_OK;
    }
    return EXIT_USAGE;
}

/* The flags together, before dt_init: something to measure. */
static int gemm_flags_check(dt_config *cfg, void *ud)
{
    (void)cfg;
    gemm_opts *o = ud;
    if (!o->cpu && !o->gpu) {
        cli_error("--no-cpu with --no-gpu leaves nothing to measure: drop one of them");
        return EXIT_USAGE;
    }
    /* The CPU has fp32 alone: its product would be timed and shown in no row. */
    if (!o->gpu && !o->types[GEMM_FP32]) {
        cli_error("--no-gpu with --dtype of tf32, bf16, fp16 alone leaves nothing to measure (the CPU runs fp32 "
                  "only): add fp32 to --dtype, or drop --no-gpu");
        return EXIT_USAGE;
    }
    /* Without the GPU a tf32, bf16 or fp16 row would hold only dashes: fp32's row alone. */
    if (!o->gpu)
        for (int t = 0; t < GEMM_NTYPES; t++)
            if (t != GEMM_FP32) o->types[t] = 0;
    return EXIT_OK;
}

/* The host memory of size n: A and B, C for the CPU side, and the GPU side's 16-bit copies of A
 * and B. Of the largest --n against this rank's host budget (base/host_budget.h), before anything
 * is allocated: past it malloc still succeeds (overcommit), and the fill or the product then
 * swaps, timing the disk, or the kernel kills the rank without a word. Collective: every rank
 * refuses together, and ranks whose budgets are alike (one limit, nodes of one kind) say it once
 * (cli_agree_failure), not once each. *shared: cli_agree_failure's. */
static int gemm_memory_check(dt_ctx *ctx, const gemm_opts *o, int local_ranks, int *shared)
{
    size_t n = 0;
    for (int i = 0; i < o->nn; i++) n = o->n[i] > n ? o->n[i] : n;
    const int half = o->gpu && (o->types[GEMM_BF16] || o->types[GEMM_FP16]);
    const size_t per = (size_t)(2 + o->cpu) * sizeof(float) + (half ? 2 * sizeof(uint16_t) : 0);
    const size_t need = n * n * per;
    size_t total = 0, avail = 0;
    char why[192];
    if (doctor_meminfo_read(&total, &avail, why, sizeof why)) avail = 0;
    host_budget hb;
    host_budget_get(&hb, avail, local_ranks, NULL);
    char msg[1024] = "";
    if (hb.kind != HOST_BUDGET_NONE && need > hb.bytes) {
        char nb[24], hbs[24];
        host_budget_bytes(need, nb, sizeof nb);
        host_budget_bytes(hb.bytes, hbs, sizeof hbs);
        /* The largest n whose matrices fit, rounded down to a multiple of 256. */
        size_t fit = 0;
        while ((fit + 256) * (fit + 256) * per <= hb.bytes) fit += 256;
        char hint[64] = "nothing fits: free host memory";
        if (fit) snprintf(hint, sizeof hint, "use --n %zu or less", fit);
        snprintf(msg, sizeof msg,
                 "--n %zu needs %s of host memory for its matrices, more than this rank's %s of %s: %s", n, nb, hbs,
                 hb.source, hint);
    }
    return cli_agree_failure(ctx, msg[0] ? EXIT_USAGE : EXIT_OK, msg, shared);
}

/* DTRAIN_TEST_GEMM_SLOW=R:MS (a test hook): rank R's every timed CPU product takes MS ms longer,
 * a slow rank to show that a row is the slowest rank's. 0 on every other rank, and without it. */
static unsigned slow_hook_us(int rank)
{
    const char *v = getenv("DTRAIN_TEST_GEMM_SLOW");
    int r = -1, ms = 0;
    if (!v || sscanf(v, "%d:%d", &r, &ms) != 2 || r != rank || ms < 0) return 0;
    return (unsigned)ms * 1000u;
}

static void cpu_run(size_t n, const gemm_opts *o, const float *a, const float *b, float *c, int rank, gemm_result *r)
{
    const int N = (int)n;
    const unsigned slow_us = slow_hook_us(rank);
    memset(r, 0, sizeof *r);
    for (int w = 0; w < o->warmup; w++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, a, N, b, N, 0.0f, c, N);
    /* Each product timed alone, so the row can show the spread as well as the mean: on a shared
     * machine a mean alone hides whether every product ran slow or a few were descheduled. One
     * clock read between each product and the next (as the loop's deadline needs anyway), so the
     * products' times sum to the loop's. */
    const double t0 = clock_now_s();
    double t = 0, last = t0;
    int done = 0;
    while (done < o->iters && (done == 0 || t < o->max_s)) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, a, N, b, N, 0.0f, c, N);
        if (slow_us) usleep(slow_us);
        const double now = clock_now_s(), one = now - last;
        r->min_ms = done == 0 || 1e3 * one < r->min_ms ? 1e3 * one : r->min_ms;
        r->max_ms = 1e3 * one > r->max_ms ? 1e3 * one : r->max_ms;
        last = now;
        t = now - t0;
        done++;
    }
    r->ran = 1;
    r->reps = done;
    r->ms = 1e3 * t / done;
    r->tflops = 2.0 * (double)n * (double)n * (double)n / (t / done) * 1e-12;
    size_t rows[GEMM_SAMPLES], cols[GEMM_SAMPLES];
    float vals[GEMM_SAMPLES];
    gemm_sample_points(n, rows, cols);
    for (int s = 0; s < GEMM_SAMPLES; s++) vals[s] = c[rows[s] * n + cols[s]];
    r->max_err = gemm_check(a, b, n, GEMM_FP32, rows, cols, vals, GEMM_SAMPLES);
}

#ifndef DTRAIN_HAVE_CUDA
int gemm_gpu_run(size_t n, gemm_type t, int warmup, int iters, double max_s, const float *a, const float *b,
                 gemm_result *r)
{
    memset(r, 0, sizeof *r);
    snprintf(r->note, sizeof r->note, "this dtrain was built without CUDA");
    return -1;
}
void gemm_gpu_describe(char *buf, size_t len) { snprintf(buf, len, "none (built without CUDA)"); }
#endif

/* gemm_gpu_run, or under DTRAIN_TEST_GEMM_GPU=nomem|error (a test hook: no GPU needed) what it
 * returns for a size that does not fit and for a failed cuBLAS call. */
static int gpu_run(size_t n, gemm_type t, const gemm_opts *o, const float *a, const float *b, gemm_result *r)
{
    const char *fake = getenv("DTRAIN_TEST_GEMM_GPU");
    if (!fake || !*fake) return gemm_gpu_run(n, t, o->warmup, o->iters, o->max_s, a, b, r);
    memset(r, 0, sizeof *r);
    const int error = !strcmp(fake, "error");
    if (error)
        snprintf(r->note, sizeof r->note, "cublasGemmEx(...): cuBLAS status 13 (test hook)");
    else
        snprintf(r->note, sizeof r->note, "3 matrices of %zu x %zu need more than is free (test hook)", n, n);
    return error;
}

/* r over every rank, in place (at world > 1): the slowest rank's mean (and the TFLOP/s of it), the
 * fewest reps, the fastest and slowest product of any rank's, the worst error; run only where every
 * rank ran it (else the slowest is unknown: ran 0, and *some_ran says whether any rank did).
 * Collective. Returns the MPI error code. */
static int merge_ranks(size_t n, gemm_result *r, int *some_ran)
{
    /* Maxima only: minima negated, and a NaN error (which a max would compare away) as inf. */
    double v[7] = {r->ran ? 0 : 1,
                   r->ran,
                   r->ms,
                   -(double)r->reps,
                   r->ran ? -r->min_ms : -INFINITY,
                   r->max_ms,
                   isnan(r->max_err) ? INFINITY : r->max_err};
    const int rc = MPI_Allreduce(MPI_IN_PLACE, v, 7, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return rc;
    *some_ran = v[1] > 0;
    r->ran = v[0] == 0;
    if (!r->ran) return MPI_SUCCESS;
    r->ms = v[2];
    r->reps = (int)-v[3];
    r->min_ms = -v[4];
    r->max_ms = v[5];
    r->max_err = isinf(v[6]) ? NAN : v[6];
    r->tflops = 2.0 * (double)n * (double)n * (double)n / (r->ms * 1e-3) * 1e-12;
    return MPI_SUCCESS;
}

/* Every rank at this point before any starts what comes next (world > 1). */
static int gemm_barrier(dt_ctx *ctx, int world)
{
    if (world < 2 || dt_barrier(ctx) == DT_OK) return 0;
    cli_error("the barrier before a timed product failed: %s", dt_last_error());
    return 1;
}

/* A side's repetitions, and with spread its fastest and slowest product ("-" when not run): single
 * tokens, so every row has the same columns. */
static void print_reps(const gemm_result *r, int spread)
{
    char mm[48] = "-";
    if (r->ran) snprintf(mm, sizeof mm, "%.2f-%.2f", r->min_ms, r->max_ms);
    if (r->ran)
        printf(" %5d", r->reps);
    else
        printf(" %5s", "-");
    if (spread) printf(" %17s", mm);
}

static void print_cell(const gemm_result *r, int digits_ms)
{
    if (r->ran)
        printf(" %10.*f %11.3f", digits_ms, r->ms, r->tflops);
    else
        printf(" %10s %11s", "-", "-");
}

/* Rank 0's header: what is multiplied, on which cores and GPU, how rows are made, the columns. */
static void print_header(const gemm_opts *o, const dt_placement *pl, int world, const char *gpu_desc)
{
    printf("# dtrain bench gemm: C = A B, n x n x n, fp32 in and out (bf16/fp16: 16-bit in and out, fp32 "
           "accumulation), 2 n^3 flops\n");
    printf("# CPU: OpenBLAS %s kernels, %d thread%s on cores %s%s\n", dt_blas_corename(), pl->blas_threads,
           cli_s(pl->blas_threads), pl->cores, o->cpu ? "" : " (not run: --no-cpu)");
    printf("# GPU: %s%s\n", gpu_desc, o->gpu ? "" : " (not run: --no-gpu)");
    if (world > 1)
        printf("# all %d ranks run every product, each size's CPU side and each GPU type started together (a "
               "barrier); a row is the slowest rank's: its mean, the fewest reps, min-max over every rank's "
               "products, the worst error\n",
               world);
    if (o->gpu && o->cpu)
        printf("# OpenBLAS has no tf32/bf16/fp16 GEMM: the CPU column is fp32, and GPU/CPU is against it\n");
    printf("# ms: the mean of one product over reps timed ones after %d warm-up (--iters %d, fewer once "
           "--max-seconds %g is spent); CPU min-max: its fastest and slowest product\n",
           o->warmup, o->iters, o->max_s);
    printf("# %7s %6s %10s %11s %10s %11s %8s %5s %17s %5s %10s %6s\n", "n", "type", "CPU ms", "CPU TFLOP/s", "GPU ms",
           "GPU TFLOP/s", "GPU/CPU", "reps", "CPU min-max ms", "reps", "max err", "check");
    fflush(stdout);
}

/* What the rows add up to, for the last lines: results outside the tolerance, GPU products that
 * failed, and whether the GPU is gone for good (no GPU at all: gpu_note says why). */
typedef struct gemm_totals {
    int wrong, failed, gpu_gone;
    char gpu_note[160];
} gemm_totals;

/* Rank 0's row of size n, type t. cpu_row: the CPU's result on the fp32 row, else NULL; cpu (the
 * ratio's) is CPU fp32 on every row. grc: gpu_run's return; mine_ran: whether this rank's GPU ran
 * it (gpu: every rank's merged). */
static void print_row(size_t n, gemm_type t, const gemm_result *cpu_row, const gemm_result *cpu, const gemm_result *gpu,
                      double err, int bad, int grc, int mine_ran)
{
    printf("  %7zu %6s", n, type_name[t]);
    static const gemm_result none = {0};
    print_cell(cpu_row ? cpu_row : &none, 2);
    print_cell(gpu, 3);
    if (gpu->ran && cpu->ran)
        printf(" %8.1f", gpu->tflops / cpu->tflops);
    else
        printf(" %8s", "-");
    print_reps(cpu_row ? cpu_row : &none, 1);
    print_reps(gpu, 0);
    if (isnan(err))
        printf(" %10s %6s\n", "-", "-");
    else
        printf(" %10.2e %6s\n", err, bad ? "WRONG" : "ok");
    /* Why this row's GPU cell is empty (no GPU at all: one line at the end). */
    if (grc >= 0 && !mine_ran && gpu->note[0])
        printf("#   GPU %s: %s\n", grc ? "FAILED" : "not run", gpu->note);
    else if (mine_ran && !gpu->ran)
        printf("#   GPU not run on every rank (the others say why on stderr): no slowest time\n");
    fflush(stdout);
}

/* Size n, type t on the GPU (every rank's merged) and its row, counted in tot. 0, or 1 when the
 * barrier or the merge failed (*mrc: the merge's MPI error; MPI_SUCCESS for the barrier's). */
static int gpu_type_row(dt_ctx *ctx, const gemm_opts *o, size_t n, gemm_type t, const float *a, const float *b,
                        const gemm_result *cpu, int rank, int world, gemm_totals *tot, int *mrc)
{
    gemm_result gpu = {0};
    int some_ran = 0;
    if (gemm_barrier(ctx, world)) return 1;
    const int grc = tot->gpu_gone ? 0 : gpu_run(n, t, o, a, b, &gpu);
    if (grc < 0) {
        tot->gpu_gone = 1;
        snprintf(tot->gpu_note, sizeof tot->gpu_note, "%s", gpu.note);
    }
    tot->failed += grc > 0;
    const int mine_ran = gpu.ran;
    if (world > 1 && (*mrc = merge_ranks(n, &gpu, &some_ran))) return 1;
    /* A rank whose GPU did not run where another's did empties the row: it says why. */
    if (some_ran && !mine_ran && rank != 0 && gpu.note[0])
        cli_error("rank %d: GPU not run at n %zu %s: %s", rank, n, type_name[t], gpu.note);
    const gemm_result *cpu_row = t == GEMM_FP32 ? cpu : NULL;
    const double err = gpu.ran ? gpu.max_err : cpu_row && cpu_row->ran ? cpu_row->max_err : NAN;
    const int bad = (gpu.ran && !(gpu.max_err <= type_tol[t])) ||
                    (cpu_row && cpu_row->ran && !(cpu_row->max_err <= type_tol[GEMM_FP32]));
    tot->wrong += bad;
    if (rank == 0) print_row(n, t, cpu_row, cpu, &gpu, err, bad, grc, mine_ran);
    return 0;
}

/* Size n's CPU side, every rank's merged into cpu. 0, or 1 when the barrier or the merge failed
 * (*mrc: the merge's MPI error). */
static int cpu_side(dt_ctx *ctx, const gemm_opts *o, size_t n, const float *a, const float *b, float *c, int rank,
                    int world, gemm_result *cpu, int *mrc)
{
    int some_ran = 0;
    if (gemm_barrier(ctx, world)) return 1;
    cpu_run(n, o, a, b, c, rank, cpu);
    return world > 1 && (*mrc = merge_ranks(n, cpu, &some_ran)) != MPI_SUCCESS;
}

/* Size n: its seeded matrices, the CPU side, then each GPU type's row. 0, or 1 once it said why
 * (out of host memory, a failed barrier or merge): the caller aborts the job. */
static int bench_size(dt_ctx *ctx, const gemm_opts *o, size_t n, int rank, int world, gemm_totals *tot)
{
    float *a = malloc(n * n * sizeof *a), *b = malloc(n * n * sizeof *b);
    float *c = o->cpu ? malloc(n * n * sizeof *c) : NULL;
    if (!a || !b || (o->cpu && !c)) {
        free(a), free(b), free(c);
        cli_error("out of host memory for three %zu x %zu matrices (%.1f GiB): use a smaller --n", n, n,
                  3.0 * (double)n * (double)n * 4 / (1 << 30));
        return 1;
    }
    gemm_fill(a, n, 1);
    gemm_fill(b, n, 2);
    gemm_result cpu = {0};
    int mrc = MPI_SUCCESS;
    int failed = o->cpu && cpu_side(ctx, o, n, a, b, c, rank, world, &cpu, &mrc);
    for (int t = 0; !failed && t < GEMM_NTYPES; t++)
        if (o->types[t]) failed = gpu_type_row(ctx, o, n, (gemm_type)t, a, b, &cpu, rank, world, tot, &mrc);
    free(a), free(b), free(c);
    if (mrc != MPI_SUCCESS) cli_error("MPI_Allreduce of the ranks' timings failed (MPI error %d)", mrc);
    return failed;
}

/* Every flag of the benchmark, which every rank must share: a row is the slowest rank's. Another
 * --n on a rank merged its other size's times into rank 0's row without a word; another --dtype,
 * --no-cpu or --no-gpu left ranks at barriers the others never reached until the deadline. */
static int gemm_flags_agree(dt_ctx *ctx, const gemm_opts *o, int *shared)
{
    char ns[GEMM_MAX_SIZES * 8] = "", ts[32] = "";
    for (int i = 0; i < o->nn; i++) snprintf(ns + strlen(ns), sizeof ns - strlen(ns), ",%zu" + !i, o->n[i]);
    for (int t = 0; t < GEMM_NTYPES; t++)
        if (o->types[t]) snprintf(ts + strlen(ts), sizeof ts - strlen(ts), ",%s" + !ts[0], type_name[t]);
    cli_flags_text a = {{0}, 0};
    cli_flags_line(&a, "--n %s", ns);
    cli_flags_line(&a, "--dtype %s", ts);
    cli_flags_line(&a, "--iters %d --warmup %d --max-seconds %s", o->iters, o->warmup, CLI_F64_TEXT(o->max_s));
    cli_flags_line(&a, "--no-cpu %d --no-gpu %d", !o->cpu, !o->gpu);
    return cli_flags_agree(ctx, "bench gemm flags, since a row is the slowest rank's", &a, shared);
}

int cmd_bench_gemm(int argc, char **argv)
{
    gemm_opts o = {.nn = 3,
                   .n = {4096, 8192, 10000},
                   .types = {1, 1, 1, 1},
                   .warmup = 1,
                   .iters = 20,
                   .max_s = 3.0,
                   .cpu = 1,
                   .gpu = 1};
    dt_config cfg;
    cli_extra extra = {gemm_options, gemm_handle, &o, gemm_flags_check};
    cli_job job;
    /* The benchmark wants this rank's cores for OpenBLAS and its GPU: placement does both. */
    int rc = cli_start(argc, argv, "bench gemm", &cfg, &extra, &job);
    if (rc) return rc;
    dt_ctx *ctx = job.ctx;
    const dt_placement pl = job.pl;
    const int rank = job.rank, world = job.world;

    /* A refusal every rank knows of (shared); a failed exchange of it may be this rank's alone. */
    int shared = 0;
    if ((rc = gemm_flags_agree(ctx, &o, &shared))) return cli_end_failed(ctx, rc, shared);
    if ((rc = gemm_memory_check(ctx, &o, pl.local_size, &shared))) return cli_end_failed(ctx, rc, shared);
    char gpu_desc[256];
    gemm_gpu_describe(gpu_desc, sizeof gpu_desc);
    if (rank == 0) print_header(&o, &pl, world, gpu_desc);
    /* OpenBLAS spins for ever where its working buffer cannot be mapped (kernels/cpu/blas_reserve.c). */
    if (o.cpu && backend_cpu_blas_reserve() != DT_OK) {
        cli_error("%s", dt_last_error());
        dt_abort_job(ctx, EXIT_FAIL);
        return EXIT_FAIL;
    }
    gemm_totals tot = {.gpu_gone = !o.gpu};
    for (int si = 0; si < o.nn; si++)
        if (bench_size(ctx, &o, o.n[si], rank, world, &tot)) {
            dt_abort_job(ctx, EXIT_FAIL);
            return EXIT_FAIL;
        }
    if (rank == 0 && o.gpu && tot.gpu_gone && tot.gpu_note[0]) printf("# GPU columns skipped: %s\n", tot.gpu_note);
    if (rank == 0 && tot.wrong)
        cli_error("%d result(s) outside the tolerance (fp32 1e-5, tf32 5e-3, bf16 1e-2, fp16 2e-3 of sum |a b|): "
                  "the GEMM library or the device is computing wrong values",
                  tot.wrong);
    if (tot.failed)
        cli_error("rank %d: %d GPU product(s) failed with a CUDA or cuBLAS error (the '# GPU FAILED' lines name the "
                  "call): their GPU columns are empty, not measured",
                  rank, tot.failed);
    return cli_finish(ctx, tot.wrong || tot.failed ? EXIT_FAIL : EXIT_OK);
}
