/*
 * engine_policy.c - the engine's rule for its pipelined chain (engine_policy.h), and the names of
 * its algorithms (dt_allreduce_algo, include/dtrain.h): the engine logs them, dt_config_from_env
 * parses DTRAIN_ALLREDUCE with them.
 */
#include "collectives/engine_policy.h"
#include "base/status.h"
#include "dtrain.h"

#include <string.h>

/* Indexed by dt_allreduce_algo, whose values are 0, 1, 2. */
static const char *const algo_names[] = {"auto", "direct", "chain"};
enum { ALGO_COUNT = sizeof algo_names / sizeof *algo_names };

dt_status dt_allreduce_algo_parse(const char *s, dt_allreduce_algo *out)
{
    if (!out) return status_set_error(DT_ERR_INVALID_ARG, "dt_allreduce_algo_parse: out is NULL");
    for (int i = 0; s && i < ALGO_COUNT; i++)
        if (strcmp(s, algo_names[i]) == 0) {
            *out = (dt_allreduce_algo)i;
            return DT_OK;
        }
    if (!s)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "dt_allreduce_algo_parse: no allreduce algorithm given (s is NULL): use one of auto, "
                                "direct, chain");
    return status_set_error(DT_ERR_INVALID_ARG, "allreduce algorithm '%s' is not one of auto, direct, chain", s);
}

const char *dt_allreduce_algo_name(dt_allreduce_algo a) { return (unsigned)a < ALGO_COUNT ? algo_names[a] : "?"; }

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
