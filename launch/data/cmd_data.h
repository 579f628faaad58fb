/*
 * cmd_data.h - what the `dtrain data` commands share (cmd_data.c): their flags and the opens of a
 * dataset's splits. One file per command: cmd_data_info.c, cmd_data_convert.c, cmd_data_verify.c;
 * cmd_data.c dispatches to them. Private to launch/.
 */
#ifndef DT_LAUNCH_CMD_DATA_H
#define DT_LAUNCH_CMD_DATA_H

#include "runtime/data/reader.h"

#include <stddef.h>

/* verify: bad samples named per split unless --max-errors says otherwise (a terminal's worth; the
 * count covers them all). */
#define DATA_VERIFY_MAX_LISTED 20

typedef struct data_args {
    ds_open_opts open;
    int threads;
    const char *split; /* convert: "train", "test", "all" or NULL (by DST's name) */
    int dtype, force;
    int max_errors; /* verify: bad samples named per split, 0 = all */
    const char *pos[2];
    int npos;
} data_args;

/* The flags of `dtrain <cmd>` (cmd "data info", "data convert" or "data verify"; convert takes them
 * all, info and verify the reading ones) and npos positional arguments into *a (its strings point
 * into argv). EXIT_OK; -1 when --help was printed (the command ends with EXIT_OK); EXIT_USAGE,
 * printed, for a bad flag or count of arguments. */
int data_parse_args(const char *cmd, int argc, char **argv, int npos, data_args *a);

/* Opens split ("train" or "test") of path with a's options, and refuses an --input that does not
 * apply to its format. EXIT_OK with *out the caller's (ds_close); else *out NULL and the error
 * printed: EXIT_USAGE for a bad argument, EXIT_FAIL for a file that cannot be read or fails its
 * checks. */
int data_open_split(const char *path, const data_args *a, const char *split, ds_split **out);

/* The test split of path, opened with a's options. 0 when *test is the open split (the caller's)
 * or path has none (a directory without its files, or one file, which is one split): then *test
 * is NULL and *why (n bytes) says why. 1 when path has a test split that does not open (its files
 * are there: ds_has_test_split): *test is NULL and *why is the reason, naming the file; the caller
 * fails (data_test_error). Prints nothing. */
int data_open_test(const char *path, const data_args *a, ds_split **test, char *why, size_t n);

/* Prints the error for a test split of path that does not open (data_open_test returned 1): why
 * is its reason, then what the command's user can do. */
void data_test_error(const char *path, const char *why, const char *then);

/* The commands; argv[0] is the command's name ("info", "convert", "verify"). Each returns the
 * process's exit code. */
int cmd_data_info(int argc, char **argv);    /* cmd_data_info.c */
int cmd_data_convert(int argc, char **argv); /* cmd_data_convert.c */
int cmd_data_verify(int argc, char **argv);  /* cmd_data_verify.c */

#endif
