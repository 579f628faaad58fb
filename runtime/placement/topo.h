/*
 * topo.h - "who am I": which launcher started this process, and its rank, world size, local rank,
 * local size, node index and host list, from the launcher's environment variables first and then
 * from MPI, with every value the launcher set cross-checked against MPI.
 *
 * The environment is read through a getenv-like callback so the unit tests can feed any set of
 * variables without touching the process environment.
 */
#ifndef DT_RUNTIME_PLACEMENT_TOPO_H
#define DT_RUNTIME_PLACEMENT_TOPO_H

#include "dtrain.h"

#include <mpi.h>

typedef const char *(*topo_getenv_fn)(const char *name, void *arg);

/* What the detected launcher's variables say. -1 marks a value the launcher did not set. */
typedef struct topo_env {
    dt_launcher launcher;
    int rank, size, local_rank, local_size, node, num_nodes;
    int pmix_rank; /* PMIX_RANK under any PMIx launcher, else -1 */
    /* The variable each value came from, for messages; NULL where unset. */
    const char *rank_var, *size_var, *local_rank_var, *local_size_var, *node_var, *num_nodes_var;
    /* local_size_var's own text when local_size was computed from it (SLURM's tasks per node,
     * "2(x3),1"), "" otherwise: messages quote what the variable holds, not only the result. */
    char local_size_text[64];
    int has_pmi;       /* a PMI/PMIx server talks to this process (PMIX_RANK, PMI_RANK or
                                       PMI_FD set): MPI_Init can learn the world from it */
    char mpi_type[32]; /* SLURM_MPI_TYPE (srun's --mpi plugin), "" when unset: for messages */
    int slurm_direct;  /* SLURM_STEP_ID and SLURM_NODELIST set: what Open MPI takes for a
                                       task started by srun, which needs a PMI server in MPI_Init */
    char **hosts;      /* SLURM's step (or job) node list, expanded; NULL otherwise */
    int num_hosts;
    const char *hosts_var;
} topo_env;

/* Detects the launcher and parses its variables strictly. A malformed value, a rank not below the
 * size, or an unparsable SLURM node list fails with DT_ERR_ENV naming the variable and value.
 * Variables of launchers that did not start this process are ignored: they may be stale (SLURM_*
 * under mpirun inside an sbatch job). get NULL means the process environment. */
dt_status topo_read_env(topo_getenv_fn get, void *arg, topo_env *out);
void topo_env_free(topo_env *e);

/* A process run directly in a batch script or an salloc shell of a job with several tasks:
 * SLURM_JOB_ID set, no SLURM_STEP_ID (no srun step), and no launcher started it, so it runs as a
 * world of 1 while the job holds more. Returns the job's task count when above 1, else 0:
 * SLURM_NTASKS, or SLURM_JOB_NUM_NODES when the job was not given a task count (srun then starts
 * one task per node); *var (may be NULL) receives the variable's name. A value that does not
 * parse counts as unset: this is a warning, never a refusal. get NULL means the process
 * environment. */
int topo_job_tasks_outside_step(topo_getenv_fn get, void *arg, const char **var);

/* 1 when a launcher started this process (topo_read_env's detection) and a PMI server talks to it
 * (PMIX_RANK; or PMI_RANK / PMI_FD with an MPI that speaks PMI-2), so MPI_Init would find the other
 * ranks: a rank that fails before MPI_Init can still join them there and fail with them instead of
 * leaving them in MPI_Init. Read even when the launcher's variables do not parse. 0 for no launcher,
 * or one without a PMI server (torchrun-style, srun --mpi=none): MPI_Init would make a singleton or
 * abort. get NULL means the process environment. */
int topo_mpi_reachable(topo_getenv_fn get, void *arg);

/* What MPI says, authoritative once MPI is initialized. */
typedef struct topo_mpi {
    int rank, size, local_rank, local_size, node, num_nodes;
} topo_mpi;

/* What can be refused before MPI_Init: srun started this process without a PMI plugin (srun
 * --mpi=none, or MpiDefault=none in slurm.conf): no PMIX_RANK, PMI_RANK or PMI_FD in a SLURM step.
 * With several tasks MPI_Init would fail or make every task a singleton; with one task Open MPI
 * aborts inside MPI_Init without naming the fix, so under Open MPI one task is refused too.
 * DT_ERR_MPI with the fix. Nothing is refused once MPI is initialized (the caller's MPI_Init
 * worked; topo_check judges the result). */
dt_status topo_check_before_mpi(const topo_env *env);

/* Cross-checks every value the launcher set against MPI. Refuses the singleton trap (a launcher
 * size > 1 while MPI sees a world of 1) with the exact fix. Fails with DT_ERR_MPI naming the
 * variable, both values and what to do. */
dt_status topo_check(const topo_env *env, const topo_mpi *mpi);

/* Fills *out from MPI: rank/size of world, local rank/size from MPI_Comm_split_type(SHARED), node
 * index = order of this node's lowest rank among the nodes'. *local_comm receives the shared-memory
 * communicator (caller frees). *node_names receives num_nodes hostnames (MPI_Get_processor_name of
 * each node's lowest rank), freed with topo_free_names. Collective over world. */
dt_status topo_query_mpi(MPI_Comm world, topo_mpi *out, MPI_Comm *local_comm, char ***node_names);
void topo_free_names(char **names, int n);

#endif
