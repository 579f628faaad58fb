/*
 * prologue.c - how every `dtrain` command starts and ends: the OpenBLAS restart (its kernels; its
 * pool of threads under a memory limit) before anything runs, then parse the flags, check them
 * together, dt_init with the job-wide abort that a failure needs, this rank's placement; at the
 * end dt_finalize, and a failure after dt_init that takes the job down. The commands call these
 * rather than repeat the lines (cli.h).
 */
#include "launch/cli.h"
#include "base/mem_limit.h"
#include "base/status.h"
#include "runtime/placement/topo.h"

#include <cblas.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The signals that ask `dtrain train` to stop (train_stop.c). */
static void stop_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGTERM), sigaddset(set, SIGUSR1), sigaddset(set, SIGINT), sigaddset(set, SIGHUP);
}

void cli_signals_block(int argc, char **argv, char **envp)
{
    (void)argc, (void)argv, (void)envp;
    sigset_t set;
    stop_signals(&set);
    sigprocmask(SIG_BLOCK, &set, NULL);
}

void cli_signals_unblock(void)
{
    sigset_t set;
    stop_signals(&set);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
}

/* The user's OPENBLAS_NUM_THREADS, carried over the restart (cli_blas_restart): "" where it was
 * unset, "=VALUE" where set. Its presence also says the restart happened, so it happens once. */
#define POOL_FROM "DTRAIN_BLAS_POOL_FROM"

/* Whether OpenBLAS should start again without its pool of workers: under a memory limit (ulimit
 * -v or -d), where the pool it started at load (one fewer than the cores, or OPENBLAS_NUM_THREADS)
 * has workers. Each maps its 128 MiB buffer when the scheduler first runs it, which may be after
 * the model took the room, and then spins for ever (kernels/cpu/blas_reserve.c). With
 * OPENBLAS_NUM_THREADS=1 there is no pool, and dt_init raises the count where the workers it adds
 * take their buffers at once, or says why not. dtrain sets the count itself (--blas-threads, or
 * the cores), so the variable changes only the pool, and the user's own value is given back in the
 * new image for what reads it (doctor, child processes). Without a limit, nothing changes. */
static int blas_pool_restart(void)
{
    const char *from = getenv(POOL_FROM);
    if (from) {
        if (from[0] == '=')
            setenv("OPENBLAS_NUM_THREADS", from + 1, 1);
        else
            unsetenv("OPENBLAS_NUM_THREADS");
        /* Gone, so that a dtrain this one starts decides for itself; this image loaded OpenBLAS
         * with no pool, so it never restarts again. */
        unsetenv(POOL_FROM);
        return 0;
    }
    mem_limit lim;
    if (!mem_limit_get(&lim) || openblas_get_num_threads() <= 1) return 0;
    const char *user = getenv("OPENBLAS_NUM_THREADS");
    char was[64] = "";
    if (user && strlen(user) < sizeof was - 1) snprintf(was, sizeof was, "=%s", user);
    setenv(POOL_FROM, was, 1);
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    return 1;
}

/* OpenBLAS picks its kernels when it loads; when it guessed below this CPU (VMs that hide the
 * CPU model get the SSE3 kernels), start again with the right OPENBLAS_CORETYPE. A user's own
 * OPENBLAS_CORETYPE always wins, and DTRAIN_BLAS_COREFIX=0 turns this off. NULL: no fix. */
static const char *blas_corefix(void)
{
    const char *fix = getenv("DTRAIN_BLAS_COREFIX");
    if (getenv("OPENBLAS_CORETYPE") || (fix && strcmp(fix, "0") == 0)) return NULL;
    /* Test hook: DTRAIN_TEST_BLAS_ADVICE=CORE acts as if OpenBLAS had guessed below this CPU and
     * CORE were the fix, so the re-exec runs on any machine (tests/mpi/test_reexec.sh). */
    const char *forced = getenv("DTRAIN_TEST_BLAS_ADVICE");
    const char *better = forced && *forced ? forced : dt_blas_coretype_advice();
    if (!better) return NULL;
    setenv("OPENBLAS_CORETYPE", better, 1);
    setenv("DTRAIN_BLAS_COREFIX", "0", 1); /* never loop */
    return better;
}

