/*
 * host_facts.c - what one rank reports about its launcher, MPI and CPU for `dtrain doctor`.
 *
 * Two halves: doctor_host_early runs before dt_init, because dt_init pins the process (the cores
 * the launcher allowed are lost after) and because the command may hide a refused launcher's
 * variables from dt_init (cmd_doctor.c); doctor_host_collect runs after, with the placement.
 */
#include "launch/doctor/doctor.h"
#include "runtime/placement/affinity.h"
#include "runtime/placement/topo.h"

#include <mpi.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h> /* MPIX_CUDA_AWARE_SUPPORT, MPIX_Query_cuda_support */
#endif
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

static void copy_env(char *dst, size_t n, const char *name)
{
    const char *v = getenv(name);
    snprintf(dst, n, "%s", v ? v : "");
}

static int env_int(const char *name)
{
    const char *v = getenv(name);
    if (!v || !*v) return -1;
    char *end = NULL;
    long x = strtol(v, &end, 10);
    return *end || x < 0 || x > 1 << 30 ? -1 : (int)x;
}

/* The launcher variable families present, by prefix: the names say who set the environment. */
static void families(char *out, size_t n)
{
    static const char *const prefix[] = {"OMPI_COMM_WORLD_", "PMIX_", "SLURM_", "PMI_", "MPI_LOCALRANKID"};
    static const char *const shown[] = {"OMPI_COMM_WORLD_*", "PMIX_*", "SLURM_*", "PMI_*", "MPI_LOCALRANKID"};
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof prefix / sizeof *prefix; i++) {
        int seen = 0;
        for (char **e = environ; e && *e && !seen; e++) seen = !strncmp(*e, prefix[i], strlen(prefix[i]));
        if (seen) len += (size_t)snprintf(out + len, n - len, "%s%s", len ? " " : "", shown[i]);
        if (len >= n) return;
    }
    if (getenv("RANK") && getenv("WORLD_SIZE"))
        snprintf(out + len, n - len, "%sRANK/WORLD_SIZE (torchrun)", len ? " " : "");
}

void doctor_host_early(doctor_host_facts *f, int launcher)
{
    memset(f, 0, sizeof *f);
    f->launcher = launcher;
    families(f->families, sizeof f->families);
    f->slurm_procid = env_int("SLURM_PROCID");
    f->slurm_ntasks = env_int("SLURM_NTASKS");
    const char *tasks_var = NULL;
    f->job_tasks = topo_job_tasks_outside_step(NULL, NULL, &tasks_var);
    snprintf(f->job_tasks_var, sizeof f->job_tasks_var, "%s", tasks_var ? tasks_var : "");
    copy_env(f->slurm_mpi_type, sizeof f->slurm_mpi_type, "SLURM_MPI_TYPE");
    f->has_pmix = getenv("PMIX_RANK") != NULL;
    f->has_pmi2 = getenv("PMI_RANK") != NULL || getenv("PMI_FD") != NULL;
    f->torch_rank = f->torch_world = -1;
    if (f->launcher != DT_LAUNCHER_TORCHRUN) {
        f->torch_rank = env_int("RANK");
        f->torch_world = env_int("WORLD_SIZE");
        copy_env(f->torch_local_rank, sizeof f->torch_local_rank, "LOCAL_RANK");
        copy_env(f->torch_local_world, sizeof f->torch_local_world, "LOCAL_WORLD_SIZE");
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        affinity_format(&set, f->allowed, sizeof f->allowed);
        f->allowed_n = CPU_COUNT(&set);
    }
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    f->online_cpus = online > 0 ? (int)online : 0;
    copy_env(f->yield, sizeof f->yield, "OMPI_MCA_mpi_yield_when_idle");
    copy_env(f->oversub, sizeof f->oversub, "OMPI_MCA_mpi_oversubscribe");
    copy_env(f->omp_threads, sizeof f->omp_threads, "OMP_NUM_THREADS");
    copy_env(f->openblas_threads, sizeof f->openblas_threads, "OPENBLAS_NUM_THREADS");
    doctor_node_collect(&f->node); /* before MPI_Init: /dev/shm without this job's segments */
    /* The prologue sets OPENBLAS_CORETYPE with DTRAIN_BLAS_COREFIX=0 when it restarts the program:
     * that pair is dtrain's own, not the user's. */
    const char *fix = getenv("DTRAIN_BLAS_COREFIX");
    const int restarted = fix && !strcmp(fix, "0") && getenv("OPENBLAS_CORETYPE");
    if (!restarted) {
        copy_env(f->coretype_env, sizeof f->coretype_env, "OPENBLAS_CORETYPE");
        f->corefix_off = fix && !strcmp(fix, "0");
    }
}

void doctor_host_collect(doctor_host_facts *f, const dt_placement *pl)
{
    (void)pl;
    char nccl[96], cuda[96];
    dt_versions(f->mpi_version, nccl, cuda, sizeof f->mpi_version);
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    f->cuda_aware_built = 1;
    f->cuda_aware_run = MPIX_Query_cuda_support() == 1;
#else
    f->cuda_aware_built = 0;
    f->cuda_aware_run = -1;
#endif
    f->thread_level = -1;
    MPI_Query_thread(&f->thread_level);
    snprintf(f->blas_core, sizeof f->blas_core, "%s", dt_blas_corename());
    const char *better = dt_blas_coretype_advice();
    snprintf(f->blas_better, sizeof f->blas_better, "%s", better ? better : "");
    f->collected = 1;
}
