/*
 * cmd_doctor.c - `dtrain doctor`: every rank collects its facts, rank 0 runs the checks over all of
 * them and prints one table (or --json). Exit 0 when nothing FAILs, 1 on a FAIL, 2 bad usage.
 *
 * Doctor must also run where dt_init would refuse the job (srun without --mpi=pmix, stale or
 * hand-set launcher variables), to report that with its fix rather than die in the prologue. So
 * it makes dt_init's own launcher checks itself first (topo_read_env, topo_check_before_mpi, then
 * MPI_Init and topo_check against MPI), records a refusal as a fact, and when any rank would be
 * refused, hides the launcher's variables from dt_init (and puts them back after it) so that
 * dt_init builds what MPI actually started: a world of 1 for each task of an srun without PMIx,
 * whose first task then prints the report. The ranks agree on hiding with one allreduce, so no
 * rank enters dt_init's collectives alone.
 */
#include "launch/cli.h"
#include "launch/doctor/doctor.h"
#include "launch/doctor/doctor_paths.h"
#include "runtime/model/model.h"
#include "runtime/placement/device.h"
#include "runtime/placement/topo.h"

#include <getopt.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

typedef struct doctor_opts {
    int json, no_comm;
    const char *model, *input, *precision_text;
    doctor_model_query q;
    doctor_path_query paths;
} doctor_opts;

enum {
    OPT_JSON = 256,
    OPT_MODEL,
    OPT_INPUT,
    OPT_PRECISION,
    OPT_BATCH,
    OPT_NO_COMM,
    OPT_CKPT_DIR,
    OPT_DATA,
    OPT_METRICS,
    OPT_KEEP
};

static const struct option doctor_options[] = {
    {"json", no_argument, NULL, OPT_JSON},
    {"model", required_argument, NULL, OPT_MODEL},
    {"input", required_argument, NULL, OPT_INPUT},
    {"precision", required_argument, NULL, OPT_PRECISION},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"no-comm", no_argument, NULL, OPT_NO_COMM},
    {"checkpoint-dir", required_argument, NULL, OPT_CKPT_DIR},
    {"data", required_argument, NULL, OPT_DATA},
    {"metrics", required_argument, NULL, OPT_METRICS},
    {"keep-checkpoints", required_argument, NULL, OPT_KEEP},
    {NULL, 0, NULL, 0},
};

static int doctor_flag(int val, const char *arg, void *ud)
{
    doctor_opts *o = ud;
    switch (val) {
        case OPT_JSON: o->json = 1; return EXIT_OK;
        case OPT_NO_COMM: o->no_comm = 1; return EXIT_OK;
        case OPT_MODEL: o->q.model = arg; return EXIT_OK;
        case OPT_INPUT: o->q.input = arg; return EXIT_OK;
        case OPT_PRECISION: o->precision_text = arg; return cli_float_dtype("--precision", arg, &o->q.precision);
        /* train's limit: a batch doctor says fits must be one train takes (the largest it reports
         * stops there too). */
        case OPT_BATCH: return cli_int("--batch", arg, 1, 1 << 20, &o->q.batch);
        case OPT_CKPT_DIR: o->paths.ckpt_dir = arg; return EXIT_OK;
        case OPT_DATA: o->paths.data = arg; return EXIT_OK;
        case OPT_METRICS: o->paths.metrics = arg; return EXIT_OK;
        case OPT_KEEP: return cli_int("--keep-checkpoints", arg, 0, 1000000, &o->paths.keep);
        default: return EXIT_USAGE;
    }
}

