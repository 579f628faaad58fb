/*
 * abort_guard.h - a last resort for a process that is ending the job: MPI_Abort asks the launcher
 * to kill every rank, and the launcher may never answer. Under srun a rank's MPI_Abort goes to its
 * node's slurmstepd, which must reach srun; on a node whose link is down that never happens and
 * the rank would sleep in MPI_Abort for as long as the link stays down (measured on the local
 * cluster: ranks of a cut-off node still there minutes later). The guard ends the process itself.
 */
#ifndef DT_BASE_ABORT_GUARD_H
#define DT_BASE_ABORT_GUARD_H

/* Seconds MPI_Abort gets to end this process before the guard does. The launcher kills a job in
 * well under a second when it can be reached, so this costs a healthy abort nothing. */
#define ABORT_GUARD_S 3.0

/* Arms the guard: if this process is still alive `seconds` from now, it logs that `what` (the call
 * about to be made: "MPI_Abort", "MPI_Finalize") has not ended it, and _exit()s with `code`, from a
 * thread of its own (whatever the caller is blocked in). Returns at once, 0; call it just before
 * `what`. When it was armed already (another thread is ending the process: two watchdogs, the
 * communication thread's and the main thread's, may fire together) it returns 1 and the caller
 * must not make its call (a second concurrent MPI_Abort returns at once) but abort_guard_wait. */
int abort_guard_arm(double seconds, int code, const char *what);

/* Stops the guard that this caller armed (abort_guard_arm returned 0) once its call returned
 * without ending the process (MPI_Finalize does return): the process lives on, and a later
 * abort_guard_arm arms a new guard. */
void abort_guard_disarm(void);

/* Never returns: sleeps until the process ends (by the first caller's MPI_Abort or the guard). A
 * disarm (the guarded MPI_Finalize returned while this thread wanted the job ended) ends the
 * process with code 1. */
_Noreturn void abort_guard_wait(void);

#endif
