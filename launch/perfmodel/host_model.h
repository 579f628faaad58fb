/*
 * host_model.h - a model of the communication engine's fp32 allreduce of host memory between MPI
 * ranks (collectives/engine*.c) over a two-level network, behind `dtrain model-perf
 * --engine-curve`: the engine's two rank-ordered algorithms, MPI's ring as the reference, and the
 * engine's own choice among them. Pure functions of their arguments: no clock, no MPI, no globals.
 *
 * W ranks on M = ceil(W / per_node) nodes, G = min(per_node, W) a node, ranks contiguous per node
 * (block placement); n bytes; m = msg_s, the host's cost of one message (post, match, complete).
 *   direct (reduce-scatter, then allgather; each phase posts W-1 sends and W-1 receives at once):
 *     2 [alpha + 2 (W-1) m + max(G (W-G)/W n / inter_bw, (G-1)/W n / intra_bw)]
 *     with alpha the inter alpha across nodes (the intra one on one node) and no inter term on one
 *     node: per phase a node's link carries G (W-G)/W n each way, a rank (G-1)/W n within the node.
 *   chain (engine_chain.c: segments of s = min(seg_bytes, n), k = ceil(n / s) of them, up the
 *     ranks 0 -> W-1 adding, the sums back down, both directions at once):
 *     2 (W-1) m + fill + (k-1) stage (2 (W-1) m: the arrival word traded with every peer, the
 *     watchdog's roll call),
 *     fill  = 2 (M-1) (inter alpha + s / inter_bw + 2 m) + 2 (W-M) (intra alpha + s / intra_bw + 2 m)
 *             (the first segment's 2 (W-1) hops, M-1 each way between nodes),
 *     stage = max(c s / inter_bw (M > 1), 2 s / intra_bw (W > M), 4 m)
 *             (c = 1 with 2 nodes, 2 with more: a middle node's link sends the bucket up and the
 *             result down; a rank within a node sends each segment up and down; 4 messages a
 *             segment a rank).
 *   ring (MPI_Allreduce's large-message algorithm: 2 (W-1) steps of n/W a rank):
 *     2 (W-1) (alpha + 2 m) + 2 (W-1)/W n / bw,
 *     across nodes alpha the inter one and bw = min(inter_bw, intra_bw), on one node the intra ones.
 *   engine (engine_pick_algo, collectives/engine_req.c, with its communication thread): W == 2: MPI
 *     (the ring); the chain when it pays (M >= 2, W >= 3, c < 2 G' (W-G')/W, G' = min(G, W/2) in
 *     integer division) and n >= max(64 KiB, 2 (W-1) seg_bytes); else direct.
 */
#ifndef DT_LAUNCH_HOST_MODEL_H
#define DT_LAUNCH_HOST_MODEL_H

#include "collectives/engine_policy.h"

/* The engine's chain segment and its smallest bucket (collectives/engine_policy.h), in bytes. */
#define HM_ENGINE_SEG_BYTES ((double)(ENGINE_CHAIN_SEG * sizeof(float)))
#define HM_ENGINE_CHAIN_MIN_BYTES ((double)ENGINE_CHAIN_MIN_BYTES)

typedef struct hm_link {
    double alpha_s; /* seconds: a message within a node, a hop between nodes */
    double bw;      /* bytes per second: of a rank within a node, of a node's link each way between */
} hm_link;

/* The job's host network: world ranks, per_node of them on each node (the last may hold fewer). */
typedef struct hm_net {
    int world, per_node;
    hm_link intra, inter;
    double msg_s;     /* the host's seconds of one message, paid by the rank that posts it */
    double seg_bytes; /* the chain's segment */
} hm_net;

/* HM_ENGINE: the engine's own choice (hm_engine_pick). HM_NONE is only what the engine picks at
 * one rank: nothing to send. */
typedef enum { HM_DIRECT, HM_CHAIN, HM_RING, HM_ENGINE, HM_NONE } hm_algo;

/* The number of nodes net spans (ceil(world / per_node)). */
int hm_nodes(const hm_net *net);
/* Seconds of one allreduce of bytes over net by algorithm a (0 at one rank or for 0 bytes). */
double hm_allreduce_time(const hm_net *net, hm_algo a, double bytes);
/* The algorithm the engine takes for a bucket of bytes: HM_NONE, HM_RING (MPI_Allreduce at 2
 * ranks), HM_CHAIN or HM_DIRECT. */
hm_algo hm_engine_pick(const hm_net *net, double bytes);
/* Whether the chain sends fewer bytes over the busiest node link than direct (engine_chain_pays). */
int hm_chain_pays(const hm_net *net);
/* The name of an algorithm: direct, chain, ring, engine, none. */
const char *hm_algo_name(hm_algo a);
/* nccl-tests' bus bandwidth of an allreduce of bytes in secs at world ranks: bytes / secs x
 * 2 (W-1)/W (0 when secs is 0). */
double hm_busbw(int world, double bytes, double secs);

#endif
