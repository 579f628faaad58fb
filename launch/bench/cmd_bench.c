/*
 * cmd_bench.c - `dtrain bench allreduce`: an nccl-tests-style bandwidth benchmark of the
 * communication engine's allreduce (collectives/engine.h, what training uses for its gradient
 * buckets), side by side with MPI_Allreduce on the same buffer sizes in the same run.
 *
 * For each size from -b to -e (times -f): fill a host buffer with rank-dependent small integers
 * (exact in fp32, so every sum is exact whatever the order), run --warmup allreduces, then time
 * --iters of engine_start + engine_wait_all; the time of a size is the largest over the ranks of
 * each rank's mean (nccl-tests' -a 3: its default, -a 1, averages the ranks' means, but the job
 * waits for the slowest rank), and each side's fastest and slowest single iteration over every
 * rank's timed ones follow the ratio (from 10 us an iteration: BENCH_SPREAD_FROM_S). Then the same for MPI_Allreduce(MPI_IN_PLACE, MPI_SUM) on a
 * duplicate of the world communicator.
 *
 * The allreduces are in place, as training's are, so each reduces the last one's result: a sum over
 * W ranks multiplies every value by W, and fp16's would be inf within 13 iterations at 2 ranks,
 * timing whatever path inf takes. So the iterations run in blocks (bench_block), each after a fresh
 * fill and a barrier that are not timed, no longer than keeps every value an integer the type
 * holds exactly. After the timed blocks the last one's result is compared, element by element, with
 * the exact value after its iterations, and so is one more allreduce of a fresh fill: #wrong counts
 * the differences (an inf or NaN among them) over all ranks, and any fails the run.
 *
 * algbw = bytes / time; busbw = algbw * 2 (n - 1) / n, what each rank's link carries in an optimal
 * allreduce, so busbw is comparable across rank counts (and 0 on one rank, where nothing moves).
 */
#include "launch/cli.h"
#include "base/clock.h"
#include "collectives/ctx_comm.h"
#include "collectives/engine.h"
#include "launch/bench/bench_args.h"
#include "launch/bench/bench_values.h"

#include <getopt.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_MAX_BYTES (4ULL << 30)  /* 1 Gi floats: MPI counts are ints */
#define BENCH_RATIO_FROM (4ULL << 20) /* the minimum ratio is reported from 4 MiB up */
/* Iterations are timed one by one (for min-max) from this long a warm-up iteration: a clock read,
 * 40-55 ns here, is then under 0.5% of the time it adds to. Shorter ones are timed a block at a
 * time, as nccl-tests times its loop, since a read per iteration would be 8% of a 0.5 us MPI call. */
#define BENCH_SPREAD_FROM_S 10e-6
#define BENCH_ABORTED (-1) /* run_allreduce: the job was aborted, MPI is gone */

typedef struct bench_opts {
    unsigned long long minbytes, maxbytes;
    int maxbytes_set;
    long factor, iters, warmup;
    dt_redop op;
    dt_dtype wire; /* what the engine sends: fp32, or fp16/bf16 copies of the fp32 buffer */
} bench_opts;

enum { OPT_MINBYTES = 256, OPT_MAXBYTES, OPT_STEPFACTOR, OPT_ITERS, OPT_WARMUP, OPT_OP, OPT_DTYPE };

static const struct option bench_options[] = {
    {"minbytes", required_argument, NULL, OPT_MINBYTES},     {"maxbytes", required_argument, NULL, OPT_MAXBYTES},
    {"stepfactor", required_argument, NULL, OPT_STEPFACTOR}, {"iters", required_argument, NULL, OPT_ITERS},
    {"warmup", required_argument, NULL, OPT_WARMUP},         {"op", required_argument, NULL, OPT_OP},
    {"dtype", required_argument, NULL, OPT_DTYPE},           {NULL, 0, NULL, 0},
};

