/*
 * cmd_data_convert.c - `dtrain data convert SRC DST`: SRC's split(s) as .dts shards (dts_write).
 * DST ending in .dts is one file, one split (--split, default train); any other DST is a directory
 * that receives train.dts and, when SRC has a test split, test.dts (--split all, default). Nothing
 * is written when a refusal is due, and an interrupted write leaves no temporary file. The splits
 * of a directory are all-or-nothing: the room for all is checked first, each is written whole
 * under its temporary name, and they are renamed into place together only then (see commit_all).
 */
#include "launch/data/cmd_data.h"

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

/* The temporary files of the shards being written (train, test), for on_stop: prepared before
 * dts_write, so the handler only reads them. A set one may already be renamed or removed: an unlink
 * of a name that is gone does nothing. */
static char g_temp[2][4400];
static volatile sig_atomic_t g_temp_set[2];
/* DST when this convert made it (removed with the temporary files: it was not there before). */
static char g_made_dir[4200];
static volatile sig_atomic_t g_made_set;

/* The signals that end a convert (an interrupt, a kill, a closed terminal, a quit): each removes
 * the temporary files; commit_all holds them off while it renames. */
static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

/* A stop signal mid-write: the temporary files (maybe gigabytes) are removed, then the signal ends
 * the process as it would have (unlink, signal and raise are async-signal-safe). */
