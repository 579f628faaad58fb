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

/* Arms the guard: if this process is still alive `seconds` from now, it logs why and _exit()s with
 * `code`, from a thread of its own (whatever the caller is blocked in). Returns at once; call it
 * just before MPI_Abort. Arming twice keeps the first deadline. */
void abort_guard_arm(double seconds, int code);

#endif