/* A byte count of -b/-e (cli_bytes), up to BENCH_MAX_BYTES. */
static int parse_bytes(const char *flag, const char *arg, unsigned long long *out)
{
    return cli_bytes(flag, arg, BENCH_MAX_BYTES, "8, 64K, 64M", out);
}

static int bench_handle(int val, const char *arg, void *ud)
{
    bench_opts *b = ud;
    switch (val) {
        case OPT_MINBYTES: return parse_bytes("-b/--minbytes", arg, &b->minbytes);
        case OPT_MAXBYTES: b->maxbytes_set = 1; return parse_bytes("-e/--maxbytes", arg, &b->maxbytes);
        case OPT_STEPFACTOR: return cli_long("-f/--stepfactor", arg, 2, 1024, &b->factor);
        case OPT_ITERS: return cli_long("--iters", arg, 1, 1000000000L, &b->iters);
        case OPT_WARMUP: return cli_long("--warmup", arg, 0, 1000000000L, &b->warmup);
        case OPT_OP:
            if (!strcmp(arg, "sum"))
                b->op = DT_SUM;
            else if (!strcmp(arg, "avg"))
                b->op = DT_AVG;
            else {
                cli_error("--op '%s' is not one of sum, avg", arg);
                return EXIT_USAGE;
            }
            return EXIT_OK;
        case OPT_DTYPE: return cli_float_dtype("--dtype", arg, &b->wire);
    }
    return EXIT_USAGE;
}

typedef struct bench_run {
    engine *eng;
    MPI_Comm comm;
    float *buf;
    int rank, world;
    dt_dtype wire;
    long block[2]; /* iterations between fills (bench_block): the engine's, MPI's */
} bench_run;

static int mpi_fail(const char *what, int rc)
{
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    cli_error("%s failed: %s", what, msg);
    return EXIT_FAIL;
}

/* The largest over ranks of each rank's mean seconds per iteration, and over every rank's
 * iterations the fastest and slowest one (mine[1], mine[2] into spread[0], spread[1]). */
static int max_over_ranks(bench_run *b, const double mine[3], double *out, double spread[2])
{
    double hi[2] = {mine[0], mine[2]}, got[2];
    int rc = MPI_Allreduce(hi, got, 2, MPI_DOUBLE, MPI_MAX, b->comm);
    if (rc == MPI_SUCCESS) rc = MPI_Allreduce(&mine[1], &spread[0], 1, MPI_DOUBLE, MPI_MIN, b->comm);
    if (rc != MPI_SUCCESS) return mpi_fail("MPI_Allreduce of the timings", rc);
    *out = got[0];
    spread[1] = got[1];
    return EXIT_OK;
}

static int sum_over_ranks(bench_run *b, long long mine[2], long long out[2])
{
    int rc = MPI_Allreduce(mine, out, 2, MPI_LONG_LONG, MPI_SUM, b->comm);
    return rc == MPI_SUCCESS ? EXIT_OK : mpi_fail("MPI_Allreduce of the error counts", rc);
}

static int engine_once(bench_run *b, size_t count, dt_redop op)
{
    dt_status s = engine_start(b->eng, b->buf, count, op, 0, b->wire);
    if (!s) s = engine_wait_all(b->eng);
    if (s) {
        char what[64];
        snprintf(what, sizeof what, "engine allreduce of %zu floats", count);
        cli_status_error(what, s);
        return EXIT_FAIL;
    }
    return EXIT_OK;
}

static int mpi_once(bench_run *b, size_t count)
{
    int rc = MPI_Allreduce(MPI_IN_PLACE, b->buf, (int)count, MPI_FLOAT, MPI_SUM, b->comm);
    return rc == MPI_SUCCESS ? EXIT_OK : mpi_fail("MPI_Allreduce", rc);
}

/* The run's next size, the last one times --stepfactor: 0 when that would pass --maxbytes (the
 * sizes printed in the header's algorithm line and measured below step alike). */
static int next_size(const bench_opts *o, unsigned long long *bytes)
{
    if (*bytes > o->maxbytes / (unsigned long long)o->factor) return 0;
    *bytes *= (unsigned long long)o->factor;
    return 1;
}

