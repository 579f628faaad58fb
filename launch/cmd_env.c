/*
 * cmd_env.c - `dtrain env`: every rank's placement, gathered over MPI and printed by rank 0 as one
 * line per rank, with the MPI, NCCL and CUDA versions each rank found (a node with a different
 * install stands out), and a warning for a CUDA_VISIBLE_DEVICES that hides GPUs by mistake.
 */
#include "launch/cli.h"
#include "runtime/placement/device.h"

#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct env_row {
    dt_placement pl;
    char mpi[96], nccl[96], cuda[96]; /* one size: dt_versions takes one length */
    char visible[512];                /* what is wrong with this rank's CUDA_VISIBLE_DEVICES, or "" */
    int cpus, node_cpus;              /* CPUs this rank may run on; CPUs its node has online */
} env_row;

/* Prints each distinct CUDA_VISIBLE_DEVICES warning once, with the ranks it concerns: under srun
 * every task can have its own list. */
static void print_visible_warnings(const env_row *rows, int world)
{
    for (int r = 0; r < world; r++) {
        if (!rows[r].visible[0]) continue;
        int first = 1;
        for (int q = 0; q < r && first; q++) first = strcmp(rows[q].visible, rows[r].visible) != 0;
        if (!first) continue;
        int n = 0, shown = 0;
        char ranks[160] = "";
        size_t len = 0;
        for (int q = r; q < world; q++) {
            if (strcmp(rows[q].visible, rows[r].visible) != 0) continue;
            n++;
            if (shown < 8 && len < sizeof ranks - 16) {
                len += (size_t)snprintf(ranks + len, sizeof ranks - len, "%s%d", shown ? ", " : "", q);
                shown++;
            }
        }
        printf("warning: %s (rank%s %s%s)\n", rows[r].visible, n > 1 ? "s" : "", ranks, n > shown ? ", ..." : "");
    }
}

static const char *bound_name(const dt_placement *p)
{
    if (p->cores_shared) return "shared";
    return p->pinned_by == DT_PINNED_BY_DTRAIN ? "dtrain" : p->pinned_by == DT_PINNED_BY_LAUNCHER ? "launcher" : "none";
}

/* This rank's row: its placement, the versions it found, what is wrong with its GPU list, and the
 * CPUs it may run on. */
static void env_row_collect(env_row *me, const dt_placement *pl)
{
    memset(me, 0, sizeof *me);
    me->pl = *pl;
    dt_versions(me->mpi, me->nccl, me->cuda, sizeof me->mpi);
    device_visible_parse(getenv("CUDA_VISIBLE_DEVICES"), me->visible, sizeof me->visible);
    /* A shared rank is not pinned, so its affinity is still what the launcher allowed. */
    cpu_set_t set;
    CPU_ZERO(&set);
    me->cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    me->node_cpus = online > 0 ? (int)online : 0;
}

/* Every rank's row at rank 0 (*rows stays NULL elsewhere). Returns EXIT_OK, or EXIT_FAIL once it
 * said why. */
