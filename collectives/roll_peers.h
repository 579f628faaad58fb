/*
 * roll_peers.h - what the MPI backend's watchdog (coll_mpi.c) says to the other ranks once rank 0,
 * the hub of the roll call, has timed a collective out. The other ranks hear only from rank 0, so
 * without its verdict only rank 0's output would name the missing ranks; and when every rank
 * reached a collective that never completes (a link that died under it), MPI cannot say who
 * stalls it, so rank 0 asks: a rank still waiting in a collective answers a probe, a stopped or
 * cut-off one does not. Point-to-point messages on the backend's own communicator, on tags of
 * their own; a listener's receives are posted once, at creation, so nothing is posted per step.
 */
#ifndef DT_COLLECTIVES_ROLL_PEERS_H
#define DT_COLLECTIVES_ROLL_PEERS_H

#include <mpi.h>

#define ROLL_VERDICT_BYTES 1400
/* How long rank 0 lets its verdict travel before MPI_Abort; the launcher then takes longer still
 * to kill the others, time in which they log it. */
#define ROLL_VERDICT_S 0.5
/* How long rank 0 waits for the answers to its probe. */
#define ROLL_PROBE_S 1.0

/* Another rank's side: the posted receives of rank 0's verdict and probe. */
typedef struct roll_listener {
    MPI_Request verdict_rx, probe_rx;
    char verdict[ROLL_VERDICT_BYTES];
    int probe_in, probe_out;
} roll_listener;

/* Marks both receives absent (before anything can fail, so cancel is always safe). */
void roll_listener_init(roll_listener *l);
/* Posts both receives from rank 0 on comm; an MPI error code. */
int roll_listener_post(roll_listener *l, MPI_Comm comm);
/* Called while waiting on a collective: answers a probe that has come, and returns rank 0's
 * verdict once it has come (NUL-terminated, owned by l), else NULL. */
const char *roll_listen(roll_listener *l, MPI_Comm comm, int rank);
/* Cancels what is still posted. */
void roll_listener_cancel(roll_listener *l);

/* Rank 0: sends the verdict to ranks 1..size-1 and lets it travel for up to wait_s (a rank that is
 * gone or cut off never takes it; the caller aborts the job either way). */
void roll_verdict_send(MPI_Comm comm, int size, const char *verdict, double wait_s);
/* Rank 0: pings ranks 1..size-1 and writes those that do not answer within wait_s into ranks (at
 * most cap); returns how many. */
int roll_probe_silent(MPI_Comm comm, int size, double wait_s, int *ranks, int cap);

#endif