/* Times one implementation at one size (which = 0 the engine, 1 MPI) in blocks of b->block[which]
 * iterations, each after a fresh fill and a barrier, neither timed; then checks the last block's
 * result and one allreduce of a fresh fill against their exact values. wrong[0]: the elements
 * that differ, over all ranks; wrong[1]: of those, the ones not finite. */
static int measure(bench_run *b, int which, size_t count, const bench_opts *o, double *t_iter, double spread[2],
                   long long wrong[2])
{
    int rc;
    const dt_redop op = which == 0 ? o->op : DT_SUM;
    const dt_dtype wire = which == 0 ? b->wire : DT_F32;
    const long block = b->block[which];
    double warm = 0;
    for (long w = 0; w < o->warmup; w++) {
        if (w % block == 0) bench_fill(b->buf, count, b->rank);
        const double t0 = clock_now_s();
        if ((rc = which == 0 ? engine_once(b, count, op) : mpi_once(b, count))) return rc;
        warm += clock_now_s() - t0;
    }
    /* Long iterations are timed one by one, a clock read between each and the next, for the spread:
     * a mean alone cannot tell a steady allreduce from one whose iterations now and then wait for a
     * descheduled peer. Short ones (BENCH_SPREAD_FROM_S) leave fast and slow -1: no spread. */
    const int each = o->warmup == 0 || warm / (double)o->warmup >= BENCH_SPREAD_FROM_S;
    double spent = 0, fast = -1, slow = -1;
    long n = 0;
    for (long done = 0; done < o->iters; done += n) {
        n = o->iters - done < block ? o->iters - done : block;
        bench_fill(b->buf, count, b->rank);
        if ((rc = MPI_Barrier(b->comm)) != MPI_SUCCESS) return mpi_fail("MPI_Barrier", rc);
        const double t0 = clock_now_s();
        double last = t0;
        for (long it = 0; it < n; it++) {
            if ((rc = which == 0 ? engine_once(b, count, op) : mpi_once(b, count))) return rc;
            if (!each) continue;
            const double now = clock_now_s(), one = now - last;
            fast = fast < 0 || one < fast ? one : fast;
            slow = one > slow ? one : slow;
            last = now;
        }
        spent += (each ? last : clock_now_s()) - t0;
    }
    const double times[3] = {spent / (double)o->iters, fast, slow};
    if ((rc = max_over_ranks(b, times, t_iter, spread))) return rc;

    long long mine[2] = {0, 0};
    float want[BENCH_FILL_PERIOD];
    bench_expected_after(b->world, op, wire, n, want); /* the last block's n iterations */
    bench_count_wrong(b->buf, count, want, &mine[0], &mine[1]);
    bench_fill(b->buf, count, b->rank);
    if ((rc = which == 0 ? engine_once(b, count, op) : mpi_once(b, count))) return rc;
    bench_expected_after(b->world, op, wire, 1, want);
    bench_count_wrong(b->buf, count, want, &mine[0], &mine[1]);
    return sum_over_ranks(b, mine, wrong);
}

static void human_bytes(unsigned long long v, char *buf, size_t n)
{
    if (v >= (1ULL << 30) && v % (1ULL << 30) == 0)
        snprintf(buf, n, "%lluG", v >> 30);
    else if (v >= (1ULL << 20) && v % (1ULL << 20) == 0)
        snprintf(buf, n, "%lluM", v >> 20);
    else if (v >= (1ULL << 10) && v % (1ULL << 10) == 0)
        snprintf(buf, n, "%lluK", v >> 10);
    else
        snprintf(buf, n, "%llu", v);
}

/* The run's own duplicate of the world communicator, its engine and its buffer of maxcount floats.
 * EXIT_OK, or EXIT_FAIL after printing why. */
