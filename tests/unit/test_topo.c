/*
 * test_topo.c - launcher detection, strict parsing of every launcher's variables, and the
 * cross-check against MPI (including the singleton trap), fed through the getenv seam.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/placement/topo.h"
#include "runtime/placement/mpi_pmi2.h"

#include <string.h>

/* A fake environment: NULL-terminated "NAME=VALUE" strings. */
static const char *fake_getenv(const char *name, void *arg)
{
    const char *const *vars = arg;
    size_t n = strlen(name);
    for (; *vars; vars++)
        if (strncmp(*vars, name, n) == 0 && (*vars)[n] == '=') return *vars + n + 1;
    return NULL;
}

#define ENV(...) ((const char *[]){__VA_ARGS__, NULL})

static dt_status read_env(const char **vars, topo_env *e) { return topo_read_env(fake_getenv, (void *)vars, e); }

static void expect_error(const char **vars, const char *must1, const char *must2)
{
    topo_env e;
    memset(&e, 0x5a, sizeof e);
    dt_status s = read_env(vars, &e);
    assert_int_equal(s, DT_ERR_ENV);
    const char *msg = dt_last_error();
    if (!strstr(msg, must1) || (must2 && !strstr(msg, must2)))
        fail_msg("message '%s' lacks '%s' / '%s'", msg, must1, must2 ? must2 : "");
}

static void test_none(void **st)
{
    (void)st;
    topo_env e;
    assert_int_equal(read_env(ENV("HOME=/root"), &e), DT_OK);
    assert_int_equal(e.launcher, DT_LAUNCHER_NONE);
    assert_int_equal(e.rank, -1);
    assert_int_equal(e.size, -1);
    assert_int_equal(e.local_rank, -1);
    topo_env_free(&e);
}

static void test_openmpi_wins_over_stale_slurm(void **st)
{
    (void)st;
    topo_env e;
    /* mpirun inside an sbatch job: SLURM_PROCID/LOCALID come from the batch step and are stale,
     * even malformed ones must not matter. */
    assert_int_equal(read_env(ENV("OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_LOCAL_RANK=0",
                                  "OMPI_COMM_WORLD_LOCAL_SIZE=2", "SLURM_PROCID=0", "SLURM_LOCALID=junk",
                                  "SLURM_STEP_ID=0", "SLURM_NTASKS=1", "PMIX_RANK=2"),
                              &e),
                     DT_OK);
    assert_int_equal(e.launcher, DT_LAUNCHER_OPENMPI);
    assert_int_equal(e.rank, 2);
    assert_int_equal(e.size, 4);
    assert_int_equal(e.local_rank, 0);
    assert_int_equal(e.local_size, 2);
    assert_int_equal(e.pmix_rank, 2);
    assert_string_equal(e.rank_var, "OMPI_COMM_WORLD_RANK");
    topo_env_free(&e);
}

static void test_slurm(void **st)
{
    (void)st;
    topo_env e;
    assert_int_equal(
        read_env(ENV("SLURM_STEP_ID=3", "SLURM_PROCID=5", "SLURM_NTASKS=8", "SLURM_LOCALID=1", "SLURM_NODEID=2",
                     "SLURM_NNODES=3", "SLURM_JOB_NODELIST=node[01-04]", "SLURM_STEP_NODELIST=node[01-02,07]",
                     "SLURM_STEP_TASKS_PER_NODE=3(x2),2", "PMIX_RANK=5"),
                 &e),
        DT_OK);
    assert_int_equal(e.launcher, DT_LAUNCHER_SLURM);
    assert_int_equal(e.rank, 5);
    assert_int_equal(e.size, 8);
    assert_int_equal(e.local_rank, 1);
    assert_int_equal(e.local_size, 2); /* node 2 of 3(x2),2 */
    assert_int_equal(e.node, 2);
    assert_int_equal(e.num_nodes, 3);
    assert_int_equal(e.num_hosts, 3);
    assert_string_equal(e.hosts[0], "node01");
    assert_string_equal(e.hosts[2], "node07"); /* the step's list, not the job's */
    assert_string_equal(e.hosts_var, "SLURM_STEP_NODELIST");
    topo_env_free(&e);
}

