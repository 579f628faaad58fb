/*
 * cli.h - what the `dtrain` subcommands share: common flags and exit codes (cli.c), flag values
 * (cli_values.c), paths (cli_paths.c), error messages (cli_error.c), the prologue
 * and epilogue of a command that runs on the job (prologue.c), the help screens (help.c).
 *
 * Exit codes: 0 success, 1 a run-time failure (the message says what and how to fix it), 2 bad
 * usage (unknown command, flag or value; an input path that is not there or may not be read:
 * cli_input_exit), 75 `train` stopped on SIGUSR1/SIGTERM with a checkpoint,
 * 143 `train` stopped so with no --checkpoint-dir (nothing saved), 130 / 129 `train` stopped on
 * SIGINT / SIGHUP (checkpoint written when there is a --checkpoint-dir; train_stop.c).
 */
#ifndef DT_LAUNCH_CLI_H
#define DT_LAUNCH_CLI_H

#include "dtrain.h"

#include <stdio.h>

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

struct option;

/* A command's own flags: getopt_long entries (val >= 256, NULL-terminated), and a handler that
 * takes one parsed flag and returns EXIT_OK or EXIT_USAGE after printing why. check (may be NULL)
 * is cli_start's: the command's checks of its flags together, once all are parsed and before
 * dt_init, so a refused command starts nothing; it may edit cfg, and returns EXIT_OK or
 * EXIT_USAGE after printing why. Both get ud. */
typedef struct cli_extra {
    const struct option *opts;
    int (*handle)(int val, const char *arg, void *ud);
    void *ud;
    int (*check)(dt_config *cfg, void *ud);
} cli_extra;

/* Parses the flags every command takes (--device, --pin, --timeout, --blas-threads) and the
 * command's own (extra may be NULL) from argv, on top of the defaults and DTRAIN_* variables.
 * Returns EXIT_OK, or EXIT_USAGE after printing why. */
int cli_parse(int argc, char **argv, const char *cmd, dt_config *cfg, const cli_extra *extra);
#define cli_parse_common(argc, argv, cmd, cfg) cli_parse(argc, argv, cmd, cfg, NULL)

/* The error for the flag getopt_long just refused with '?' (call it at once, with getopt_long's argv
 * and the option table it was given): an unknown name, with the closest of opts when one is a
 * slip away ("did you mean --batch?"); an abbreviation that fits several ("ambiguous: it could
 * be ..."); or a value given to a flag that takes none. Ends with "(see dtrain help CMD)". Every
 * getopt_long parser of the commands uses it, so that all say the same. */
void cli_unknown_option(int argc, char **argv, const char *cmd, const struct option *opts);

/* Strict values of flags: the whole text must be a number within [lo, hi]. Print the error and
 * return EXIT_USAGE otherwise. */
int cli_int(const char *flag, const char *arg, long lo, long hi, int *out);
int cli_long(const char *flag, const char *arg, long lo, long hi, long *out);
int cli_float(const char *flag, const char *arg, double lo, double hi, float *out);
/* A byte count: digits, then at most one of K, M, G (either case, powers of 1024), 1 to max (a
 * whole number of GiB); examples go into the error message. *out is written only on success. */
int cli_bytes(const char *flag, const char *arg, unsigned long long max, const char *examples, unsigned long long *out);

/* A floating-point dt_dtype by its dt_dtype_name (fp32, fp16, bf16); DT_U8, which nothing reduces,
 * is refused with the others. */
int cli_float_dtype(const char *flag, const char *arg, dt_dtype *out);

/* A comma-separated list: calls each(item) for every item in order (items are NUL-terminated
 * copies); each prints its own error and returns EXIT_USAGE to stop. An empty list, more than max
 * items or a text over 511 characters is an error naming the flag. */
int cli_list(const char *flag, const char *arg, int max, int (*each)(const char *item, void *ud), void *ud);

