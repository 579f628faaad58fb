/*
 * topo.c - launcher detection, strict parsing of the launcher's variables, the MPI view of the
 * same facts, and the cross-check between the two.
 *
 * Detection order matters because variables of other launchers can be present and stale: under
 * mpirun inside an sbatch job SLURM_PROCID/SLURM_LOCALID come from the batch step and are wrong,
 * so OMPI_COMM_WORLD_SIZE wins over SLURM_*. Under srun there are no OMPI_* variables at all.
 */
#include "runtime/placement/topo.h"
#include "runtime/placement/mpi_pmi2.h"
#include "runtime/placement/hostlist.h"
#include "base/parse.h"
#include "base/status.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOPO_MAX_RANKS (INT_MAX - 1)

static const char *topo_process_getenv(const char *name, void *arg)
{
    (void)arg;
    return getenv(name);
}

/* A set variable: present and not empty. An empty value counts as set so that it is reported as
 * malformed rather than silently ignored. */
static int has(topo_getenv_fn get, void *arg, const char *name) { return get(name, arg) != NULL; }

/* Who sets each launcher variable this file reads, and to what: a parse error says so, since users
 * meet these names only when one is wrong. */
static const char *const topo_var_roles[][2] = {
    {"SLURM_PROCID", "srun sets it to the task's rank"},
    {"SLURM_NTASKS", "srun sets it to the number of tasks"},
    {"SLURM_LOCALID", "srun sets it to the task's index on its node"},
    {"SLURM_NODEID", "srun sets it to the node's index in the job"},
    {"SLURM_NNODES", "srun sets it to the number of nodes"},
    {"OMPI_COMM_WORLD_RANK", "mpirun sets it to the rank"},
    {"OMPI_COMM_WORLD_SIZE", "mpirun sets it to the number of ranks"},
    {"OMPI_COMM_WORLD_LOCAL_RANK", "mpirun sets it to the rank's index on its node"},
    {"OMPI_COMM_WORLD_LOCAL_SIZE", "mpirun sets it to the number of ranks on the node"},
    {"PMI_RANK", "mpiexec (Hydra) or srun --mpi=pmi2 sets it to the rank"},
    {"PMI_SIZE", "mpiexec (Hydra) sets it to the number of ranks"},
    {"MPI_LOCALRANKID", "mpiexec (Hydra) sets it to the rank's index on its node"},
    {"MPI_LOCALNRANKS", "mpiexec (Hydra) sets it to the number of ranks on the node"},
    {"PMIX_RANK", "the PMIx server of mpirun or srun --mpi=pmix sets it to the rank"},
    {"RANK", "torchrun sets it to the process's rank (dtrain takes its ranks from MPI)"},
    {"WORLD_SIZE", "torchrun sets it to the number of processes (dtrain takes its ranks from MPI)"},
    {"LOCAL_RANK", "torchrun sets it to the process's index on its node"},
    {"LOCAL_WORLD_SIZE", "torchrun sets it to the number of processes on the node"},
};

static const char *topo_var_role(const char *name)
{
    for (size_t i = 0; i < sizeof topo_var_roles / sizeof *topo_var_roles; i++)
        if (strcmp(topo_var_roles[i][0], name) == 0) return topo_var_roles[i][1];
    return "the launcher sets it";
}

/* Parses variable `name` into *out when it is set; leaves *out at -1 when it is not. A value that
 * does not parse fails with parse_int's message, then who sets the variable and the fix. */
static dt_status read_opt(topo_getenv_fn get, void *arg, const char *name, long lo, int *out, const char **var)
{
    const char *v = get(name, arg);
    if (!v) return DT_OK;
    dt_status s = parse_int(name, v, lo, TOPO_MAX_RANKS, out);
    if (s == DT_OK && var) *var = name;
    if (s == DT_OK) return s;
    char what[1024];
    snprintf(what, sizeof what, "%s", dt_last_error());
    const size_t n = strlen(v);
    const int blank = n > 0 && (isspace((unsigned char)v[0]) || isspace((unsigned char)v[n - 1]));
    return status_set_error(s, "%s; %s. Fix: %s or unset it (it was likely exported by hand or left from another job)",
                            what, topo_var_role(name), blank ? "remove the spaces" : "give it a whole number");
}

