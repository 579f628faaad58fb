/*
 * status.h - the thread-local last-error message behind dt_last_error().
 *
 * Every failing internal function records what failed, the offending value and the fix with
 * status_set_error(), then returns the status; callers pass the status up unchanged.
 */
#ifndef DT_BASE_STATUS_H
#define DT_BASE_STATUS_H

#include "dtrain.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Records a printf-style message as this thread's last error and returns s, so a failure reads
 * `return status_set_error(DT_ERR_ENV, "SLURM_PROCID='%s' is not a number; ...", v);`. */
dt_status status_set_error(dt_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* As status_set_error, for a failure that another rank had and a collective call reports on this
 * one ("dt_model_create failed on rank 1 ..."): the status is that rank's, and status_from_peer()
 * says 1 until the next error is recorded. What this rank itself ran out of is its own report
 * (the launcher's out-of-memory summary is printed by the rank that ran out, not by its peers). */
dt_status status_set_peer_error(dt_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* 1 when this thread's last error was recorded by status_set_peer_error, else 0. */
int status_from_peer(void);
/* Marks this thread's last error, of status s, as a failure that every rank of the job returned
 * from the same collective exchange (a verdict every rank got: rank_verdict_status, ckpt_agree),
 * so no rank is left waiting on a peer that failed alone; returns s. The next error recorded
 * (status_set_error, status_set_peer_error, status_clear_error) drops the mark. */
dt_status status_mark_shared(dt_status s);
/* 1 when this thread's last error is marked shared and is of status s, else 0: read it right where
 * a call returned s, for how the job ends (a launcher may then let every rank finalize and exit
 * with its own code, where a failure this rank may have alone needs MPI_Abort). */
int status_shared(dt_status s);
/* Puts "<prefix>: " before this thread's last error, which stays of status s, another rank's
 * (status_from_peer) and shared (status_shared) as it was: a caller naming where a callee's
 * failure happened ("--bucket-mb auto: ...") keeps how the job must end. Returns s. */
dt_status status_prefix(dt_status s, const char *prefix);
/* A public call given NULL for a required argument, refused before it does any work: the one
 * wording of every layer, DT_ERR_INVALID_ARG with "fn: arg is NULL: fix" (fix: what to pass). */
dt_status status_null_arg(const char *fn, const char *arg, const char *fix);
/* DT_OK when `count` elements of type t fit in one buffer (PTRDIFF_MAX bytes, C's limit on an
 * object); else DT_ERR_INVALID_ARG, the one wording of every layer: "<fn: >count N is more <t>
 * elements than any buffer can hold (at most M, PTRDIFF_MAX bytes): pass the number of <what> (a
 * negative count converted to size_t looks like this)" (fn NULL: no prefix). */
dt_status status_count_fits(const char *fn, size_t count, dt_dtype t, const char *what);

/* Clears this thread's last error (dt_last_error() then returns ""). */
void status_clear_error(void);

/* A last-error message copied aside, whole (the same size as the thread's own). Two uses:
 *  - cleanup after a failure (freeing memory, waiting for a device, a collective that tells the
 *    other ranks) may record errors of its own; the failure's message is kept before it and put
 *    back after it, so the caller reads what started the failure;
 *  - a worker thread's failure carried to the thread that reports it (the last error is per
 *    thread). */
typedef struct status_kept {
    char msg[2048];
    int from_peer; /* status_from_peer() at the keep */
    int shared;    /* the status the last error was marked shared for (0: none) */
} status_kept;

/* Copies this thread's last error into *k. */
void status_keep(status_kept *k);

/* Makes k's message this thread's last error again and returns s, so a failure path reads
 * `status_keep(&k); cleanup(); return status_restore(s, &k);`. */
dt_status status_restore(dt_status s, const status_kept *k);

#ifdef __cplusplus
}
#endif
#endif