static int doctor_flags_check(dt_config *cfg, void *ud)
{
    (void)cfg;
    doctor_opts *o = ud;
    if (!o->q.model && (o->q.input || o->precision_text || o->q.batch)) {
        cli_error("--input, --precision and --batch size the memory check of a model: add --model M "
                  "(e.g. dtrain doctor --model cnn --input 3x32x32 --batch 256)");
        return EXIT_USAGE;
    }
    /* A preset (mlp, cnn) brings its input shape, as under dtrain train and bench step. */
    if (o->q.model && !o->q.input) o->q.input = model_preset_input(o->q.model);
    if (o->q.model && model_spec_check_name(o->q.model)) {
        cli_error("%s", dt_last_error());
        return EXIT_USAGE;
    }
    if (o->q.model && !o->q.input) {
        cli_error("--model %s needs --input N|CxHxW (the shape of one sample, e.g. --input 3x32x32)", o->q.model);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

/* ---------------------------------------------------------------- hiding a refused launcher */

/* The variables by which a launcher says who this process is. GPU lists stay: they say which GPU
 * a rank may use, not who it is. PMIX_* stay: they come from a live PMIx server and are right. */
static int launcher_var(const char *kv)
{
    static const char *const exact[] = {"RANK=",       "WORLD_SIZE=",      "LOCAL_RANK=",     "LOCAL_WORLD_SIZE=",
                                        "GROUP_RANK=", "MPI_LOCALRANKID=", "MPI_LOCALNRANKS="};
    for (size_t i = 0; i < sizeof exact / sizeof *exact; i++)
        if (!strncmp(kv, exact[i], strlen(exact[i]))) return 1;
    const char *eq = strchr(kv, '=');
    if (!strncmp(kv, "SLURM_", 6)) return !(eq && memmem(kv, (size_t)(eq - kv), "GPU", 3));
    return !strncmp(kv, "OMPI_COMM_WORLD_", 16) || (!strncmp(kv, "PMI_", 4));
}

typedef struct hidden_vars {
    char **kv; /* "NAME=value" copies */
    int n;
} hidden_vars;

static void hide_launcher(hidden_vars *h)
{
    int n = 0;
    for (char **e = environ; *e; e++) n += launcher_var(*e);
    h->kv = calloc((size_t)n + 1, sizeof *h->kv);
    h->n = 0;
    if (!h->kv) return;
    for (char **e = environ; *e && h->n < n; e++)
        if (launcher_var(*e) && (h->kv[h->n] = strdup(*e))) h->n++;
    for (int i = 0; i < h->n; i++) {
        char *eq = strchr(h->kv[i], '=');
        *eq = '\0';
        unsetenv(h->kv[i]);
        *eq = '=';
    }
}

static void restore_launcher(hidden_vars *h)
{
    for (int i = 0; i < h->n; i++) {
        char *eq = strchr(h->kv[i], '=');
        *eq = '\0';
        setenv(h->kv[i], eq + 1, 1);
        free(h->kv[i]);
    }
    free(h->kv);
    memset(h, 0, sizeof *h);
}

/* ---------------------------------------------------------------- start */

/* Whether this process reports for the job before MPI says which is rank 0: the launcher's first
 * task, or a process that no MPI launcher started (its MPI world is its own, so it reports). */
static int reports_before_mpi(int launcher, int rank)
{
    return rank <= 0 || launcher == DT_LAUNCHER_NONE || launcher == DT_LAUNCHER_TORCHRUN;
}

/* The rows read before MPI_Init, printed and flushed before it: a bad transport variable can kill
 * MPI_Init in Open MPI's own code, and these lines are then what the user still gets. Only when
 * a transport variable is set (otherwise nothing there could kill it) and not under --json (one
 * object on stdout, written at the end). */
static void print_before_mpi(const doctor_net_facts *net)
{
    if (!strncmp(net->seen, "no ", 3)) return;
    printf("dtrain doctor: before MPI_Init, this process's environment (the report follows once MPI starts)\n");
    printf("%-22s %-6s %-12s %s\n", "net.env", doc_level_name((doc_level)net->level), "this", net->seen);
    if (net->fix[0]) printf("%-22s %-6s %-12s fix: %s\n", "", "", "", net->fix);
    fflush(stdout);
}

/* MPI_Init failed and returned: the report of what was seen before it, one valid table or JSON
 * object with a FAIL row saying why. */
static void report_no_mpi(const doctor_facts *me, int json, const char *why)
{
    doc_list l;
    doc_list_init(&l, 0);
    doctor_net_check(&me->net, &l);
    doc_add(&l, "mpi.init", DOC_FAIL,
            "check the launcher (srun needs --mpi=pmix), that mpirun belongs to the MPI dtrain was built with, and "
            "the MPI/UCX variables above",
            "%s", why);
    doc_header h = {dt_version_string(), 1, 1, "none"};
    if (json)
        doc_print_json(stdout, &h, &l);
    else
        doc_print_table(stdout, &h, &l);
    fflush(stdout);
    doc_list_free(&l);
}

/* dt_init's launcher checks made here, recorded instead of refused. Returns EXIT_OK with MPI
 * initialized (by us), or EXIT_FAIL when MPI itself cannot start. */
static int doctor_preflight(doctor_facts *me, int json, hidden_vars *hidden, int *orig_rank, int *orig_launcher)
{
    char refusal[sizeof me->host.refusal] = "";
    topo_env env;
    const int env_ok = topo_read_env(NULL, NULL, &env) == DT_OK;
    if (!env_ok)
        snprintf(refusal, sizeof refusal, "%s", dt_last_error());
    else if (topo_check_before_mpi(&env) != DT_OK)
        snprintf(refusal, sizeof refusal, "%s", dt_last_error());
    *orig_rank = env_ok ? env.rank : -1;
    *orig_launcher = env_ok ? (int)env.launcher : -1;
    doctor_net_collect(&me->net);
    const int speaks = reports_before_mpi(*orig_launcher, *orig_rank);
    if (speaks && !json) print_before_mpi(&me->net);
    doctor_host_early(&me->host, env_ok ? (int)env.launcher : -1);
    /* Open MPI cannot start a task of srun without PMIx as such; hidden, it starts a singleton. */
    if (refusal[0]) hide_launcher(hidden);
    /* Before MPI_Init, as cli_begin does for the other commands (it runs after MPI is up here): a
     * crash inside MPI_Init then gets dtrain's report, whose return address names the library,
     * instead of Open MPI's, which stops at the signal frame. */
    cli_crash_report_install(-1, NULL);
    int provided = 0;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        cli_error("MPI_Init_thread failed: check the launcher (srun needs --mpi=pmix) and that mpirun belongs to "
                  "the MPI dtrain was built with%s%s",
                  refusal[0] ? "; " : "", refusal);
        char why[sizeof refusal + 64];
        snprintf(why, sizeof why, "MPI_Init_thread failed%s%s", refusal[0] ? ": " : "", refusal);
        if (speaks) report_no_mpi(me, json, why);
        if (env_ok) topo_env_free(&env);
        return EXIT_FAIL;
    }
    if (env_ok && !refusal[0]) {
        topo_mpi m;
        MPI_Comm local = MPI_COMM_NULL;
        char **names = NULL;
        if (topo_query_mpi(MPI_COMM_WORLD, &m, &local, &names) != DT_OK || topo_check(&env, &m) != DT_OK)
            snprintf(refusal, sizeof refusal, "%s", dt_last_error());
        if (local != MPI_COMM_NULL) {
            MPI_Comm_free(&local);
            topo_free_names(names, m.num_nodes);
        }
    }
    if (env_ok) topo_env_free(&env);
    snprintf(me->host.refusal, sizeof me->host.refusal, "%s", refusal);
    int any = refusal[0] != '\0';
    MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any && !hidden->kv) hide_launcher(hidden);
    return EXIT_OK;
}

