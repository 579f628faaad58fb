/*
 * rank_verdict.h - every rank's outcome, to every rank: how a rank whose own part of a collective
 * call failed (a bad argument, memory it could not get) still joins the collective its peers
 * entered, so that none of them waits for it until the watchdog, and every rank returns the same
 * code, naming the rank that failed first; and how a setting every rank must give alike is
 * compared in the same exchange before any rank applies it (rank_agree_status).
 *
 * Each rank puts its code into its own slot of a zeroed fp32 array (an integer below 2^24 is exact
 * there), and the array is summed over the ranks: afterwards slot r holds rank r's code (or its
 * setting). At most
 * RANK_VERDICT_CHUNK ranks per allreduce, in a buffer on the stack, so that no rank can fail to
 * allocate it and skip the collective (which would hang the others). Over the context's host
 * backend (ctx_host_coll), under the deadline of every collective.
 */
#ifndef DT_COLLECTIVES_RANK_VERDICT_H
#define DT_COLLECTIVES_RANK_VERDICT_H

#include "dtrain.h"

#include <mpi.h>

#define RANK_VERDICT_CHUNK 256

/* The most floats one rank may share through rank_share_slots (a 64-bit hash and a 64-bit length
 * in 16-bit digits: dt_check_replicas). */
#define RANK_SLOT_MAX 8

/* Sees one rank's k shared floats, in rank order (rank 0 first). */
typedef void (*rank_slot_visit)(int rank, const float *values, void *state);

/* Collective over ctx's ranks: every rank gives k (1 .. RANK_SLOT_MAX) floats, and visit sees every
 * rank's, in rank order. Each rank's values go into its own slot of a zeroed fp32 array that is
 * summed (so a value is exact when it is exact in fp32: integers below 2^24), RANK_VERDICT_CHUNK
 * ranks per allreduce in a buffer on the stack. The one copy of that exchange: the verdicts below
 * and dt_check_replicas' hashes use it. Returns DT_OK, the collective's own failure (DT_ERR_MPI,
 * DT_ERR_TIMEOUT; visit may then have seen part of the ranks), or DT_ERR_INTERNAL for a k out of
 * range or a NULL argument. */
dt_status rank_share_slots(const dt_ctx *ctx, const float *mine, int k, rank_slot_visit visit, void *state);

/* What the ranks reported. */
typedef struct rank_verdict {
    int first_rank; /* the lowest rank whose code was not 0; -1 when every rank gave 0 */
    int first_code; /* that rank's code (0 when none) */
    int failed;     /* how many ranks gave a code other than 0 */
} rank_verdict;

/* Collective over ctx's ranks: code is this rank's outcome, 0 for success, else any integer of
 * magnitude below 2^24 (a dt_status, a field's index: the caller's to decode). *out gets the
 * first rank with a code and its code. In a world of one nothing is sent and *out describes this
 * rank. Returns DT_OK, or the collective's own failure (DT_ERR_MPI, DT_ERR_TIMEOUT), *out then
 * describing this rank alone. DT_ERR_INVALID_ARG for a NULL ctx or out (nothing sent), or a code
 * out of range: that one still takes part, as the nearest code in range, and *out is the
 * exchange's, so the other ranks are not left waiting. */
dt_status rank_verdict_share(const dt_ctx *ctx, int code, rank_verdict *out);

/* The usual ending of a call that every rank joins, also a failed one: own is this rank's
 * status. Every rank succeeded: DT_OK. This rank failed: own, with its own message (kept across
 * the exchange). Another rank failed first: that rank's status, with the message
 * "<fn> failed on rank R (<its status>)[ and on other ranks]<consequence>: read rank R's message
 * for the cause"; consequence (may be NULL) says what that means, as ", so nothing was compared".
 * A failed exchange: own when this rank failed, else the exchange's status. Collective, as
 * rank_verdict_share; in a world of one, or without a context, it returns own at once. */
dt_status rank_verdict_status(const dt_ctx *ctx, dt_status own, const char *fn, const char *consequence);

/* As rank_verdict_status, over an MPI communicator where no context exists yet (dt_init, between
 * MPI_Init and its communicators): own is this rank's status, the first failing rank's message is
 * sent to all, and another rank's failure reads "<fn> failed on rank R (<its status>)[ and on other
 * ranks]<consequence>; rank R says: <its message>". Plain MPI calls (no watchdog: every rank has
 * just come out of MPI_Init); a failed exchange returns own, or DT_ERR_MPI on a rank that had no
 * failure of its own. *shared (may be NULL) is 1 when the exchange completed, so every rank
 * returns a failure or every rank DT_OK, else 0. Collective over comm; in a world of one it
 * returns own at once (*shared 1). */
dt_status rank_verdict_comm_status(MPI_Comm comm, dt_status own, const char *fn, const char *consequence, int *shared);

/* Writes value as a setting's text ("fp16", "4") into buf (n bytes), for rank_agree_status. */
typedef void (*rank_value_text)(int value, char *buf, size_t n);
/* The plain decimal text of value. */
void rank_value_int(int value, char *buf, size_t n);

/* A setting every rank must give alike, compared before any rank applies it, in the one exchange
 * of rank_verdict_status (one allreduce of one float per rank, RANK_VERDICT_CHUNK ranks at a
 * time): own is this rank's status so far, value its setting as an integer 0 .. 2^24 - 1 (the
 * caller's encoding; ignored when own is not DT_OK). This rank failed: own, its message kept.
 * Another rank failed: that rank's status, named as rank_verdict_status names it (fn,
 * consequence). Every rank succeeded but some gave another value than rank 0: DT_ERR_INVALID_ARG
 * on every rank, "<fn>: rank R gave <setting> <R's value> where rank 0 gave <rank 0's>[, and
 * other ranks differ too]: every rank must pass the same <setting> (the call is
 * collective)<consequence>", the values written by text. Collective; in a world of one, or
 * without a context, it returns own at once. */
dt_status rank_agree_status(const dt_ctx *ctx, dt_status own, int value, const char *fn, const char *setting,
                            rank_value_text text, const char *consequence);

/* Tells where two copies of a caller's plain struct differ: 0 when they agree, else a code of the
 * caller's (1 + the index of the first field that differs, say), below 2^24. */
typedef int (*rank_first_difference)(const void *a, const void *b);

/* Collective over ctx's ranks: one plain struct (bytes long, sent as bytes: the ranks run the same
 * build, and the caller has zeroed any padding) compared across the ranks before any rank acts on
 * it. Rank 0's copy of mine reaches every rank in *zero; each rank's code is differ(mine, zero); the
 * ranks' verdict (*v) names the first rank whose code is not 0, its code, and how many differ. When
 * some rank differs, that rank's copy reaches every rank in *other, so that every rank can word the
 * same message naming both values (the failure path alone pays for it). zero and other are the
 * caller's buffers of bytes each, not overlapping mine; *other is left as mine where every rank
 * agrees. In a world of one nothing is sent: *zero is mine, v->first_rank -1. Returns DT_OK
 * (whether or not the copies agree: v says), the collectives' own failure (DT_ERR_MPI,
 * DT_ERR_TIMEOUT), or DT_ERR_INTERNAL for a NULL argument. Two collectives where every rank
 * agrees (rank 0's broadcast, the verdict's allreduce), three where one differs. */
dt_status rank_compare_struct(dt_ctx *ctx, const void *mine, size_t bytes, rank_first_difference differ, void *zero,
                              void *other, rank_verdict *v);

#endif