/* The data flags the commands share: --augment crop:P,flip (either or both, any order, or none),
 * --normalize none|unit|standard (a dt_normalize), --cifar100-labels fine|coarse (1: coarse). */
int cli_augment(const char *arg, int *crop_pad, int *flip);
int cli_normalize(const char *arg, int *out);
int cli_cifar100_labels(const char *arg, int *coarse);
/* --bad-samples fail|skip (1: skip); skip_means says what skip does in the command, for the refusal
 * (training replaces the sample, an evaluation leaves it out). */
int cli_bad_samples(const char *arg, const char *skip_means, int *skip);
/* --clip-grad-norm F: 0 (off) to 1e30, or inf (+infinity: the norm reported, nothing clipped, as
 * torch's clip_grad_norm_(max_norm=inf) is used to log it). */
int cli_clip_grad_norm(const char *arg, double *out);

/* --loader-threads N|auto (auto = -1), and what auto means for ctx's placement: on a GPU, one
 * thread per core of the rank but one, 1 to CLI_LOADER_MAX_AUTO; on the CPU 0 (the batch is made
 * by the training thread, leaving the cores to OpenBLAS). A given N stays. */
int cli_loader_threads(const char *arg, int *out);
/* --step-overlap auto|1|0 (dt_step_overlap). */
int cli_step_overlap(const char *arg, dt_step_overlap *out);
/* --graphs auto|1|0 (dt_graphs). */
int cli_graphs(const char *arg, dt_graphs *out);
/* --fused-relu 1|0 (dt_model_set_fused_relu). */
int cli_fused_relu(const char *arg, int *out);
/* --synthetic-on auto|host|device (dt_synthetic_on). */
int cli_synthetic_on(const char *arg, dt_synthetic_on *out);
/* --synthetic-on device on a rank placed on the CPU: EXIT_USAGE after cli_error says why, as
 * dt_loader_create would (synthetic_on.c), else EXIT_OK. For a command to refuse it in an exchange
 * it makes anyway (cli_agree_failure), before its loaders. */
int cli_synthetic_on_check(const dt_placement *pl, dt_synthetic_on on);
int cli_loader_auto(const dt_ctx *ctx, int requested);
#define CLI_LOADER_MAX_AUTO 32
#define CLI_LOADER_DEPTH 3 /* batches: the one in use and two made ahead */

/* Whether a and b name one file: by st_dev/st_ino when both exist (a hard link, a link to it),
 * else by path once the parent directory is resolved (realpath: "./a", "d/../a" and a symlinked
 * directory meet; an unresolvable one compares as written). */
int cli_same_file(const char *a, const char *b);
/* The exit code of a command whose input path (as the command line names it) failed to open with
 * s: EXIT_USAGE for DT_ERR_INVALID_ARG, and for DT_ERR_IO when the path does not exist (or a
 * directory on its way does not) or this user may not read it: an input refused before any work,
 * which the command (or the file's permissions) must change; EXIT_FAIL otherwise (a file that is
 * there but fails to read or fails its checks, out of memory). */
int cli_input_exit(dt_status s, const char *path);
/* Rank 0's verdict on what only it checks (a path it alone writes): why (empty when good) goes
 * from rank 0 to every rank, and rank 0 prints it; *refused says whether it was not empty, so that
 * every rank stops together. Returns the broadcast's status. Collective. */
dt_status cli_rank0_verdict(dt_ctx *ctx, char *why, size_t len, int *refused);

/* ---------------------------------------------------------------- the prologue (prologue.c) */

/* Before anything else: restarts the program once (execv, the same arguments) where OpenBLAS
 * started badly: with a better OPENBLAS_CORETYPE when it chose kernels below this CPU (unless the
 * user set OPENBLAS_CORETYPE, or DTRAIN_BLAS_COREFIX=0), and with OPENBLAS_NUM_THREADS=1 when a
 * memory limit is in force (ulimit -v or -d) and it started a pool of threads, whose buffers
 * could then not be taken in time (the user's value is given back after the restart). Returns
 * when there is nothing to fix or exec failed, with a warning. */
