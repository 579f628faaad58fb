/*
 * cmd_bench_reducer.c - `dtrain bench reducer`: what the gradient reducer (include/dtrain/reducer.h)
 * gains a user's own training loop, measured side by side in one run.
 *
 * The loop is what a user writes against the public header: a stack of L fully connected layers
 * of width W (x W_l^T + b_l, ReLU between layers, softmax cross-entropy over the W outputs of the
 * last), batch B per rank, fp32 parameters and gradients in flat host buffers, forward and backward
 * by dt_sgemm. It runs in five variants, interleaved round by round (one step of each per round,
 * their order rotating, so a slow phase of a shared machine falls on all of them alike):
 *
 *   A  the reducer: backward calls dt_reducer_ready() for each layer as soon as its weight and
 *      bias gradients are final (last layer first), dt_reducer_wait() after backward;
 *   B  the same loop, then one blocking dt_allreduce() of the whole gradient;
 *   C  the same loop with no communication (compute only);
 *   D  that allreduce alone;
 *   E  A with overlap off: the same reducer, buckets and engine, every bucket started in wait().
 *
 * A against B is what a user gains by moving from the blocking call to the reducer; A against E is
 * what overlap alone gains, since the two differ in nothing else (B against E is the blocking
 * dt_allreduce against the reducer's engine: different transports, see below).
 *
 * Each step starts after a barrier (not timed) and its time is the slowest rank's; the table holds
 * the median over the timed rounds (and the min and max). From those: A/B (below 1 when the
 * reducer pays), D/B (the share of a blocking step spent communicating: a model where overlap
 * matters has at least a third), the fraction of communication hidden, (B - A) / D, and overlap's
 * own, (E - A) / (E - C) (E - C is the engine's communication in a blocking step), both clamped to
 * [0, 1].
 * A, B and E take the same batch in each round, so A's and E's gradients of the last round must be
 * equal bit for bit (the engine adds every element in rank order whatever the buckets), and B's
 * too where MPI adds in rank order (up to 3 ranks on one node); from 4 ranks MPI may add in
 * another order, so B's must be within 1e-5 of the largest gradient: the run fails otherwise.
 * With --wire fp16|bf16, B and D use a reducer with one bucket and overlap off (a blocking
 * allreduce at wait()) instead of dt_allreduce, which has no 16-bit wire for fp32 buffers, so
 * that A and B send the same bytes and round alike. No optimizer runs: it would cost
 * every variant the same.
 *
 * Why 2 cores allow little overlap (bench/REDUCER-NOTES.md has the runs): at -np 2 on the 2-core VM
 * each rank is bound to one core. Overlap needs something other than that core to move and add the
 * bytes, and on one machine there is nothing else: MPI's shared-memory transport copies with the
 * CPU, the sums are CPU work, and the communication thread that drives them (the engine calls the
 * blocking MPI_Allreduce on it at 2 ranks) runs on the core the GEMMs use. So a bucket reduced
 * during backward takes its time out of backward instead of hiding it: with the defaults, A's
 * compute is 1-5 ms slower than C's while A's wait() still leaves 14-18 ms exposed, against 15-17
 * ms of communication in E, and A/E is 0.97-1.13 (median 1.11: overlap costs a little, the thread's
 * switching), with the thread or inline (DTRAIN_COMM_THREAD=0: 1.06-1.11) and with one bucket
 * per layer (--bucket-mb 4: 0.98-1.09). A still beats B (A/B 0.74-0.85) but not by overlap:
 * dt_allreduce of host memory is MPI_Iallreduce polled against the deadline with a roll call and
 * a division pass, 1.3-1.4x slower here than the engine's blocking MPI_Allreduce (B/E), which is
 * also why (B-A)/D reads 0.23-0.45 while (E-A)/(E-C) is 0. A GPU (NCCL on its own stream, copy
 * engines and NVLink doing the moving) or a NIC with its own DMA is what hides communication.
 */
#include "launch/cli.h"
#include "collectives/ctx_comm.h"
#include "base/clock.h"
#include "base/median.h"
#include "base/status.h"

#include <getopt.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_PARAMS (1ULL << 28) /* per buffer: 1 GiB of fp32; the bench holds five such buffers */

