/*
 * cli.h - what the `dtrain` subcommands share: common flags and exit codes.
 *
 * Exit codes: 0 success, 1 a run-time failure (the message says what and how to fix it), 2 bad
 * usage (unknown command, flag or value).
 */
#ifndef DT_LAUNCH_CLI_H
#define DT_LAUNCH_CLI_H

#include "dtrain.h"

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

/* Parses the flags every command takes (--device, --pin, --timeout, --blas-threads) from argv,
 * on top of the defaults and DTRAIN_* variables. Returns EXIT_OK, or EXIT_USAGE after printing why. */
int cli_parse_common(int argc, char **argv, const char *cmd, dt_config *cfg);

/* dt_init with the message and the job-wide abort that a failure needs; returns NULL on failure
 * after printing the error (the caller exits with EXIT_FAIL). */
dt_ctx *cli_init(const dt_config *cfg);

/* Prints "dtrain: error: <msg>" to stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

int cmd_env(int argc, char **argv);

#endif