static void job_devices(const doctor_facts *all, int world, char *out, size_t n)
{
    int cpu = 0, cuda = 0;
    for (int r = 0; r < world; r++) {
        cpu |= all[r].pl.device == DT_DEVICE_CPU;
        cuda |= all[r].pl.device == DT_DEVICE_CUDA;
    }
    snprintf(out, n, "%s%s%s", cpu ? "cpu" : "", cpu && cuda ? "+" : "", cuda ? "cuda" : "");
}

/* Rank 0: every check, one report. Returns the exit code. */
static int doctor_report(const doctor_facts *all, int world, const doctor_opts *o, dt_ctx *ctx)
{
    doc_list job;
    doc_list_init(&job, world);
    for (int r = 0; r < world; r++) {
        doc_list one;
        doc_list_init(&one, 0);
        doctor_host_check_rank(&all[r], &one);
        doctor_node_check_rank(&all[r], &one);
        doctor_cuda_check_rank(&all[r], &one);
        doctor_memory_check_rank(&all[r], &one);
        doctor_net_check(&all[r].net, &one);
        doc_merge_rank(&job, &one, r);
        doc_list_free(&one);
    }
    doctor_host_check_job(all, world, &job);
    doctor_node_check_job(all, world, &job);
    doctor_comm_check_job(all, world, &job);
    doctor_cuda_check_job(all, world, &job);
    doctor_memory_check_job(all, world, &job);
    doctor_paths_check(&o->paths, o->q.model ? &o->q : NULL, all, world, &job);
    char devices[16];
    job_devices(all, world, devices, sizeof devices);
    doc_header h = {dt_version_string(), world, all[0].pl.num_nodes, devices};
    if (o->json)
        doc_print_json(stdout, &h, &job);
    else
        doc_print_table(stdout, &h, &job);
    if (!o->json && all[0].host.refusal[0] && world == 1 && all[0].host.slurm_ntasks > 1)
        printf("(each of the %d tasks ran alone; only the first printed this report)\n", all[0].host.slurm_ntasks);
    fflush(stdout);
    (void)ctx;
    const int rc = doc_worst(&job) == DOC_FAIL ? EXIT_FAIL : EXIT_OK;
    doc_list_free(&job);
    return rc;
}