static dt_status read_req(topo_getenv_fn get, void *arg, const char *name, long lo, int *out, const char **var,
                          const char *launcher)
{
    if (!get(name, arg))
        return status_set_error(DT_ERR_ENV,
                                "%s is not set although the other variables say %s started this process; "
                                "start the job with the launcher's normal command or unset its variables",
                                name, launcher);
    return read_opt(get, arg, name, lo, out, var);
}

static dt_launcher topo_detect(topo_getenv_fn get, void *arg)
{
    if (has(get, arg, "OMPI_COMM_WORLD_SIZE")) return DT_LAUNCHER_OPENMPI;
    /* mpiexec.hydra sets MPI_LOCALRANKID; srun --mpi=pmi2 sets PMI_RANK too but not that one. */
    if (has(get, arg, "PMI_RANK") && (has(get, arg, "MPI_LOCALRANKID") || !has(get, arg, "SLURM_STEP_ID")))
        return DT_LAUNCHER_HYDRA;
    if (has(get, arg, "SLURM_STEP_ID") && has(get, arg, "SLURM_PROCID")) return DT_LAUNCHER_SLURM;
    if (has(get, arg, "PMIX_RANK")) return DT_LAUNCHER_PMIX;
    if (has(get, arg, "RANK") && has(get, arg, "WORLD_SIZE")) return DT_LAUNCHER_TORCHRUN;
    return DT_LAUNCHER_NONE;
}

static dt_status topo_read_slurm(topo_getenv_fn get, void *arg, topo_env *e)
{
    dt_status s;
    if ((s = read_req(get, arg, "SLURM_PROCID", 0, &e->rank, &e->rank_var, "srun")) ||
        (s = read_req(get, arg, "SLURM_NTASKS", 1, &e->size, &e->size_var, "srun")) ||
        (s = read_opt(get, arg, "SLURM_LOCALID", 0, &e->local_rank, &e->local_rank_var)) ||
        (s = read_opt(get, arg, "SLURM_NODEID", 0, &e->node, &e->node_var)) ||
        (s = read_opt(get, arg, "SLURM_NNODES", 1, &e->num_nodes, &e->num_nodes_var)))
        return s;
    /* The step's node list describes the nodes of this srun; the job's may be larger. */
    const char *hv = get("SLURM_STEP_NODELIST", arg)  ? "SLURM_STEP_NODELIST"
                     : get("SLURM_JOB_NODELIST", arg) ? "SLURM_JOB_NODELIST"
                     : get("SLURM_NODELIST", arg)     ? "SLURM_NODELIST"
                                                      : NULL;
    if (hv) {
        if ((s = hostlist_parse(hv, get(hv, arg), &e->hosts, &e->num_hosts))) return s;
        e->hosts_var = hv;
        if (e->num_nodes >= 0 && e->num_hosts != e->num_nodes && strcmp(hv, "SLURM_STEP_NODELIST") == 0)
            return status_set_error(DT_ERR_ENV,
                                    "%s='%s' names %d nodes but SLURM_NNODES=%d; the SLURM "
                                    "variables disagree, so they cannot be trusted: rerun with a clean srun",
                                    hv, get(hv, arg), e->num_hosts, e->num_nodes);
        if (e->node >= 0 && e->node >= e->num_hosts)
            return status_set_error(DT_ERR_ENV, "SLURM_NODEID=%d is not below the %d nodes of %s='%s'", e->node,
                                    e->num_hosts, hv, get(hv, arg));
    }
    const char *tv = get("SLURM_STEP_TASKS_PER_NODE", arg) ? "SLURM_STEP_TASKS_PER_NODE"
                     : get("SLURM_TASKS_PER_NODE", arg)    ? "SLURM_TASKS_PER_NODE"
                                                           : NULL;
    if (tv && e->node >= 0) {
        int *counts = NULL, n = 0;
        if ((s = hostlist_tasks_per_node_parse(tv, get(tv, arg), &counts, &n))) return s;
        if (e->node < n) {
            e->local_size = counts[e->node];
            e->local_size_var = tv;
            const char *text = get(tv, arg);
            snprintf(e->local_size_text, sizeof e->local_size_text, "%.56s%s", text, strlen(text) > 56 ? "..." : "");
        }
        free(counts);
    }
    return DT_OK;
}