typedef struct red_opts {
    int layers, width, batch, steps, warmup;
    float bucket_mb, first_bucket_mb; /* < 0: the reducer's default */
    dt_dtype wire;
} red_opts;

enum { OPT_LAYERS = 256, OPT_WIDTH, OPT_BATCH, OPT_STEPS, OPT_WARMUP, OPT_BUCKET, OPT_FIRST, OPT_WIRE };

static const struct option red_options[] = {
    {"layers", required_argument, NULL, OPT_LAYERS},
    {"width", required_argument, NULL, OPT_WIDTH},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"steps", required_argument, NULL, OPT_STEPS},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"bucket-mb", required_argument, NULL, OPT_BUCKET},
    {"first-bucket-mb", required_argument, NULL, OPT_FIRST},
    {"wire", required_argument, NULL, OPT_WIRE},
    {NULL, 0, NULL, 0},
};

static int red_handle(int val, const char *arg, void *ud)
{
    red_opts *o = ud;
    switch (val) {
        case OPT_LAYERS: return cli_int("--layers", arg, 1, 4096, &o->layers);
        case OPT_WIDTH: return cli_int("--width", arg, 2, 1 << 16, &o->width);
        case OPT_BATCH: return cli_int("--batch", arg, 1, 1 << 16, &o->batch);
        case OPT_STEPS: return cli_int("--steps", arg, 1, 1 << 20, &o->steps);
        case OPT_WARMUP: return cli_int("--warmup", arg, 0, 1 << 20, &o->warmup);
        case OPT_BUCKET: return cli_float("--bucket-mb", arg, 0, 1e6, &o->bucket_mb);
        case OPT_FIRST: return cli_float("--first-bucket-mb", arg, 0, 1e6, &o->first_bucket_mb);
        case OPT_WIRE: return cli_float_dtype("--wire", arg, &o->wire);
    }
    return EXIT_USAGE;
}

/* The flags together, before dt_init: the size of the net, and host memory only. */
static int red_check(dt_config *cfg, void *ud)
{
    const red_opts *o = ud;
    const unsigned long long n = ((unsigned long long)o->width * o->width + o->width) * (unsigned long long)o->layers;
    if (n > MAX_PARAMS) {
        cli_error("--layers %d x --width %d is %llu parameters, more than 2^28 (1 GiB of fp32 per buffer, and the "
                  "bench holds five): lower --layers or --width",
                  o->layers, o->width, n);
        return EXIT_USAGE;
    }
    if (cfg->device == DT_DEVICE_CUDA) {
        cli_error("dtrain bench reducer measures host-memory buffers only: drop --device cuda (or DTRAIN_DEVICE=cuda)");
        return EXIT_USAGE;
    }
    cfg->device = DT_DEVICE_CPU;
    return EXIT_OK;
}

/* The model and the buffers every variant shares, and each variant's own gradients. */
typedef struct net {
    int L, W, B, world;
    size_t per_layer, n; /* W*W + W; L * per_layer */
    float *p;            /* parameters: layer l's W_l (W, W) then b_l (W) at l * per_layer */
    float **act;         /* act[0] = x (B, W), act[l+1] = layer l's output (B, W) */
    float *dz, *dtmp;    /* gradient of a layer's output, of its input (B, W) */
    int32_t *labels;
    float *g[5]; /* gradients of each variant but D (g[VD] is NULL: D reduces C's) */
} net;

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33, x *= 0xff51afd7ed558ccdULL, x ^= x >> 33, x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

/* A uniform value in [-a, a) from a counter: the same on every machine. */
static float uniform(uint64_t key, float a) { return a * (2.0f * (float)(mix(key) >> 40) / 16777216.0f - 1.0f); }

/* Round r's batch on this rank (every variant of a round takes the same one). */
static void make_batch(net *m, int rank, int round)
{
    const uint64_t base = ((uint64_t)(unsigned)round << 40) ^ ((uint64_t)(unsigned)rank << 56);
    for (size_t i = 0; i < (size_t)m->B * m->W; i++) m->act[0][i] = uniform(base + i, 1.0f);
    for (int i = 0; i < m->B; i++) m->labels[i] = (int32_t)(mix(base ^ (0x5bd1e995ULL + (uint64_t)i)) % m->W);
}

