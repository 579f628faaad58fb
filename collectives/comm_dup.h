/*
 * comm_dup.h - MPI_Comm_dup under a deadline (comm_dup.c), for the dups that come before any
 * request the watchdog can see: dt_init's duplicate of the world and each communication engine's.
 */
#ifndef DT_COLLECTIVES_COMM_DUP_H
#define DT_COLLECTIVES_COMM_DUP_H

#include "dtrain.h"

#include <mpi.h>

/* *out = a duplicate of world, waited for at most timeout_s seconds (0: for ever). A dup is
 * collective and has no roll call: a rank that never reaches it (it did not start, died, stalled,
 * or makes its collectives in another order) would leave the others blocked in it for ever, so
 * past the deadline the job is aborted (MPI_Abort, as the watchdog does) after an ERROR line
 * saying `what` waited that long and `hint`, what a missing rank means there. DT_ERR_MPI (and
 * *out = MPI_COMM_NULL) when MPI fails the dup. */
dt_status comm_dup_bounded(MPI_Comm world, double timeout_s, const char *what, const char *hint, MPI_Comm *out);

#endif