static void on_stop(int sig)
{
    for (int k = 0; k < 2; k++)
        if (g_temp_set[k]) unlink(g_temp[k]);
    if (g_made_set) rmdir(g_made_dir);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void temps_arm(int k, const char *dst)
{
    dts_temp_path(dst, g_temp[k], sizeof g_temp[k]);
    g_temp_set[k] = 1;
}

/* Removes the temporary files still there (a failure before the renames) and disarms them. */
static void temps_drop(void)
{
    for (int k = 0; k < 2; k++) {
        if (g_temp_set[k]) unlink(g_temp[k]);
        g_temp_set[k] = 0;
    }
}

/* Writes s to dst, or with keep set leaves it at dst's temporary file (slot k of g_temp) for
 * commit_all; *r is what was written, for report. */
static int convert_one(const ds_split *s, const char *dst, const data_args *a, int k, int keep, dts_write_result *r)
{
    dts_write_opts wo = {.dtype = a->dtype, .threads = a->threads, .force = a->force, .keep_temp = keep};
    printf("converting %s (%s, %s split, %zu sample%s of %dx%dx%d) -> %s\n", s->source, s->format, s->split, s->count,
           cli_s((long)s->count), s->c, s->h, s->w, dst);
    fflush(stdout);
    temps_arm(k, dst);
    dt_status st = dts_write(s, dst, &wo, r);
    if (!keep) g_temp_set[k] = 0;
    if (st) {
        cli_error("%s", dt_last_error());
        return st == DT_ERR_INVALID_ARG ? EXIT_USAGE : EXIT_FAIL;
    }
    return EXIT_OK;
}

static void report(const ds_split *s, const char *dst, const dts_write_result *r)
{
    const double mb = (double)r->bytes / 1e6;
    printf("  wrote %s: %zu sample%s of %dx%dx%d %s, %d classes, %llu bytes (%.1f MB) in %.2f s, %.1f MB/s, "
           "%.0f samples/s\n",
           dst, r->count, cli_s((long)r->count), s->c, s->h, s->w, dts_dtype_name(r->dtype), s->classes,
           (unsigned long long)r->bytes, mb, r->seconds, r->seconds > 0 ? mb / r->seconds : 0,
           r->seconds > 0 ? (double)r->count / r->seconds : 0);
}

/* The room for every shard before any is written: the filesystem must hold them all at once
 * (each is whole under its temporary name before the first is renamed; a file they replace is
 * freed only by its rename). */
static int check_room(ds_split *const split[2], const char *const path[2], const char *dst, const data_args *a)
{
    dts_write_opts wo = {.dtype = a->dtype};
    uint64_t need[2] = {0, 0}, avail;
    for (int k = 0; k < 2; k++)
        if (split[k]) need[k] = dts_file_bytes(split[k], &wo);
    if (dts_free_bytes(dst, &avail) != 0 || avail >= need[0] + need[1]) return EXIT_OK;
    char what[9000];
    if (split[0] && split[1])
        snprintf(what, sizeof what, "%s (%llu bytes) and %s (%llu bytes) need %llu bytes", path[0],
                 (unsigned long long)need[0], path[1], (unsigned long long)need[1],
                 (unsigned long long)(need[0] + need[1]));
    else
        snprintf(what, sizeof what, "%s needs %llu bytes", path[split[0] ? 0 : 1],
                 (unsigned long long)(need[0] + need[1]));
    cli_error("cannot convert into %s: %s and its filesystem has %llu free; nothing was written: free space there or "
              "give another DST",
              dst, what, (unsigned long long)avail);
    return EXIT_FAIL;
}

/* Renames the finished temporary files into place, test.dts first: a crash between the two renames
 * (the one window left where a convert can tear) then leaves a test.dts without a train.dts, which
 * no command reads as a dataset, rather than a train.dts that reads as one without a test split.
 * (Over an earlier pair, with --force, that window holds the new test.dts beside the old
 * train.dts.) The caller holds the stop signals off meanwhile. A rename that fails after the first
 * one undoes that one where it made a new file; a file it replaced cannot come back, and is named. */
static int commit_all(ds_split *const split[2], const char *const path[2], const int existed[2], int force)
{
    int placed = -1;
    for (int k = 1; k >= 0; k--) {
        if (!split[k]) continue;
        const dt_status st = dts_commit(path[k], force);
        g_temp_set[k] = 0;
        if (st == DT_OK) {
            placed = k;
            continue;
        }
        cli_error("%s", dt_last_error());
        if (placed >= 0 && !existed[placed] && unlink(path[placed]) == 0)
            fprintf(stderr, "  removed the new %s again: nothing was written\n", path[placed]);
        else if (placed >= 0)
            fprintf(stderr, "  %s is the new one already, beside the old %s: run the convert again\n", path[placed],
                    path[k]);
        return st == DT_ERR_INVALID_ARG ? EXIT_USAGE : EXIT_FAIL;
    }
    return EXIT_OK;
}

/* The stop signals' handler installed (each removes the temporary files), their set into *stops
 * for the renames to hold off; a file past the size limit fails with a message instead of killing
 * the process (SIGXFSZ). */
static void stops_install(sigset_t *stops)
{
    signal(SIGXFSZ, SIG_IGN);
    struct sigaction sa = {.sa_handler = on_stop};
    sigemptyset(&sa.sa_mask);
    sigemptyset(stops);
    for (size_t i = 0; i < sizeof stop_signals / sizeof *stop_signals; i++) {
        sigaction(stop_signals[i], &sa, NULL);
        sigaddset(stops, stop_signals[i]);
    }
}

/* One file is its own samples whatever the split asked for: --split test would pick nothing in it,
 * and into a directory would write a training file as DST/test.dts. EXIT_USAGE then. */
static int refuse_test_of_one_file(const char *src, const char *dst, const data_args *a, int one_file)
{
    struct stat sb;
    if (!a->split || strcmp(a->split, "test") != 0 || stat(src, &sb) != 0 || S_ISDIR(sb.st_mode)) return EXIT_OK;
    if (one_file)
        cli_error("--split test picks the test split of a dataset directory, and SRC %s is one file, which is "
                  "one split: drop --split",
                  src);
    else
        cli_error("--split test picks the test split of a dataset directory, and SRC %s is one file, which is "
                  "one split: it would be written as %s/test.dts whatever it holds. Drop --split, or, to keep "
                  "this file as a test set, name the file to write (the directory must exist): dtrain data convert %s "
                  "%s/test.dts",
                  src, dst, src, dst);
    return EXIT_USAGE;
}

/* DST ending in .dts: one split into one file. */
static int convert_to_file(const char *src, const char *dst, data_args *a)
{
    if (a->split && strcmp(a->split, "all") == 0) {
        cli_error("DST %s is one .dts file, which holds one split: give --split train or test, or a directory "
                  "as DST for both",
                  dst);
        return EXIT_USAGE;
    }
    ds_split *s = NULL;
    int rc = data_open_split(src, a, a->split ? a->split : "train", &s);
    if (rc) return rc;
    dts_write_result r;
    rc = convert_one(s, dst, a, 0, 0, &r);
    if (!rc) report(s, dst, &r);
    ds_close(s);
    return rc;
}

/* The splits a directory DST receives (want: all, train or test) opened into *train and *test; a
 * test split that does not open fails the conversion before anything is written (a train.dts alone
 * would read as a set without one), and with none why says so. */
static int open_splits(const char *src, data_args *a, const char *want, ds_split **train, ds_split **test, char *why,
                       size_t n)
{
    int rc;
    if (strcmp(want, "test") != 0 && (rc = data_open_split(src, a, "train", train))) return rc;
    if (strcmp(want, "test") == 0 && (rc = data_open_split(src, a, "test", test))) return rc;
    if (strcmp(want, "all") == 0 && data_open_test(src, a, test, why, n)) {
        data_test_error(src, why, "nothing was written; give --split train to convert the train split alone");
        ds_close(*train);
        *train = NULL;
        return EXIT_FAIL;
    }
    return EXIT_OK;
}

/* Every refusal of a directory DST before anything is written, so a half-done pair is never left
 * behind; then DST made when it is not there (*made: removed again if the convert fails). *stale:
 * a test.dts of an earlier conversion that the new train.dts would be read with (data info, train
 * --data DIR): refused without --force, removed with it once the new train.dts is in place. */
static int prepare_dir(const char *src, const char *dst, const data_args *a, ds_split *const split[2],
                       const char *const path[2], const char *why, int *stale, int *made)
{
    struct stat sb;
    int rc = EXIT_OK;
    for (int k = 0; k < 2 && !a->force; k++)
        if (split[k] && stat(path[k], &sb) == 0) {
            cli_error("%s exists: give --force to replace it, or another DST", path[k]);
            rc = EXIT_USAGE;
        }
    *stale = !strcmp(a->split ? a->split : "all", "all") && !split[1] && stat(path[1], &sb) == 0;
    if (!rc && *stale && !a->force) {
        cli_error("%s exists from an earlier conversion and %s has no test split (%s), so it would stay beside the "
                  "new train.dts as its test split: give --force to remove it, or another DST",
                  path[1], src, why);
        rc = EXIT_USAGE;
    }
    snprintf(g_made_dir, sizeof g_made_dir, "%s", dst);
    if (!rc && mkdir(dst, 0777) == 0)
        *made = g_made_set = 1;
    else if (!rc && errno != EEXIST) {
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
    return rc;
}

/* Any other DST: a directory receiving train.dts and test.dts, all or nothing (see commit_all). */
static int convert_to_dir(const char *src, const char *dst, data_args *a, const sigset_t *stops)
{
    const char *want = a->split ? a->split : "all";
    ds_split *train = NULL, *test = NULL;
    char why[1200] = "";
    int rc = open_splits(src, a, want, &train, &test, why, sizeof why);
    if (rc) return rc;
    char tp[4200], sp[4200];
    snprintf(tp, sizeof tp, "%s/train.dts", dst);
    snprintf(sp, sizeof sp, "%s/test.dts", dst);
    ds_split *const split[2] = {train, test};
    const char *const path[2] = {tp, sp};
    int stale = 0, made = 0;
    rc = prepare_dir(src, dst, a, split, path, why, &stale, &made);
    struct stat sb;
    const int existed[2] = {stat(tp, &sb) == 0, stat(sp, &sb) == 0};
    dts_write_result res[2];
    if (!rc) rc = check_room(split, path, dst, a);
    int tried = 0;
    for (int k = 0; k < 2 && !rc; k++)
        if (split[k]) rc = convert_one(split[k], path[k], a, k, 1, &res[k]), tried = 1;
    if (rc && tried)
        fprintf(stderr, "  nothing was put into %s: the splits go in together or not at all, once each is whole\n",
                dst);
    /* Every shard is whole: the renames (and the removal of a stale test.dts) run with the stop
     * signals held, so only a crash can come between them. */
    sigset_t unblocked;
    sigprocmask(SIG_BLOCK, stops, &unblocked);
    if (!rc) rc = commit_all(split, path, existed, a->force);
    if (!rc && stale && unlink(sp) != 0) {
        cli_error("cannot remove %s, left from an earlier conversion (%s has no test split): %s; remove it by "
                  "hand, or it is read as the test split of %s",
                  sp, src, strerror(errno), dst);
        rc = EXIT_FAIL;
    }
    temps_drop();
    if (rc && made) rmdir(dst);
    g_made_set = 0;
    sigprocmask(SIG_SETMASK, &unblocked, NULL);
    for (int k = 0; k < 2 && !rc; k++)
        if (split[k]) report(split[k], path[k], &res[k]);
    if (!rc && !test && strcmp(want, "all") == 0) printf("  test: none (%s)\n", why);
    if (!rc && stale)
        printf("  removed %s: it was left from an earlier conversion, and %s has no test split\n", sp, src);
    ds_close(train);
    ds_close(test);
    return rc;
}

int cmd_data_convert(int argc, char **argv)
{
    data_args a;
    int rc = data_parse_args("data convert", argc, argv, 2, &a);
    if (rc) return rc < 0 ? EXIT_OK : rc;
    const char *src = a.pos[0], *dst = a.pos[1];
    sigset_t stops;
    stops_install(&stops);
    const int one_file = ends_with(dst, ".dts");
    if ((rc = refuse_test_of_one_file(src, dst, &a, one_file))) return rc;
    return one_file ? convert_to_file(src, dst, &a) : convert_to_dir(src, dst, &a, &stops);
}
