/*
 * doctor_host.h - doctor's launcher, MPI and CPU checks: what one rank collects (host_facts.c),
 * the checks over it (host_checks.c), and the timed allreduces with their verdict (comm_check.c).
 */
#ifndef DT_LAUNCH_DOCTOR_HOST_H
#define DT_LAUNCH_DOCTOR_HOST_H

#include "dtrain.h"

struct doc_list;
struct doctor_facts;

/* What the timed allreduces found (comm_check.c). Times are the slowest rank's, median of reps. */
typedef struct doctor_comm_facts {
    int ran;              /* 1 when measured; 0: skipped, see skipped */
    char skipped[96];     /* why not measured: "--no-comm", "a world of 1 sends nothing" */
    char error[192];      /* a collective that failed, "" when none did */
    double small_s;       /* one 8-byte allreduce: latency, where busy-polling shows */
    double t1m_s, t64m_s; /* 1 MiB and 64 MiB fp32 allreduces over the world */
    double node_busbw;    /* bytes/s: this node's own allreduce of 16 MiB, 0 when it has one rank */
} doctor_comm_facts;

/* The node's resources that make MPI jobs fail or crawl (node_facts.c), read before MPI_Init so
 * that /dev/shm's free space is what this job's segments will find. */
typedef struct doctor_node_facts {
    int shm_ok;                       /* 1 when /dev/shm could be statvfs'd */
    unsigned long long shm_total;     /* bytes */
    unsigned long long shm_free;      /* bytes available to this user */
    double quota_cpus;                /* CPUs the tightest CPU quota of this cgroup and its ancestors
                                       * allows (quota / period), 0 when none */
    char quota_file[160];             /* the file that sets it: ".../cpu.max", ".../cpu.cfs_quota_us" */
    unsigned long long nofile, stack; /* soft RLIMIT_NOFILE, RLIMIT_STACK (bytes) */
    unsigned long long memlock;       /* soft RLIMIT_MEMLOCK, bytes */
    int rdma_devices;                 /* entries of /sys/class/infiniband */
} doctor_node_facts;

/* A limit that is RLIM_INFINITY, as the facts hold it. */
#define DOC_UNLIMITED (~0ULL)

/* One rank's host facts: plain fixed-size data (gathered as bytes). */
typedef struct doctor_host_facts {
    int collected; /* 1 once doctor_host_collect ran */
    /* The launcher, read before dt_init from the environment the launcher gave (doctor_host_early). */
    int launcher;                   /* dt_launcher by topo's rules (-1: its variables did not parse) */
    char families[192];             /* the launcher variable families present: "OMPI_COMM_WORLD_* PMIX_* SLURM_*" */
    char refusal[480];              /* why dt_init would refuse this rank, "" when it would not */
    int slurm_procid, slurm_ntasks; /* -1 when unset */
    /* A batch script or salloc shell of a job with several tasks ran doctor directly: the job's
     * task count and the variable it came from (topo_job_tasks_outside_step), 0 and "" otherwise */
    int job_tasks;
    char job_tasks_var[24];
    char slurm_mpi_type[32];     /* SLURM_MPI_TYPE, "" when unset */
    int has_pmix;                /* PMIX_RANK set */
    int has_pmi2;                /* PMI_RANK or PMI_FD set (PMI-2: srun --mpi=pmi2), which dt_init accepts */
    int torch_rank, torch_world; /* RANK and WORLD_SIZE when set under another launcher, else -1 */
    /* LOCAL_RANK and LOCAL_WORLD_SIZE as set under another launcher, "" when unset (text, so that a
     * zeroed fact is "unset" and a value that is no number can be quoted) */
    char torch_local_rank[16], torch_local_world[16];
    /* MPI */
    char mpi_version[96];
    int cuda_aware_built; /* this build's <mpi-ext.h> says CUDA-aware (Open MPI) */
    int cuda_aware_run;   /* MPIX_Query_cuda_support() at run time: 1, 0, -1 not asked */
    int thread_level;     /* MPI_Query_thread */
    int gpu_comm;         /* dt_gpu_comm in effect */
    /* CPU */
    int online_cpus;   /* CPUs the node has online (the ranks may be allowed fewer: allowed) */
    char allowed[256]; /* the cores this process was allowed before dtrain pinned it */
    int allowed_n;
    char yield[16];   /* OMPI_MCA_mpi_yield_when_idle, "" when unset */
    char oversub[16]; /* OMPI_MCA_mpi_oversubscribe, which mpirun sets to 1 when it oversubscribes */
    char omp_threads[16], openblas_threads[16]; /* OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, "" unset */
    char blas_core[32], blas_better[32];        /* OpenBLAS's kernels; a better set, "" when none */
    char coretype_env[32]; /* OPENBLAS_CORETYPE as the user set it, "" when unset or set by dtrain */
    int corefix_off;       /* DTRAIN_BLAS_COREFIX=0 given by the user */
    doctor_comm_facts comm;
    doctor_node_facts node;
} doctor_host_facts;

