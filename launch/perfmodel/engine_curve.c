/*
 * engine_curve.c - the tables of `dtrain model-perf --engine-curve` (engine_curve.h): for each
 * bucket size, each scale's modelled busbw of MPI's ring, the direct algorithm, the chain, and the
 * algorithm the engine would take with its busbw against the ring's. busbw, not the time, so that
 * sizes and scales compare on one axis (nccl-tests' convention: an algorithm moving the bytes at
 * the link's rate reads as the link's rate whatever the scale).
 */
#include "launch/perfmodel/engine_curve.h"
#include "launch/cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

const char *mp_size_text(double bytes, char *buf, int n)
{
    static const char *const unit[] = {"GiB", "MiB", "KiB"};
    for (int i = 0; i < 3; i++) {
        const double u = ldexp(1, 10 * (3 - i));
        if (bytes >= u && fmod(bytes, u) == 0) {
            snprintf(buf, (size_t)n, "%.0f %s", bytes / u, unit[i]);
            return buf;
        }
    }
    snprintf(buf, (size_t)n, "%.0f bytes", bytes);
    return buf;
}

/* The engine's pick as bench allreduce names it (engine_algo_name): MPI_Allreduce at 2 ranks. */
static const char *pick_name(hm_algo a) { return a == HM_RING ? "mpi" : hm_algo_name(a); }

static void curve_model(mp_curve *c, double bytes, const int *scales, int nscales, hm_net net)
{
    static const hm_algo algos[] = {HM_DIRECT, HM_CHAIN, HM_RING, HM_ENGINE};
    c->bytes = bytes;
    c->n = 0;
    for (int k = 0; k < nscales && c->n < MP_CURVE_MAX_POINTS; k++) {
        net.world = scales[k];
        c->ranks[c->n] = scales[k];
        for (int a = 0; a < 4; a++)
            c->busbw[algos[a]][c->n] = hm_busbw(scales[k], bytes, hm_allreduce_time(&net, algos[a], bytes));
        c->pick[c->n++] = hm_engine_pick(&net, bytes);
    }
}

static void curve_print(const mp_curve *c, hm_net net)
{
    char sz[32];
    printf("# %s (%.0f bytes): modelled busbw in GB/s (bytes / time x 2 (W-1)/W); the engine's choice and its "
           "busbw against MPI's ring\n",
           mp_size_text(c->bytes, sz, sizeof sz), c->bytes);
    printf("#  ranks  nodes   ring(MPI)     direct      chain | engine      busbw  engine/ring\n");
    for (int k = 0; k < c->n; k++) {
        net.world = c->ranks[k];
        const double ring = c->busbw[HM_RING][k], eng = c->busbw[HM_ENGINE][k];
        printf("  %6d %6d %11.4g %10.4g %10.4g | %-6s %10.4g", c->ranks[k], hm_nodes(&net), ring / 1e9,
               c->busbw[HM_DIRECT][k] / 1e9, c->busbw[HM_CHAIN][k] / 1e9, pick_name(c->pick[k]), eng / 1e9);
        if (ring > 0)
            printf(" %12.3f\n", eng / ring);
        else
            printf(" %12s\n", "-"); /* one rank: nothing moves */
    }
}

int mp_engine_curve(const double *sizes, int nsizes, const int *scales, int nscales, hm_net net, const char *plot)
{
    printf("# engine curve: %d ranks a node; between nodes %.4g GB/s a node each way, %.4g us a hop; within a node "
           "%.4g GB/s a rank, %.4g us a message; %.4g us of host work a message; chain segments of %.0f bytes\n",
           net.per_node, net.inter.bw / 1e9, net.inter.alpha_s * 1e6, net.intra.bw / 1e9, net.intra.alpha_s * 1e6,
           net.msg_s * 1e6, net.seg_bytes);
    mp_curve *curves = calloc((size_t)nsizes, sizeof *curves);
    if (!curves) {
        cli_error("model-perf: out of memory for %d curves", nsizes);
        return EXIT_FAIL;
    }
    for (int i = 0; i < nsizes; i++) {
        curve_model(&curves[i], sizes[i], scales, nscales, net);
        curve_print(&curves[i], net);
    }
    int rc = EXIT_OK;
    if (plot && mp_curve_plot(plot, curves, nsizes, &net)) rc = EXIT_FAIL;
    free(curves);
    return rc;
}
