/*
 * comm_check.c - doctor's communication check: timed fp32 allreduces over the world (8 bytes for
 * latency, 1 MiB and 64 MiB for bandwidth, through dt_allreduce as training does), and one
 * allreduce inside each node at once, so that a node slower than the others stands out; then
 * the verdict over the numbers (pure, for the unit test).
 *
 * A time is the slowest rank's (the collective ends for everyone when it ends for the last), the
 * median of a few repetitions after one warm-up. Bus bandwidth is algbw * 2(n-1)/n: what each
 * link of a ring carries, comparable across world sizes (nccl-tests' definition).
 */
#include "launch/doctor/doctor.h"
#include "base/clock.h"
#include "base/median.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

enum { COMM_REPS = 5, COMM_REPS_BIG = 3 };
#define MIB ((size_t)1 << 20)

/* Bus bandwidth (B/s) of an allreduce of `bytes` over n ranks taking t seconds; 0 for no time. */
static double busbw(double bytes, double t, int n) { return t > 0 ? bytes / t * 2.0 * (n - 1) / n : 0; }

/* The slowest rank's median time of reps allreduces of count floats; < 0 on failure (error set). */
static double time_world(dt_ctx *ctx, float *buf, size_t count, int reps, doctor_comm_facts *out)
{
    double t[COMM_REPS + 1];
    for (int r = 0; r <= reps; r++) { /* r == 0 warms up: first-touch pages, connections */
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = clock_now_s();
        dt_status s = dt_allreduce(ctx, buf, count, DT_F32, DT_SUM);
        const double dt = clock_now_s() - t0;
        if (s != DT_OK) {
            snprintf(out->error, sizeof out->error, "allreduce of %zu floats: %s", count, dt_last_error());
            return -1;
        }
        if (r) t[r - 1] = dt;
    }
    MPI_Allreduce(MPI_IN_PLACE, t, reps, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return median_sort(t, (size_t)reps);
}

/* This node's own allreduce busbw (B/s) over comm (the node's ranks), every node at once. */
static double time_node(MPI_Comm node, float *buf, size_t count)
{
    int n = 1;
    MPI_Comm_size(node, &n);
    if (n < 2) return 0;
    double t[COMM_REPS_BIG];
    for (int r = 0; r <= COMM_REPS_BIG; r++) {
        MPI_Barrier(node);
        const double t0 = clock_now_s();
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, node);
        const double dt = clock_now_s() - t0;
        if (r) t[r - 1] = dt;
    }
    MPI_Allreduce(MPI_IN_PLACE, t, COMM_REPS_BIG, MPI_DOUBLE, MPI_MAX, node);
    return busbw((double)(count * sizeof(float)), median_sort(t, COMM_REPS_BIG), n);
}

void doctor_comm_measure(dt_ctx *ctx, const dt_placement *pl, const char *skip, doctor_comm_facts *out)
{
    memset(out, 0, sizeof *out);
    if (skip) {
        snprintf(out->skipped, sizeof out->skipped, "%s", skip);
        return;
    }
    const size_t big = 64 * MIB / sizeof(float);
    float *buf = calloc(big, sizeof *buf);
    int ok = buf != NULL, all_ok = 0;
    /* Every rank must agree to start: one rank out of memory would leave the others waiting. */
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        snprintf(out->skipped, sizeof out->skipped, "a rank had no memory for the 64 MiB buffer");
        free(buf);
        return;
    }
    out->ran = 1;
    if ((out->small_s = time_world(ctx, buf, 2, COMM_REPS, out)) < 0 ||
        (out->t1m_s = time_world(ctx, buf, MIB / sizeof(float), COMM_REPS, out)) < 0 ||
        (out->t64m_s = time_world(ctx, buf, big, COMM_REPS_BIG, out)) < 0) {
        free(buf);
        return; /* a failed dt_allreduce has aborted the job, or says why in error */
    }
    MPI_Comm node = MPI_COMM_NULL;
    if (MPI_Comm_split(MPI_COMM_WORLD, pl->node, pl->rank, &node) == MPI_SUCCESS) {
        out->node_busbw = time_node(node, buf, 16 * MIB / sizeof(float));
        MPI_Comm_free(&node);
    }
    free(buf);
}

static void world_row(doc_list *job, const char *name, double bytes, double t, int n)
{
    const double alg = t > 0 ? bytes / t : 0;
    doc_add(job, name, DOC_PASS, NULL, "%.3g MiB: %.3f ms (median, slowest rank), algbw %.2f GB/s, busbw %.2f GB/s",
            bytes / (double)MIB, t * 1e3, alg / 1e9, busbw(bytes, t, n) / 1e9);
}

/* The 8-byte allreduce's row: on one node with a core for each rank the ranks talk through shared
 * memory, and an allreduce far slower than that means they do not (Open MPI fell back to TCP). */