static int env_rows_gather(const env_row *me, const cli_job *job, env_row **rows)
{
    *rows = job->rank == 0 ? calloc((size_t)job->world, sizeof **rows) : NULL;
    if (job->rank == 0 && !*rows) {
        cli_error("out of memory for %d rows", job->world);
        return EXIT_FAIL;
    }
    if (MPI_Gather(me, sizeof *me, MPI_BYTE, *rows, sizeof *me, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
        cli_error("gathering the placements over MPI failed");
        return EXIT_FAIL;
    }
    return EXIT_OK;
}

static void print_rank_row(const env_row *row)
{
    const dt_placement *p = &row->pl;
    char rk[32], lc[32], dev[32];
    snprintf(rk, sizeof rk, "%d/%d", p->rank, p->world_size);
    snprintf(lc, sizeof lc, "%d/%d", p->local_rank, p->local_size);
    if (p->device == DT_DEVICE_CUDA)
        snprintf(dev, sizeof dev, "cuda:%d", p->cuda_device);
    else
        snprintf(dev, sizeof dev, "cpu");
    /* Spaces would break the columns of the "- (4 ranks, 2 GPUs)" form. */
    char gpu[64];
    snprintf(gpu, sizeof gpu, "%s", p->gpu[0] ? p->gpu : "-");
    for (char *q = gpu; *q; q++)
        if (*q == ' ') *q = '_';
    printf("%-7s %-7s %-5d %-16s %-9s %-7s %-5s %-12s %-8s %-4d %-22s %-12s %s\n", rk, lc, p->node, p->hostname,
           dt_launcher_name(p->launcher), dev, gpu, p->cores, bound_name(p), p->blas_threads, row->mpi, row->nccl,
           row->cuda);
}

/* The notes under the table: why cores are shared, and GPUs assigned that no rank can use. */
static void print_notes(const env_row *rows, int world, dt_device_kind device)
{
    int shared = 0, confined = -1, gpu_unused = 0;
    for (int r = 0; r < world; r++) {
        const dt_placement *p = &rows[r].pl;
        shared |= p->cores_shared;
        /* Shared because the launcher (a binding, taskset, a cgroup) allowed fewer CPUs than the
         * node has, not because the node has too few: the first such rank, for the note. */
        if (p->cores_shared && confined < 0 && rows[r].cpus > 0 && rows[r].cpus < rows[r].node_cpus) confined = r;
        gpu_unused |= p->device == DT_DEVICE_CPU && p->gpu[0] && p->gpu[0] != '-';
    }
    if (confined >= 0)
        printf("note: the launcher (or a taskset or cgroup) confined ranks to fewer CPUs than their node has "
               "(rank %d may run on CPUs %s, %d online on %s), so cores are shared and those ranks are not "
               "pinned; expect slower steps (give each rank its own cores: srun --cpus-per-task=N "
               "--cpu-bind=cores, mpirun --bind-to core, and no taskset narrower than that).\n",
               confined, rows[confined].pl.cores, rows[confined].node_cpus, rows[confined].pl.hostname);
    else if (shared)
        printf("note: some nodes run more ranks than they have cores, so cores are shared and those "
               "ranks are not pinned; expect slower steps (start fewer ranks per node).\n");
    if (gpu_unused)
        printf("note: GPUs are assigned but none is usable here (%s), so ranks run on the CPU; the GPU column "
               "shows the device each rank would take.\n",
               device == DT_DEVICE_CPU ? "--device cpu" : "no driver or device");
}

/* Rank 0's report: the job's line, one row per rank, the notes and warnings, the node names. */
static void print_env(const env_row *rows, int world, dt_ctx *ctx, dt_device_kind device)
{
    const int num_nodes = rows[0].pl.num_nodes;
    printf("dtrain %s, %d rank%s on %d node%s, collectives: %s, OpenBLAS kernels: %s\n", dt_version_string(), world,
           cli_s(world), num_nodes, cli_s(num_nodes), dt_backend_name(ctx), dt_blas_corename());
    printf("%-7s %-7s %-5s %-16s %-9s %-7s %-5s %-12s %-8s %-4s %-22s %-12s %s\n", "RANK", "LOCAL", "NODE", "HOST",
           "LAUNCHER", "DEVICE", "GPU", "CORES", "BOUND", "BLAS", "MPI", "NCCL", "CUDA");
    for (int r = 0; r < world; r++) print_rank_row(&rows[r]);
    print_notes(rows, world, device);
    print_visible_warnings(rows, world);
    for (int i = 0; i < num_nodes; i++) printf("node %d: %s\n", i, dt_node_name(ctx, i));
    fflush(stdout);
}

int cmd_env(int argc, char **argv)
{
    dt_config cfg;
    cli_job job;
    int rc = cli_start(argc, argv, "env", &cfg, NULL, &job);
    if (rc) return rc;
    env_row me;
    env_row_collect(&me, &job.pl);
    env_row *rows;
    if (env_rows_gather(&me, &job, &rows) != EXIT_OK) {
        free(rows);
        dt_abort_job(job.ctx, EXIT_FAIL);
        return EXIT_FAIL;
    }
    if (job.rank == 0) print_env(rows, job.world, job.ctx, cfg.device);
    free(rows);
    return cli_finish(job.ctx, EXIT_OK);
}