/* The local size as the launcher gave it, for messages: "OMPI_COMM_WORLD_LOCAL_SIZE=2", or for a
 * per-node list "SLURM_STEP_TASKS_PER_NODE='2(x3),1' (2 on node 0)". */
static const char *local_size_desc(const topo_env *e, char *buf, size_t n)
{
    if (e->local_size_text[0])
        snprintf(buf, n, "%s='%s' (%d on node %d)", e->local_size_var, e->local_size_text, e->local_size, e->node);
    else
        snprintf(buf, n, "%s=%d", e->local_size_var, e->local_size);
    return buf;
}

/* The rank, size, local rank and local size a launcher exports under its own names; the size is
 * optional where the launcher may leave it out (Hydra's PMI_SIZE). command names the launcher in
 * the message for a missing required variable. */
typedef struct launcher_names {
    const char *rank, *size, *local_rank, *local_size, *command;
    int size_required;
} launcher_names;

static const launcher_names openmpi_names = {"OMPI_COMM_WORLD_RANK",
                                             "OMPI_COMM_WORLD_SIZE",
                                             "OMPI_COMM_WORLD_LOCAL_RANK",
                                             "OMPI_COMM_WORLD_LOCAL_SIZE",
                                             "mpirun",
                                             1};
static const launcher_names hydra_names = {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "mpiexec", 0};
/* GROUP_RANK (torchrun's node index) is not read: MPI numbers the nodes, and nothing would check
 * it, so a malformed one must not refuse the run. */
static const launcher_names torchrun_names = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "torchrun", 1};

static dt_status topo_read_named(topo_getenv_fn get, void *arg, const launcher_names *n, topo_env *e)
{
    dt_status s;
    if ((s = read_req(get, arg, n->rank, 0, &e->rank, &e->rank_var, n->command)) ||
        (s = n->size_required ? read_req(get, arg, n->size, 1, &e->size, &e->size_var, n->command)
                              : read_opt(get, arg, n->size, 1, &e->size, &e->size_var)) ||
        (s = read_opt(get, arg, n->local_rank, 0, &e->local_rank, &e->local_rank_var)) ||
        (s = read_opt(get, arg, n->local_size, 1, &e->local_size, &e->local_size_var)))
        return s;
    return DT_OK;
}

static dt_status topo_read_launcher_vars(topo_getenv_fn get, void *arg, topo_env *e)
{
    switch (e->launcher) {
        case DT_LAUNCHER_OPENMPI: return topo_read_named(get, arg, &openmpi_names, e);
        case DT_LAUNCHER_SLURM: return topo_read_slurm(get, arg, e);
        case DT_LAUNCHER_HYDRA: return topo_read_named(get, arg, &hydra_names, e);
        case DT_LAUNCHER_TORCHRUN: return topo_read_named(get, arg, &torchrun_names, e);
        case DT_LAUNCHER_PMIX:
        case DT_LAUNCHER_NONE: break;
    }
    return DT_OK;
}