void cli_blas_restart(char **argv);
/* Blocks SIGTERM, SIGUSR1, SIGINT and SIGHUP, the signals that ask `dtrain train` to stop: the
 * dtrain program runs it from .preinit_array (main.c), after the libraries are loaded and before
 * their constructors run, which in a CUDA build take 50 ms and more (cuBLAS's); a signal arriving
 * then waits, pending, for train's handler instead of ending the process with nothing said. The
 * mask and the pending signals survive cli_blas_restart's exec. Its arguments are unused. */
void cli_signals_block(int argc, char **argv, char **envp);
/* Unblocks them: main calls it for every command but train, which calls it once its stop handlers
 * are in place (train_stop_install), so a signal that came meanwhile then acts as it would have.
 * A mask inherited with them blocked is not kept (a blocked SIGTERM would lose the checkpoint). */
void cli_signals_unblock(void);

/* A command running on the job: its context (the command finalizes it, with cli_finish) and this
 * rank's placement. */
typedef struct cli_job {
    dt_ctx *ctx;
    dt_placement pl;
    int rank, world;
    /* Read before dt_init (Open MPI's singleton MPI_Init exports OMPI_* variables, which would hide
     * it after): the task count of the SLURM job this process runs outside any srun step of, 0
     * when none (topo_job_tasks_outside_step), and the variable it came from. */
    int job_tasks;
    const char *job_tasks_var;
} cli_job;

/* The prologue of a command that runs on the job: cli_parse into *cfg, extra->check, then
 * cli_begin and cli_warn_alone. Returns EXIT_OK with *job filled, or the exit code after printing why: EXIT_USAGE
 * before dt_init (nothing started), EXIT_FAIL when dt_init failed (the job is being aborted). */
int cli_start(int argc, char **argv, const char *cmd, dt_config *cfg, const cli_extra *extra, cli_job *job);
/* The second half of cli_start, for a command whose checks before dt_init hold resources (train):
 * dt_init with the crash report, the message and the job-wide abort a failure needs, then this
 * rank's placement into *job. EXIT_OK, or EXIT_FAIL after printing the error. */
int cli_begin(const dt_config *cfg, cli_job *job);
/* Warns once on stderr when job runs alone (a world of 1) in a batch script or an salloc shell of a
 * SLURM job with several tasks (job->job_tasks), naming the count and the fix (srun --mpi=pmix). cli_start calls it for the commands that run on the job, train after its
 * cli_begin; doctor reports it in its launch.launcher row instead. */
void cli_warn_alone(const cli_job *job);
/* The epilogue: dt_finalize(ctx); returns rc, or EXIT_FAIL after printing why finalize failed. */
int cli_finish(dt_ctx *ctx, int rc);
/* The end of a command that failed (rc, its error printed) after dt_init. shared 1: every rank
 * knows of the failure and ends on it (it came out of a verdict every rank got, status_shared):
 * dt_finalize, so each process exits with its own code and message, without MPI_Abort's banner,
 * and rc is returned; a refused dt_finalize (something still made on ctx) falls back to the abort.
 * shared 0: this rank may have failed alone, so its peers must not wait for it: dt_abort_job, which
 * returns only in a world of one rank (MPI finalized), and rc is returned. Either way ctx is gone
 * when it returns: the caller frees only its own memory, and must not call dt_finalize. */
int cli_end_failed(dt_ctx *ctx, int rc, int shared);
/* A library failure s after dt_init, right where the call returned it: prints "[what: ]<last
 * error> (<status>)" (what may be NULL: what failed, when the last error does not say) and ends as
 * cli_end_failed, shared when status_shared(s); returns the exit code, EXIT_USAGE for
 * DT_ERR_INVALID_ARG and EXIT_FAIL otherwise. The caller must hold nothing made on ctx (else the
 * job is aborted) and must not call dt_finalize. */
