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

static void check_conflict(const doctor_facts *f, doc_list *out);

/* The launcher's variables did not parse (launcher -1): no launcher explains the rank, and the
 * refusal names the variable and its value ("SLURM_NTASKS='2x' is not a whole number ..."). The
 * launchers set these themselves, so a bad one was exported by hand (a job script, a shell rc) or
 * inherited from another job: the fix names it. The identity and PMI rows cannot be judged then. */
static void launcher_unreadable(const doctor_host_facts *h, doc_list *out)
{
    const char *r = h->refusal[0] ? h->refusal : "the launcher's variables do not parse";
    size_t n = strspn(r, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
    char fix[DOC_TEXT];
    if (n > 0 && n < 64 && r[n] == '=')
        snprintf(fix, sizeof fix,
                 "give %.*s a valid value or unset it: srun and mpirun set it themselves, so a job script or "
                 "shell that exports it by hand (or a variable left from another job) is the cause",
                 (int)n, r);
    else
        snprintf(fix, sizeof fix, "start the job with mpirun or `srun --mpi=pmix` (see docs/doctor.md)");
    /* What was seen ends where the refusal's own fix starts (this row gives its fix), without the
     * sentence's full stop: "; variables seen" follows. */
    const char *cut = strstr(r, " Fix: ");
    int len = cut ? (int)(cut - r) : (int)strlen(r);
    if (len > 0 && r[len - 1] == '.') len--;
    doc_add(out, "launch.launcher", DOC_FAIL, fix, "no launcher explains this rank: %.*s; variables seen: %s", len, r,
            h->families[0] ? h->families : "none");
    doc_add(out, "launch.identity", DOC_SKIP, NULL,
            "not compared: the launcher's variables do not parse (launch.launcher)");
    doc_add(out, "launch.pmix", DOC_SKIP, NULL, "not judged: the launcher's variables do not parse (launch.launcher)");
}

/* LOCAL_RANK or LOCAL_WORLD_SIZE (torchrun's) against MPI's local rank and size: "" when they
 * agree or are unset, else the disagreement into buf. A program that picks its GPU from
 * LOCAL_RANK would take another rank's GPU. */
static const char *local_conflict(const doctor_host_facts *h, const dt_placement *pl, char *buf, size_t n)
{
    buf[0] = '\0';
    const char *var[2] = {"LOCAL_RANK", "LOCAL_WORLD_SIZE"};
    const char *val[2] = {h->torch_local_rank, h->torch_local_world};
    const int mpi[2] = {pl->local_rank, pl->local_size};
    for (int i = 0; i < 2; i++) {
        if (!val[i][0]) continue;
        char *end = NULL;
        const long v = strtol(val[i], &end, 10);
        if (!*end && v == mpi[i]) continue;
        doc_append(buf, n, "%s%s=%s", buf[0] ? " " : "", var[i], val[i]);
    }
    if (buf[0])
        doc_append(buf, n, " %s set but MPI says local rank %d of %d on this node", strchr(buf, ' ') ? "are" : "is",
                   pl->local_rank, pl->local_size);
    return buf;
}

static void check_launcher(const doctor_facts *f, doc_list *out)
{
    const doctor_host_facts *h = &f->host;
    if (h->launcher < 0) {
        launcher_unreadable(h, out);
        check_conflict(f, out);
        return;
    }
    /* Run directly in a batch script or salloc shell: a world of 1 while the job holds more. */
    if (h->launcher == DT_LAUNCHER_NONE && h->job_tasks > 1 && f->pl.world_size == 1) {
        const int nodes = strcmp(h->job_tasks_var, "SLURM_JOB_NUM_NODES") == 0;
        doc_add(out, "launch.launcher", DOC_WARN,
                "start it with `srun --mpi=pmix dtrain doctor` in the batch script or salloc shell, so that it runs "
                "as the job's tasks (and so do dtrain train and the others)",
                "none: this job has %d %s (%s=%d) but dtrain runs alone, a world of 1, in the batch script or salloc "
                "shell (no SLURM_STEP_ID); variables seen: %s",
                h->job_tasks, nodes ? "nodes" : "tasks", h->job_tasks_var, h->job_tasks,
                h->families[0] ? h->families : "none");
    } else
        doc_add(out, "launch.launcher", DOC_PASS, NULL, "%s; variables seen: %s",
                dt_launcher_name((dt_launcher)h->launcher), h->families[0] ? h->families : "none (a world of 1)");
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
    check_conflict(f, out);
}

static void check_conflict(const doctor_facts *f, doc_list *out)
{
    const doctor_host_facts *h = &f->host;
    static const char *const unset_fix =
        "unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE in the job script (dtrain takes its ranks from MPI; code "
        "that reads them would disagree)";
    char local[160];
    /* torchrun's variables under another launcher: a Python program reading them would be wrong. */
    if (h->torch_rank >= 0 && h->torch_world >= 0 &&
        (h->torch_rank != f->pl.rank || h->torch_world != f->pl.world_size))
        doc_add(out, "launch.conflict", DOC_WARN, unset_fix, "RANK=%d WORLD_SIZE=%d are set but MPI says rank %d of %d",
                h->torch_rank, h->torch_world, f->pl.rank, f->pl.world_size);
    else if (local_conflict(h, &f->pl, local, sizeof local)[0])
        doc_add(out, "launch.conflict", DOC_WARN, unset_fix, "%s", local);
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
    /* The engine starts its communication thread only under MPI_THREAD_MULTIPLE (collectives/engine.c);
     * below it every allreduce runs inline on the compute thread, none overlaps the backward pass. */
    if (h->thread_level >= 0 && h->thread_level < 3 /* MPI_THREAD_MULTIPLE */)
        doc_add(out, "mpi.threads", DOC_WARN,
                "use an MPI built with MPI_THREAD_MULTIPLE support (Open MPI: the default; MPICH: "
                "--enable-threads=multiple)",
                "MPI provides thread level %d only: the communication thread needs MPI_THREAD_MULTIPLE, so "
                "allreduces run inline and do not overlap the backward pass",
                h->thread_level);
    else
        doc_add(out, "mpi.threads", DOC_PASS, NULL, "MPI thread level %d (MPI_THREAD_MULTIPLE)", h->thread_level);
}

/* A thread variable: "" unset, else whether it is a whole number above 0 (OpenBLAS reads it with
 * atoi, so "abc" and "0" mean its default). */
static int threads_var_ok(const char *v)
{
    char *end = NULL;
    const long x = v[0] ? strtol(v, &end, 10) : 1;
    return !v[0] || (!*end && x > 0);
}

/* What sets a rank's BLAS threads is dtrain: it calls openblas_set_num_threads from the rank's
 * cores or --blas-threads (affinity.c), over OPENBLAS_NUM_THREADS; the OpenBLAS it links uses
 * pthreads, not OpenMP, and nothing else in dtrain reads OMP_NUM_THREADS. So the row judges the
 * count dtrain set against the cores the rank may run on, and only says a variable is ignored. */
static void check_threads(const doctor_host_facts *h, const dt_placement *pl, doc_list *out)
{
    const char *bad_var = NULL, *bad_val = NULL;
    if (!threads_var_ok(h->openblas_threads))
        bad_var = "OPENBLAS_NUM_THREADS", bad_val = h->openblas_threads;
    else if (!threads_var_ok(h->omp_threads))
        bad_var = "OMP_NUM_THREADS", bad_val = h->omp_threads;
    char vars[96];
    snprintf(vars, sizeof vars, "%s%s%s", h->openblas_threads[0] ? "OPENBLAS_NUM_THREADS " : "",
             h->omp_threads[0] ? "OMP_NUM_THREADS " : "",
             h->openblas_threads[0] || h->omp_threads[0] ? "set but without effect: dtrain sets the count" : "");
    if (bad_var) {
        char fix[DOC_TEXT];
        snprintf(fix, sizeof fix, "unset %s: dtrain sets OpenBLAS's threads itself (--blas-threads N to choose)",
                 bad_var);
        doc_add(out, "cpu.threads", DOC_WARN, fix, "%s='%s' is not a whole number above 0", bad_var, bad_val);
        return;
    }
    if (pl->num_cores > 0 && pl->blas_threads > pl->num_cores) {
        char fix[DOC_TEXT];
        snprintf(fix, sizeof fix, "--blas-threads %d (or leave it out: dtrain runs one per core)", pl->num_cores);
        doc_add(out, "cpu.threads", DOC_WARN, fix,
                "%d BLAS threads per rank on %d core%s each: the threads take turns and GEMMs slow down",
                pl->blas_threads, pl->num_cores, pl->num_cores == 1 ? "" : "s");
        return;
    }
    doc_add(out, "cpu.threads", DOC_PASS, NULL, "%d BLAS thread%s on %d core%s each%s%s", pl->blas_threads,
            pl->blas_threads == 1 ? "" : "s", pl->num_cores, pl->num_cores == 1 ? "" : "s", vars[0] ? "; " : "", vars);
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
    check_threads(h, pl, out);
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

/* An Open MPI boolean MCA value read the way Open MPI 4.1 reads it (mca_base_var_enum_bool): leading
 * white space skipped, then a whole integer (nonzero: true) or exactly one of t true enabled yes y /
 * f false disabled no n, case-sensitive (measured: "TRUE" and "1 " are refused). 1 true, 0 false,
 * -1 a value Open MPI refuses, with a warning, keeping its default. */
static int mca_bool(const char *v)
{
    v += strspn(v, " \t\n\v\f\r");
    char *end = NULL;
    const long x = strtol(v, &end, 10);
    if (!*end) return x != 0; /* "" is 0 as well: false */
    static const char *const yes[] = {"t", "true", "enabled", "yes", "y"}, *const no[] = {"f", "false", "disabled",
                                                                                          "no", "n"};
    for (int i = 0; i < 5; i++) {
        if (!strcmp(v, yes[i])) return 1;
        if (!strcmp(v, no[i])) return 0;
    }
    return -1;
}

/* Whether Open MPI makes this rank yield when it waits: OMPI_MCA_mpi_yield_when_idle when set to a
 * value it reads; unset (or refused), its default, which is to yield when mpirun oversubscribed the
 * node, as mpirun tells the rank with OMPI_MCA_mpi_oversubscribe=1 (measured, Open MPI 4.1.4, 3
 * ranks on 2 cores: an 8-byte allreduce takes ~10 us unset or "TRUE", ~330 us with "0"). */
static int yields(const doctor_host_facts *h)
{
    const int y = h->yield[0] ? mca_bool(h->yield) : -1;
    if (y >= 0) return y;
    return h->oversub[0] && mca_bool(h->oversub) == 1;
}

/* The CPUs the ranks of a node may use: the union of the sets the launcher allowed them. */
static int node_allowed(const doctor_facts *all, const int *idx, int n)
{
    cpu_set_t u;
    CPU_ZERO(&u);
    for (int i = 0; i < n; i++) {
        cpu_set_t s;
        if (affinity_parse(all[idx[i]].host.allowed, &s) == DT_OK) CPU_OR(&u, &u, &s);
    }
    return CPU_COUNT(&u);
}

static void check_busy_poll(const doctor_facts *all, const int *idx, int n, doc_list *job, int *bad)
{
    int spin = -1; /* a rank of the node that does not yield */
    for (int i = 0; i < n && spin < 0; i++)
        if (!yields(&all[idx[i]].host)) spin = idx[i];
    const int cores = node_allowed(all, idx, n);
    if (n <= cores || spin < 0 || cores == 0) return;
    const doctor_host_facts *h = &all[spin].host;
    char why[160];
    if (!h->yield[0])
        snprintf(why, sizeof why,
                 "unset and mpirun did not mark the node oversubscribed (only then does Open MPI "
                 "yield by itself)");
    else if (mca_bool(h->yield) < 0)
        snprintf(why, sizeof why,
                 "'%.16s', which Open MPI refuses (keeping its default: no yield unless mpirun "
                 "oversubscribed the node)",
                 h->yield);
    else
        snprintf(why, sizeof why, "'%.16s' (false)", h->yield);
    doc_add_ranks(job, idx, n, "mpi.busy_poll", DOC_WARN,
                  "export OMPI_MCA_mpi_yield_when_idle=1 before mpirun or srun (or start at most as many ranks per "
                  "node as it has cores)",
                  "node %s runs %d ranks on %d core%s and OMPI_MCA_mpi_yield_when_idle is %s: waiting ranks spin and "
                  "starve the others (small allreduces take 0.3-10 ms instead of ~20 us)",
                  all[idx[0]].pl.hostname, n, cores, cores == 1 ? "" : "s", why);
    *bad = 1;
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
            /* The CPUs the ranks may use, not the node's: under taskset or a cgroup they are fewer. */
            const int cpus = node_allowed(all, idx, n);
            if (n > cpus) /* every rank of the node shares: the row names them all, the pair as an example */
                doc_add_ranks(job, idx, n, "cpu.overlap", DOC_WARN,
                              "start at most as many ranks per node as it has cores (srun --ntasks-per-node, "
                              "mpirun --map-by ppr:N:node)",
                              "%d ranks on the %d CPU%s they may use on %s share cores (ranks %d and %d: %s)", n, cpus,
                              cpus == 1 ? "" : "s", a->hostname, pair[0], pair[1], common);
            else if (a->cores_shared)
                doc_add_ranks(job, pair, 2, "cpu.overlap", DOC_WARN,
                              "start at most as many ranks per node as it has cores (srun --ntasks-per-node, "
                              "mpirun --map-by ppr:N:node)",
                              "ranks %d and %d share cores %s on %s: %d ranks on the %d CPU%s they may use", pair[0],
                              pair[1], common, a->hostname, n, cpus, cpus == 1 ? "" : "s");
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
    for (int nd = 0; nd < nodes; nd++) {
        const int n = node_ranks(all, world, nd, idx);
        if (!n) continue;
        check_busy_poll(all, idx, n, job, &busy);
        check_overlap(all, idx, n, job, &overlap);
        /* A job of many ranks outgrows the row: the list ends in "..." where it is cut. */
        doc_append(lists, sizeof lists, "%s%s:", lists[0] ? "; " : "", all[idx[0]].pl.hostname);
        for (int i = 0; i < n; i++) doc_append(lists, sizeof lists, " %d=%s", idx[i], all[idx[i]].pl.cores);
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