/* What the PMI side of the launch looks like, which decides how MPI_Init will find its peers. */
static dt_status topo_read_pmi(topo_getenv_fn get, void *arg, topo_env *e)
{
    e->has_pmi = has(get, arg, "PMIX_RANK") || has(get, arg, "PMI_RANK") || has(get, arg, "PMI_FD");
    const char *mt = get("SLURM_MPI_TYPE", arg);
    snprintf(e->mpi_type, sizeof e->mpi_type, "%s", mt ? mt : "");
    e->slurm_direct = has(get, arg, "SLURM_STEP_ID") && has(get, arg, "SLURM_NODELIST");
    /* PMIX_RANK comes from the PMIx server of mpirun or srun --mpi=pmix, so it is never stale. */
    if (e->launcher == DT_LAUNCHER_OPENMPI || e->launcher == DT_LAUNCHER_SLURM || e->launcher == DT_LAUNCHER_PMIX) {
        dt_status s = read_opt(get, arg, "PMIX_RANK", 0, &e->pmix_rank, NULL);
        if (s) return s;
        if (e->launcher == DT_LAUNCHER_PMIX) {
            e->rank = e->pmix_rank;
            e->rank_var = "PMIX_RANK";
        }
    }
    return DT_OK;
}

/* Relations within the launcher's own variables. */
static dt_status topo_check_relations(const topo_env *e)
{
    if (e->rank >= 0 && e->size >= 0 && e->rank >= e->size)
        return status_set_error(DT_ERR_ENV,
                                "%s=%d is not below %s=%d: a rank must be smaller than the world "
                                "size; the launcher's variables are inconsistent (set by hand?)",
                                e->rank_var, e->rank, e->size_var, e->size);
    char ls[160];
    if (e->local_rank >= 0 && e->local_size >= 0 && e->local_rank >= e->local_size)
        return status_set_error(DT_ERR_ENV,
                                "%s=%d is not below %s: a local rank must be smaller than the "
                                "number of ranks on the node; the launcher's variables are inconsistent (set by hand?)",
                                e->local_rank_var, e->local_rank, local_size_desc(e, ls, sizeof ls));
    if (e->local_size >= 0 && e->size >= 0 && e->local_size > e->size)
        return status_set_error(DT_ERR_ENV,
                                "%s is larger than %s=%d (more ranks on this node than in the job): the launcher's "
                                "variables are inconsistent (set by hand or left from another job). Fix: unset them, "
                                "or start the job again with the launcher",
                                local_size_desc(e, ls, sizeof ls), e->size_var, e->size);
    return DT_OK;
}

dt_status topo_read_env(topo_getenv_fn get, void *arg, topo_env *out)
{
    if (!get) get = topo_process_getenv;
    topo_env e;
    memset(&e, 0, sizeof e);
    e.rank = e.size = e.local_rank = e.local_size = e.node = e.num_nodes = e.pmix_rank = -1;
    e.launcher = topo_detect(get, arg);
    dt_status s;
    if ((s = topo_read_launcher_vars(get, arg, &e)) || (s = topo_read_pmi(get, arg, &e)) ||
        (s = topo_check_relations(&e))) {
        topo_env_free(&e);
        return s;
    }
    *out = e;
    return DT_OK;
}

int topo_job_tasks_outside_step(topo_getenv_fn get, void *arg, const char **var)
{
    if (!get) get = topo_process_getenv;
    if (var) *var = NULL;
    /* SLURM_STEPID is the older spelling of SLURM_STEP_ID. */
    if (topo_detect(get, arg) != DT_LAUNCHER_NONE || !has(get, arg, "SLURM_JOB_ID") || has(get, arg, "SLURM_STEP_ID") ||
        has(get, arg, "SLURM_STEPID"))
        return 0;
    static const char *const counts[] = {"SLURM_NTASKS", "SLURM_JOB_NUM_NODES"};
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
        const char *v = get(counts[i], arg);
        if (!v) continue;
        char *end = NULL;
        const long n = strtol(v, &end, 10);
        if (end == v || *end || n < 1 || n > TOPO_MAX_RANKS) continue;
        if (n == 1) return 0; /* one task (or one node and no task count): running alone is right */
        if (var) *var = counts[i];
        return (int)n;
    }
    return 0;
}