static int bench_open(bench_run *b, dt_ctx *ctx, size_t maxcount)
{
    int mrc;
    dt_status s;
    if ((mrc = MPI_Comm_dup(ctx_world_comm(ctx), &b->comm)) != MPI_SUCCESS) {
        b->comm = MPI_COMM_NULL;
        return mpi_fail("MPI_Comm_dup of the world communicator", mrc);
    }
    MPI_Comm_set_errhandler(b->comm, MPI_ERRORS_RETURN);
    if ((s = engine_create(ctx_world_comm(ctx), ctx_timeout(ctx), ctx_config(ctx)->comm_thread,
                           ctx_config(ctx)->allreduce, &b->eng))) {
        cli_status_error(NULL, s);
        return EXIT_FAIL;
    }
    if (!(b->buf = malloc(maxcount * sizeof *b->buf))) {
        cli_error("out of memory for a %zu-byte buffer: lower -e/--maxbytes", maxcount * sizeof *b->buf);
        return EXIT_FAIL;
    }
    return EXIT_OK;
}

/* Rank 0's header: the run's settings, what each column means, and the column names. */
static void print_header(const bench_run *b, dt_ctx *ctx, const bench_opts *o, const char *tname, size_t es)
{
    char lo[32], hi[32];
    human_bytes(o->minbytes, lo, sizeof lo);
    human_bytes(o->maxbytes, hi, sizeof hi);
    printf("# dtrain bench allreduce: %d rank%s, engine %s, op %s, %s, sizes %s to %s x%ld, iters "
           "%ld, warmup %ld\n",
           b->world, cli_s(b->world),
           engine_threaded(b->eng) ? "threaded (communication thread)"
                                   : "inline (no MPI_THREAD_MULTIPLE, or DTRAIN_COMM_THREAD=0)",
           o->op == DT_AVG ? "avg" : "sum", dt_dtype_name(o->wire), lo, hi, o->factor, o->iters, o->warmup);
    printf("# dtrain: engine_start + engine_wait_all on host memory; MPI: MPI_Allreduce(MPI_IN_PLACE, "
           "MPI_FLOAT, MPI_SUM)%s\n",
           o->op == DT_AVG ? " (sum: MPI has no average)" : "");
    if (o->wire != DT_F32)
        printf("# --dtype %s: the engine sends 16-bit copies of fp32 buffers (size = its bytes on the wire); MPI "
               "reduces the same count in fp32 (twice the bytes, its algbw from those); ratio = MPI time / "
               "dtrain time for the same count\n",
               tname);
    /* Which algorithm the engine takes at each size (engine.h, DTRAIN_ALLREDUCE): its
     * transitions over the run's sizes. */
    printf("# dtrain algorithm by size (DTRAIN_ALLREDUCE=%s):", dt_allreduce_algo_name(ctx_config(ctx)->allreduce));
    const char *prev = NULL;
    for (unsigned long long by = o->minbytes;;) {
        const size_t cnt = by / es ? (size_t)(by / es) : 1;
        const char *name = o->wire == DT_F32 ? engine_algo_name(b->eng, cnt) : b->world > 1 ? "direct" : "none";
        if (!prev || strcmp(prev, name) != 0) printf("%s %s from %zu bytes", prev ? "," : "", name, cnt * es);
        prev = name;
        if (!next_size(o, &by)) break;
    }
    printf("\n");
    printf("# time: the largest over ranks of each rank's mean per iteration; algbw = size / time, busbw = "
           "algbw * 2(n-1)/n; ratio = %s\n",
           o->wire == DT_F32 ? "dtrain busbw / MPI busbw = MPI time / dtrain time"
                             : "MPI time / dtrain time for the same count (twice the busbw ratio on a 16-bit wire)");
    printf("# in place: each iteration reduces the last one's result, which a sum over %d rank%s multiplies "
           "by %d, so the buffer is filled afresh (not timed, then a barrier) every %ld iterations of dtrain and "
           "%ld of MPI, the most that keep every value an integer the type holds exactly; #wrong: elements of "
           "the last timed result and of one allreduce of a fresh fill that are not their exact value\n",
           b->world, cli_s(b->world), b->world, b->block[0], b->block[1]);
    if (b->world == 1)
        printf("# note: 1 rank: nothing moves between ranks, so busbw = algbw * 2(n-1)/n is 0, and algbw is "
               "size over the time of a call that moves and adds nothing (no bandwidth); the ratio still "
               "compares times\n");
    printf("# min-max(us): the fastest and slowest single iteration over every rank's timed ones; - where a "
           "warm-up iteration took under %.0f us, too short to time one by one without the clock reads "
           "adding to the mean\n",
           BENCH_SPREAD_FROM_S * 1e6);
    printf("#\n#%11s %10s %7s %16s %12s %12s %7s %14s %8s %8s %7s %10s %21s %17s\n", "size", "count", "type",
           "dtrain time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong", "MPI time(us)", "algbw", "busbw", "#wrong",
           o->wire == DT_F32 ? "ratio(busbw dtrain/MPI)" : "ratio(MPI/dtrain time)", "dtrain min-max(us)",
           "MPI min-max(us)");
    fflush(stdout);
}

