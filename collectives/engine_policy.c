/*
 * engine_policy.c - the engine's rule for its pipelined chain (engine_policy.h).
 */
#include "collectives/engine_policy.h"

int engine_policy_chain_pays(int world, int nodes, int block, int node_ranks)
{
    if (nodes < 2 || !block || world < 3) return 0;
    const double W = world, G = node_ranks < world / 2 ? node_ranks : world / 2;
    const double chain = nodes == 2 ? 1.0 : 2.0, direct = 2.0 * G * (W - G) / W;
    return chain < direct;
}

double engine_policy_chain_from(int world, double seg_bytes, double min_bytes)
{
    const double fill = 2.0 * (world - 1) * seg_bytes;
    return fill > min_bytes ? fill : min_bytes;
}
