/*
 * perfmodel.c - the allreduce half of the step-time model (perfmodel.h): NCCL's per-algorithm
 * latency and bus-bandwidth model over a two-level network, and the fit of a ring to measured
 * `bench allreduce` rows. The step simulation is perfmodel_step.c.
 */
#include "launch/perfmodel/perfmodel.h"
#include "base/status.h"

#include <math.h>

/* NCCL multiplies the tree's bandwidth by this against the ring's (tuning.cc: busBw * .92). */
#define PM_TREE_BW_FACTOR 0.92

int pm_nodes(const pm_net *net)
{
    const int g = net->per_node > 0 ? net->per_node : net->world;
    return (net->world + g - 1) / g;
}

/* The bandwidth every byte of a collective crosses: the slower level once the job spans nodes. */
static double pm_busbw(const pm_net *net)
{
    if (pm_nodes(net) <= 1) return net->intra.busbw;
    return fmin(net->intra.busbw, net->inter.busbw);
}

static double pm_ring_time(const pm_net *net, double bytes)
{
    const int w = net->world, nodes = pm_nodes(net);
    const int steps = 2 * (w - 1), inter_steps = nodes > 1 ? 2 * nodes : 0;
    const double lat = (steps - inter_steps) * net->intra.alpha_s + inter_steps * net->inter.alpha_s;
    return lat + bytes * 2.0 * (w - 1) / w / pm_busbw(net);
}

static double pm_tree_time(const pm_net *net, double bytes)
{
    const int nodes = pm_nodes(net);
    const int per_node = net->world < net->per_node || net->per_node <= 0 ? net->world : net->per_node;
    const double lat = 2.0 * ((per_node - 1) * net->intra.alpha_s + log2((double)nodes) * net->inter.alpha_s);
    return lat + bytes * 2.0 / (PM_TREE_BW_FACTOR * pm_busbw(net));
}

double pm_allreduce_time(const pm_net *net, pm_algo a, double bytes)
{
    if (net->world <= 1 || bytes <= 0) return 0;
    if (a == PM_RING) return net->call_s + pm_ring_time(net, bytes);
    if (a == PM_TREE) return net->call_s + pm_tree_time(net, bytes);
    return net->call_s + fmin(pm_ring_time(net, bytes), pm_tree_time(net, bytes));
}

dt_status pm_fit_ring(int world, const double *bytes, const double *secs, int n, pm_link *out)
{
    if (world < 2)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "a ring fit needs allreduce rows from 2 or more ranks, not %d: run bench allreduce "
                                "under mpirun -np 2 or more",
                                world);
    /* Weighted least squares of t = a + b x, x = 2 (W-1)/W bytes, weights 1/t^2. */
    double sw = 0, sx = 0, st = 0, sxx = 0, sxt = 0, xmin = INFINITY, xmax = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (!(secs[i] > 0) || !(bytes[i] > 0))
            return status_set_error(DT_ERR_INVALID_ARG,
                                    "allreduce row %d: %.0f bytes in %g s; both must be positive (a damaged bench "
                                    "allreduce output?)",
                                    i + 1, bytes[i], secs[i]);
        const double x = 2.0 * (world - 1) / world * bytes[i], w = 1.0 / (secs[i] * secs[i]);
        sw += w, sx += w * x, st += w * secs[i], sxx += w * x * x, sxt += w * x * secs[i];
        xmin = fmin(xmin, x), xmax = fmax(xmax, x);
    }
    if (n < 2 || !(xmax > xmin))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "%d allreduce row(s) with %s: the fit needs two sizes or more (bench allreduce -b "
                                "64K -e 16M)",
                                n, n ? "one size" : "no size");
    const double det = sw * sxx - sx * sx;
    double b = (sw * sxt - sx * st) / det, a = (st - b * sx) / sw;
    if (a < 0) { /* latency lost in the noise: refit through the origin */
        a = 0;
        b = sxt / sxx;
    }
    if (!(b > 0))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "the allreduce rows (%d sizes, %.0f to %.0f bytes) do not take longer as they grow, "
                                "so no bandwidth fits: measure larger sizes (-e 64M) or more --iters",
                                n, xmin * world / (2.0 * (world - 1)), xmax * world / (2.0 * (world - 1)));
    out->alpha_s = a / (2.0 * (world - 1));
    out->busbw = 1.0 / b;
    return DT_OK;
}