/* What the rows add up to, for the summary and the verdict. */
typedef struct bench_totals {
    double bus_sum[2], min_ratio; /* min_ratio -1: no size from BENCH_RATIO_FROM */
    size_t min_ratio_bytes;
    int rows;
    long long wrong, nonfinite;
} bench_totals;

/* One size, `bytes`: the engine's and MPI's timings and checks (collective), and rank 0's row.
 * EXIT_OK, or the failure's code after printing why. */
static int bench_size(bench_run *b, const bench_opts *o, unsigned long long bytes, const char *tname, size_t es,
                      bench_totals *tot)
{
    const double busf = b->world > 1 ? 2.0 * (b->world - 1) / b->world : 0.0;
    size_t count = bytes / es ? (size_t)(bytes / es) : 1;
    size_t size = count * es, size_mpi = count * sizeof(float);
    double t[2], spread[2][2];
    long long wrong[2], bad[2][2];
    int rc;
    for (int which = 0; which < 2; which++) {
        if ((rc = measure(b, which, count, o, &t[which], spread[which], bad[which]))) return rc;
        wrong[which] = bad[which][0];
        tot->nonfinite += bad[which][1];
    }
    double alg[2], bus[2];
    for (int k = 0; k < 2; k++) {
        alg[k] = t[k] > 0 ? (double)(k == 0 ? size : size_mpi) / t[k] / 1e9 : 0;
        bus[k] = alg[k] * busf;
        tot->bus_sum[k] += bus[k];
    }
    double ratio = t[0] > 0 ? t[1] / t[0] : 0;
    if (size >= BENCH_RATIO_FROM && (tot->min_ratio < 0 || ratio < tot->min_ratio)) {
        tot->min_ratio = ratio;
        tot->min_ratio_bytes = size;
    }
    tot->wrong += wrong[0] + wrong[1];
    tot->rows++;
    if (b->rank == 0) {
        char mm[2][64];
        for (int k = 0; k < 2; k++)
            if (spread[k][0] < 0) /* some rank's iterations too short to time one by one */
                snprintf(mm[k], sizeof mm[k], "-");
            else
                snprintf(mm[k], sizeof mm[k], "%.1f-%.1f", 1e6 * spread[k][0], 1e6 * spread[k][1]);
        printf("%12zu %10zu %7s %16.1f %12.3f %12.3f %7lld %14.1f %8.3f %8.3f %7lld %10.3f %21s %17s\n", size, count,
               tname, 1e6 * t[0], alg[0], bus[0], wrong[0], 1e6 * t[1], alg[1], bus[1], wrong[1], ratio, mm[0], mm[1]);
        fflush(stdout);
    }
    return EXIT_OK;
}

