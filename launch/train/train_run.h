/*
 * train_run.h - one run of `dtrain train`, as its parts see it: the command (cmd_train.c: checks,
 * setup, the end), the step loop (train_loop.c), the trace's file (train_trace.c) and what rank 0
 * prints and records (train_report.c).
 */
#ifndef DT_LAUNCH_TRAIN_RUN_H
#define DT_LAUNCH_TRAIN_RUN_H

#include "launch/train/fault_inject.h"
#include "launch/train/lr_schedule.h"
#include "launch/train/metrics.h"
#include "launch/train/progress.h"
#include "launch/train/straggler.h"
#include "launch/train/train_data.h"
#include "launch/train/train_flags.h"

#include <stdio.h>

/* SIGUSR1 (SLURM's --signal, scancel --signal) and SIGTERM (preemption, scancel) ask for a clean
 * stop: the ranks agree on it at the end of a step, write a checkpoint and exit with
 * EXIT_PREEMPTED, so a requeued job resumes with --resume auto. SIGINT (Ctrl-C) and SIGHUP (the
 * terminal gone) stop the same way, checkpoint included, but exit 128 + the signal (130, 129): the
 * user asked for the stop, and a requeue-on-75 script must not start the run again
 * (train_stop.c). */
enum { EXIT_PREEMPTED = 75 }; /* EX_TEMPFAIL: try again later */
/* Stopped on SIGUSR1/SIGTERM with no --checkpoint-dir: nothing saved, so not 75 (a requeue would
 * start again from step 0 at every preemption); 128 + SIGTERM, as the signal would have ended it. */
enum { EXIT_STOPPED_UNSAVED = 143 };

typedef struct train_run {
    train_opts t;
    dt_ctx *ctx;
    int rank, world;
    dt_dtype grad_t; /* the type the gradients are kept in: the precision's, or fp32 */
    fault flt;       /* DTRAIN_FAULT */
    lr_schedule sched;
    int loader_threads, read_threads; /* the loader's (0: the training thread), and the readers' (>= 1) */
    long first_step;                  /* the step a resumed run continues after; 0 for a fresh one */
    double auto_wait0;                /* --bucket-mb auto: the loader's wait when its profiled steps began */
    char oom_at[48];                  /* what ran out of device memory ("while making the model", "at step 1"), for the
                                         summary cmd_train prints once the run is freed; "": nothing did */
    /* What the run holds, freed by train_release on every way out (each may be NULL). */
    dt_scaler *sc;
    dt_model *m;
    dt_optimizer *opt;
    train_data data;
    dt_loader *ld;
    FILE *metrics;          /* rank 0's --metrics file; NULL once a write to it failed */
    long metrics_lost;      /* rank 0: the step of the first record a failed write lost (0: none lost) */
    char metrics_why[128];  /* and why, strerror's text */
    int metrics_gone;       /* rank 0: its file was found removed (said once, train_ckpt.c) */
    int stop_sig, stop_own; /* the stop signal the ranks agreed on (0: none), and whether this rank got it */
    long saved_at;          /* the step a stop on the last step saved (train_loop.c): the run finishes without
                               saving it again (0: none) */
    int final_eval_failed;  /* the evaluation after the last step failed on every rank (said): the run finishes
                               without it, its outputs written, and exits EXIT_FAIL (train_loop.c) */
    char trace_out[4096];   /* rank 0: where --trace is written (beside it after a resume, train_trace.c) */
    int trace_none;         /* a resumed run whose --trace-steps are all done: no trace written */
    progress prog;          /* rank 0's progress line on a terminal (train_loop.c) */
    straggler_state strag;  /* rank 0: the straggler streak */
    /* What the loop measured, for the last line. */
    double t_start, t_end;
    double samples_sum, interval_s_sum; /* over the log intervals: the mean rate is their ratio */
    int intervals;
} train_run;

/* The name of a dtype that training uses: "fp32", "fp16" or "bf16". */
static inline const char *train_type_name(dt_dtype t) { return t == DT_F16 ? "fp16" : t == DT_BF16 ? "bf16" : "fp32"; }