void cli_blas_restart(char **argv)
{
    const char *better = blas_corefix();
    const int pool = blas_pool_restart();
    if (!better && !pool) return;
    /* Exec the file /proc/self/exe points to, not the link: the kernel names the process (comm:
     * ps, top, pgrep) after the basename of the path it executed, and "exe" is not what users
     * look for. The link itself is the fallback when it cannot be read or the file is gone. */
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        execv(self, argv);
    }
    execv("/proc/self/exe", argv);
    /* exec failed: carry on as loaded, and say what that costs. */
    if (better) {
        unsetenv("OPENBLAS_CORETYPE");
        fprintf(stderr,
                "dtrain: warning: OpenBLAS runs its %s kernels on a CPU that can run %s ones; "
                "set OPENBLAS_CORETYPE=%s for faster GEMM\n",
                dt_blas_corename(), better, better);
    }
    if (pool) {
        blas_pool_restart(); /* the user's OPENBLAS_NUM_THREADS back */
        unsetenv(POOL_FROM);
        fprintf(stderr,
                "dtrain: warning: under a memory limit (ulimit -v or -d), OpenBLAS's %d threads started at load "
                "may take their 128 MiB buffers too late and spin for ever; set OPENBLAS_NUM_THREADS=1 in the "
                "environment (dtrain still runs --blas-threads)\n",
                openblas_get_num_threads());
    }
}

/* dt_init with the message and the job-wide abort that a failure needs; NULL on failure after
 * printing the error. */
static dt_ctx *cli_init(const dt_config *cfg)
{
    dt_ctx *ctx = NULL;
    cli_crash_report_install(-1, NULL); /* before MPI_Init: a crash in it is reported too */
    dt_status s = dt_init(cfg, &ctx);
    if (s == DT_OK) {
        dt_placement pl;
        dt_get_placement(ctx, &pl);
        cli_crash_report_install(pl.rank, pl.hostname);
        cli_error_identity(pl.rank, pl.world_size, pl.hostname);
        return ctx;
    }
    cli_status_error(NULL, s);
    /* Peers that initialized fine would otherwise wait for this rank forever. */
    dt_abort_job(NULL, EXIT_FAIL);
    return NULL;
}

int cli_begin(const dt_config *cfg, cli_job *job)
{
    memset(job, 0, sizeof *job);
    job->job_tasks = topo_job_tasks_outside_step(NULL, NULL, &job->job_tasks_var);
    if (!(job->ctx = cli_init(cfg))) return EXIT_FAIL;
    dt_get_placement(job->ctx, &job->pl);
    job->rank = dt_rank(job->ctx);
    job->world = dt_world_size(job->ctx);
    return EXIT_OK;
}

/* A batch script's `dtrain train` (no srun) trains alone on the first node while the job holds
 * the rest: it works, so nothing refuses it, but the user asked for more. */
void cli_warn_alone(const cli_job *job)
{
    const char *var = job->job_tasks_var;
    const int n = job->job_tasks;
    if (job->world != 1 || n <= 1 || !var) return;
    const int nodes = strcmp(var, "SLURM_JOB_NUM_NODES") == 0;
    fprintf(stderr,
            "dtrain: warning: this job has %d %s (%s=%d) but dtrain runs alone, a world of 1: it was started in "
            "the batch script or salloc shell (no SLURM_STEP_ID), not by srun. Fix: start it with "
            "`srun --mpi=pmix dtrain ...` to run as the job's %s\n",
            n, nodes ? "nodes" : "tasks", var, n, nodes ? "tasks, one per node" : "tasks");
}

int cli_start(int argc, char **argv, const char *cmd, dt_config *cfg, const cli_extra *extra, cli_job *job)
{
    memset(job, 0, sizeof *job);
    int rc = cli_parse(argc, argv, cmd, cfg, extra);
    /* Refusals that need all the flags come before dt_init: a refused command starts nothing. */
    if (!rc && extra && extra->check) rc = extra->check(cfg, extra->ud);
    if (!rc) rc = cli_begin(cfg, job);
    if (!rc) cli_warn_alone(job);
    return rc;
}

int cli_finish(dt_ctx *ctx, int rc)
{
    if (dt_finalize(ctx) != DT_OK) {
        cli_error("%s", dt_last_error());
        return EXIT_FAIL;
    }
    return rc;
}

int cli_end_failed(dt_ctx *ctx, int rc, int shared)
{
    if (shared) {
        /* Every rank is here on the same failure: MPI ends as it began. dt_finalize releases the
         * context whatever MPI_Finalize says, and refuses only while something made on it lives. */
        const dt_status s = dt_finalize(ctx);
        if (s == DT_OK) return rc;
        cli_error("%s", dt_last_error());
        if (s != DT_ERR_INVALID_ARG) return rc;
    }
    dt_abort_job(ctx, rc);
    return rc;
}

int cli_fail(dt_ctx *ctx, dt_status s, const char *what)
{
    const int shared = status_shared(s);                 /* before the messages below: about the failure itself */
    if (!cli_peer_failure(s)) cli_status_error(what, s); /* else the rank that met it says why */
    /* A bad value given to the library is a usage error; anything else is a run-time failure. */
    const int rc = s == DT_ERR_INVALID_ARG ? EXIT_USAGE : EXIT_FAIL;
    return cli_end_failed(ctx, rc, shared);
}