/* Rank 0's summary lines, nccl-tests' names. */
static void print_summary(const bench_run *b, const bench_opts *o, const bench_totals *tot)
{
    printf("# Out of bounds values : %lld %s\n", tot->wrong, tot->wrong ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : dtrain %.3f GB/s, MPI %.3f GB/s%s\n", tot->bus_sum[0] / tot->rows,
           tot->bus_sum[1] / tot->rows, b->world == 1 ? " (0 on 1 rank)" : "");
    if (tot->min_ratio >= 0)
        printf("# Min ratio from 4 MiB : %.3f (%s, at %zu bytes)\n", tot->min_ratio,
               o->wire == DT_F32 ? "busbw dtrain/MPI" : "MPI time / dtrain time", tot->min_ratio_bytes);
    else
        printf("# Min ratio from 4 MiB : - (no size of 4 MiB or more)\n");
    fflush(stdout);
}

static int run_allreduce(dt_ctx *ctx, const bench_opts *o)
{
    bench_run b = {.eng = NULL,
                   .comm = MPI_COMM_NULL,
                   .buf = NULL,
                   .rank = dt_rank(ctx),
                   .world = dt_world_size(ctx),
                   .wire = o->wire};
    int rc = EXIT_OK;
    const size_t es = dt_dtype_size(o->wire);
    const char *tname = o->wire == DT_F16 ? "half" : o->wire == DT_BF16 ? "bf16" : "float";
    const size_t maxcount = o->maxbytes / es ? (size_t)(o->maxbytes / es) : 1;
    b.block[0] = bench_block(b.world, o->op, o->wire);
    b.block[1] = bench_block(b.world, DT_SUM, DT_F32);
    /* A test hook: a block longer than bench_block's, to show the check catching what it prevents. */
    const char *forced = getenv("DTRAIN_TEST_BENCH_BLOCK");
    if (forced && atol(forced) > 0) b.block[0] = b.block[1] = atol(forced);

    if (bench_open(&b, ctx, maxcount)) goto fail;
    if (b.rank == 0) print_header(&b, ctx, o, tname, es);
    bench_totals tot = {.min_ratio = -1};
    for (unsigned long long bytes = o->minbytes;;) {
        if (bench_size(&b, o, bytes, tname, es, &tot)) goto fail;
        if (!next_size(o, &bytes)) break;
    }
    if (b.rank == 0) print_summary(&b, o, &tot);
    if (tot.wrong) {
        if (b.rank == 0)
            cli_error(
                "%lld element(s) differ from the exact allreduce result (see #wrong), %lld of them not finite: %s",
                tot.wrong, tot.nonfinite,
                tot.nonfinite ? "the allreduce is broken, or its in-place sums outgrew the type"
                              : "the allreduce is broken");
        rc = EXIT_FAIL; /* every rank knows the total: all exit 1 together, no abort needed */
    }

    free(b.buf);
    engine_destroy(b.eng);
    MPI_Comm_free(&b.comm);
    return rc;

fail:
    /* This rank may have failed alone (out of memory, a dead peer): its peers must not wait for it.
     * dt_abort_job returns only in a world of 1, with MPI finalized: the caller must not finalize. */
    dt_abort_job(ctx, EXIT_FAIL);
    return BENCH_ABORTED;
}

/* The flags together, before dt_init: the size range, and host memory only. */
static int bench_check(dt_config *cfg, void *ud)
{
    bench_opts *o = ud;
    if (!o->maxbytes_set && o->minbytes > o->maxbytes) o->maxbytes = o->minbytes;
    if (o->minbytes > o->maxbytes) {
        char lo[32], hi[32];
        human_bytes(o->minbytes, lo, sizeof lo);
        human_bytes(o->maxbytes, hi, sizeof hi);
        cli_error("-b/--minbytes %s (%llu bytes) is larger than -e/--maxbytes %s (%llu bytes)", lo, o->minbytes, hi,
                  o->maxbytes);
        return EXIT_USAGE;
    }
    /* The engine reduces host memory: the buffers live on the CPU whatever GPU is visible. */
    if (cfg->device == DT_DEVICE_CUDA) {
        cli_error("dtrain bench allreduce measures host-memory buffers only for now: drop --device cuda "
                  "(or DTRAIN_DEVICE=cuda)");
        return EXIT_USAGE;
    }
    cfg->device = DT_DEVICE_CPU;
    return EXIT_OK;
}

