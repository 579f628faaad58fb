/*
 * host_checks.c - doctor's launcher, MPI and CPU verdicts: pure functions of the facts
 * (doctor_host.h), so the unit test can fake any environment. Each row's fix names the value and
 * what to type.
 *
 * A per-rank row's text must not name the rank (nor anything else that differs between healthy
 * ranks): rows equal across ranks merge into one, which is what keeps a large job's report short.
 */
#include "launch/doctor/doctor.h"
#include "runtime/placement/affinity.h"

#include <stdlib.h>
#include <string.h>

static const char *bound_by(const dt_placement *p)
{
    return p->pinned_by == DT_PINNED_BY_DTRAIN     ? "dtrain"
           : p->pinned_by == DT_PINNED_BY_LAUNCHER ? "the launcher"
                                                   : "nobody";
}

/* The part of a refusal after "Fix: " is the fix; the rest is what was seen. */
static void refusal_row(doc_list *out, const char *name, const char *refusal)
{
    const char *fix = strstr(refusal, "Fix: ");
    if (!fix) {
        doc_add(out, name, DOC_FAIL, "start the job with mpirun or `srun --mpi=pmix` (see docs/doctor.md)", "%s",
                refusal);
        return;
    }
    doc_add(out, name, DOC_FAIL, fix + 5, "%.*s", (int)(fix - refusal), refusal);
}

static void check_launcher(const doctor_facts *f, doc_list *out)
{
    const doctor_host_facts *h = &f->host;
    const char *name = h->launcher < 0 ? "unreadable" : dt_launcher_name((dt_launcher)h->launcher);
    doc_add(out, "launch.launcher", DOC_PASS, NULL, "%s; variables seen: %s", name,
            h->families[0] ? h->families : "none (a world of 1)");
    if (h->refusal[0])
        refusal_row(out, "launch.identity", h->refusal);
    else
        doc_add(out, "launch.identity", DOC_PASS, NULL, "the launcher's rank and size agree with MPI (world of %d)",
                f->pl.world_size);

    /* PMIx: how MPI learns the world. srun without it is the singleton trap. */
    if (h->launcher == DT_LAUNCHER_SLURM && !h->has_pmix && h->has_pmi2)
        doc_add(out, "launch.pmix", DOC_PASS, NULL,
                "PMI-2 present (SLURM_MPI_TYPE=%s): MPI joins the tasks through it when it was built with PMI-2 "
                "(launch.identity says whether it did)",
                h->slurm_mpi_type[0] ? h->slurm_mpi_type : "(unset)");
    else if (h->launcher == DT_LAUNCHER_SLURM && !h->has_pmix)
        doc_add(out, "launch.pmix", DOC_FAIL,
                "run `srun --mpi=pmix ...` (or set MpiDefault=pmix in slurm.conf); `srun --mpi=list` shows the "
                "plugins",
                "srun started %d task%s with SLURM_MPI_TYPE=%s and no PMIx: MPI cannot join them into one job",
                h->slurm_ntasks, h->slurm_ntasks == 1 ? "" : "s", h->slurm_mpi_type[0] ? h->slurm_mpi_type : "(unset)");
    else if (h->has_pmix)
        doc_add(out, "launch.pmix", DOC_PASS, NULL, "PMIx present (PMIX_RANK set by %s)",
                h->launcher == DT_LAUNCHER_SLURM ? "srun --mpi=pmix" : "the launcher");
    else
        doc_add(out, "launch.pmix", DOC_SKIP, NULL, "no PMIx server: %s",
                h->launcher == DT_LAUNCHER_NONE ? "started without a launcher" : "this launcher uses another PMI");

    /* torchrun's variables under another launcher: a Python program reading them would be wrong. */
    if (h->torch_rank >= 0 && h->torch_world >= 0 &&
        (h->torch_rank != f->pl.rank || h->torch_world != f->pl.world_size))
        doc_add(out, "launch.conflict", DOC_WARN,
                "unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE in the job script (dtrain takes its ranks from "
                "MPI; code that reads them would disagree)",
                "RANK=%d WORLD_SIZE=%d are set but MPI says rank %d of %d", h->torch_rank, h->torch_world, f->pl.rank,
                f->pl.world_size);
    else if (h->launcher == DT_LAUNCHER_OPENMPI && h->slurm_procid >= 0)
        doc_add(out, "launch.conflict", DOC_PASS, NULL,
                "SLURM_* of the batch step are present and ignored: mpirun's OMPI_COMM_WORLD_* win");
    else
        doc_add(out, "launch.conflict", DOC_PASS, NULL, "no other launcher's variables disagree");
}

