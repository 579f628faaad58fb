/*
 * engine_policy.h - when the engine takes its pipelined chain (DT_ALLREDUCE_AUTO), as pure
 * functions of the topology and the bucket, without MPI: engine_req.c decides with them, and the
 * model of `dtrain model-perf --engine-curve` (launch/perfmodel/host_model.c) predicts with the
 * same rule.
 */
#ifndef DT_COLLECTIVES_ENGINE_POLICY_H
#define DT_COLLECTIVES_ENGINE_POLICY_H

#include <stddef.h>

/* The chain allreduce's default segment: 64000 bytes, under Open MPI's TCP eager limit (64 KiB
 * with its header), so a segment goes without a rendezvous handshake. Rendezvous segments ran at
 * half the link (14 of 25 MB/s at 2 x 2 ranks, 200 Mbit/s, with 64 KiB to 1 MiB segments): with both
 * directions of a link loaded, each handshake's reply queues behind the other direction's data.
 * And the smallest bucket (bytes) it carries under DT_ALLREDUCE_AUTO, besides the pipeline's fill
 * (engine_policy_chain_from); measured in docs/performance.md "Across nodes: the pipelined chain". */
#define ENGINE_CHAIN_SEG ((size_t)16000)
#define ENGINE_CHAIN_MIN_BYTES ((size_t)64 << 10)

/* Bytes a node's link sends per byte of bucket, with M nodes of (at most) G ranks, W = M G:
 * the chain sends the bucket once up and once down through each middle node (2; 1 with two
 * nodes, whose link carries one direction each way); the direct algorithm sends, per phase, each
 * of its G ranks' parts for the W - G ranks elsewhere: 2 G (W - G) / W. So the chain pays with two
 * or more ranks a node (2 x 2: 1 against 2; 3 x 2: 2 against 2.67) and not with one (3 x 1: 2
 * against 1.33), as measured on the shaped cluster (docs/performance.md "Across nodes: the
 * pipelined chain"). With the ranks interleaved over the nodes (block 0) every hop of the chain
 * would cross nodes: never. node_ranks: the most ranks on one node. */
int engine_policy_chain_pays(int world, int nodes, int block, int node_ranks);

/* The smallest bucket in bytes the chain carries: large enough that the pipeline's fill (2 (W-1)
 * hops of a segment of seg_bytes) is at most half of it, and at least min_bytes. */
double engine_policy_chain_from(int world, double seg_bytes, double min_bytes);

#endif