/* The flags whose checks every rank takes part in, which every rank must share: another --no-comm
 * on a rank left the others in the communication check's collectives with no deadline (a hang
 * until the launcher's), and another --model, --input, --precision or --batch reported one rank's
 * model in the job's memory rows. The paths' checks are each rank's own (a node-local path), and
 * --json is rank 0's to print. */
static int doctor_flags_agree(dt_ctx *ctx, const doctor_opts *o, int *shared)
{
    cli_flags_text a;
    memset(&a, 0, sizeof a);
    cli_flags_line(&a, "--no-comm %s", o->no_comm ? "on" : "off");
    cli_flags_line(&a, "--precision %s", dt_dtype_name(o->q.precision));
    cli_flags_line(&a, "--batch %d", o->q.batch);
    cli_flags_line(&a, "--model %s", o->q.model ? o->q.model : "(none)");
    cli_flags_line(&a, "--input %s", o->q.input ? o->q.input : "(none)");
    return cli_flags_agree(ctx, "doctor flags (paths and --json aside), since the ranks check one job together", &a,
                           shared);
}

/* What starting the job learned that the facts and the report need: who the launcher said this
 * process was, and what dt_init would have refused. */
typedef struct doctor_start {
    int refused; /* the launcher's variables were hidden from dt_init */
    int orig_rank, orig_launcher;
    dt_device_kind device_req;
    char cuda_refusal[sizeof((doctor_facts *)0)->cuda.device_refusal];
} doctor_start;

/* --device cuda where dt_init would refuse it (no GPU, a build without CUDA): the refusal is
 * recorded for the cuda rows and the job starts as --device auto would, so it still reports. */
static void cuda_fallback(dt_config *cfg, char *refusal, size_t n)
{
    refusal[0] = '\0';
    if (cfg->device != DT_DEVICE_CUDA) return;
    dt_device_kind kind;
    int ordinal;
    if (device_resolve(DT_DEVICE_CUDA, 0, 1, 1, &kind, &ordinal, NULL, 0) != DT_OK) {
        snprintf(refusal, n, "%s", dt_last_error());
        cfg->device = DT_DEVICE_AUTO;
    }
}

/* dt_init's launcher checks, then dt_init itself with a refused launcher hidden from it. Returns
 * EXIT_OK with the job started; otherwise the failure was reported (by the preflight or by
 * cli_begin, which also took the job down). */
static int doctor_start_job(const doctor_opts *o, dt_config *cfg, doctor_facts *me, doctor_start *st, cli_job *job)
{
    hidden_vars hidden = {NULL, 0};
    st->orig_rank = -1;
    st->orig_launcher = -1;
    int rc = doctor_preflight(me, o->json, &hidden, &st->orig_rank, &st->orig_launcher);
    if (rc) {
        restore_launcher(&hidden);
        return rc;
    }
    st->refused = hidden.kv != NULL;
    if (st->refused) cfg->gpu_comm = DT_GPU_COMM_MPI; /* ranks may then land on one GPU: let them, to report */
    st->device_req = cfg->device;
    cuda_fallback(cfg, st->cuda_refusal, sizeof st->cuda_refusal);
    rc = cli_begin(cfg, job);
    restore_launcher(&hidden);
    return rc;
}

