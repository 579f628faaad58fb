/*
 * cmd_data_convert.c - `dtrain data convert SRC DST`: SRC's split(s) as .dts shards (dts_write).
 * DST ending in .dts is one file, one split (--split, default train); any other DST is a directory
 * that receives train.dts and, when SRC has a test split, test.dts (--split all, default). Nothing
 * is written when a refusal is due, and an interrupted write leaves no temporary file.
 */
#include "launch/cmd_data.h"

#include "launch/cli.h"
#include "base/io_error.h"
#include "runtime/data/dts.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int ends_with(const char *s, const char *tail)
{
    const size_t n = strlen(s), t = strlen(tail);
    return n >= t && strcmp(s + n - t, tail) == 0;
}

/* The temporary file of the shard being written, for on_stop: prepared before dts_write, so the
 * handler only reads it. */
static char g_temp[4400];
static volatile sig_atomic_t g_temp_set;

/* SIGINT/SIGTERM mid-write: the temporary file (maybe gigabytes) is removed, then the signal ends
 * the process as it would have (unlink, signal and raise are async-signal-safe). */
static void on_stop(int sig)
{
    if (g_temp_set) unlink(g_temp);
    signal(sig, SIG_DFL);
    raise(sig);
}

static int convert_one(const ds_split *s, const char *dst, const data_args *a)
{
    dts_write_opts wo = {.dtype = a->dtype, .threads = a->threads, .force = a->force};
    dts_write_result r;
    printf("converting %s (%s, %s split, %zu sample%s of %dx%dx%d) -> %s\n", s->source, s->format, s->split, s->count,
           cli_s((long)s->count), s->c, s->h, s->w, dst);
    fflush(stdout);
    dts_temp_path(dst, g_temp, sizeof g_temp);
    g_temp_set = 1;
    dt_status st = dts_write(s, dst, &wo, &r);
    g_temp_set = 0;
    if (st) {
        cli_error("%s", dt_last_error());
        return st == DT_ERR_INVALID_ARG ? EXIT_USAGE : EXIT_FAIL;
    }
    const double mb = (double)r.bytes / 1e6;
    printf("  wrote %s: %zu sample%s of %dx%dx%d %s, %d classes, %llu bytes (%.1f MB) in %.2f s, %.1f MB/s, "
           "%.0f samples/s\n",
           dst, r.count, cli_s((long)r.count), s->c, s->h, s->w, dts_dtype_name(r.dtype), s->classes,
           (unsigned long long)r.bytes, mb, r.seconds, r.seconds > 0 ? mb / r.seconds : 0,
           r.seconds > 0 ? (double)r.count / r.seconds : 0);
    return EXIT_OK;
}

int cmd_data_convert(int argc, char **argv)
{
    data_args a;
    int rc = data_parse_args("data convert", argc, argv, 2, &a);
    if (rc) return rc < 0 ? EXIT_OK : rc;
    const char *src = a.pos[0], *dst = a.pos[1];
    /* A file past the size limit must fail with a message, not kill the process (SIGXFSZ). */
    signal(SIGXFSZ, SIG_IGN);
    struct sigaction sa = {.sa_handler = on_stop};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    const int one_file = ends_with(dst, ".dts");
    struct stat sb;
    /* One file is its own samples whatever the split asked for: --split test would pick nothing in
     * it, and into a directory would write a training file as DST/test.dts. */
    if (a.split && !strcmp(a.split, "test") && stat(src, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
        if (one_file)
            cli_error("--split test picks the test split of a dataset directory, and SRC %s is one file, which is "
                      "one split: drop --split",
                      src);
        else
            cli_error(
                "--split test picks the test split of a dataset directory, and SRC %s is one file, which is "
                "one split: it would be written as %s/test.dts whatever it holds. Drop --split, or, to keep "
                "this file as a test set, name the file to write (the directory must exist): dtrain data convert %s "
                "%s/test.dts",
                src, dst, src, dst);
        return EXIT_USAGE;
    }
    if (one_file) {
        if (a.split && strcmp(a.split, "all") == 0) {
            cli_error("DST %s is one .dts file, which holds one split: give --split train or test, or a directory "
                      "as DST for both",
                      dst);
            return EXIT_USAGE;
        }
        ds_split *s = NULL;
        if ((rc = data_open_split(src, &a, a.split ? a.split : "train", &s))) return rc;
        rc = convert_one(s, dst, &a);
        ds_close(s);
        return rc;
    }
    const char *want = a.split ? a.split : "all";
    ds_split *train = NULL, *test = NULL;
    char why[1200] = "";
    if (strcmp(want, "test") != 0 && (rc = data_open_split(src, &a, "train", &train))) return rc;
    if (strcmp(want, "test") == 0 && (rc = data_open_split(src, &a, "test", &test))) return rc;
    /* A test split that does not open fails the conversion before anything is written: a train.dts
     * alone would read as a set without one. */
    if (strcmp(want, "all") == 0 && data_open_test(src, &a, &test, why, sizeof why)) {
        data_test_error(src, why, "nothing was written; give --split train to convert the train split alone");
        ds_close(train);
        return EXIT_FAIL;
    }
    char tp[4200], sp[4200];
    snprintf(tp, sizeof tp, "%s/train.dts", dst);
    snprintf(sp, sizeof sp, "%s/test.dts", dst);
    /* Both refusals before anything is written, so a half-done pair is never left behind. */
    for (int k = 0; k < 2 && !a.force; k++)
        if ((k ? test : train) && stat(k ? sp : tp, &sb) == 0) {
            cli_error("%s exists: give --force to replace it, or another DST", k ? sp : tp);
            rc = EXIT_USAGE;
        }
    /* A test.dts of an earlier conversion beside the new train.dts would be read as its test split
     * (data info, train --data DIR): without --force refused, with --force removed once the new
     * train.dts is in place (a failed convert leaves the old pair as it was). */
    const int stale = !strcmp(want, "all") && !test && stat(sp, &sb) == 0;
    if (!rc && stale && !a.force) {
        cli_error("%s exists from an earlier conversion and %s has no test split (%s), so it would stay beside the "
                  "new train.dts as its test split: give --force to remove it, or another DST",
                  sp, src, why);
        rc = EXIT_USAGE;
    }
    if (!rc && mkdir(dst, 0777) != 0 && errno != EEXIST) {
        const int err = errno;
        char advice[IO_FIX_LEN];
        cli_error("cannot create the directory %s (DST is a directory unless it ends in .dts): %s: %s", dst,
                  strerror(err), io_error_fix(err, "shard", "DST", advice, sizeof advice));
        rc = EXIT_FAIL;
    }
    if (!rc && stat(dst, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
        cli_error("%s is a file and not a directory: name a .dts file DST ending in .dts, or give a directory", dst);
        rc = EXIT_USAGE;
    }
    if (!rc && train) rc = convert_one(train, tp, &a);
    if (!rc && test) rc = convert_one(test, sp, &a);
    if (!rc && !test && strcmp(want, "all") == 0) printf("  test: none (%s)\n", why);
    if (!rc && stale) {
        if (unlink(sp) == 0) {
            printf("  removed %s: it was left from an earlier conversion, and %s has no test split\n", sp, src);
        } else {
            cli_error("cannot remove %s, left from an earlier conversion (%s has no test split): %s; remove it by "
                      "hand, or it is read as the test split of %s",
                      sp, src, strerror(errno), dst);
            rc = EXIT_FAIL;
        }
    }
    ds_close(train);
    ds_close(test);
    return rc;
}
