/*
 * placement_only.c - a program that does not train at all and uses dtrain only for placement: an
 * MPI simulation (explicit time steps of the 1-D heat equation u_t = u_xx, the rod split across
 * the ranks, one halo cell exchanged with each neighbour per step) that wants the same answer to
 * "who am I, which node, which GPU, which cores, pinned by whom" as `dtrain env` gives a training job.
 *
 * The program owns MPI: it calls MPI_Init_thread itself (the thread level its own code needs) and
 * MPI_Finalize at the end, and tells dtrain so with cfg.init_mpi = 0. dt_init then only resolves
 * the placement (launcher, node, local rank, device, core binding) and dt_finalize leaves MPI
 * alone. Rank 0 prints one line per rank, gathered with dt_gather_placement.
 *
 * The check: started from u = sin(pi x), the discrete scheme decays that mode by exactly
 * g = 1 - 4 r sin^2(pi dx / 2) per step, so after STEPS steps u_i = g^STEPS sin(pi x_i) up to
 * rounding, whatever the number of ranks (0.445 of the start here). Exits 0 when every point agrees
 * to 1e-10; a halo exchanged one step late is off by 7e-4.
 *
 *   mpirun -np 2 ./example_placement_only
 */
#include <dtrain.h>

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

enum { N = 120, STEPS = 3000 }; /* interior points of the rod (x = i dx, i = 1..N), time steps */
#define R 0.4                   /* dt / dx^2: stable below 0.5 */

static const char *bound_by(const dt_placement *p)
{
    if (p->cores_shared) return "nobody (cores shared)";
    if (p->pinned_by == DT_PINNED_BY_DTRAIN) return "dtrain";
    return p->pinned_by == DT_PINNED_BY_LAUNCHER ? "the launcher" : "nobody";
}

int main(int argc, char **argv)
{
    /* The simulation's own MPI: funneled is all it needs (only the main thread calls MPI). */
    int provided;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "placement_only: MPI_Init_thread failed\n");
        return 1;
    }
    dt_config cfg;
    dt_config_defaults(&cfg);
    dt_status s = dt_config_from_env(&cfg); /* DTRAIN_PIN, DTRAIN_BLAS_THREADS, ... as for training */
    cfg.init_mpi = 0;                       /* MPI is ours: dt_init must find it initialized */
    cfg.device = DT_DEVICE_CPU;             /* it computes on the CPU; the placement still names its GPU */
    dt_ctx *ctx = NULL;
    if (s == DT_OK) s = dt_init(&cfg, &ctx);
    if (s != DT_OK) {
        fprintf(stderr, "placement_only: dt_init failed: %s (%s)\n", dt_last_error(), dt_strerror(s));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    dt_placement me;
    dt_get_placement(ctx, &me);
    const int rank = me.rank, size = me.world_size;
    dt_placement *all = rank == 0 ? malloc((size_t)size * sizeof *all) : NULL;
    /* A rank 0 whose malloc failed still calls (with NULL): every rank then fails together. */
    if (dt_gather_placement(ctx, all) != DT_OK) {
        fprintf(stderr, "placement_only: gathering the placements failed: %s\n", dt_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int r = 0; rank == 0 && r < size; r++) {
        const dt_placement *p = &all[r];
        printf("rank %d/%d local %d/%d node %d (%s) host %s launcher %s gpu %s cores %s (%d, bound by %s)\n", p->rank,
               p->world_size, p->local_rank, p->local_size, p->node, dt_node_name(ctx, p->node), p->hostname,
               dt_launcher_name(p->launcher), p->gpu[0] ? p->gpu : "-", p->cores, p->num_cores, bound_by(p));
    }
    free(all);

    /* This rank's slice of the rod: points lo+1..lo+n of 1..N, with a halo cell at each end. */
    const int n = N / size + (rank < N % size), lo = rank * (N / size) + (rank < N % size ? rank : N % size);
    const int left = rank > 0 ? rank - 1 : MPI_PROC_NULL, right = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
    const double dx = 1.0 / (N + 1), pi = acos(-1.0);
    double *u = calloc((size_t)n + 2, sizeof *u), *v = calloc((size_t)n + 2, sizeof *v);
    if (!u || !v) {
        fprintf(stderr, "placement_only: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int i = 1; i <= n; i++) u[i] = sin(pi * (lo + i) * dx);
    const double t0 = MPI_Wtime();
    for (int step = 0; step < STEPS; step++) {
        /* Halos: the ends of the rod stay 0 (MPI_PROC_NULL leaves u[0] / u[n+1] untouched). */
        MPI_Sendrecv(&u[1], 1, MPI_DOUBLE, left, 0, &u[n + 1], 1, MPI_DOUBLE, right, 0, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        MPI_Sendrecv(&u[n], 1, MPI_DOUBLE, right, 1, &u[0], 1, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (int i = 1; i <= n; i++) v[i] = u[i] + R * (u[i - 1] - 2 * u[i] + u[i + 1]);
        double *t = u;
        u = v, v = t;
    }
    const double g = 1 - 4 * R * pow(sin(pi * dx / 2), 2), decay = pow(g, STEPS);
    double err = 0, worst = 0;
    for (int i = 1; i <= n; i++) err = fmax(err, fabs(u[i] - decay * sin(pi * (lo + i) * dx)));
    MPI_Allreduce(&err, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    const int ok = worst < 1e-10;
    if (rank == 0)
        printf("placement_only: heat equation, %d points on %d rank%s, %d steps in %.3f ms: amplitude %.6f, exact "
               "%.6f, worst error %.2e: %s\n",
               N, size, size == 1 ? "" : "s", STEPS, 1e3 * (MPI_Wtime() - t0), u[1] / sin(pi * (lo + 1) * dx), decay,
               worst, ok ? "ok" : "WRONG");
    free(u), free(v);
    dt_finalize(ctx); /* leaves MPI initialized: init_mpi was 0 */
    MPI_Finalize();
    return ok ? 0 : 1;
}