int cli_fail(dt_ctx *ctx, dt_status s, const char *what);
/* The one wording of a library failure s, which the tests and users grep: "[what: ]<last error>
 * (<status>)" (what may be NULL) into buf, cut to its n bytes; returns buf. For a message that
 * goes into an exchange (cli_agree_failure) rather than straight to stderr. */
const char *cli_status_text(char *buf, size_t n, const char *what, dt_status s);
/* cli_error of cli_status_text's line: this rank's own report of s, named by rank. */
void cli_status_error(const char *what, dt_status s);

/* A crash (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) then prints the rank, the host, the faulting
 * address and where the program was as FILE+0xOFFSET for addr2line, and dies of the same signal
 * (crash.c). cli_begin installs it before MPI_Init (rank -1: not known yet, host NULL:
 * gethostname) and sets MPI's rank and host after; a second call only updates those. */
void cli_crash_report_install(int rank, const char *host);

/* ---------------------------------------------------------------- help (help.c) */

/* The overview: the commands and the options of every command. */
void cli_usage(FILE *f);
/* Prints the help screen of topic ("train", "bench", "bench gemm", ...) to f and returns 0, or
 * returns -1 when there is none; f NULL only looks it up. */
int cli_help(const char *topic, FILE *f);

/* The plural ending for a count: "1 rank", "2 ranks". */
static inline const char *cli_s(long n) { return n == 1 ? "" : "s"; }

/* Prints "dtrain: error: <msg>" to stderr, followed by " (rank R of W, on HOST)" once
 * cli_error_identity has named a world of several ranks. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* As cli_error, without "(rank R of W, on HOST)": for a failure every rank of the job has alike,
 * said once for all of them by one rank. */