static void test_slurm_job_nodelist_fallback(void **st)
{
    (void)st;
    topo_env e;
    assert_int_equal(read_env(ENV("SLURM_STEP_ID=0", "SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_NODEID=0",
                                  "SLURM_JOB_NODELIST=gpu-a[1-2],login", "SLURM_TASKS_PER_NODE=1(x2)"),
                              &e),
                     DT_OK);
    assert_int_equal(e.num_hosts, 3);
    assert_string_equal(e.hosts[1], "gpu-a2");
    assert_string_equal(e.hosts[2], "login");
    assert_int_equal(e.local_size, 1);
    topo_env_free(&e);
    /* A node past the end of the per-node counts (and no node list to refuse it): its count is
     * unknown, not read from beyond the list. */
    assert_int_equal(read_env(ENV("SLURM_STEP_ID=0", "SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_NODEID=2",
                                  "SLURM_STEP_TASKS_PER_NODE=2(x2)"),
                              &e),
                     DT_OK);
    assert_int_equal(e.local_size, -1);
    assert_null(e.local_size_var);
    topo_env_free(&e);
}

static void test_hydra_torchrun_pmix(void **st)
{
    (void)st;
    topo_env e;
    assert_int_equal(read_env(ENV("PMI_RANK=1", "PMI_SIZE=2", "MPI_LOCALRANKID=1", "MPI_LOCALNRANKS=2"), &e), DT_OK);
    assert_int_equal(e.launcher, DT_LAUNCHER_HYDRA);
    assert_int_equal(e.rank, 1);
    assert_int_equal(e.local_size, 2);
    topo_env_free(&e);

    /* GROUP_RANK (torchrun's node index) is not used, so even a malformed one is no refusal. */
    const char *group[] = {"GROUP_RANK=1", "GROUP_RANK=x", "GROUP_RANK="};
    for (size_t i = 0; i < sizeof group / sizeof *group; i++) {
        if (read_env(ENV("RANK=3", "WORLD_SIZE=4", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2", group[i]), &e) != DT_OK)
            fail_msg("%s refused: %s", group[i], dt_last_error());
        assert_int_equal(e.launcher, DT_LAUNCHER_TORCHRUN);
        assert_int_equal(e.rank, 3);
        assert_int_equal(e.size, 4);
        assert_int_equal(e.local_rank, 1);
        assert_int_equal(e.node, -1);
        topo_env_free(&e);
    }

    assert_int_equal(read_env(ENV("PMIX_RANK=3"), &e), DT_OK);
    assert_int_equal(e.launcher, DT_LAUNCHER_PMIX);
    assert_int_equal(e.rank, 3);
    assert_int_equal(e.size, -1);
    topo_env_free(&e);
}

static void test_malformed_values(void **st)
{
    (void)st;
#define SL(v) ENV("SLURM_STEP_ID=0", "SLURM_PROCID=" v, "SLURM_NTASKS=4")
    expect_error(SL("abc"), "SLURM_PROCID", "'abc'");
    expect_error(SL("-1"), "SLURM_PROCID", "'-1'");
    expect_error(SL("99999999999999999999"), "SLURM_PROCID", "99999999999999999999");
    expect_error(SL(""), "SLURM_PROCID", "''");
    expect_error(SL("3x"), "SLURM_PROCID", "'3x'");
    expect_error(SL(" 3"), "SLURM_PROCID", NULL);
    /* A parse error says who sets the variable and what to do. */
    expect_error(SL(" 0"), "srun sets it to the task's rank", "Fix: remove the spaces or unset it");
    expect_error(SL("0x1"), "srun sets it to the task's rank", "Fix: give it a whole number or unset it");
    expect_error(ENV("RANK=", "WORLD_SIZE=2"), "torchrun sets it", "Fix: give it a whole number or unset it");
    expect_error(ENV("OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_RANK=1 "), "mpirun sets it to the rank",
                 "remove the spaces");
    expect_error(SL("4"), "SLURM_PROCID=4", "SLURM_NTASKS=4");
#undef SL
    expect_error(ENV("SLURM_STEP_ID=0", "SLURM_PROCID=0"), "SLURM_NTASKS", "not set");
    expect_error(ENV("SLURM_STEP_ID=0", "SLURM_PROCID=0", "SLURM_NTASKS=0"), "SLURM_NTASKS", "'0'");
    expect_error(ENV("SLURM_STEP_ID=0", "SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_LOCALID=x"), "SLURM_LOCALID", "'x'");
    expect_error(
        ENV("SLURM_STEP_ID=0", "SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_NODEID=0", "SLURM_STEP_NODELIST=node[01-04"),
        "node[01-04", NULL);
    expect_error(
        ENV("SLURM_STEP_ID=0", "SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_NODEID=2", "SLURM_STEP_NODELIST=node[01-02]"),
        "SLURM_NODEID=2", "node[01-02]");
    expect_error(
        ENV("SLURM_STEP_ID=0", "SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_NODEID=0", "SLURM_TASKS_PER_NODE=2(x"), "2(x",
        NULL);
    /* A per-node list is quoted as the variable holds it, beside the count it gives this node. */
    expect_error(ENV("SLURM_STEP_ID=0", "SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_NODEID=0",
                     "SLURM_STEP_TASKS_PER_NODE=2(x3),1"),
                 "SLURM_STEP_TASKS_PER_NODE='2(x3),1' (2 on node 0)", "SLURM_NTASKS=1");
    expect_error(ENV("SLURM_STEP_ID=0", "SLURM_PROCID=0", "SLURM_NTASKS=8", "SLURM_LOCALID=2", "SLURM_NODEID=3",
                     "SLURM_STEP_TASKS_PER_NODE=3(x3),2"),
                 "SLURM_LOCALID=2", "SLURM_STEP_TASKS_PER_NODE='3(x3),2' (2 on node 3)");
    expect_error(ENV("OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_LOCAL_RANK=2",
                     "OMPI_COMM_WORLD_LOCAL_SIZE=2"),
                 "OMPI_COMM_WORLD_LOCAL_RANK=2", "OMPI_COMM_WORLD_LOCAL_SIZE=2");
    expect_error(ENV("OMPI_COMM_WORLD_SIZE=two", "OMPI_COMM_WORLD_RANK=1"), "OMPI_COMM_WORLD_SIZE", "'two'");
    expect_error(ENV("OMPI_COMM_WORLD_SIZE=2"), "OMPI_COMM_WORLD_RANK", "not set");
    expect_error(ENV("RANK=1", "WORLD_SIZE=1"), "RANK=1", "WORLD_SIZE=1");
    expect_error(ENV("RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=-3"), "LOCAL_RANK", "'-3'");
    expect_error(ENV("PMIX_RANK=1e3"), "PMIX_RANK", "'1e3'");
}

static topo_mpi mpi_of(int rank, int size, int lr, int ls, int node, int nn)
{
    topo_mpi m = {rank, size, lr, ls, node, nn};
    return m;
}

static void check_fails(const char **vars, topo_mpi m, const char *must1, const char *must2)
{
    topo_env e;
    assert_int_equal(read_env(vars, &e), DT_OK);
    dt_status s = topo_check(&e, &m);
    topo_env_free(&e);
    assert_int_equal(s, DT_ERR_MPI);
    const char *msg = dt_last_error();
    if (!strstr(msg, must1) || (must2 && !strstr(msg, must2)))
        fail_msg("message '%s' lacks '%s' / '%s'", msg, must1, must2 ? must2 : "");
}

static void test_check(void **st)
{
    (void)st;
    topo_env e;
    /* Agreement passes. */
    assert_int_equal(read_env(ENV("OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_LOCAL_RANK=2",
                                  "OMPI_COMM_WORLD_LOCAL_SIZE=4", "PMIX_RANK=2"),
                              &e),
                     DT_OK);
    topo_mpi ok = mpi_of(2, 4, 2, 4, 0, 1);
    assert_int_equal(topo_check(&e, &ok), DT_OK);
    topo_env_free(&e);
    /* No launcher, a world of 1: fine. */
    assert_int_equal(read_env(ENV("X=1"), &e), DT_OK);
    topo_mpi one = mpi_of(0, 1, 0, 1, 0, 1);
    assert_int_equal(topo_check(&e, &one), DT_OK);
    topo_env_free(&e);

    /* srun --mpi=none: refused before MPI_Init (which would fail or make singletons). */
    assert_int_equal(read_env(ENV("SLURM_STEP_ID=0", "SLURM_PROCID=1", "SLURM_NTASKS=2"), &e), DT_OK);
    assert_int_equal(topo_check_before_mpi(&e), DT_ERR_MPI);
    assert_non_null(strstr(dt_last_error(), "srun --mpi=pmix"));
    assert_non_null(strstr(dt_last_error(), "SLURM_NTASKS=2"));
    topo_env_free(&e);
    assert_int_equal(read_env(ENV("SLURM_STEP_ID=0", "SLURM_PROCID=1", "SLURM_NTASKS=2", "PMIX_RANK=1"), &e), DT_OK);
    assert_int_equal(topo_check_before_mpi(&e), DT_OK);
    topo_env_free(&e);
    /* One task without PMI (srun --mpi=none -n 1): Open MPI would abort inside MPI_Init without a
     * word on the fix, so dtrain refuses first, naming SLURM_MPI_TYPE as srun left it. */
    assert_int_equal(read_env(ENV("SLURM_STEP_ID=0", "SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_NODELIST=n1"), &e),
                     DT_OK);
#ifdef OPEN_MPI
    assert_int_equal(topo_check_before_mpi(&e), DT_ERR_MPI);
    assert_non_null(strstr(dt_last_error(), "srun --mpi=pmix"));
    assert_non_null(strstr(dt_last_error(), "SLURM_MPI_TYPE unset"));
#else
    assert_int_equal(topo_check_before_mpi(&e), DT_OK);
#endif
    topo_env_free(&e);
#ifdef OPEN_MPI
    assert_int_equal(
        read_env(ENV("SLURM_STEP_ID=0", "SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_NODELIST=n1", "SLURM_MPI_TYPE=none"),
                 &e),
        DT_OK);
    assert_int_equal(topo_check_before_mpi(&e), DT_ERR_MPI);
    assert_non_null(strstr(dt_last_error(), "SLURM_MPI_TYPE is none"));
    topo_env_free(&e);
#endif
    /* Left alone: an srun task with a PMIx server (PMIX_RANK under MpiDefault=pmix), mpirun inside an allocation (OMPI_* beside the
     * batch step's SLURM_*), a batch script or an salloc shell (SLURM_JOB_ID, no SLURM_STEP_ID),
     * and a world of 1 with SLURM's task variables set by hand (tests/mpi/test_refusals.sh). */
    /* PMI-2 (srun --mpi=pmi2) is refused where this MPI cannot use it, naming why. */
    char why[1024];
    const char **pmi2 =
        ENV("SLURM_STEP_ID=0", "SLURM_PROCID=0", "SLURM_NTASKS=1", "PMI_FD=5", "PMI_RANK=0", "PMI_SIZE=1");
    assert_int_equal(read_env(pmi2, &e), DT_OK);
    if (mpi_lacks_pmi2(why, sizeof why)) {
        assert_int_equal(topo_check_before_mpi(&e), DT_ERR_MPI);
        assert_non_null(strstr(dt_last_error(), "through PMI-2"));
        assert_non_null(strstr(dt_last_error(), why));
        assert_non_null(strstr(dt_last_error(), "srun --mpi=pmix"));
    } else {
        assert_int_equal(topo_check_before_mpi(&e), DT_OK);
    }
    topo_env_free(&e);
    const char **fine[] = {
        ENV("SLURM_STEP_ID=0", "SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_MPI_TYPE=pmix", "PMIX_RANK=0"),
        ENV("OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_RANK=1", "PMIX_RANK=1", "SLURM_STEP_ID=0", "SLURM_PROCID=0",
            "SLURM_NTASKS=1"),
        ENV("SLURM_JOB_ID=7", "SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_NODELIST=n1"),
        /* SLURM's task variables without SLURM_NODELIST: Open MPI starts a singleton there. */
        ENV("SLURM_STEP_ID=0", "SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_STEP_NODELIST=n1"),
    };
    for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++) {
        assert_int_equal(read_env(fine[i], &e), DT_OK);
        if (topo_check_before_mpi(&e) != DT_OK) fail_msg("case %zu refused: %s", i, dt_last_error());
        topo_env_free(&e);
    }

    /* The singleton trap: srun without PMIx. */
    check_fails(ENV("SLURM_STEP_ID=0", "SLURM_PROCID=2", "SLURM_NTASKS=4"), one, "SLURM_NTASKS=4", "--mpi=pmix");
    check_fails(ENV("RANK=0", "WORLD_SIZE=2"), one, "WORLD_SIZE=2", "mpirun");
    /* Disagreements name the variable and both values. */
    check_fails(ENV("OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_RANK=1"), mpi_of(1, 2, 1, 2, 0, 1),
                "OMPI_COMM_WORLD_SIZE=4", "2 ranks");
    check_fails(ENV("OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_RANK=1"), mpi_of(0, 2, 0, 2, 0, 1),
                "OMPI_COMM_WORLD_RANK=1", "rank 0");
    check_fails(ENV("OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_LOCAL_RANK=0"),
                mpi_of(1, 2, 1, 2, 0, 1), "OMPI_COMM_WORLD_LOCAL_RANK=0", "local rank 1");
    check_fails(ENV("OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_LOCAL_SIZE=1"),
                mpi_of(1, 2, 1, 2, 0, 1), "OMPI_COMM_WORLD_LOCAL_SIZE=1", "2 ranks");
    check_fails(ENV("OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_RANK=1", "PMIX_RANK=0"), mpi_of(1, 2, 1, 2, 0, 1),
                "PMIX_RANK=0", "rank 1");
    check_fails(ENV("SLURM_STEP_ID=0", "SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_NNODES=2"), mpi_of(1, 2, 1, 2, 0, 1),
                "SLURM_NNODES=2", "1 nodes");
    check_fails(
        ENV("SLURM_STEP_ID=0", "SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_NODEID=0", "SLURM_STEP_NODELIST=n[1-2]"),
        mpi_of(1, 2, 1, 2, 0, 1), "SLURM_STEP_NODELIST", "2 nodes");
    check_fails(
        ENV("SLURM_STEP_ID=0", "SLURM_PROCID=1", "SLURM_NTASKS=4", "SLURM_NODEID=1", "SLURM_STEP_TASKS_PER_NODE=2(x2)"),
        mpi_of(1, 4, 0, 1, 1, 2), "SLURM_STEP_TASKS_PER_NODE='2(x2)' (2 on node 1)", "finds 1 ranks");
    /* With srun's PMIx server live, MPI's view is srun's: the SLURM variable that disagrees is stale
     * or set by hand, and "run srun --mpi=pmix" (which it already is) would not help. */
    const char **stale[] = {
        ENV("SLURM_STEP_ID=0", "SLURM_PROCID=1", "SLURM_NTASKS=2", "PMIX_RANK=0", "SLURM_MPI_TYPE=pmix"),
        ENV("SLURM_STEP_ID=0", "SLURM_PROCID=0", "SLURM_NTASKS=3", "PMIX_RANK=0", "SLURM_MPI_TYPE=pmix"),
        ENV("SLURM_STEP_ID=0", "SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_NNODES=2", "PMIX_RANK=0"),
    };
    const char *stale_var[] = {"SLURM_PROCID is stale", "SLURM_NTASKS is stale", "SLURM_NNODES is stale"};
    for (size_t i = 0; i < sizeof stale / sizeof *stale; i++) {
        check_fails(stale[i], mpi_of(0, 2, 0, 2, 0, 1), stale_var[i], "unset it");
        if (strstr(dt_last_error(), "--mpi=pmix")) fail_msg("case %zu says --mpi=pmix: %s", i, dt_last_error());
    }
}

/* A batch script or salloc shell (SLURM_JOB_ID, no step) of a job with several tasks runs dtrain
 * alone: the count comes back for a warning; anything started by a launcher, or a job of one task,
 * gives 0. */
static void test_job_tasks_outside_step(void **st)
{
    (void)st;
    const char *var = "x";
    const char **batch = ENV("SLURM_JOB_ID=7", "SLURM_NTASKS=4", "SLURM_PROCID=0", "SLURM_LOCALID=0", "SLURM_NODEID=0");
    assert_int_equal(topo_job_tasks_outside_step(fake_getenv, (void *)batch, &var), 4);
    assert_string_equal(var, "SLURM_NTASKS");
    /* salloc -N2 with no task count: srun would start one task per node. */
    assert_int_equal(
        topo_job_tasks_outside_step(fake_getenv, (void *)ENV("SLURM_JOB_ID=7", "SLURM_JOB_NUM_NODES=2"), &var), 2);
    assert_string_equal(var, "SLURM_JOB_NUM_NODES");
    const char **alone_is_right[] = {
        ENV("SLURM_JOB_ID=7", "SLURM_NTASKS=1", "SLURM_JOB_NUM_NODES=1"),
        ENV("SLURM_JOB_ID=7", "SLURM_NTASKS=4", "SLURM_STEP_ID=0", "SLURM_PROCID=0"),
        ENV("SLURM_JOB_ID=7", "SLURM_NTASKS=4", "SLURM_STEPID=0"),
        ENV("SLURM_JOB_ID=7", "SLURM_NTASKS=4", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_RANK=0"),
        ENV("SLURM_JOB_ID=7", "SLURM_NTASKS=4", "PMIX_RANK=0"),
        ENV("SLURM_NTASKS=4"),
        ENV("SLURM_JOB_ID=7", "SLURM_NTASKS=4x"),
        ENV("HOME=/root"),
    };
    for (size_t i = 0; i < sizeof alone_is_right / sizeof *alone_is_right; i++) {
        var = "x";
        if (topo_job_tasks_outside_step(fake_getenv, (void *)alone_is_right[i], &var) != 0 || var != NULL)
            fail_msg("case %zu: a warning where running alone is right", i);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_none),
        cmocka_unit_test(test_openmpi_wins_over_stale_slurm),
        cmocka_unit_test(test_slurm),
        cmocka_unit_test(test_slurm_job_nodelist_fallback),
        cmocka_unit_test(test_hydra_torchrun_pmix),
        cmocka_unit_test(test_malformed_values),
        cmocka_unit_test(test_check),
        cmocka_unit_test(test_job_tasks_outside_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