static void forward(net *m)
{
    const int B = m->B, W = m->W;
    for (int l = 0; l < m->L; l++) {
        const float *w = m->p + (size_t)l * m->per_layer, *b = w + (size_t)W * W;
        float *y = m->act[l + 1];
        for (int i = 0; i < B; i++) memcpy(y + (size_t)i * W, b, (size_t)W * sizeof *y);
        dt_sgemm(0, 1, B, W, W, 1.0f, m->act[l], W, w, W, 1.0f, y, W); /* y = x W^T + b */
        if (l < m->L - 1)
            for (size_t i = 0; i < (size_t)B * W; i++) y[i] = y[i] > 0 ? y[i] : 0;
    }
}

/* Backward into g, last layer first; red non-NULL: each layer's range is marked ready the moment
 * its gradients are final, before the gradient of its input is computed. */
static dt_status backward(net *m, float *g, dt_reducer *red)
{
    const int B = m->B, W = m->W;
    int correct;
    dt_softmax_xent(m->act[m->L], m->labels, m->dz, B, W, 1.0f / (float)B, &correct);
    for (int l = m->L - 1; l >= 0; l--) {
        const size_t off = (size_t)l * m->per_layer;
        float *gw = g + off, *gb = gw + (size_t)W * W;
        dt_sgemm(1, 0, W, W, B, 1.0f, m->dz, W, m->act[l], W, 0.0f, gw, W); /* gW = dz^T x */
        memset(gb, 0, (size_t)W * sizeof *gb);
        for (int i = 0; i < B; i++)
            for (int j = 0; j < W; j++) gb[j] += m->dz[(size_t)i * W + j];
        if (red) {
            dt_status s = dt_reducer_ready(red, off, m->per_layer);
            if (s) return s;
        }
        if (l == 0) break;
        /* dx = dz W, through the ReLU of the layer below. */
        dt_sgemm(0, 0, B, W, W, 1.0f, m->dz, W, m->p + off, W, 0.0f, m->dtmp, W);
        const float *x = m->act[l];
        for (size_t i = 0; i < (size_t)B * W; i++) m->dtmp[i] = x[i] > 0 ? m->dtmp[i] : 0;
        float *t = m->dz;
        m->dz = m->dtmp, m->dtmp = t;
    }
    return DT_OK;
}

enum { VA, VB, VC, VD, VE, NV };
static const char *vname[NV] = {"A reducer, ready() per layer", "B one blocking allreduce", "C compute only",
                                "D the allreduce alone", "E reducer with overlap off"};

typedef struct variants {
    dt_reducer *red, *noov; /* A, E */
    dt_reducer *whole[2];   /* 16-bit wire only: one-bucket reducers without overlap over B's and C's buffers */
} variants;

/* The allreduce of B and D: dt_allreduce, or with a 16-bit wire a one-bucket reducer. */
static dt_status allreduce_whole(dt_ctx *ctx, const net *m, const variants *v, int which)
{
    if (!v->whole[which]) return dt_allreduce(ctx, m->g[which == 0 ? VB : VC], m->n, DT_F32, DT_AVG);
    dt_status s = dt_reducer_ready(v->whole[which], 0, m->n);
    return s ? s : dt_reducer_wait(v->whole[which]);
}

static dt_status run_variant(dt_ctx *ctx, net *m, const variants *v, int k)
{
    dt_status s = DT_OK;
    switch (k) {
        case VA:
            forward(m);
            if (!(s = backward(m, m->g[VA], v->red))) s = dt_reducer_wait(v->red);
            break;
        case VB:
            forward(m);
            if (!(s = backward(m, m->g[VB], NULL))) s = allreduce_whole(ctx, m, v, 0);
            break;
        case VC:
            forward(m);
            s = backward(m, m->g[VC], NULL);
            break;
        case VD: s = allreduce_whole(ctx, m, v, 1); break;
        case VE:
            forward(m);
            if (!(s = backward(m, m->g[VE], v->noov))) s = dt_reducer_wait(v->noov);
            break;
    }
    return s;
}

static void net_free(net *m)
{
    free(m->p);
    for (int i = 0; m->act && i <= m->L; i++) free(m->act[i]);
    free(m->act);
    free(m->dz), free(m->dtmp), free(m->labels);
    for (int k = 0; k < NV; k++) free(m->g[k]);
}