void cli_error_job(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* 1 when the failure s just returned is another rank's, reported here by the exchange that told
 * every rank of it (status_shared and status_from_peer): the rank that met it prints its own
 * message and every rank ends on its own, so this rank's "failed on rank R: read its message"
 * would only repeat it once per rank (63 lines at 64 ranks, the cause somewhere among them). */
int cli_peer_failure(dt_status s);
/* From cli_error_capture(buf, n) until cli_error_capture(NULL, 0), cli_error keeps its messages
 * in buf (joined by "; ", cut at n) instead of printing them: for a step every rank runs on its
 * own, whose failure cli_agree_failure then says once for all the ranks that met it. */
void cli_error_capture(char *buf, size_t n);
/* Collective: after a step each rank ran on its own (opening the data), every rank learns every
 * rank's outcome. rc is this rank's (EXIT_OK or the exit code of its failure), why its captured
 * message (may be empty when it was printed already). Returns EXIT_OK when every rank succeeded;
 * else the failure's exit code on every rank, with *shared 1 (each rank may finalize: none waits
 * in a collective): a message that every failing rank has alike is printed once, by the lowest of
 * them, with how many ranks met it; different messages by each failing rank. A failed exchange
 * prints this rank's message and returns with *shared 0 (the job must be aborted). */
int cli_agree_failure(dt_ctx *ctx, int rc, const char *why, int *shared);
/* Collective: a failure s that every rank returned from the same call (status_shared(s)), said as
 * cli_agree_failure says a step's: once where the ranks that met it have it alike ("what: <message>
 * (<status>)", what may be NULL); a rank that has it from a peer (cli_peer_failure) says nothing.
 * Returns the exit code (EXIT_USAGE for DT_ERR_INVALID_ARG, else EXIT_FAIL; a peer-informed rank
 * the first failing rank's), *shared as cli_agree_failure's. Call it only with a shared s, on
 * every rank: it is one more exchange over ctx. */
int cli_say_shared_failure(dt_ctx *ctx, dt_status s, const char *what, int *shared);

/* ------------------------------------------- flags that must agree (flags_text.c, flags_agree.c) */

/* The text of a command's flags that every rank must share, one "--flag value" line each, made from
 * the parsed values (so "--lr 0.10" and "--lr 0.1" agree). Texts of any length go last: a text cut
 * at the buffer's end then cuts no number. */
enum { CLI_FLAGS_TEXT = 4096 };
typedef struct cli_flags_text {
    char s[CLI_FLAGS_TEXT];
    size_t len;
} cli_flags_text;
/* One line, printf-style; a line past the buffer's end is cut there (len stays below the size). */
void cli_flags_line(cli_flags_text *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A path flag's line: whether it is given ("--data PATH" or "no --data"), not the path, since a
 * node may read its own copy under another name. */
void cli_flags_path(cli_flags_text *a, const char *flag, const char *path);
/* The shortest text of v that reads back as v (as a float when is_float): "0.01", not
 * 0.00999999978, so equal texts mean equal values. Returns buf. */
const char *cli_flags_num(char buf[32], double v, int is_float);
/* cli_flags_num's text of a float (fp32) or a double setting, in a buffer that lives to the end of
 * the enclosing block: for the argument lists of cli_flags_line. */
#define CLI_F32_TEXT(v) cli_flags_num((char[32]){0}, (double)(v), 1)
#define CLI_F64_TEXT(v) cli_flags_num((char[32]){0}, (double)(v), 0)
/* Collective, before the command makes anything: text compared across the ranks (one
 * broadcast of rank 0's text and one small allreduce; where it differs, one broadcast more and
 * cli_say_shared_failure's exchange). EXIT_OK where every rank has rank 0's
 * text (and in a world of 1); else EXIT_USAGE after saying once, for all the ranks, "rank R was
 * given '<its line>' where rank 0 was given '<rank 0's line>' [(N ranks differ from rank 0)]: every
 * rank of a job must get the same <what>; start them all with one command line", with *shared 1.
 * A failed exchange says why and returns its code (*shared as status_shared). End a failure with
 * cli_end_failed(ctx, rc, *shared). */
int cli_flags_agree(dt_ctx *ctx, const char *what, const cli_flags_text *text, int *shared);

/* For the commands that run in one process: EXIT_OK when the launcher's variables say one
 * process (or none) was started, else EXIT_USAGE after an error naming the variable, the count
 * and what_each_would_do (one_process.c). */
int cli_one_process(const char *command, const char *what_each_would_do);
/* Names this process in cli_error's messages from now on (cli_begin calls it after dt_init). */
void cli_error_identity(int rank, int world, const char *host);
/* The end of every command (close_stdout.c): flushes and closes stdout; when output was lost (a
 * full disk, an I/O error) prints "dtrain: error: writing standard output failed: <cause>: <fix>"
 * and returns rc, or EXIT_FAIL when rc was EXIT_OK. A reader that went away (EPIPE) and a closed
 * stdout with nothing to write are no error. Nothing may write to stdout after it. */
int cli_close_stdout(int rc);

/* The commands: argv[0] is the command's name, EXIT_* returned. */
int cmd_help(int argc, char **argv); /* argv[0] = "help" */
int cmd_version(int argc, char **argv);
int cmd_env(int argc, char **argv);
int cmd_doctor(int argc, char **argv); /* launch/doctor/cmd_doctor.c */
int cmd_train(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_data(int argc, char **argv); /* argv[0] = "data" */
int cmd_eval(int argc, char **argv);
int cmd_plot(int argc, char **argv);          /* argv[0] = "plot" */
int cmd_model_perf(int argc, char **argv);    /* argv[0] = "model-perf"; launch/perfmodel/ */
int cmd_bench_gemm(int argc, char **argv);    /* argv[0] = "gemm" */
int cmd_bench_step(int argc, char **argv);    /* argv[0] = "step" */
int cmd_bench_data(int argc, char **argv);    /* argv[0] = "data" */
int cmd_bench_reducer(int argc, char **argv); /* argv[0] = "reducer" */

#endif
