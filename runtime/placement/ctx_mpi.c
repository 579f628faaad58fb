/*
 * ctx_mpi.c - MPI as a context needs it (ctx_impl.h): started by dt_init when the program has not
 * (MPI_THREAD_MULTIPLE, for the communication thread), ended by dt_finalize when dt_init started
 * it, and the world's duplicate, dt_init's first collective, made under the deadline.
 */
#include "runtime/placement/ctx_impl.h"
#include "collectives/comm_dup.h"
#include "base/log.h"
#include "base/status.h"

#include <stdlib.h>
#include <unistd.h>

/* 1 once dtrain itself has called MPI_Finalize (dt_finalize after a dt_init that initialized MPI,
 * dt_abort_job in a world of one): a later dt_init is then told that MPI cannot start twice in a
 * process and how a program that wants several contexts keeps MPI, rather than that the caller
 * finalized it. */
static atomic_int mpi_ended_by_dtrain;

/* MPI_Finalize of MPI that dtrain initialized, remembered for ctx_mpi_init's message. */
int ctx_mpi_finalize(void)
{
    atomic_store(&mpi_ended_by_dtrain, 1);
    return MPI_Finalize();
}

dt_status ctx_mpi_init(const dt_config *cfg, int *we_did)
{
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    *we_did = 0;
    if (finalized && atomic_load(&mpi_ended_by_dtrain))
        return status_set_error(
            DT_ERR_MPI, "MPI was finalized by dtrain (by dt_finalize, as dt_init had initialized it, or by "
                        "dt_abort_job in a world of one), and MPI cannot start twice in a process: keep one context "
                        "for the whole run, or call MPI_Init_thread yourself and set dt_config.init_mpi = 0 so that "
                        "dt_finalize leaves MPI running for the next dt_init");
    if (finalized)
        return status_set_error(DT_ERR_MPI, "MPI was already finalized; dt_init must run before MPI_Finalize");
    if (inited) return DT_OK;
    if (!cfg->init_mpi)
        return status_set_error(DT_ERR_MPI, "MPI is not initialized and dt_config.init_mpi is 0: call "
                                            "MPI_Init_thread first or set init_mpi = 1");
    int provided = 0;
    /* MULTIPLE lets a communication thread run collectives beside the compute thread. */
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
        return status_set_error(DT_ERR_MPI, "MPI_Init_thread failed: check the launcher (srun needs "
                                            "--mpi=pmix) and that mpirun belongs to the MPI dtrain was built with");
    *we_did = 1;
    /* Open MPI 4.1 reports the failure of a nonblocking collective (a count that differs across
     * ranks: MPI_ERR_TRUNCATE) through MPI_COMM_WORLD's handler, not its communicator's: fatal by
     * default. dtrain owns MPI here, so it sets a handler there that lets its own polls get the
     * error back as a code and stays fatal for every other call, as MPI's default. */
    coll_mpi_world_errhandler();
    /* As doctor's mpi.threads says: the engine starts its communication thread only under
     * MULTIPLE; below it the allreduces progress on the training thread, inside dtrain's calls. */
    if (provided < MPI_THREAD_MULTIPLE)
        log_msg(LOG_LEVEL_WARN,
                "MPI provides thread level %d, not MPI_THREAD_MULTIPLE: gradient allreduces run on the training "
                "thread (no communication thread), so they overlap backward less; use an MPI built with thread "
                "support",
                provided);
    return DT_OK;
}

/* DTRAIN_TEST_INIT_STALL=RANK (runtime/test_hooks.h): that rank of the world never reaches dt_init's
 * first collective, as a rank whose node could not start it, so the others' deadline there is
 * tested. */
static void test_stall_before_dup(void)
{
    const char *v = getenv("DTRAIN_TEST_INIT_STALL");
    int rank = -1;
    if (!v || !*v || MPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS || atoi(v) != rank) return;
    for (;;) pause();
}

dt_status ctx_world_dup(double timeout_s, MPI_Comm *world)
{
    test_stall_before_dup();
    /* Every rank's first collective, so under the deadline: a rank that never gets here (its node
     * could not start dtrain or a library, it died in MPI_Init, or stalled) left the others blocked
     * in it until the job's time limit where the launcher does not end them (srun without
     * --kill-on-bad-exit). */
    return comm_dup_bounded(MPI_COMM_WORLD, timeout_s, "dt_init's MPI_Comm_dup(MPI_COMM_WORLD)",
                            "a rank has not reached dt_init (dtrain or a library could not start on its node, it "
                            "died in MPI_Init, or it stalled before dt_init); --timeout sets this deadline",
                            world);
}