static dt_status net_alloc(net *m, const red_opts *o, int world)
{
    memset(m, 0, sizeof *m);
    m->L = o->layers, m->W = o->width, m->B = o->batch, m->world = world;
    m->per_layer = (size_t)o->width * o->width + o->width;
    m->n = m->per_layer * (size_t)o->layers;
    const size_t act = (size_t)o->batch * o->width;
    m->p = malloc(m->n * sizeof *m->p);
    m->act = calloc((size_t)o->layers + 1, sizeof *m->act);
    m->dz = malloc(act * sizeof *m->dz), m->dtmp = malloc(act * sizeof *m->dtmp);
    m->labels = malloc((size_t)o->batch * sizeof *m->labels);
    int ok = m->p && m->act && m->dz && m->dtmp && m->labels;
    for (int i = 0; ok && i <= o->layers; i++) ok = (m->act[i] = malloc(act * sizeof **m->act)) != NULL;
    for (int k = 0; ok && k < NV; k++) ok = k == VD || (m->g[k] = calloc(m->n, sizeof **m->g)) != NULL;
    if (!ok) {
        net_free(m);
        return DT_ERR_NOMEM;
    }
    /* The same weights on every rank, scaled so the activations keep their size through the stack. */
    const float a = 1.0f / (float)o->width;
    for (size_t i = 0; i < m->n; i++) m->p[i] = uniform(0x9e3779b97f4a7c15ULL + i, 2.0f * a);
    for (int l = 0; l < o->layers; l++) {
        float *b = m->p + (size_t)l * m->per_layer + (size_t)o->width * o->width;
        for (int j = 0; j < o->width; j++) b[j] = 0.01f;
    }
    return DT_OK;
}

/* A's reducer over its gradients, with the layers as ranges in backward order; with a 16-bit wire
 * also the one-bucket reducers of B and D. */
static dt_status make_reducers(dt_ctx *ctx, const net *m, const red_opts *o, variants *v)
{
    dt_range *ranges = malloc((size_t)m->L * sizeof *ranges);
    if (!ranges) return status_set_error(DT_ERR_NOMEM, "out of memory for %d ranges", m->L);
    for (int l = 0; l < m->L; l++) ranges[l] = (dt_range){(size_t)(m->L - 1 - l) * m->per_layer, m->per_layer};
    dt_reducer_config rc;
    dt_reducer_defaults(&rc);
    rc.wire = o->wire;
    if (o->bucket_mb >= 0) rc.bucket_mb = o->bucket_mb;
    if (o->first_bucket_mb >= 0) rc.first_bucket_mb = o->first_bucket_mb;
    dt_status s = dt_reducer_create(ctx, m->g[VA], m->n, ranges, m->L, &rc, &v->red);
    rc.overlap = 0;
    if (!s) s = dt_reducer_create(ctx, m->g[VE], m->n, ranges, m->L, &rc, &v->noov);
    free(ranges);
    if (s || o->wire == DT_F32) return s;
    /* Both caps 0: one bucket (a first cap alone would still close the first bucket). */
    rc.bucket_mb = rc.first_bucket_mb = 0;
    rc.overlap = 0;
    for (int i = 0; i < 2 && !s; i++)
        s = dt_reducer_create(ctx, m->g[i == 0 ? VB : VC], m->n, NULL, 0, &rc, &v->whole[i]);
    return s;
}

/* A's gradients against E's (the same engine: bit for bit, or the reducer is broken) and B's
 * (dt_allreduce: MPI's order of addition, which is rank order up to 3 ranks on one node and may be
 * another from 4, so only the last bits may differ). Summed and maxed over the ranks. */
typedef struct grads_check {
    long long differ_e, differ_b; /* elements not equal bit for bit */
    double worst_b;               /* the largest |A - B| over the largest |A| */
} grads_check;

/* Within this share of the largest gradient B may differ from A: sums of W fp32 terms in another
 * order differ by a few of their ulps, 1e-5 keeps a margin of ~80 ulps of the largest and still
 * catches a missed or doubled rank's share (what examples/custom_loop.c allows its parameters). */
#define REDUCER_B_TOLERANCE 1e-5