/* A library failure s on this rank: prints "<last error> (<status>)" and returns the exit code,
 * EXIT_USAGE for DT_ERR_INVALID_ARG and EXIT_FAIL otherwise (the caller aborts the job). */
int train_status_error(dt_status s);
/* A failure every rank meets alike, from figures one allreduce gave them all (a loss that became
 * nan) or from what every rank has (the flags, the world, a checkpoint's step rank 0 read for
 * all): rank 0 alone prints "dtrain: error: <msg>" (W ranks would print W copies of one line), and
 * every rank ends on it without an abort, each finalizing (cli_end_failed, shared). Returns rc
 * (EXIT_FAIL, or EXIT_USAGE for a refusal of the flags). */
int train_shared_error(const train_run *r, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Marks the failure that ends this run, already printed, as one every rank got: each rank then
 * ends on it without an abort (cli_end_failed, shared). */
void train_failure_shared(void);
/* On the GPU, 16-bit models keep fp32 gradients (as torch.cuda.amp): r->grad_t becomes fp32, or a
 * 16-bit --grad-comm given with them is a usage error naming `who` chose the GPU and `alt`
 * (cmd_train.c). EXIT_OK or EXIT_USAGE after printing why. */
int train_gpu_grads(train_run *r, const char *who, const char *alt);

/* ---------------------------------------------------------------- set-up (train_setup.c) */

/* After dt_init, up to the first step: the refusals that need the world, the output paths and the
 * checkpoint directory tried, the data, model, optimizer, steps and schedule, a resumed run's
 * checkpoint, the loader. EXIT_OK, or the exit code after printing why (a failure every rank
 * shares marked with train_failure_shared). Collective. */
int train_setup(train_run *r, const dt_placement *pl);

/* The training flags every rank must share (all but paths, and of those whether each is given),
 * compared across the ranks: EXIT_OK, or EXIT_USAGE after saying once, for all the ranks, the
 * first rank whose flags differ from rank 0's, the flag and both values (train_flags_agree.c).
 * Two collectives where the flags agree (rank 0's text broadcast, the verdict's allreduce:
 * rank_compare_struct); where they differ, the first differing rank's text broadcast and the
 * exchange that says the refusal once (cli_say_shared_failure). Collective. */
int train_flags_agree(train_run *r);

/* ---------------------------------------------------------------- memory (train_memory.c) */

/* Before the model is made on the CPU: its plan's peak against this rank's host budget; over a
 * limit the kernel enforces, EXIT_FAIL on every rank (r->oom_at set where this rank's plan is
 * over), else EXIT_OK. Collective. */
int train_memory_check(train_run *r, const dt_placement *pl);
/* The out-of-memory summary of r's plan (r->oom_at says where it ran out): the batch that fits. */
void train_oom_report(const train_run *r);

/* ---------------------------------------------------------------- stop signals (train_stop.c) */

/* Installs the handlers of SIGUSR1, SIGTERM, SIGINT and SIGHUP (SIGINT and SIGHUP only where they
 * are not ignored already: nohup, a background job), each a request to stop, then unblocks them
 * (cli_signals_unblock): one that arrived since the program started is handled now. The first
 * SIGINT says at once that the run stops after this step (with a checkpoint in ckpt_dir, or
 * nothing saved when it is NULL) and that Ctrl-C again ends it at once: a second SIGINT, after
 * any stop request, ends the process by SIGINT there and then. The first stop request also sets
 * SIGPIPE to be ignored: a reader of the output that the same signal ended (`| tee`) costs the
 * lines printed after it, not the checkpoint. Call it before dt_init. */
void train_stop_install(const char *ckpt_dir);
/* From here on a first SIGINT's note says the run stops after the step in progress; before (the
 * set-up), that it stops before the first step with nothing saved. Called once the set-up's own
 * stop check has passed, just before the first step. */
void train_stop_training_begins(void);
/* The stop requests of every rank, agreed: *sig the signal (0: none asked for a stop), the one of
 * highest precedence when ranks got different ones (SIGINT, SIGHUP, SIGTERM, SIGUSR1), also kept
 * in r->stop_sig with r->stop_own; and with them whether this rank failed to make the next step's
 * batch (batch_failed), *batch_failures the ranks that did (batch_failures may be NULL).
 * Collective (one allreduce of 5 floats with several ranks). */
dt_status train_stop_agree(train_run *r, int batch_failed, int *sig, int *batch_failures);
/* The exit code of a run stopped on r->stop_sig: 130 for SIGINT and 129 for SIGHUP, else
 * EXIT_PREEMPTED with --checkpoint-dir and EXIT_STOPPED_UNSAVED without. */
int train_stop_exit_code(const train_run *r);
/* Rank 0's line on the stop: after step `done` (its checkpoint written when there is a
 * --checkpoint-dir), or with `before` set, before step done + 1 (nothing trained by this run). */
void train_stop_report(const train_run *r, long done, int before);
/* Rank 0's line on a stop that came with the last step, `done`: nothing is left to stop, the run
 * finishes (its checkpoint of that step written when there is a --checkpoint-dir). */
void train_stop_report_last(const train_run *r, long done);

/* ---------------------------------------------------------------- the loop (train_loop.c) */

typedef enum train_end {
    TRAIN_END_DONE,    /* every step ran */
    TRAIN_END_STOPPED, /* a stop signal, on every rank after the same step (or before the first): the
                          checkpoint is written, said so; train_stop_exit_code is the exit code */
    TRAIN_END_NUMERIC, /* loss scaling gave up, on every rank at the same step: reported */
    TRAIN_END_FAILED   /* this rank failed (*rc the exit code, the error printed): the job must be aborted */
} train_end;

/* Runs the steps first_step .. t.steps of a set-up run (model, optimizer, loader, schedule):
 * forward + backward, the gradients reduced, the optimizer step; the checkpoints, the log
 * intervals and the evaluations on the way. Collective. */
train_end train_loop(train_run *r, int *rc);

/* ---------------------------------------------------------------- --epochs (train_epochs.c) */

/* --epochs into steps and the schedule parsed and checked, from the data's steps per epoch
 * (EXIT_USAGE with the message said). */
int train_steps_and_schedule(train_run *r);
/* Once the data position is known (after a resume, or at step 0): --epochs N ends where epoch N
 * starts and epoch milestones are placed where their epochs start, from that position. */
int train_epochs_place(train_run *r);

/* ---------------------------------------------------------------- checkpoints (train_ckpt.c) */

/* The checkpoint of `step` (optimizer steps of --accum-steps batches each; the data position
 * counts batches) in --checkpoint-dir: the model state, the data block (the position after `step`
 * and the normalization in use) and the run record r->data.rec; then, with --keep-checkpoints N,
 * rank 0 removes the files of earlier steps beyond the N - 1 newest (ckpt_prune). Collective. */
dt_status train_ckpt_save(train_run *r, long step);
/* After the failed save of `step` was reported (a full disk, a quota), on rank 0: which step the
 * run's newest earlier checkpoint in --checkpoint-dir holds, where --resume auto goes on, and the
 * steps that then run again. Local: rank 0 lists the directory; the other ranks return. */
void train_ckpt_report_unsaved(const train_run *r, long step);
/* --resume auto: loads the newest sound checkpoint of --checkpoint-dir into the model, optimizer
 * and scaler, r->first_step its step (0: none); its run record, when it has one, is checked
 * against r->data.rec (train_record_check: a changed data order mid-epoch is DT_ERR_INVALID_ARG);
 * when it holds a data block, the training and held-out sets take its normalization, and the data
 * position goes on from where it was (so a different rank count continues mid-epoch). Rank 0 says
 * what it did. Collective. */
dt_status train_ckpt_resume(train_run *r);
/* Before the data is opened, under --resume auto with --data normalized by computed statistics:
 * the figures of the checkpoint the resume will load into *out (ckpt_peek_figures; out->figures
 * NULL when none, else the caller frees it). Errors as ckpt_peek_figures'. Collective. */
dt_status train_ckpt_peek(const train_run *r, train_figures *out);

/* ---------------------------------------------------------------- --trace (train_trace.c) */

/* Once the resume is done (r->first_step known, --metrics opened): where the trace goes. A fresh
 * run writes --trace; a resumed one whose --trace path holds a file keeps it and writes its own to
 * the first free FILE.resumed-STEP.json (-2, -3 ... before the extension after that), and one
 * whose --trace-steps all lie at or before its first step writes none; rank 0 says which unless
 * --quiet. EXIT_OK, or the exit code after printing why (no name to write to). Collective. */
int train_trace_resumed(train_run *r);
/* The trace of a run that ended (finished, or stopped on every rank), merged on rank 0 and written
 * where train_trace_resumed chose, said unless --quiet. Collective. */
int train_trace_end(train_run *r);

/* ---------------------------------------------------------------- --bucket-mb auto (train_bucket_auto.c) */

/* The steps profiled before --bucket-mb auto chooses. */
enum { TRAIN_AUTO_STEPS = 3 };
/* With --bucket-mb auto on more than one rank: profiling on for the first steps. */
dt_status train_bucket_auto_begin(train_run *r);
/* After the steps_run-th step of this run: at TRAIN_AUTO_STEPS, the compute profiled and the
 * link measured (collective), the cap the step-time model finds best, the reducer rebuilt with
 * it, and rank 0's line saying so. Nothing at any other step or without --bucket-mb auto. */
dt_status train_bucket_auto_after_step(train_run *r, long steps_run);

/* ---------------------------------------------------------------- rank 0's report (train_report.c) */

/* The lines before the first step: the data, the schedule, the model, the gradients' buckets and
 * wire type, the precision, the memory per rank (the loader's line comes once it is made). */
void train_report_start(const train_run *r);
/* Rank 0's line on how batches are made, once the loader is (it decides where). */
void train_report_data(const train_run *r);
/* One log interval: the step line, the held-out line (eval_line, may be ""; neither with
 * --quiet), and the record to --metrics. logged: the optimizer steps in the interval. A record that
 * cannot be written (a full disk) loses no training: rank 0 warns once, naming the file, why and
 * the step from which records are missing, closes the file and writes no more records
 * (r->metrics_lost), and the run goes on. */
void train_report_interval(train_run *r, const metrics_record *rec, long logged, const char *eval_line);
/* The record alone to --metrics (when rank 0 has the file), with train_report_interval's handling
 * of a write that fails: for an interval whose step line is not printed (a loss that became NaN). */
void train_report_record(train_run *r, const metrics_record *rec);
/* Rank 0, at the end of a run whose --metrics lost records (r->metrics_lost): the warning again,
 * after the last lines, where it is seen. Nothing otherwise. */
void train_report_metrics_lost(const train_run *r);
/* A straggler found in an interval (rank 0, after the step line): the straggler line and, on the
 * interval that makes its streak STRAGGLER_PERSIST long, a WARN line naming it. */
void train_report_straggler(const train_run *r, const straggler_verdict *v);
/* Before the first step, under --quiet too: a WARN on rank 0 when fp32 gradients cross ranks as
 * fp16 with no loss scaler (--precision fp32 --grad-comm fp16), where the small ones round to zero. */
void train_report_wire(const train_run *r);
/* After the first step: a WARN on rank 0 when --step-overlap 1 was asked for and the step ran after
 * backward (a setting that needs the whole gradient kept it there), rather than ignoring it. */
void train_report_step_overlap(const train_run *r);
/* The last lines of a run that finished: the time, the throughput, whether the ranks' parameters
 * agree (agree > 0: identical, compared), the bad samples replaced (bad), the loss scale. */
void train_report_end(const train_run *r, int agree, double bad);
/* Loss scaling gave up at step: every rank calls it (it gathers which ranks and layers saw the
 * first non-finite gradients); rank 0 prints why. Collective. */
void train_report_numeric_stop(const train_run *r, long step);

#endif