static void latency_row(const doctor_facts *all, int world, const doctor_comm_facts *c, doc_list *job)
{
    int shared_cores = 0;
    for (int r = 0; r < world; r++) shared_cores |= all[r].pl.cores_shared;
    const int one_node = all[0].pl.num_nodes == 1 && world > 1 && !shared_cores;
    if (one_node && c->small_s > DOC_SHM_LATENCY_WARN_S && c->small_s <= DOC_SMALL_ALLREDUCE_WARN_S)
        doc_add(job, "comm.latency", DOC_WARN,
                "see node.shm: Open MPI falls back to TCP when /dev/shm is too small or full (a larger /dev/shm: "
                "docker --shm-size, or its mount's size=); else other load on the node",
                "an 8-byte allreduce takes %.1f us on one node, above the %.0f us of shared memory (healthy: 1.5-3 "
                "us; through TCP: 25-30 us)",
                c->small_s * 1e6, DOC_SHM_LATENCY_WARN_S * 1e6);
    else if (c->small_s > DOC_SMALL_ALLREDUCE_WARN_S)
        doc_add(job, "comm.latency", DOC_WARN,
                "with more ranks than cores export OMPI_MCA_mpi_yield_when_idle=1 before mpirun/srun; else check "
                "the network between the nodes (see mpi.busy_poll)",
                "an 8-byte allreduce takes %.2f ms (healthy: tens of microseconds)", c->small_s * 1e3);
    else
        doc_add(job, "comm.latency", DOC_PASS, NULL, "an 8-byte allreduce takes %.1f us", c->small_s * 1e6);
}

/* The comm.nodes row over the nodes' own allreduces (bw, B/s, 0 where not measured; lead: each
 * node's first rank, for its name): the slowest below DOC_SLOW_NODE_FRACTION of the median named. */
static void compare_nodes(const doctor_facts *all, const double *bw, const int *lead, int nodes, int measured,
                          doc_list *job)
{
    double *sorted = calloc((size_t)nodes, sizeof *sorted);
    int n = 0, slow = -1;
    for (int i = 0; sorted && i < nodes; i++)
        if (bw[i] > 0) sorted[n++] = bw[i];
    const double med = sorted ? median_sort(sorted, (size_t)n) : 0;
    free(sorted);
    for (int i = 0; i < nodes; i++)
        if (bw[i] > 0 && bw[i] < DOC_SLOW_NODE_FRACTION * med && (slow < 0 || bw[i] < bw[slow])) slow = i;
    if (slow >= 0) {
        char fix[DOC_TEXT];
        snprintf(fix, sizeof fix,
                 "check node %.64s (other jobs on it: top; CPU frequency; its memory), or leave it out: "
                 "sbatch --exclude=%.64s",
                 all[lead[slow]].pl.hostname, all[lead[slow]].pl.hostname);
        doc_add(job, "comm.nodes", DOC_WARN, fix,
                "node %d (%s) allreduces 16 MiB at %.2f GB/s busbw inside itself, below %.0f%% of the median "
                "node's %.2f GB/s",
                slow, all[lead[slow]].pl.hostname, bw[slow] / 1e9, DOC_SLOW_NODE_FRACTION * 100, med / 1e9);
    } else {
        doc_add(job, "comm.nodes", DOC_PASS, NULL,
                "%d nodes allreduce 16 MiB inside themselves at %.2f GB/s busbw (median); none below %.0f%% of it",
                measured, med / 1e9, DOC_SLOW_NODE_FRACTION * 100);
    }
}

/* Per node: its own allreduce, all nodes at once, each node's as its first rank measured it. */
static void nodes_row(const doctor_facts *all, int world, doc_list *job)
{
    const int nodes = all[0].pl.num_nodes;
    double *bw = calloc((size_t)(nodes > 0 ? nodes : 1), sizeof *bw);
    int *lead = calloc((size_t)(nodes > 0 ? nodes : 1), sizeof *lead);
    if (!bw || !lead) {
        free(bw), free(lead);
        job->nomem = 1;
        return;
    }
    int measured = 0;
    for (int i = 0; i < nodes; i++) lead[i] = -1;
    for (int r = 0; r < world; r++) {
        const int nd = all[r].pl.node;
        if (nd < 0 || nd >= nodes || lead[nd] >= 0) continue;
        lead[nd] = r;
        bw[nd] = all[r].host.comm.node_busbw;
        measured += bw[nd] > 0;
    }
    if (nodes < 2 || measured < 2)
        doc_add(job, "comm.nodes", DOC_SKIP, NULL, "%s",
                nodes < 2 ? "one node: no node to compare with"
                          : "fewer than 2 nodes run 2 or more ranks: no node allreduce to compare");
    else
        compare_nodes(all, bw, lead, nodes, measured, job);
    free(bw), free(lead);
}

void doctor_comm_check_job(const doctor_facts *all, int world, doc_list *job)
{
    const doctor_comm_facts *c = &all[0].host.comm;
    if (!c->ran) {
        doc_add(job, "comm.allreduce", DOC_SKIP, NULL, "not measured: %s", c->skipped);
        return;
    }
    if (c->error[0]) {
        doc_add(job, "comm.allreduce", DOC_FAIL,
                "run `dtrain bench allreduce` with DTRAIN_LOG=debug to see which rank and which transfer fails", "%s",
                c->error);
        return;
    }
    latency_row(all, world, c, job);
    world_row(job, "comm.allreduce_1m", (double)MIB, c->t1m_s, world);
    world_row(job, "comm.allreduce_64m", 64.0 * (double)MIB, c->t64m_s, world);
    nodes_row(all, world, job);
}