static void check_mpi(const doctor_facts *f, doc_list *out)
{
    const doctor_host_facts *h = &f->host;
    const int gpu_via_mpi = f->pl.device == DT_DEVICE_CUDA && h->gpu_comm == DT_GPU_COMM_MPI;
    if (h->cuda_aware_built && h->cuda_aware_run == 0)
        doc_add(out, "mpi.cuda_aware", DOC_WARN,
                "point LD_LIBRARY_PATH at the CUDA-aware Open MPI dtrain was built with (`ldd $(which dtrain) | grep "
                "mpi` shows the one loaded)",
                "%s: built against a CUDA-aware Open MPI, but the library loaded at run time is not", h->mpi_version);
    else if (!h->cuda_aware_built && gpu_via_mpi)
        doc_add(out, "mpi.cuda_aware", DOC_WARN,
                "use --gpu-comm nccl (the default), or build dtrain against a CUDA-aware MPI",
                "%s is not CUDA-aware and --gpu-comm mpi is set: every GPU allreduce is staged through host memory",
                h->mpi_version);
    else
        doc_add(out, "mpi.cuda_aware", DOC_PASS, NULL, "%s %s%s", h->mpi_version,
                h->cuda_aware_built ? "is CUDA-aware" : "is not CUDA-aware",
                f->pl.device == DT_DEVICE_CUDA ? " (GPU buffers go through NCCL)" : " (not needed on the CPU)");
    if (h->thread_level >= 0 && h->thread_level < 2 /* MPI_THREAD_SERIALIZED */)
        doc_add(out, "mpi.threads", DOC_WARN,
                "use an MPI built with thread support (Open MPI: the default), or DTRAIN_COMM_THREAD=0",
                "MPI provides thread level %d only: the communication thread needs MPI_THREAD_SERIALIZED or better",
                h->thread_level);
    else
        doc_add(out, "mpi.threads", DOC_PASS, NULL, "MPI thread level %d (%s)", h->thread_level,
                h->thread_level >= 3 ? "MPI_THREAD_MULTIPLE" : "MPI_THREAD_SERIALIZED");
}

/* A thread variable x local ranks above the node's CPUs: one WARN row naming the values. */
static int threads_over(doc_list *out, const char *var, const char *value, const dt_placement *pl, int cpus)
{
    const long v = value[0] ? strtol(value, NULL, 10) : 0;
    if (v <= 0 || cpus <= 0 || v * pl->local_size <= cpus) return 0;
    char fix[DOC_TEXT];
    const long each = cpus / pl->local_size > 0 ? cpus / pl->local_size : 1;
    snprintf(fix, sizeof fix,
             "export %s=%ld (the node's %d CPUs / %d ranks), or unset it: dtrain sizes OpenBLAS "
             "from each rank's cores (--blas-threads N to choose)",
             var, each, cpus, pl->local_size);
    doc_add(out, "cpu.threads", DOC_WARN, fix, "%s=%s x %d ranks on the node = %ld threads on %d CPUs", var, value,
            pl->local_size, v * pl->local_size, cpus);
    return 1;
}

