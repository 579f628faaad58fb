/*
 * train_stop.c - the signals that stop `dtrain train` cleanly (train_run.h): SIGUSR1 and SIGTERM
 * (a scheduler's: the time limit, preemption, scancel), SIGINT (Ctrl-C) and SIGHUP (the terminal
 * gone). Each only asks for a stop; the ranks agree on it at the end of a step (a signal reaches
 * them at different times, or only some of them), so that every rank stops after the same one and
 * the checkpoint holds it. A second SIGINT ends the process at once, as Ctrl-C twice does in most
 * interactive programs. The signals are blocked from the program's start until the handlers are
 * in place (cli_signals_block), so none arriving before is lost.
 */
#include "launch/train/train_run.h"

#include "launch/cli.h"
#include "runtime/checkpoint/ckpt_temps.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The stop signals in rising precedence: when the ranks got different ones, the last wins, so an
 * interactive stop (INT, HUP) is never taken for a preemption to requeue. */
static const int stop_sigs[] = {SIGUSR1, SIGTERM, SIGHUP, SIGINT};
enum { NSTOP = sizeof stop_sigs / sizeof *stop_sigs };

/* One flag per signal, each written only by its own handler: no read-modify-write to race. Atomic,
 * not volatile sig_atomic_t: the handler runs on whichever thread the kernel hands a process's
 * signal to (a loader or communication thread as well as the main one, all started after the
 * handlers are in place), and volatile orders nothing between threads (C11 5.1.2.4: a data race).
 * A lock-free atomic is as safe in a handler (C11 7.14.1.1). */
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "the stop flags are set in a signal handler: they must be lock-free");
static atomic_int got[NSTOP];
/* What the first SIGINT says at once (a step may take long), written before the handler can run:
 * during the set-up (the data's scan, a resume: minutes at times) nothing is trained or saved, so
 * that note says so instead of promising a checkpoint. */
static char int_note[600];
static const char int_note_setup[] = "dtrain: SIGINT: stopping before the first step, once the set-up in progress "
                                     "ends (nothing is trained or saved); Ctrl-C again ends at once\n";
static atomic_int training;

static void on_stop_signal(int sig)
{
    /* The thread it interrupted may be between a failed call and its look at errno (a write to a
     * closed pipe): the calls below (sigaction, a write to a closed stderr) must not change it. */
    const int saved_errno = errno;
    int k = 0;
    while (k < NSTOP - 1 && stop_sigs[k] != sig) k++;
    if (sig == SIGINT &&
        (atomic_load(&got[0]) || atomic_load(&got[1]) || atomic_load(&got[2]) || atomic_load(&got[3]))) {
        /* A stop was asked for already: this Ctrl-C ends the process now, by the signal itself
         * (SIGINT is blocked in its handler, so the raise lands once the handler returns), and
         * the partial file of a save, a dump or a trace it cuts short goes with it. */
        ckpt_temps_remove();
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigaction(SIGINT, &dfl, NULL);
        raise(SIGINT);
        errno = saved_errno;
        return;
    }
    atomic_store(&got[k], 1);
    /* From the first stop request on, a write to a pipe whose reader is gone fails (EPIPE) instead
     * of ending the process by SIGPIPE: the signal that asks for the stop often ended the reader
     * too (`dtrain train | tee log` and Ctrl-C, which the terminal sends to both), and the next
     * line printed (the note below, a step's, the stop's) would kill the run before its checkpoint
     * or its last record. Before the stop request, `| head` still ends the run as it always did. */
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ign, NULL);
    if (sig == SIGINT) {
        const char *note = atomic_load(&training) ? int_note : int_note_setup;
        const ssize_t n = write(STDERR_FILENO, note, strlen(note));
        (void)n; /* nothing to do about a closed stderr */
    }
    errno = saved_errno;
}

