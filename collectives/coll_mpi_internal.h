/*
 * coll_mpi_internal.h - what the MPI collective backend's two files share: its state, the kinds
 * of operation, and the watchdog (coll_mpi_roll.c) that every operation of coll_mpi.c runs under.
 */
#ifndef DT_COLLECTIVES_COLL_MPI_INTERNAL_H
#define DT_COLLECTIVES_COLL_MPI_INTERNAL_H

#include "collectives/coll.h"

#include <mpi.h>
#include <stddef.h>

/* One rank's arrival at a collective: its sequence number, which operation, how many elements. */
typedef struct roll_msg {
    unsigned long long seq, kind, count;
} roll_msg;

typedef struct mpi_state {
    float *scratch;         /* MPI16_CHUNK floats, allocated on first 16-bit use */
    unsigned long long seq; /* collectives started on this communicator */
    /* The roll call of the collective in progress (see roll_post). Rank 0: receives from ranks
     * 1..W-1 at roll[0..W-2], sends to them at roll[W-1..2W-3]; another rank: the receive from
     * rank 0 at roll[0], its send at roll[1]. */
    MPI_Request *roll;
    roll_msg *roll_in; /* what each receive brought */
    roll_msg roll_out;
    int nroll;     /* requests of the current roll call; 0 when there is none */
    int roll_done; /* 1 once they have all completed */
    double t_hub;  /* another rank: when rank 0's arrival was first seen (0: not yet) */
} mpi_state;

enum { OP_ALLREDUCE, OP_BCAST, OP_BARRIER, OP_REDUCE_SCATTER, OP_ALLGATHER, OP_KINDS };

/* "MPI_Allreduce" etc. for an OP_ kind; "?" for another value. */
const char *mpi_op_name(unsigned long long kind);

/* mpi_op_begin's code when another thread is in a collective of the same context (ctx_enter):
 * nothing was started. No MPI error code is negative. */
#define MPI_OP_REFUSED (-1)

/* The start of one operation of c: the context's mark (ctx_enter), its sequence number and roll
 * call (returns MPI's code for posting it, or MPI_OP_REFUSED), *start for the deadline, a debug
 * line. Every call is ended by mpi_op_end with the code of the operation's MPI calls. */
int mpi_op_begin(coll *c, int kind, size_t count, size_t bytes, double *start);
/* Waits for request r of the operation begun at start, and its roll call, against c's deadline:
 * MPI's code; past the deadline it names the ranks that never arrived and ends the job. */
int mpi_op_wait(coll *c, MPI_Request *r, int kind, size_t count, double start);
/* The end of one operation begun by mpi_op_begin, whose MPI calls ended with code rc: its status.
 * DT_ERR_MPI when rc failed, or when the roll call shows a rank at another operation or count (a
 * caller's error that MPI reports only on the rank with the smaller buffer, if at all); a debug line
 * with its time; a failure drops a roll call left pending. */
dt_status mpi_op_end(coll *c, int kind, size_t count, size_t bytes, double start, int rc);
/* DT_ERR_MPI for MPI's code rc in the operation `what` of count elements, with MPI's message and
 * the likely cause. */
dt_status mpi_fail(int rc, const char *what, size_t count);

#endif