static void check_cpu(const doctor_facts *f, doc_list *out)
{
    const doctor_host_facts *h = &f->host;
    const dt_placement *pl = &f->pl;
    doc_add(out, "cpu.cores", pl->num_cores > 0 ? DOC_PASS : DOC_WARN,
            pl->num_cores > 0 ? NULL : "check the launcher's binding (srun --cpu-bind=cores, mpirun --bind-to core)",
            "%d core%s each, bound by %s%s, %d BLAS thread%s", pl->num_cores, pl->num_cores == 1 ? "" : "s",
            bound_by(pl), pl->cores_shared ? " (shared: more ranks than cores)" : "", pl->blas_threads,
            pl->blas_threads == 1 ? "" : "s");
    if (h->blas_better[0]) {
        char fix[DOC_TEXT];
        if (h->coretype_env[0])
            snprintf(fix, sizeof fix, "unset OPENBLAS_CORETYPE (it is %s), or export OPENBLAS_CORETYPE=%s",
                     h->coretype_env, h->blas_better);
        else if (h->corefix_off)
            snprintf(fix, sizeof fix,
                     "unset DTRAIN_BLAS_COREFIX (it is 0) so dtrain restarts itself with "
                     "OPENBLAS_CORETYPE=%s, or export OPENBLAS_CORETYPE=%s",
                     h->blas_better, h->blas_better);
        else
            snprintf(fix, sizeof fix, "export OPENBLAS_CORETYPE=%s before starting the job", h->blas_better);
        doc_add(out, "cpu.blas", DOC_WARN, fix,
                "OpenBLAS runs its %s kernels on a CPU that can run %s ones (GEMM up to 4x slower)", h->blas_core,
                h->blas_better);
    } else {
        doc_add(out, "cpu.blas", DOC_PASS, NULL, "OpenBLAS runs its %s kernels, the best for this CPU", h->blas_core);
    }
    int warned = threads_over(out, "OMP_NUM_THREADS", h->omp_threads, pl, h->online_cpus);
    warned |= threads_over(out, "OPENBLAS_NUM_THREADS", h->openblas_threads, pl, h->online_cpus);
    if (!warned)
        doc_add(out, "cpu.threads", DOC_PASS, NULL,
                "OMP_NUM_THREADS %s, OPENBLAS_NUM_THREADS %s: within the node's CPUs",
                h->omp_threads[0] ? h->omp_threads : "unset", h->openblas_threads[0] ? h->openblas_threads : "unset");
}

void doctor_host_check_rank(const doctor_facts *f, doc_list *out)
{
    if (!f->host.collected) {
        doc_add(out, "launch.launcher", DOC_FAIL, "rerun; report a bug if it stays",
                "this rank collected no host facts");
        return;
    }
    check_launcher(f, out);
    check_mpi(f, out);
    check_cpu(f, out);
}

/* ---------------------------------------------------------------- per job */

/* The ranks of node nd, in rank order, into idx (world entries); their count. */
static int node_ranks(const doctor_facts *all, int world, int nd, int *idx)
{
    int n = 0;
    for (int r = 0; r < world; r++)
        if (all[r].pl.node == nd) idx[n++] = r;
    return n;
}

static void check_busy_poll(const doctor_facts *all, int world, const int *idx, int n, doc_list *job, int *bad)
{
    cpu_set_t u;
    CPU_ZERO(&u);
    int yield = 0;
    for (int i = 0; i < n; i++) {
        cpu_set_t s;
        const doctor_host_facts *h = &all[idx[i]].host;
        if (affinity_parse(h->allowed, &s) == DT_OK) CPU_OR(&u, &u, &s);
        yield |= h->yield[0] && strcmp(h->yield, "0") != 0;
    }
    const int cores = CPU_COUNT(&u);
    if (n <= cores || yield || cores == 0) return;
    const char *host = all[idx[0]].pl.hostname;
    doc_add_ranks(job, idx, n, "mpi.busy_poll", DOC_WARN,
                  "export OMPI_MCA_mpi_yield_when_idle=1 before mpirun or srun (or start at most as many ranks per "
                  "node as it has cores)",
                  "node %s runs %d ranks on %d core%s and OMPI_MCA_mpi_yield_when_idle is %s: waiting ranks spin and "
                  "starve the others (small allreduces ~10 ms instead of ~20 us)",
                  host, n, cores, cores == 1 ? "" : "s", all[idx[0]].host.yield[0] ? all[idx[0]].host.yield : "unset");
    *bad = 1;
    (void)world;
}