void topo_env_free(topo_env *e)
{
    if (!e) return;
    if (e->hosts) hostlist_free(e->hosts, e->num_hosts);
    e->hosts = NULL;
    e->num_hosts = 0;
}

int topo_mpi_reachable(topo_getenv_fn get, void *arg)
{
    if (!get) get = topo_process_getenv;
    if (topo_detect(get, arg) == DT_LAUNCHER_NONE) return 0;
    if (has(get, arg, "PMIX_RANK")) return 1;
    if (!has(get, arg, "PMI_RANK") && !has(get, arg, "PMI_FD")) return 0;
    /* PMI-2 only: the MPI must speak it, or MPI_Init aborts (topo_check_before_mpi). */
    char why[256];
    return !mpi_lacks_pmi2(why, sizeof why);
}

/* ---------------------------------------------------------------- cross-check */

static const char *launch_hint(dt_launcher l)
{
    switch (l) {
        case DT_LAUNCHER_SLURM:
            return "srun must hand the job to MPI through PMIx: run `srun --mpi=pmix ...` (or set "
                   "MpiDefault=pmix in slurm.conf), or start the ranks with mpirun";
        case DT_LAUNCHER_TORCHRUN:
            return "dtrain takes its ranks from MPI, not from torchrun: start it with mpirun or "
                   "`srun --mpi=pmix`, or unset RANK and WORLD_SIZE";
        case DT_LAUNCHER_HYDRA:
            return "the MPI library dtrain was built with does not speak this mpiexec's PMI: use the "
                   "mpirun of the same MPI";
        default: return "start every rank with the same launcher and the mpirun of the MPI dtrain was built with";
    }
}

/* The fix when the launcher's variable `var` disagrees with MPI. Under srun with PMIx live
 * (PMIX_RANK set) MPI learned the world from srun's PMIx server, so srun is wired right and `var`
 * is what is wrong: exported by a wrapper or job script, or left from another step. Otherwise the
 * launcher's usual fix (launch_hint). */
static const char *mismatch_fix(const topo_env *e, const char *var, char *buf, size_t n)
{
    if (e->launcher != DT_LAUNCHER_SLURM || e->pmix_rank < 0) return launch_hint(e->launcher);
    snprintf(buf, n,
             "srun's PMIx server told MPI the job's shape, so %s is stale or set by hand (srun sets it for each task "
             "itself): unset it, or remove it from the wrapper or job script that exports it, and start the job again",
             var);
    return buf;
}

dt_status topo_check_before_mpi(const topo_env *e)
{
    if (e->launcher != DT_LAUNCHER_SLURM) return DT_OK;
    int inited = 0;
    MPI_Initialized(&inited);
    if (inited) return DT_OK;
    if (e->has_pmi) {
        /* PMI-2 (srun --mpi=pmi2: PMI_FD or PMI_RANK, no PMIX_RANK) with an MPI that cannot use it:
         * refused here, naming the cause, before MPI_Init aborts blaming SLURM support. */
        char why[1024];
        if (e->pmix_rank < 0 && mpi_lacks_pmi2(why, sizeof why))
            return status_set_error(DT_ERR_MPI,
                                    "srun started this task through PMI-2 (SLURM_MPI_TYPE %s%s, no PMIX_RANK), but "
                                    "%s: MPI_Init would abort. Fix: %s",
                                    e->mpi_type[0] ? "is " : "unset", e->mpi_type, why, launch_hint(e->launcher));
        return DT_OK;
    }
    if (e->size > 1)
        return status_set_error(DT_ERR_MPI,
                                "srun started %d tasks (SLURM_NTASKS=%d) without a PMI plugin: MPI cannot learn that "
                                "they form one job, and each would train alone. Fix: %s",
                                e->size, e->size, launch_hint(e->launcher));
#ifdef OPEN_MPI
    /* One task of an srun step with no PMI server to talk to: Open MPI (4.1) takes SLURM_STEP_ID
     * with SLURM_NODELIST for a direct launch and aborts inside MPI_Init ("OPAL ERROR: Unreachable"),
     * while without SLURM_NODELIST it starts a singleton. A batch script or an salloc shell has no
     * SLURM_STEP_ID (launcher none), srun under MpiDefault=pmix sets PMIX_RANK, and mpirun's ranks
     * have OMPI_* variables: none of them is refused here. */
    if (!e->slurm_direct) return DT_OK;
    return status_set_error(DT_ERR_MPI,
                            "srun started this task without a PMI plugin (SLURM_MPI_TYPE %s%s, no PMIX_RANK): "
                            "Open MPI cannot start under srun without PMIx and would abort inside MPI_Init. Fix: %s",
                            e->mpi_type[0] ? "is " : "unset", e->mpi_type, launch_hint(e->launcher));
#else
    return DT_OK; /* other MPIs start a singleton here, which is what one task asks for */
#endif
}