/* Every flag of the benchmark, which every rank must share: the ranks time one allreduce together.
 * Another size, --iters or --warmup on a rank left the others waiting in an allreduce it never
 * joined until the watchdog's deadline; another --op or --dtype failed the run as "the allreduce
 * is broken". */
static int bench_flags_agree(dt_ctx *ctx, const bench_opts *o, int *shared)
{
    cli_flags_text a = {{0}, 0};
    cli_flags_line(&a, "-b/--minbytes %llu", o->minbytes);
    cli_flags_line(&a, "-e/--maxbytes %llu", o->maxbytes);
    cli_flags_line(&a, "-f/--stepfactor %ld", o->factor);
    cli_flags_line(&a, "--iters %ld", o->iters);
    cli_flags_line(&a, "--warmup %ld", o->warmup);
    cli_flags_line(&a, "--op %s", o->op == DT_AVG ? "avg" : "sum");
    cli_flags_line(&a, "--dtype %s", dt_dtype_name(o->wire));
    return cli_flags_agree(ctx, "bench allreduce flags, since the ranks time one allreduce together", &a, shared);
}

int cmd_bench(int argc, char **argv)
{
    if (argc < 2) {
        cli_error("name a benchmark: dtrain bench allreduce|gemm|step|data|reducer [options] (see dtrain help bench)");
        return EXIT_USAGE;
    }
    const char *name = argv[1];
    if (!strcmp(name, "-h") || !strcmp(name, "--help")) {
        dt_config cfg;
        return cli_parse_common(argc, argv, "bench", &cfg); /* prints the usage and exits 0 */
    }
    if (!strcmp(name, "gemm")) return cmd_bench_gemm(argc - 1, argv + 1);
    if (!strcmp(name, "step")) return cmd_bench_step(argc - 1, argv + 1);
    if (!strcmp(name, "data")) return cmd_bench_data(argc - 1, argv + 1);
    if (!strcmp(name, "reducer")) return cmd_bench_reducer(argc - 1, argv + 1);
    if (strcmp(name, "allreduce") != 0) {
        if (name[0] == '-')
            cli_error("the first argument of dtrain bench must be the benchmark name (allreduce, gemm, step, data, "
                      "reducer), not '%s'",
                      name);
        else
            cli_error("unknown benchmark '%s'; the benchmarks are allreduce, gemm, step, data, reducer (see dtrain "
                      "help bench)",
                      name);
        return EXIT_USAGE;
    }

    bench_opts o = {
        .minbytes = 8, .maxbytes = 64ULL << 20, .factor = 2, .iters = 20, .warmup = 5, .op = DT_SUM, .wire = DT_F32};
    int nargc = 0, nowned = 0;
    char **owned = NULL;
    char **nargv = bench_rewrite_args(argc, argv, &nargc, &owned, &nowned);
    if (!nargv) {
        cli_error("out of memory parsing the command line");
        return EXIT_FAIL;
    }
    dt_config cfg;
    cli_extra extra = {bench_options, bench_handle, &o, bench_check};
    cli_job job;
    int rc = cli_start(nargc, nargv, "bench allreduce", &cfg, &extra, &job);
    for (int i = 0; i < nowned; i++) free(owned[i]);
    free(owned);
    free(nargv);
    if (rc) return rc;
    int shared = 0;
    if ((rc = bench_flags_agree(job.ctx, &o, &shared))) return cli_end_failed(job.ctx, rc, shared);
    rc = run_allreduce(job.ctx, &o);
    if (rc == BENCH_ABORTED) return EXIT_FAIL;
    return cli_finish(job.ctx, rc);
}