/* Before dt_init (and before MPI): the launcher's variables, the cores the launcher allowed, and
 * the thread variables. launcher is what topo_read_env resolved (a dt_launcher), or -1 when it
 * refused the environment; the caller records the refusal itself once MPI has had its say. */
void doctor_host_early(doctor_host_facts *f, int launcher);

/* Fills the rest of *f for this rank, whose placement is pl (after dt_init). Never fails: what
 * cannot be read is recorded as absent, and the checks say so. */
void doctor_host_collect(doctor_host_facts *f, const dt_placement *pl);

/* Times the allreduces into *out (every rank gets the same world numbers, and its node's). skip
 * non-NULL: record why and send nothing. Collective over MPI_COMM_WORLD when not skipped. */
void doctor_comm_measure(dt_ctx *ctx, const dt_placement *pl, const char *skip, doctor_comm_facts *out);

/* The per-rank host checks over one rank's facts, into out (a scratch list). */
void doctor_host_check_rank(const struct doctor_facts *f, struct doc_list *out);
/* The per-job host checks over every rank's facts (world entries), into job. */
void doctor_host_check_job(const struct doctor_facts *all, int world, struct doc_list *job);
/* The per-job communication rows, from the facts of comm_measure (world entries), into job. */
void doctor_comm_check_job(const struct doctor_facts *all, int world, struct doc_list *job);

/* Fills *f: /dev/shm, the CPU quota (doctor_cpu_quota_read over /proc/self/cgroup and
 * /sys/fs/cgroup), the resource limits, the RDMA devices. Never fails: what cannot be read is 0. */
void doctor_node_collect(doctor_node_facts *f);
/* The tightest CPU quota of the cgroups that proc_cgroup (a /proc/PID/cgroup file) names, and of
 * their ancestors (cgroup_walk, base/cgroup.h), under the cgroup file system mounted at root: v2
 * cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us (in root/cpu or root/<controllers>). Sets f->quota_cpus
 * and f->quota_file; leaves them 0 and "" without a quota. Separate so tests can fake the files. */
void doctor_cpu_quota_read(const char *proc_cgroup, const char *root, doctor_node_facts *f);
/* The per-rank resource limit row (node.limits), into out. */
void doctor_node_check_rank(const struct doctor_facts *f, struct doc_list *out);
/* The per-node rows: node.shm (free /dev/shm against the local ranks' segments) and cpu.quota
 * (a cgroup CPU quota against the ranks' BLAS threads), into job. */
void doctor_node_check_job(const struct doctor_facts *all, int world, struct doc_list *job);

/* What shared memory one local rank needs: Open MPI's vader BTL maps a 4 MiB + 8 byte segment per
 * local rank (measured: ls -la /dev/shm during a 2-rank run, Open MPI 4.1). */
#define DOC_SHM_PER_RANK ((4ULL << 20) + 8)
/* NCCL's own advice for a GPU node (its troubleshooting guide: docker --shm-size=1g). */
#define DOC_SHM_GPU_NODE (1ULL << 30)
/* One node, no more ranks than CPUs: an 8-byte allreduce through shared memory takes ~1.5-3 us
 * here (measured), through TCP loopback, Open MPI's fallback when /dev/shm is too small or full,
 * 25-30 us. Above this, the ranks are not talking through shared memory. */
#define DOC_SHM_LATENCY_WARN_S 10e-6

/* Slowest node: a node whose own allreduce runs below this fraction of the median node's. */
#define DOC_SLOW_NODE_FRACTION 0.5
/* Latency of a small allreduce above which ranks are likely busy-polling (measured: ~20 us healthy,
 * ~10 ms with more ranks than cores and no yield). */
#define DOC_SMALL_ALLREDUCE_WARN_S 1e-3

#endif
