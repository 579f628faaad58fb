/*
 * perfmodel.h - the step-time model behind `dtrain model-perf` and `train --bucket-mb auto`: an
 * alpha-beta model of allreduce per algorithm (ring, tree) over a two-level network (links within
 * a node, links between nodes), its fit from `bench allreduce` rows, and the simulation of one
 * training step in which each gradient bucket's allreduce starts when backward has filled it and
 * the link is free. Pure functions of their arguments: no clock, no MPI, no globals.
 *
 * The allreduce times follow NCCL's own tuning model (src/graph/tuning.cc, ncclTopoTuneModel):
 *   time = latency + bytes / algbw,  algbw = busbw x ratio,
 *   ring: ratio = W / (2 (W - 1)), latency = (2 (W - 1) - 2 N) alpha_intra + 2 N alpha_inter
 *         (N nodes; one node: 2 (W - 1) alpha_intra), busbw = min(intra, inter) across nodes;
 *   tree: ratio = 1/2, latency = 2 ((G - 1) alpha_intra + log2(N) alpha_inter) (G ranks a node),
 *         busbw = 0.92 x the ring's (NCCL's tree correction).
 * On one node the ring's time is the textbook 2 (W-1)/W x bytes / busbw + 2 (W-1) alpha. Each
 * collective also pays call_s, whatever its size (NCCL's baseLat plus the launch): what makes many
 * small buckets cost more than a few large ones.
 */
#ifndef DT_LAUNCH_PERFMODEL_H
#define DT_LAUNCH_PERFMODEL_H

#include "dtrain.h"

#include <stddef.h>

/* One kind of link: the latency of one ring step and the bus bandwidth (nccl-tests' busbw). */
typedef struct pm_link {
    double alpha_s; /* seconds per step (hop) */
    double busbw;   /* bytes per second */
} pm_link;

/* The job's network: world ranks, per_node of them on each node (the last node may hold fewer). */
typedef struct pm_net {
    int world, per_node;
    pm_link intra, inter; /* inter: a node's links to the others, all its NICs together */
    double call_s;        /* fixed seconds of every collective: launch and NCCL's base latency */
} pm_net;

typedef enum { PM_RING, PM_TREE, PM_AUTO } pm_algo; /* PM_AUTO: the faster of the two per size */

/* The number of nodes net spans (ceil(world / per_node)). */
int pm_nodes(const pm_net *net);
/* Seconds for one allreduce of bytes over net with algorithm a (0 for world 1 or 0 bytes). */
double pm_allreduce_time(const pm_net *net, pm_algo a, double bytes);

/* Fits a one-level ring (pm_link) to n measured allreduces at world ranks (world >= 2): bytes[i]
 * took secs[i]. Least squares of t = 2 (W-1) alpha + 2 (W-1)/W bytes / busbw, each row weighted by
 * 1/t^2 so small and large sizes count alike. DT_ERR_INVALID_ARG when fewer than 2 distinct sizes,
 * a time <= 0, or the fit gives no positive bandwidth (the message names the rows). A negative
 * intercept (latency below the noise) is clamped to 0. */
dt_status pm_fit_ring(int world, const double *bytes, const double *secs, int n, pm_link *out);

/* A layer of the model, in forward order: the backward time and its parameters' range of the
 * flat gradient buffer (n 0: no parameters). */
typedef struct pm_layer {
    double bwd_s;
    size_t off, n;
} pm_layer;

/* One training step's compute: forward_s before backward (input, forward, loss), the layers'
 * backward, after_s after the gradients are synchronized (checks, optimizer). */
typedef struct pm_model {
    const pm_layer *layers;
    int nlayers;
    size_t count;      /* elements in the gradient buffer */
    size_t elem_bytes; /* of the buffer (the bucket caps count these) */
    size_t wire_bytes; /* of an element as sent (2 with a 16-bit --grad-comm) */
    double forward_s, after_s;
} pm_model;

/* How the gradients are synchronized: the reducer's caps in MiB (0: no cap) and overlap. */
typedef struct pm_sync {
    double bucket_mb, first_bucket_mb;
    int overlap;
    pm_algo algo;
} pm_sync;

typedef struct pm_step {
    double step_s;     /* the predicted step */
    double compute_s;  /* forward + backward + after: the step at one rank */
    double comm_s;     /* the allreduces' times summed */
    double exposed_s;  /* step_s - compute_s: communication backward did not hide */
    double efficiency; /* compute_s / step_s (weak scaling: the batch per rank is fixed) */
    int nbuckets;
} pm_step;

/* Simulates one step: buckets planned by the reducer's own planner (bucket_plan_ranges over the
 * layers' ranges in backward order); with overlap each bucket's allreduce starts when the last of
 * its layers has finished backward and the previous allreduce is done, without it all start
 * after backward. DT_ERR_INVALID_ARG when the layers do not tile the buffer (the planner's
 * message), or a time is negative. */
dt_status pm_step_time(const pm_model *m, const pm_net *net, const pm_sync *sync, pm_step *out);

/* The bucket cap among caps[0..ncaps) (MiB; 0 = one bucket) giving the shortest step with
 * sync's other settings; ties go to the earlier cap. *best_mb and *best get the winner. */
dt_status pm_best_bucket(const pm_model *m, const pm_net *net, const pm_sync *sync, const double *caps, int ncaps,
                         double *best_mb, pm_step *best);

#endif
