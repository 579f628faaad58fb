/*
 * cli.h - what the `dtrain` subcommands share: common flags and exit codes.
 *
 * Exit codes: 0 success, 1 a run-time failure (the message says what and how to fix it), 2 bad
 * usage (unknown command, flag or value), 75 `train` stopped on SIGUSR1/SIGTERM with a checkpoint.
 */
#ifndef DT_LAUNCH_CLI_H
#define DT_LAUNCH_CLI_H

#include "dtrain.h"

#include <stdio.h>

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

struct option;

/* A command's own flags: getopt_long entries (val >= 256, NULL-terminated), and a handler that
 * takes one parsed flag and returns EXIT_OK or EXIT_USAGE after printing why. */
typedef struct cli_extra {
    const struct option *opts;
    int (*handle)(int val, const char *arg, void *ud);
    void *ud;
} cli_extra;

/* Parses the flags every command takes (--device, --pin, --timeout, --blas-threads) and the
 * command's own (extra may be NULL) from argv, on top of the defaults and DTRAIN_* variables.
 * Returns EXIT_OK, or EXIT_USAGE after printing why. */
int cli_parse(int argc, char **argv, const char *cmd, dt_config *cfg, const cli_extra *extra);
#define cli_parse_common(argc, argv, cmd, cfg) cli_parse(argc, argv, cmd, cfg, NULL)

/* Strict values of flags: the whole text must be a number within [lo, hi]. Print the error and
 * return EXIT_USAGE otherwise. */
int cli_int(const char *flag, const char *arg, long lo, long hi, int *out);
int cli_long(const char *flag, const char *arg, long lo, long hi, long *out);
int cli_float(const char *flag, const char *arg, double lo, double hi, float *out);

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

/* --loader-threads N|auto (auto = -1), and what auto means for ctx's placement: on a GPU, one
 * thread per core of the rank but one, 1 to 8; on the CPU 0 (the batch is made by the training
 * thread, leaving the cores to OpenBLAS). A given N stays. */
int cli_loader_threads(const char *arg, int *out);
int cli_loader_auto(const dt_ctx *ctx, int requested);
#define CLI_LOADER_DEPTH 3 /* batches: the one in use and two made ahead */

/* dt_init with the message and the job-wide abort that a failure needs; returns NULL on failure
 * after printing the error (the caller exits with EXIT_FAIL). */
dt_ctx *cli_init(const dt_config *cfg);
/* A crash (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) then prints the rank, the host, the faulting
 * address and where the program was as FILE+0xOFFSET for addr2line, and dies of the same signal
 * (crash.c). cli_init installs it before MPI_Init (rank -1: not known yet, host NULL:
 * gethostname) and sets MPI's rank and host after; a second call only updates those. */
void cli_crash_report_install(int rank, const char *host);

/* The overview: the commands and the options of every command (help.c). */
void cli_usage(FILE *f);
/* Prints the help screen of topic ("train", "bench", "bench gemm", ...) to f and returns 0, or
 * returns -1 when there is none; f NULL only looks it up. */
int cli_help(const char *topic, FILE *f);

/* The plural ending for a count: "1 rank", "2 ranks". */
static inline const char *cli_s(long n) { return n == 1 ? "" : "s"; }

/* Prints "dtrain: error: <msg>" to stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

int cmd_env(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_data(int argc, char **argv);       /* argv[0] = "data" */
int cmd_eval(int argc, char **argv);
int cmd_bench_gemm(int argc, char **argv); /* argv[0] = "gemm" */
int cmd_bench_step(int argc, char **argv); /* argv[0] = "step" */
int cmd_bench_data(int argc, char **argv); /* argv[0] = "data" */
int cmd_bench_reducer(int argc, char **argv); /* argv[0] = "reducer" */

#endif
