/*
 * comm_dup.c - MPI_Comm_dup under a deadline (comm_dup.h): MPI_Comm_idup polled as every collective
 * is, spinning a little and then sleeping 20 us between tests, so a waiting rank leaves its core to
 * the others.
 */
#include "collectives/comm_dup.h"
#include "base/abort_guard.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/status.h"

#include <stdlib.h>
#include <time.h>

dt_status comm_dup_bounded(MPI_Comm world, double timeout_s, const char *what, const char *hint, MPI_Comm *out)
{
    MPI_Request r;
    int flag = 0, spins = 0;
    int rc = MPI_Comm_idup(world, out, &r);
    const double start = clock_now_s();
    while (rc == MPI_SUCCESS && !(rc = MPI_Test(&r, &flag, MPI_STATUS_IGNORE)) && !flag) {
        if (++spins < 2000) continue;
        const double age = clock_now_s() - start;
        if (timeout_s > 0 && age > timeout_s) {
            log_msg(LOG_LEVEL_ERROR,
                    "watchdog: %s has waited %.1f s, past the %.1f s timeout: %s. Aborting the job so no rank hangs",
                    what, age, timeout_s, hint);
            if (abort_guard_arm(ABORT_GUARD_S, 1, "MPI_Abort")) abort_guard_wait(); /* another thread ends it */
            MPI_Abort(MPI_COMM_WORLD, 1);
            abort(); /* MPI_Abort does not return; if it did, nothing may go on */
        }
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
    if (rc != MPI_SUCCESS) {
        *out = MPI_COMM_NULL;
        return status_set_error(DT_ERR_MPI, "%s failed (MPI error %d)", what, rc);
    }
    return DT_OK;
}