static grads_check grads_compare(const net *m)
{
    long long mine[2] = {0, 0}, all[2] = {0, 0};
    /* The largest |A - B| and |A| here, then over the ranks. A NaN difference counts as infinite,
     * so that MPI_MAX keeps it (its NaN handling is MPI's own) and the check below fails. */
    double local[2] = {0, 0}, most[2] = {0, 0};
    for (size_t i = 0; i < m->n; i++) {
        mine[0] += memcmp(&m->g[VA][i], &m->g[VE][i], sizeof(float)) != 0;
        mine[1] += memcmp(&m->g[VA][i], &m->g[VB][i], sizeof(float)) != 0;
        const double d = fabs((double)m->g[VA][i] - (double)m->g[VB][i]);
        local[0] = fmax(local[0], isnan(d) ? INFINITY : d);
        local[1] = fmax(local[1], fabs((double)m->g[VA][i]));
    }
    MPI_Allreduce(mine, all, 2, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(local, most, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    grads_check c = {all[0], all[1], 0};
    if (most[0] > 0) c.worst_b = most[1] > 0 ? most[0] / most[1] : INFINITY;
    return c;
}

static void print_header(dt_ctx *ctx, const net *m, const red_opts *o, const variants *v)
{
    dt_placement pl;
    dt_get_placement(ctx, &pl);
    int provided = 0;
    MPI_Query_thread(&provided);
    /* The engine's own rule (collectives/engine.c): a thread only with MPI_THREAD_MULTIPLE. */
    const int threaded = provided == MPI_THREAD_MULTIPLE && ctx_config(ctx)->comm_thread;
    const double mib = (double)m->n * 4 / 1048576.0;
    dt_reducer_config def;
    dt_reducer_defaults(&def);
    printf("# dtrain bench reducer: %d rank%s, %d fc layer%s of %dx%d (+bias), batch %d per rank, %zu parameters "
           "(%.2f MiB of fp32 gradients), host memory\n",
           m->world, cli_s(m->world), m->L, cli_s(m->L), m->W, m->W, m->B, m->n, mib);
    printf("# rank 0: cores %s (%d), %d BLAS thread%s; communication %s\n", pl.cores, pl.num_cores, pl.blas_threads,
           cli_s(pl.blas_threads), threaded ? "thread on" : "inline (DTRAIN_COMM_THREAD=0 or no MPI_THREAD_MULTIPLE)");
    printf("# A, E: %d bucket%s (caps %g / first %g MiB), wire %s; B, D: %s\n", dt_reducer_num_buckets(v->red),
           cli_s(dt_reducer_num_buckets(v->red)), o->bucket_mb >= 0 ? o->bucket_mb : def.bucket_mb,
           o->first_bucket_mb >= 0 ? o->first_bucket_mb : def.first_bucket_mb, dt_dtype_name(o->wire),
           o->wire == DT_F32 ? "dt_allreduce of the whole gradient (DT_AVG)"
                             : "a one-bucket reducer without overlap (the same wire; dt_allreduce has none)");
    printf("# %d timed round%s after %d, one step of each variant per round in rotating order, each after a "
           "barrier; a step's time is the slowest rank's\n#\n",
           o->steps, cli_s(o->steps), o->warmup);
    printf("# %-30s %10s %9s %9s %7s\n", "variant", "median ms", "min ms", "max ms", "x B");
    fflush(stdout);
}

/* Runs the rounds; t[k * steps + i]: variant k's time in round i, the slowest rank's; *warm:
 * variant A's reducer stats when the timed rounds began, for a summary of those alone. */
static dt_status run_rounds(dt_ctx *ctx, net *m, const red_opts *o, const variants *v, double *t,
                            dt_reducer_stats *warm)
{
    const int rank = dt_rank(ctx);
    dt_status s = DT_OK;
    for (int round = 0; round < o->warmup + o->steps && !s; round++) {
        if (round == o->warmup) dt_reducer_get_stats(v->red, warm);
        make_batch(m, rank, round);
        for (int j = 0; j < NV && !s; j++) {
            const int k = (j + round) % NV;
            if ((s = dt_barrier(ctx))) break;
            const double t0 = clock_now_s();
            s = run_variant(ctx, m, v, k);
            if (round >= o->warmup) t[k * o->steps + round - o->warmup] = clock_now_s() - t0;
        }
    }
    if (s) return s;
    if (MPI_Allreduce(MPI_IN_PLACE, t, NV * o->steps, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS)
        return status_set_error(DT_ERR_MPI, "MPI_Allreduce of the step times failed");
    return DT_OK;
}

static int report(dt_ctx *ctx, const net *m, const red_opts *o, const variants *v, double *t,
                  const dt_reducer_stats *warm)
{
    double med[NV];
    const int rank = dt_rank(ctx);
    for (int k = 0; k < NV; k++) {
        double *x = t + (size_t)k * o->steps;
        med[k] = median_sort(x, (size_t)o->steps); /* x sorted: its ends are the min and max below */
    }
    for (int k = 0; k < NV && rank == 0; k++) {
        const double *x = t + (size_t)k * o->steps;
        printf("  %-30s %10.3f %9.3f %9.3f %7.3f\n", vname[k], 1e3 * med[k], 1e3 * x[0], 1e3 * x[o->steps - 1],
               med[k] / med[VB]);
    }
    const grads_check gc = grads_compare(m);
    const int broken = gc.differ_e > 0 || !(gc.worst_b <= REDUCER_B_TOLERANCE);
    if (rank != 0) return broken ? EXIT_FAIL : EXIT_OK;
    char versus_b[160];
    if (!gc.differ_b)
        snprintf(versus_b, sizeof versus_b, "equal bit for bit");
    else
        snprintf(versus_b, sizeof versus_b,
                 "%s: %lld element(s) differ, by at most %.2g of the largest (MPI adds in another order)",
                 gc.worst_b <= REDUCER_B_TOLERANCE ? "within 1e-5" : "DIFFER", gc.differ_b, gc.worst_b);
    dt_reducer_stats st;
    dt_reducer_get_stats(v->red, &st);
    /* The timed rounds' alone. */
    st.wait_s -= warm->wait_s, st.steps -= warm->steps, st.overlapped -= warm->overlapped, st.starts -= warm->starts;
    const double share = med[VD] / med[VB], raw = med[VD] > 0 ? (med[VB] - med[VA]) / med[VD] : 0;
    const double hidden = raw < 0 ? 0 : raw > 1 ? 1 : raw;
    char clamp[64] = "";
    if (hidden != raw) snprintf(clamp, sizeof clamp, " (clamped from %.3f)", raw);
    printf("# A's wait() on rank 0, timed steps: %.3f ms per step exposed; %ld of %ld bucket allreduces started by "
           "ready(), before wait()\n",
           1e3 * st.wait_s / (double)(st.steps ? st.steps : 1), st.overlapped, st.starts);
    printf("summary: A/B %.3f, D/B %.3f, hidden (B-A)/D %.3f%s, A and B gradients of the last step %s\n",
           med[VA] / med[VB], share, hidden, clamp, versus_b);
    /* The engine's own communication time in a blocking step is E - C; overlap hid what A saves of it. */
    const double eng = med[VE] - med[VC], raw_e = eng > 0 ? (med[VE] - med[VA]) / eng : 0;
    const double hidden_e = raw_e < 0 ? 0 : raw_e > 1 ? 1 : raw_e;
    char clamp_e[64] = "";
    if (hidden_e != raw_e) snprintf(clamp_e, sizeof clamp_e, " (clamped from %.3f)", raw_e);
    printf("overlap alone: A/E %.3f, hidden (E-A)/(E-C) %.3f%s; B/E %.3f (dt_allreduce against the reducer's "
           "engine)\n",
           med[VA] / med[VE], hidden_e, clamp_e, med[VB] / med[VE]);
    if (m->world > 1 && share < 1.0 / 3.0)
        printf("warning: communication is %.2f of a blocking step (D/B), under the third where overlap matters: "
               "lower --batch (the bytes per step do not depend on it, the compute does)\n",
               share);
    if (m->world == 1) printf("note: 1 rank: nothing is communicated, so D/B and the hidden fraction mean nothing\n");
    fflush(stdout);
    if (gc.differ_e)
        cli_error("%lld gradient element(s) of the reducer's step differ from the same reducer's without overlap "
                  "(E): the reducer is broken",
                  gc.differ_e);
    if (!(gc.worst_b <= REDUCER_B_TOLERANCE))
        cli_error("the reducer's gradients differ from the blocking allreduce's (B) by %.3g of the largest, past "
                  "1e-5: the reducer is broken",
                  gc.worst_b);
    return broken ? EXIT_FAIL : EXIT_OK;
}

/* The reducers and the network's buffers, freed. */
static void release(variants *v, net *m)
{
    dt_reducer_free(v->red);
    dt_reducer_free(v->noov);
    dt_reducer_free(v->whole[0]);
    dt_reducer_free(v->whole[1]);
    net_free(m);
}

/* The flags every rank must share that the reducer does not compare: the ranks time one reducer
 * together. Another --steps or --warmup on a rank left the others waiting in a round it never
 * joined until the watchdog's deadline; another --batch was timed under rank 0's "batch B per
 * rank". The net's size, the caps and the wire are dt_reducer_create's to compare (it refuses
 * ranks that differ there, naming both values, said once). */
static int red_flags_agree(dt_ctx *ctx, const red_opts *o, int *shared)
{
    cli_flags_text a = {{0}, 0};
    cli_flags_line(&a, "--batch %d", o->batch);
    cli_flags_line(&a, "--steps %d", o->steps);
    cli_flags_line(&a, "--warmup %d", o->warmup);
    return cli_flags_agree(ctx, "bench reducer flags, since the ranks time one reducer together", &a, shared);
}

int cmd_bench_reducer(int argc, char **argv)
{
    red_opts o = {.layers = 6,
                  .width = 1024,
                  .batch = 16,
                  .steps = 20,
                  .warmup = 3,
                  .bucket_mb = -1,
                  .first_bucket_mb = -1,
                  .wire = DT_F32};
    dt_config cfg;
    cli_extra extra = {red_options, red_handle, &o, red_check};
    cli_job job;
    int rc = cli_start(argc, argv, "bench reducer", &cfg, &extra, &job);
    if (rc) return rc;
    dt_ctx *ctx = job.ctx;
    int shared = 0;
    if ((rc = red_flags_agree(ctx, &o, &shared))) return cli_end_failed(ctx, rc, shared);
    const unsigned long long n = ((unsigned long long)o.width * o.width + o.width) * (unsigned long long)o.layers;

    net m;
    variants v = {NULL, NULL, {NULL, NULL}};
    double *t = calloc((size_t)NV * o.steps, sizeof *t);
    dt_status s = net_alloc(&m, &o, dt_world_size(ctx));
    const int have_net = s == DT_OK;
    if (s || !t)
        s = status_set_error(DT_ERR_NOMEM, "out of memory for %llu parameters (x 5 buffers): lower --layers or --width",
                             n);
    /* Each rank allocates on its own, and a net too large for the memory limit is too large on
     * every rank alike: said once for all of them, every rank ending by itself, not once per rank
     * and an abort's banner (a rank that ran out alone says so with its rank). */
    char why[2048] = "";
    if (s) cli_status_text(why, sizeof why, NULL, s);
    if ((rc = cli_agree_failure(ctx, s ? EXIT_FAIL : EXIT_OK, why, &shared))) {
        if (have_net) net_free(&m);
        free(t);
        return cli_end_failed(ctx, rc, shared);
    }
    s = make_reducers(ctx, &m, &o, &v);
    if (!s && dt_rank(ctx) == 0) print_header(ctx, &m, &o, &v);
    dt_reducer_stats warm = {0};
    if (!s) s = run_rounds(ctx, &m, &o, &v, t, &warm);
    if (s) {
        shared = status_shared(s);
        /* One every rank returned (ranks that gave the reducer other settings) is said once by the
         * ranks that met it alike, through one exchange more; a rank's own failure by that rank. */
        if (shared && dt_world_size(ctx) > 1)
            rc = cli_say_shared_failure(ctx, s, NULL, &shared);
        else
            cli_status_error(NULL, s), rc = EXIT_FAIL;
        /* A rank that may have failed alone must not wait for its peers (nor free reducers whose
         * collectives they may still be in): the job is aborted. One every rank knows of (a reducer
         * no rank could make) frees what it made and ends with every rank finalizing. */
        if (shared) release(&v, &m);
        free(t);
        return cli_end_failed(ctx, rc, shared);
    }
    rc = report(ctx, &m, &o, &v, t, &warm);
    release(&v, &m);
    free(t);
    return cli_finish(ctx, rc);
}
