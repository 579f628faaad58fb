/*
 * host_model.c - the engine's allreduce algorithms over a host network (host_model.h): the
 * direct reduce-scatter + allgather, the pipelined chain, MPI's ring, and the engine's choice
 * among them, mirrored from engine_pick_algo and engine_chain_pays (collectives/engine_req.c).
 */
#include "launch/perfmodel/host_model.h"

#include <math.h>

int hm_nodes(const hm_net *net)
{
    const int g = net->per_node > 0 ? net->per_node : net->world;
    return (net->world + g - 1) / g;
}

/* Ranks on the fullest node: what the engine's topology probe calls node_ranks. */
static int hm_node_ranks(const hm_net *net)
{
    return net->per_node > 0 && net->per_node < net->world ? net->per_node : net->world;
}

static double hm_direct_time(const hm_net *net, double n)
{
    const int w = net->world, g = hm_node_ranks(net), nodes = hm_nodes(net);
    const double alpha = nodes > 1 ? net->inter.alpha_s : net->intra.alpha_s;
    /* Per phase: a node's G ranks each send their parts for the W - G ranks elsewhere over the
     * node's link, and each rank its parts for its G - 1 neighbours through shared memory. */
    const double inter = nodes > 1 ? (double)g * (w - g) / w * n / net->inter.bw : 0;
    const double intra = (double)(g - 1) / w * n / net->intra.bw;
    return 2 * (alpha + 2.0 * (w - 1) * net->msg_s + fmax(inter, intra));
}

static double hm_chain_time(const hm_net *net, double n)
{
    const int w = net->world, nodes = hm_nodes(net);
    const double s = fmin(net->seg_bytes, n), k = ceil(n / s);
    const double c = nodes == 2 ? 1 : 2; /* a middle node's link sends the bucket up and the sum down */
    const double fill = 2.0 * (nodes - 1) * (net->inter.alpha_s + s / net->inter.bw + 2 * net->msg_s) +
                        2.0 * (w - nodes) * (net->intra.alpha_s + s / net->intra.bw + 2 * net->msg_s);
    /* Once full, the pipeline moves one segment a stage, as slow as its slowest resource. A term
     * counts only where the chain has such hops: one rank a node has none within a node. */
    double stage = 4 * net->msg_s;
    if (nodes > 1) stage = fmax(stage, c * s / net->inter.bw);
    if (w > nodes) stage = fmax(stage, 2 * s / net->intra.bw);
    /* Each request also trades an 8-byte arrival word with every peer (the watchdog's roll call,
     * engine_chain.c): 2 (W-1) messages a rank, whatever the bucket. */
    return 2.0 * (w - 1) * net->msg_s + fill + (k - 1) * stage;
}

static double hm_ring_time(const hm_net *net, double n)
{
    const int w = net->world;
    const int across = hm_nodes(net) > 1;
    /* Every step waits for its slowest hop: one between nodes once the job spans them. */
    const double alpha = across ? net->inter.alpha_s : net->intra.alpha_s;
    const double bw = across ? fmin(net->inter.bw, net->intra.bw) : net->intra.bw;
    return 2.0 * (w - 1) * (alpha + 2 * net->msg_s) + 2.0 * (w - 1) / w * n / bw;
}

int hm_chain_pays(const hm_net *net)
{
    /* The model's ranks are contiguous per node, as srun and mpirun place them. */
    return engine_policy_chain_pays(net->world, hm_nodes(net), 1, hm_node_ranks(net));
}

hm_algo hm_engine_pick(const hm_net *net, double bytes)
{
    if (net->world <= 1) return HM_NONE;
    if (net->world == 2) return HM_RING; /* MPI_Allreduce, on the communication thread */
    if (hm_chain_pays(net) && bytes >= engine_policy_chain_from(net->world, net->seg_bytes, HM_ENGINE_CHAIN_MIN_BYTES))
        return HM_CHAIN;
    return HM_DIRECT;
}

double hm_allreduce_time(const hm_net *net, hm_algo a, double bytes)
{
    if (net->world <= 1 || !(bytes > 0)) return 0;
    if (a == HM_ENGINE) a = hm_engine_pick(net, bytes);
    switch (a) {
        case HM_DIRECT: return hm_direct_time(net, bytes);
        case HM_CHAIN: return hm_chain_time(net, bytes);
        case HM_RING: return hm_ring_time(net, bytes);
        default: return 0;
    }
}

const char *hm_algo_name(hm_algo a)
{
    return a == HM_DIRECT   ? "direct"
           : a == HM_CHAIN  ? "chain"
           : a == HM_RING   ? "ring"
           : a == HM_ENGINE ? "engine"
                            : "none";
}

double hm_busbw(int world, double bytes, double secs)
{
    return secs > 0 ? bytes / secs * 2.0 * (world - 1) / world : 0;
}