/* This rank's facts, each group's collector in turn; the communication check runs with every rank. */
static void doctor_collect(doctor_facts *me, const cli_job *job, const dt_config *cfg, doctor_opts *o,
                           const doctor_start *st)
{
    me->pl = job->pl;
    doctor_host_collect(&me->host, &job->pl);
    me->host.gpu_comm = cfg->gpu_comm;
    doctor_cuda_collect(&me->cuda, &job->pl);
    me->cuda.device_req = st->device_req;
    snprintf(me->cuda.device_refusal, sizeof me->cuda.device_refusal, "%s", st->cuda_refusal);
    doctor_memory_collect(&me->mem, job->ctx, o->q.model ? &o->q : NULL);
    doctor_paths_collect(&o->paths, o->q.model ? &o->q : NULL, &me->paths);
    doctor_comm_measure(job->ctx, &job->pl,
                        o->no_comm        ? "--no-comm"
                        : job->world == 1 ? "a world of 1 sends nothing"
                                          : NULL,
                        &me->host.comm);
}

/* A task of a refused srun that MPI started alone: the first task reports for all. A lone process
 * (stale torchrun variables, a hand-set SLURM_PROCID outside srun) reports itself. */
static int doctor_quiet(const doctor_start *st, int world)
{
    return st->refused && world == 1 && st->orig_rank > 0 && st->orig_launcher == DT_LAUNCHER_SLURM &&
           getenv("SLURM_STEP_ID") != NULL;
}

/* Rank 0 gathers every rank's facts and reports; returns the exit code, the same at every rank. */
static int doctor_gather_report(const doctor_facts *me, const cli_job *job, const doctor_opts *o, int quiet)
{
    int rc = EXIT_OK;
    doctor_facts *all = job->rank == 0 ? calloc((size_t)job->world, sizeof *all) : NULL;
    int ok = job->rank != 0 || all;
    if (MPI_Gather(me, (int)sizeof *me, MPI_BYTE, all, (int)sizeof *me, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
        ok = 0;
    if (job->rank == 0 && !ok) {
        cli_error("gathering %d ranks' facts failed (out of memory or MPI)", job->world);
        rc = EXIT_FAIL;
    }
    if (job->rank == 0 && ok && !quiet) rc = doctor_report(all, job->world, o, job->ctx);
    if (quiet) rc = EXIT_FAIL;
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(all);
    return rc;
}

int cmd_doctor(int argc, char **argv)
{
    doctor_opts o;
    memset(&o, 0, sizeof o);
    o.q.precision = DT_F32;
    dt_config cfg;
    const cli_extra extra = {doctor_options, doctor_flag, &o, NULL};
    int rc = cli_parse(argc, argv, "doctor", &cfg, &extra);
    if (!rc) rc = doctor_flags_check(&cfg, &o);
    if (rc) return rc;

    doctor_facts *me = calloc(1, sizeof *me);
    if (!me) {
        cli_error("out of memory for doctor's facts");
        return EXIT_FAIL;
    }
    doctor_start st;
    cli_job job;
    if ((rc = doctor_start_job(&o, &cfg, me, &st, &job))) {
        free(me);
        return rc;
    }
    int shared = 0;
    if ((rc = doctor_flags_agree(job.ctx, &o, &shared))) {
        free(me);
        rc = cli_end_failed(job.ctx, rc, shared);
        if (shared) MPI_Finalize(); /* ours, as below; an abort does not return at several ranks */
        return rc;
    }
    doctor_collect(me, &job, &cfg, &o, &st);
    rc = doctor_gather_report(me, &job, &o, doctor_quiet(&st, job.world));
    free(me);
    rc = cli_finish(job.ctx, rc);
    MPI_Finalize(); /* ours: dt_init found MPI started and leaves it */
    return rc;
}