void train_stop_install(const char *ckpt_dir)
{
    /* The note first: the handler may run as soon as the signals are unblocked below. */
    if (ckpt_dir)
        snprintf(int_note, sizeof int_note,
                 "dtrain: SIGINT: stopping after this step, with a checkpoint in %.400s; Ctrl-C again ends at once, "
                 "without it\n",
                 ckpt_dir);
    else
        snprintf(int_note, sizeof int_note,
                 "dtrain: SIGINT: stopping after this step (no --checkpoint-dir: nothing is saved); Ctrl-C again "
                 "ends at once\n");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    /* A stop is only noted here and taken at a step's end, so the call the signal lands in must go
     * on: without SA_RESTART a write blocked on a full pipe (`| less`, a slow `| tee`), a read of
     * a FIFO or a network file fails with EINTR, and stdio, zlib and libpng take that for an I/O
     * error (standard output reported lost, a data file called unreadable). */
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (int k = 0; k < NSTOP; k++) sigaddset(&sa.sa_mask, stop_sigs[k]);
    for (int k = 0; k < NSTOP; k++) {
        struct sigaction old;
        /* SIGINT and SIGHUP ignored when we start stay ignored: nohup, or a shell's background job
         * that a Ctrl-C at the terminal must not stop. */
        if ((stop_sigs[k] == SIGINT || stop_sigs[k] == SIGHUP) && sigaction(stop_sigs[k], NULL, &old) == 0 &&
            old.sa_handler == SIG_IGN)
            continue;
        sigaction(stop_sigs[k], &sa, NULL);
    }
    /* Blocked since the program started (cli_signals_block): one that came meanwhile runs the
     * handler now. */
    cli_signals_unblock();
}

void train_stop_training_begins(void) { atomic_store(&training, 1); }

dt_status train_stop_agree(train_run *r, int batch_failed, int *sig, int *batch_failures)
{
    /* The stop signals, then the ranks whose next batch failed, in one allreduce. */
    float v[NSTOP + 1];
    for (int k = 0; k < NSTOP; k++) v[k] = atomic_load(&got[k]) ? 1.0f : 0.0f;
    v[NSTOP] = batch_failed ? 1.0f : 0.0f;
    if (r->world > 1) {
        const dt_status s = dt_allreduce(r->ctx, v, NSTOP + 1, DT_F32, DT_SUM);
        if (s) return s;
    }
    if (batch_failures) *batch_failures = (int)v[NSTOP];
    *sig = 0;
    for (int k = NSTOP - 1; k >= 0 && !*sig; k--)
        if (v[k] > 0) {
            *sig = stop_sigs[k];
            r->stop_sig = stop_sigs[k];
            r->stop_own = atomic_load(&got[k]) != 0;
        }
    return DT_OK;
}

/* "SIGTERM" and so on. */
static const char *train_stop_name(int sig)
{
    return sig == SIGINT    ? "SIGINT"
           : sig == SIGHUP  ? "SIGHUP"
           : sig == SIGTERM ? "SIGTERM"
           : sig == SIGUSR1 ? "SIGUSR1"
                            : "a signal";
}

int train_stop_exit_code(const train_run *r)
{
    /* 128 + the signal, what it alone would have given: Ctrl-C or a lost terminal asked to stop,
     * not to be requeued, whatever was saved. */
    if (r->stop_sig == SIGINT || r->stop_sig == SIGHUP) return 128 + r->stop_sig;
    return r->t.ckpt_dir ? EXIT_PREEMPTED : EXIT_STOPPED_UNSAVED;
}

void train_stop_report(const train_run *r, long done, int before)
{
    if (r->rank != 0) return;
    const train_opts *t = &r->t;
    char what[48];
    snprintf(what, sizeof what, "%s%s", train_stop_name(r->stop_sig), r->stop_own ? "" : ", on another rank");
    if (before)
        printf("stopping before step %ld on a signal (%s): no step trained, nothing to save%s\n", done + 1, what,
               t->ckpt_dir ? "; continue with --resume auto" : "");
    else
        printf("stopping after step %ld on a signal (%s); %s%s%s\n", done, what,
               t->ckpt_dir ? "checkpoint in " : "no --checkpoint-dir: nothing saved", t->ckpt_dir ? t->ckpt_dir : "",
               t->ckpt_dir ? "; continue with --resume auto" : "");
    fflush(stdout);
}

void train_stop_report_last(const train_run *r, long done)
{
    if (r->rank != 0) return;
    printf("signal (%s%s) during the last step, %ld: training is complete%s%s; finishing the run\n",
           train_stop_name(r->stop_sig), r->stop_own ? "" : ", on another rank", done,
           r->t.ckpt_dir ? ", checkpoint in " : "", r->t.ckpt_dir ? r->t.ckpt_dir : "");
    fflush(stdout);
}