dt_status topo_check(const topo_env *e, const topo_mpi *m)
{
    const char *name = dt_launcher_name(e->launcher);
    char fix[512];
    if (e->size > 1 && m->size == 1)
        return status_set_error(DT_ERR_MPI,
                                "%s=%d but MPI sees a world of 1: every process started as its own MPI "
                                "singleton and would train alone. Fix: %s",
                                e->size_var, e->size, mismatch_fix(e, e->size_var, fix, sizeof fix));
    if (e->size >= 0 && e->size != m->size)
        return status_set_error(DT_ERR_MPI, "%s=%d but MPI_COMM_WORLD has %d ranks (launcher %s). Fix: %s", e->size_var,
                                e->size, m->size, name, mismatch_fix(e, e->size_var, fix, sizeof fix));
    if (e->rank >= 0 && e->rank != m->rank)
        return status_set_error(DT_ERR_MPI, "%s=%d but MPI says this is rank %d (launcher %s). Fix: %s", e->rank_var,
                                e->rank, m->rank, name, mismatch_fix(e, e->rank_var, fix, sizeof fix));
    if (e->pmix_rank >= 0 && e->pmix_rank != m->rank)
        return status_set_error(DT_ERR_MPI, "PMIX_RANK=%d but MPI says this is rank %d. Fix: %s", e->pmix_rank, m->rank,
                                launch_hint(e->launcher));
    if (e->local_rank >= 0 && e->local_rank != m->local_rank)
        return status_set_error(DT_ERR_MPI,
                                "%s=%d but MPI says this is local rank %d of the %d ranks sharing this "
                                "node's memory. Fix: place ranks so the launcher and MPI agree on nodes "
                                "(one launcher per job), or unset the stale %s",
                                e->local_rank_var, e->local_rank, m->local_rank, m->local_size, e->local_rank_var);
    char ls[160];
    if (e->local_size >= 0 && e->local_size != m->local_size)
        return status_set_error(DT_ERR_MPI,
                                "%s but MPI finds %d ranks sharing this node's memory. Fix: place ranks "
                                "so the launcher and MPI agree on nodes, or unset the stale %s",
                                local_size_desc(e, ls, sizeof ls), m->local_size, e->local_size_var);
    if (e->num_nodes >= 0 && e->num_nodes != m->num_nodes)
        return status_set_error(DT_ERR_MPI, "%s=%d but MPI finds ranks on %d nodes. Fix: %s", e->num_nodes_var,
                                e->num_nodes, m->num_nodes, mismatch_fix(e, e->num_nodes_var, fix, sizeof fix));
    /* Only the step's list must match: the job's may hold nodes this step does not use. */
    if (e->hosts_var && strcmp(e->hosts_var, "SLURM_STEP_NODELIST") == 0 && e->num_hosts != m->num_nodes)
        return status_set_error(DT_ERR_MPI, "%s names %d nodes but MPI finds ranks on %d nodes. Fix: %s", e->hosts_var,
                                e->num_hosts, m->num_nodes, mismatch_fix(e, e->hosts_var, fix, sizeof fix));
    return DT_OK;
}

