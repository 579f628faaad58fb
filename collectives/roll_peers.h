/*
 * roll_peers.h - the watchdogs' board: what a rank that has timed a collective out tells the
 * others, on a communicator of its own. A rank waiting in a collective hears only part of the job
 * (the MPI backend's ranks other than 0 hear from rank 0; a rank still in an earlier collective
 * hears nothing), so without the board only the first rank to time out would name the missing
 * ranks before the launcher kills the rest. And when every rank reached a collective that never
 * completes (a link that died under it), MPI cannot say who stalls it, so the rank that times it
 * out asks (rank 0 in the MPI backend's collectives, either rank of the engine's 2-rank
 * MPI_Allreduce, any rank of its chain): a rank waiting anywhere answers a probe (the MPI backend
 * and the engine both listen while they wait), a stopped or cut-off one does not. The receives are
 * posted once, at creation: nothing per step.
 */
#ifndef DT_COLLECTIVES_ROLL_PEERS_H
#define DT_COLLECTIVES_ROLL_PEERS_H

#include "dtrain.h"

#include <mpi.h>

/* How long a rank lets its verdict travel before MPI_Abort; the launcher then takes longer still
 * to kill the others, time in which they log it. */
#define ROLL_VERDICT_S 0.5
/* How long a rank that probes waits for the answers. */
#define ROLL_PROBE_S 1.0

typedef struct roll_board roll_board;

/* A board over a duplicate of world (collective), its receives posted; *out NULL (and DT_OK) in a
 * world of 1 or without a deadline (timeout_s <= 0), where no watchdog runs. */
dt_status roll_board_create(MPI_Comm world, double timeout_s, roll_board **out);
/* Cancels what is posted and frees it all. NULL is a no-op. */
void roll_board_destroy(roll_board *b);
/* The board's calls are thread-safe: a rank's main thread and communication thread both wait on
 * it (each call holds the board's lock, the probe's and the verdict's waits included).
 *
 * Called while waiting: answers a probe that has come, takes the busy words that came (see
 * roll_board_busy_seen), and returns the first verdict another rank told (NUL-terminated, owned
 * by b; *from its rank) to the one call that takes it, else NULL. b NULL: NULL. */
const char *roll_board_listen(roll_board *b, int *from);
/* Tells every other rank this rank's verdict and lets it travel for up to ROLL_VERDICT_S (a rank
 * that is gone or cut off never takes it; the caller aborts the job either way). b NULL: nothing. */
void roll_board_tell(roll_board *b, const char *verdict);
/* Tells every other rank that this rank is alive and busy with work of its own (rank 0 writing
 * a checkpoint while the others wait for its verdict), at most once per every_s seconds: a
 * waiting rank's deadline counts from the last such word (roll_board_busy_seen), so a long
 * write is not taken for a dead rank, and one that stops (a rank stuck in it) still times out.
 * b NULL: nothing. */
void roll_board_busy(roll_board *b, double every_s);
/* When (clock_now_s) this rank last heard that another rank is busy, 0 if never, as of the last
 * roll_board_listen (which takes the words that came). b NULL: 0. */
double roll_board_busy_seen(roll_board *b);
/* Pings every other rank and writes those that do not answer within ROLL_PROBE_S into ranks (at
 * most cap); returns how many (0 for b NULL). */
int roll_board_probe(roll_board *b, int *ranks, int cap);

/* The one watchdog verdict a process logs. A rank has two threads that wait (the main thread and
 * the communication thread): without this, the one whose deadline passed logged its own verdict
 * and, while that verdict travelled, the other logged a peer's ("rank R timed out first"), so
 * every rank said two, and a job of W ranks 2W lines. Returns 1 to the first caller in the
 * process, which then logs its verdict (its own or one told) and ends the job, using no lock
 * another waiting thread may hold; 0 to every later caller, which must log nothing and call
 * roll_board_wait_end. Thread-safe. */
int roll_board_claim(void);
/* Never returns: sleeps while the thread that claimed the verdict ends the job (MPI_Abort, or the
 * abort guard it arms); should that thread not do so within ROLL_VERDICT_S + ROLL_PROBE_S +
 * ABORT_GUARD_S and a second, this one ends the process with code 1 so that it cannot hang. */
_Noreturn void roll_board_wait_end(void);

#endif