static void check_overlap(const doctor_facts *all, const int *idx, int n, doc_list *job, int *bad)
{
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            const dt_placement *a = &all[idx[i]].pl, *b = &all[idx[j]].pl;
            cpu_set_t sa, sb, both;
            if (affinity_parse(a->cores, &sa) || affinity_parse(b->cores, &sb)) continue;
            CPU_AND(&both, &sa, &sb);
            if (!CPU_COUNT(&both)) continue;
            char common[128];
            affinity_format(&both, common, sizeof common);
            const int pair[2] = {idx[i], idx[j]};
            const int cpus = all[idx[i]].host.online_cpus;
            if (n > cpus || a->cores_shared)
                doc_add_ranks(job, pair, 2, "cpu.overlap", DOC_WARN,
                              "start at most as many ranks per node as it has cores (srun --ntasks-per-node, "
                              "mpirun --map-by ppr:N:node)",
                              "ranks %d and %d share cores %s on %s: %d ranks on %d CPUs", pair[0], pair[1], common,
                              a->hostname, n, cpus);
            else if (a->pinned_by == DT_PINNED_NONE || b->pinned_by == DT_PINNED_NONE)
                doc_add_ranks(job, pair, 2, "cpu.overlap", DOC_WARN,
                              "let dtrain pin the ranks (drop --pin none / DTRAIN_PIN=none), or bind them apart: "
                              "srun --cpu-bind=cores, mpirun --bind-to core",
                              "ranks %d and %d are not pinned and share cores %s on %s, which has a core for each",
                              pair[0], pair[1], common, a->hostname);
            else
                doc_add_ranks(job, pair, 2, "cpu.overlap", DOC_FAIL,
                              "bind the ranks apart: srun --cpu-bind=cores, mpirun --bind-to core; or drop the "
                              "launcher's binding (taskset, --cpu-bind=map_cpu) and let dtrain split the cores",
                              "ranks %d and %d are bound to the same cores %s on %s although it has a core for each: "
                              "each runs at half speed",
                              pair[0], pair[1], common, a->hostname);
            *bad = 1;
            return; /* one pair per node says it; the rest follows from it */
        }
}

void doctor_host_check_job(const doctor_facts *all, int world, doc_list *job)
{
    int *idx = calloc((size_t)world, sizeof *idx);
    if (!idx) {
        job->nomem = 1;
        return;
    }
    const int nodes = all[0].pl.num_nodes;
    int busy = 0, overlap = 0;
    char lists[DOC_TEXT] = "";
    size_t len = 0;
    for (int nd = 0; nd < nodes; nd++) {
        const int n = node_ranks(all, world, nd, idx);
        if (!n) continue;
        check_busy_poll(all, world, idx, n, job, &busy);
        check_overlap(all, idx, n, job, &overlap);
        len += (size_t)snprintf(lists + len, len < sizeof lists ? sizeof lists - len : 0, "%s%s:", len ? "; " : "",
                                all[idx[0]].pl.hostname);
        for (int i = 0; i < n && len < sizeof lists; i++)
            len += (size_t)snprintf(lists + len, sizeof lists - len, " %d=%s", idx[i], all[idx[i]].pl.cores);
    }
    if (!busy)
        doc_add(job, "mpi.busy_poll", DOC_PASS, NULL, "no node runs more ranks than it has cores without yielding");
    if (!overlap)
        doc_add(job, "cpu.overlap", DOC_PASS, NULL, "no two ranks of a node share a core (rank=cores: %s)", lists);
    /* One MPI everywhere: a node with another install breaks the job in strange ways. */
    int other = -1;
    for (int r = 1; r < world && other < 0; r++)
        if (strcmp(all[r].host.mpi_version, all[0].host.mpi_version)) other = r;
    if (other >= 0)
        doc_add(job, "mpi.version", DOC_FAIL,
                "install the same MPI on every node (or use one container image); `dtrain env` lists each rank's",
                "rank 0 on %s runs %s but rank %d on %s runs %s", all[0].pl.hostname, all[0].host.mpi_version, other,
                all[other].pl.hostname, all[other].host.mpi_version);
    else
        doc_add(job, "mpi.version", DOC_PASS, NULL, "every rank runs %s", all[0].host.mpi_version);
    free(idx);
}
