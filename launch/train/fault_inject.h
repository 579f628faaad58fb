/*
 * fault_inject.h - the DTRAIN_FAULT test hook of `dtrain train` (fault_inject.c).
 *
 * DTRAIN_FAULT=KIND:RANK:STEP makes rank RANK, at the start of step STEP (1-based; 0 = before the
 * model is built and broadcast), stall forever (stall), exit with code 3 without finalizing
 * (exit), die by SIGKILL (kill) or call through a NULL function pointer (segv: the crash report
 * must name the rank and the caller): the job must then end, with a message, rather than hang; or
 * send itself SIGUSR1 / SIGTERM / SIGINT / SIGHUP (usr1, term, int, hup): the job must stop cleanly
 * (an int or hup where that signal is ignored, as under nohup, does nothing); or (inf) put an inf into
 * its own gradients in that step's backward, before the allreduce: every rank must skip that step
 * and back off its loss scale; or (slow) sleep FAULT_SLOW_MS at the start of step STEP and of every
 * step after it: a straggler, which the straggler report must name (with the phase "compute"); or
 * (ckpt, rank 0 only: it writes the files) fail the next checkpoint write as on a full disk: every
 * rank gets that failure from the commit's verdict and ends on it, each with its own exit code.
 */
#ifndef DT_LAUNCH_FAULT_INJECT_H
#define DT_LAUNCH_FAULT_INJECT_H

#include "dtrain.h"

/* The kinds, in the order the error message lists them (KIND names in fault_inject.c). */
typedef enum fault_kind {
    FAULT_NONE = 0,
    FAULT_STALL, /* stall forever */
    FAULT_EXIT,  /* _exit(3) without finalizing */
    FAULT_KILL,  /* SIGKILL to itself */
    FAULT_USR1,  /* SIGUSR1 to itself, through the real handler */
    FAULT_TERM,  /* SIGTERM to itself, through the real handler */
    FAULT_INT,   /* SIGINT to itself, through the real handler */
    FAULT_HUP,   /* SIGHUP to itself, through the real handler */
    FAULT_INF,   /* an inf in its own gradients, before the allreduce */
    FAULT_SEGV,  /* a call through a NULL function pointer */
    FAULT_SLOW,  /* FAULT_SLOW_MS of sleep in every step from STEP on */
    FAULT_CKPT,  /* the next checkpoint write fails (ENOSPC), rank 0 only */
    FAULT_NKINDS
} fault_kind;

/* The slow fault's sleep per step: many times a small model's step on the CPU. */
#define FAULT_SLOW_MS 20

typedef struct fault {
    fault_kind kind; /* FAULT_NONE: no fault armed */
    int rank;
    long step;
} fault;

/* Reads DTRAIN_FAULT into *f (FAULT_NONE when unset or empty). RANK and STEP are digits only (no
 * sign, no blanks), within int and within --steps' range. Returns EXIT_OK, or EXIT_USAGE after
 * printing why (f->kind is then FAULT_NONE). */
int fault_parse(fault *f);

/* The checks that need the job: RANK must be a rank of the world, STEP at most the run's last
 * step, a ckpt fault on rank 0 of a run with checkpoints (ckpt_dir not NULL) (else the fault would
 * silently never happen). Returns EXIT_OK, or EXIT_USAGE after printing the value and the limit. */
int fault_check(const fault *f, int world, long steps, const char *ckpt_dir);

/* Injects the fault when this is its rank and step, or for slow any later step (m may be NULL
 * before the model exists). */
void fault_maybe(const fault *f, int rank, long step, dt_model *m);

#endif