/* ---------------------------------------------------------------- the MPI view */

#define MPI_TRY(call)                                                                                                  \
    do {                                                                                                               \
        int rc_ = (call);                                                                                              \
        if (rc_ != MPI_SUCCESS) {                                                                                      \
            char msg_[MPI_MAX_ERROR_STRING];                                                                           \
            int len_ = 0;                                                                                              \
            MPI_Error_string(rc_, msg_, &len_);                                                                        \
            s = status_set_error(DT_ERR_MPI, "%s failed: %s", #call, msg_);                                            \
            goto done;                                                                                                 \
        }                                                                                                              \
    } while (0)

dt_status topo_query_mpi(MPI_Comm world, topo_mpi *out, MPI_Comm *local_comm, char ***node_names)
{
    dt_status s = DT_OK;
    MPI_Comm local = MPI_COMM_NULL, leaders = MPI_COMM_NULL;
    char *all = NULL;
    char **names = NULL;
    topo_mpi m;
    MPI_TRY(MPI_Comm_rank(world, &m.rank));
    MPI_TRY(MPI_Comm_size(world, &m.size));
    MPI_TRY(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, m.rank, MPI_INFO_NULL, &local));
    MPI_TRY(MPI_Comm_rank(local, &m.local_rank));
    MPI_TRY(MPI_Comm_size(local, &m.local_size));
    /* The lowest rank of each node leads it; leaders ordered by world rank number the nodes. */
    MPI_TRY(MPI_Comm_split(world, m.local_rank == 0 ? 0 : MPI_UNDEFINED, m.rank, &leaders));
    int node = 0, num_nodes = 0;
    char host[MPI_MAX_PROCESSOR_NAME] = {0};
    int hl = 0;
    MPI_TRY(MPI_Get_processor_name(host, &hl));
    if (leaders != MPI_COMM_NULL) {
        MPI_TRY(MPI_Comm_rank(leaders, &node));
        MPI_TRY(MPI_Comm_size(leaders, &num_nodes));
    }
    int nn[2] = {node, num_nodes};
    MPI_TRY(MPI_Bcast(nn, 2, MPI_INT, 0, local));
    m.node = nn[0];
    m.num_nodes = nn[1];
    /* Every rank learns every node's name: leaders gather, then the block goes to all. */
    all = calloc((size_t)m.num_nodes, MPI_MAX_PROCESSOR_NAME);
    if (!all) {
        s = status_set_error(DT_ERR_NOMEM, "out of memory for %d host names", m.num_nodes);
        goto done;
    }
    if (leaders != MPI_COMM_NULL)
        MPI_TRY(MPI_Allgather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, leaders));
    MPI_TRY(MPI_Bcast(all, m.num_nodes * MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, local));
    names = calloc((size_t)m.num_nodes, sizeof *names);
    if (!names) {
        s = status_set_error(DT_ERR_NOMEM, "out of memory for %d host names", m.num_nodes);
        goto done;
    }
    for (int i = 0; i < m.num_nodes; i++) {
        names[i] = strndup(all + (size_t)i * MPI_MAX_PROCESSOR_NAME, MPI_MAX_PROCESSOR_NAME - 1);
        if (!names[i]) {
            s = status_set_error(DT_ERR_NOMEM, "out of memory for host names");
            goto done;
        }
    }
    *out = m;
    *local_comm = local;
    local = MPI_COMM_NULL;
    *node_names = names;
    names = NULL;
done:
    if (names) topo_free_names(names, m.num_nodes);
    free(all);
    if (leaders != MPI_COMM_NULL) MPI_Comm_free(&leaders);
    if (local != MPI_COMM_NULL) MPI_Comm_free(&local);
    return s;
}

void topo_free_names(char **names, int n)
{
    if (!names) return;
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}
