/*
 * cmd_data.c - `dtrain data info|convert|verify`: datasets read through the one reader interface
 * (runtime/data/reader.h), so every command works on every format.
 *   info PATH           per split: format, samples, shape, classes with their counts, value range,
 *                       per-channel mean and std (the figures `--normalize standard` will use)
 *   convert SRC DST     SRC's split(s) as .dts shards: DST ending in .dts is one file, one split
 *                       (--split, default train); any other DST is a directory that receives
 *                       train.dts and, when SRC has a test split, test.dts (--split all, default)
 *   verify PATH         reads every sample and label, and for .dts checks the payload CRC; goes on
 *                       past a bad sample and names each (the first --max-errors per split) with a
 *                       count per split, so one run finds them all
 * One process, no MPI: they only read and write files.
 */
#include "launch/cli.h"
#include "runtime/data/dts.h"
#include "runtime/data/reader.h"
#include "runtime/data/stats.h"
#include "base/parse.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { OPT_FORMAT = 256, OPT_CIFAR100_LABELS, OPT_THREADS, OPT_SPLIT, OPT_INPUT, OPT_DTYPE, OPT_FORCE, OPT_MAX_ERRORS };

/* Classes listed one by one up to this many; beyond, the smallest and largest counts. */
#define DATA_INFO_MAX_LISTED 20
/* verify: bad samples named per split unless --max-errors says otherwise (a terminal's worth; the
 * count covers them all). */
#define VERIFY_MAX_LISTED 20

typedef struct data_args {
    ds_open_opts open;
    int threads;
    const char *split; /* convert: "train", "test", "all" or NULL (by DST's name) */
    int dtype, force;
    int max_errors; /* verify: bad samples named per split, 0 = all */
    const char *pos[2];
    int npos;
} data_args;

/* Default threads: the machine's cores, up to 8 (beyond, reading is the disk's pace anyway). */
static int default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 8 ? 8 : (int)n;
}

/* --input CxHxW: three numbers 1..65535 joined by 'x', each read by the strict parser that every
 * flag uses ("3x 32x32", "+3x32x32" and "0x10x10" are refused, as by dtrain train --input). */
static int parse_input(const char *arg, ds_open_opts *o)
{
    int v[3] = {0, 0, 0}, n = 0, ok = strlen(arg) < 64;
    char buf[64];
    for (const char *p = arg; ok && n < 3; n++) {
        const char *x = strchr(p, 'x');
        const size_t len = x ? (size_t)(x - p) : strlen(p);
        snprintf(buf, sizeof buf, "%.*s", (int)len, p);
        /* parse_int takes a sign, which a size never has. */
        ok = (n < 2) == (x != NULL) && buf[0] >= '0' && buf[0] <= '9' &&
             parse_int("--input", buf, 1, 65535, &v[n]) == DT_OK;
        p = x ? x + 1 : p + len;
    }
    if (!ok) {
        cli_error("--input '%s' is not CxHxW (three numbers 1..65535 joined by x, as 3x224x224)", arg);
        return EXIT_USAGE;
    }
    o->c = v[0], o->h = v[1], o->w = v[2];
    return EXIT_OK;
}

/* The flags of `data <cmd>`; convert takes them all, info and verify the reading ones. */
static int parse_args(const char *cmd, int argc, char **argv, int npos, data_args *a)
{
    static const struct option opts[] = {{"data-format", required_argument, NULL, OPT_FORMAT},
                                         {"cifar100-labels", required_argument, NULL, OPT_CIFAR100_LABELS},
                                         {"threads", required_argument, NULL, OPT_THREADS},
                                         {"split", required_argument, NULL, OPT_SPLIT},
                                         {"input", required_argument, NULL, OPT_INPUT},
                                         {"dtype", required_argument, NULL, OPT_DTYPE},
                                         {"force", no_argument, NULL, OPT_FORCE},
                                         {"max-errors", required_argument, NULL, OPT_MAX_ERRORS},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const int convert = strcmp(cmd, "data convert") == 0, verify = strcmp(cmd, "data verify") == 0;
    memset(a, 0, sizeof *a);
    a->threads = default_threads();
    a->max_errors = VERIFY_MAX_LISTED;
    optind = 1;
    opterr = 0;
    /* A leading ':' makes a missing value ':' rather than '?', so each error names its cause. */
    for (int c; (c = getopt_long(argc, argv, ":h", opts, NULL)) != -1;) {
        /* --input is the decode size of an image folder: info and verify need it too. */
        const int convert_only = c == OPT_SPLIT || c == OPT_DTYPE || c == OPT_FORCE;
        if ((!convert && convert_only) || (!verify && c == OPT_MAX_ERRORS)) {
            const char *name = "";
            for (const struct option *q = opts; q->name; q++)
                if (q->val == c) name = q->name;
            cli_error("%s takes no --%s (it is an option of dtrain data %s)", cmd, name,
                      convert_only ? "convert" : "verify");
            return EXIT_USAGE;
        }
        switch (c) {
            case OPT_FORMAT: a->open.format = optarg; break;
            case OPT_CIFAR100_LABELS:
                if (cli_cifar100_labels(optarg, &a->open.cifar100_coarse)) return EXIT_USAGE;
                break;
            case OPT_THREADS:
                if (cli_int("--threads", optarg, 1, 256, &a->threads)) return EXIT_USAGE;
                break;
            case OPT_SPLIT:
                if (strcmp(optarg, "train") != 0 && strcmp(optarg, "test") != 0 && strcmp(optarg, "all") != 0) {
                    cli_error("--split '%s' is not train, test or all", optarg);
                    return EXIT_USAGE;
                }
                a->split = optarg;
                break;
            case OPT_INPUT:
                if (parse_input(optarg, &a->open)) return EXIT_USAGE;
                break;
            case OPT_DTYPE:
                if (!(a->dtype = dts_dtype_parse(optarg))) {
                    cli_error("--dtype '%s' is not uint8, fp16 or fp32", optarg);
                    return EXIT_USAGE;
                }
                break;
            case OPT_FORCE: a->force = 1; break;
            case OPT_MAX_ERRORS:
                if (cli_int("--max-errors", optarg, 0, 1000000000, &a->max_errors)) return EXIT_USAGE;
                break;
            case 'h': cli_help(cmd, stdout); return -1;
            case ':': cli_error("%s needs a value (see dtrain help %s)", argv[optind - 1], cmd); return EXIT_USAGE;
            default: {
                const char *word = argv[optind - 1], *eq = strchr(word, '=');
                for (const struct option *q = opts; eq && word[0] == '-' && word[1] == '-' && q->name; q++)
                    if (q->has_arg == no_argument && strlen(q->name) == (size_t)(eq - word - 2) &&
                        !strncmp(q->name, word + 2, (size_t)(eq - word - 2))) {
                        cli_error("--%s takes no value: '%s' (see dtrain help %s)", q->name, word, cmd);
                        return EXIT_USAGE;
                    }
                cli_error("unknown option '%s' (see dtrain help %s)", word, cmd);
                return EXIT_USAGE;
            }
        }
    }
    if (argc - optind != npos) {
        cli_error("dtrain %s takes %s, got %d argument%s", cmd,
                  npos == 1 ? "one PATH (a dataset directory or file)"
                            : "SRC and DST (a dataset, then a .dts file or a directory)",
                  argc - optind, cli_s(argc - optind));
        return EXIT_USAGE;
    }
    for (int i = 0; i < npos; i++) a->pos[i] = argv[optind + i];
    a->npos = npos;
    return EXIT_OK;
}

/* --input is the size an image folder's images are decoded to; any other format has a fixed
 * shape, which a different --input would not change: the command would silently use the file's. */
static int check_input(const data_args *a, const ds_split *s)
{
    const ds_open_opts *o = &a->open;
    if (!o->c || !strcmp(s->format, "imagefolder") || (o->c == s->c && o->h == s->h && o->w == s->w)) return EXIT_OK;
    cli_error("--input %dx%dx%d: --input resizes image folders only, and %s (%s) holds samples of %dx%dx%d: drop "
              "--input",
              o->c, o->h, o->w, s->source, s->format, s->c, s->h, s->w);
    return EXIT_USAGE;
}

/* Opens split of path, printing the error; EXIT_OK, EXIT_USAGE or EXIT_FAIL. */
static int open_split(const char *path, const data_args *a, const char *split, ds_split **out)
{
    ds_open_opts o = a->open;
    o.split = split;
    dt_status s = ds_open(path, &o, out);
    if (!s) {
        const int rc = check_input(a, *out);
        if (rc) ds_close(*out), *out = NULL;
        return rc;
    }
    cli_error("%s", dt_last_error());
    return s == DT_ERR_INVALID_ARG ? EXIT_USAGE : EXIT_FAIL;
}

/* Whether path holds a test split of its own: a directory whose test split opens. One file is its
 * own samples whatever the split, so it has none. *test is the open split or NULL; *why, when
 * there is none, says why. */
static void open_test(const char *path, const data_args *a, ds_split **test, char *why, size_t n)
{
    struct stat sb;
    *test = NULL;
    if (stat(path, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
        snprintf(why, n, "%s is one file, which is one split", path);
        return;
    }
    ds_open_opts o = a->open;
    o.split = "test";
    if (ds_open(path, &o, test) != DT_OK) snprintf(why, n, "%s", dt_last_error());
}

static void print_channels(const char *what, int c, const double *mean, const double *std)
{
    printf("%s", what);
    for (int k = 0; k < c && k < 16; k++) printf(" %.4g / %.4g", mean[k], std[k]);
    printf("%s\n", c > 16 ? " ..." : "");
}

static int split_info(const ds_split *s, int threads)
{
    ds_stats st;
    if (ds_compute_stats(s, threads, &st)) {
        cli_error("%s", dt_last_error());
        return EXIT_FAIL;
    }
    const size_t per = (size_t)s->c * s->h * s->w;
    printf("  %s: %zu sample%s of %dx%dx%d (%zu values), %d classes\n", s->split, s->count, cli_s((long)s->count), s->c,
           s->h, s->w, per, s->classes);
    printf("    values: min %g, max %g;", (double)st.lo, (double)st.hi);
    print_channels(" per channel mean / std:", s->c, st.mean, st.std);
    if (s->mean && s->std) {
        double *m = malloc((size_t)s->c * sizeof *m), *d = malloc((size_t)s->c * sizeof *d);
        if (m && d) {
            for (int k = 0; k < s->c; k++) m[k] = s->mean[k], d[k] = s->std[k];
            print_channels("    stored in the file, mean / std:", s->c, m, d);
        }
        free(m), free(d);
    }
    printf("    samples per class:");
    const size_t *counts = st.class_counts;
    if (s->classes <= DATA_INFO_MAX_LISTED) {
        for (int k = 0; k < s->classes; k++) printf("%s %d: %zu", k ? "," : "", k, counts[k]);
    } else {
        int kmin = 0, kmax = 0;
        for (int k = 1; k < s->classes; k++) {
            if (counts[k] < counts[kmin]) kmin = k;
            if (counts[k] > counts[kmax]) kmax = k;
        }
        printf(" fewest %zu (class %d), most %zu (class %d)", counts[kmin], kmin, counts[kmax], kmax);
    }
    int empty = 0;
    for (int k = 0; k < s->classes; k++) empty += counts[k] == 0;
    if (empty) printf("; %d class%s without a sample", empty, empty == 1 ? "" : "es");
    printf("\n");
    ds_stats_free(&st);
    return EXIT_OK;
}

static int data_info(int argc, char **argv)
{
    data_args a;
    int rc = parse_args("data info", argc, argv, 1, &a);
    if (rc) return rc < 0 ? EXIT_OK : rc;
    const char *path = a.pos[0];
    ds_split *train = NULL, *test = NULL;
    if ((rc = open_split(path, &a, "train", &train))) return rc;
    printf("dataset %s: %s\n", path, train->format);
    rc = split_info(train, a.threads);
    char why[1200];
    if (!rc) open_test(path, &a, &test, why, sizeof why);
    if (!rc && test)
        rc = split_info(test, a.threads);
    else if (!rc)
        printf("  test: none (%s)\n", why);
    ds_close(train);
    ds_close(test);
    return rc;
}

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

static int data_convert(int argc, char **argv)
{
    data_args a;
    int rc = parse_args("data convert", argc, argv, 2, &a);
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
        if ((rc = open_split(src, &a, a.split ? a.split : "train", &s))) return rc;
        rc = convert_one(s, dst, &a);
        ds_close(s);
        return rc;
    }
    const char *want = a.split ? a.split : "all";
    ds_split *train = NULL, *test = NULL;
    char why[1200] = "";
    if (strcmp(want, "test") != 0 && (rc = open_split(src, &a, "train", &train))) return rc;
    if (strcmp(want, "test") == 0 && (rc = open_split(src, &a, "test", &test))) return rc;
    if (strcmp(want, "all") == 0) open_test(src, &a, &test, why, sizeof why);
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
        cli_error("cannot create the directory %s: %s (DST is a directory unless it ends in .dts)", dst,
                  strerror(errno));
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

/* Where sample i of s is, for the list of bad ones: an image's path, a .dts byte offset; nothing
 * for the other formats, whose messages name the file and record. */
static void sample_where(const ds_split *s, size_t i, char *out, size_t n)
{
    char path[4200];
    out[0] = '\0';
    if (imagefolder_sample_path(s, i, path, sizeof path))
        snprintf(out, n, " (%s)", path);
    else if (strcmp(s->format, "dts") == 0)
        snprintf(out, n, " (byte offset %llu of %s)", (unsigned long long)dts_sample_offset(s, i), s->source);
}

/* Every sample and label of one split, and for a .dts the payload CRC. Prints OK, or each bad
 * sample (the first a->max_errors) with the split's count and the CRC verdict; *nbad and *crc_bad
 * say what was found. EXIT_OK once every sample was read, bad or not; EXIT_FAIL (printed) when the
 * pass itself failed (out of memory, a thread that did not start). */
static int verify_split(const ds_split *s, const data_args *a, size_t *nbad, int *crc_bad)
{
    *nbad = 0;
    *crc_bad = 0;
    /* A payload CRC that does not match says only that some byte is damaged: every sample is still
     * read, so that the bad labels and values among them are named. */
    char crc_msg[2048] = "";
    if (strcmp(s->format, "dts") == 0 && dts_check_payload(s) != DT_OK) {
        *crc_bad = 1;
        snprintf(crc_msg, sizeof crc_msg, "%s", dt_last_error());
    }
    ds_bad_samples bad;
    if (ds_find_bad_samples(s, a->threads, (size_t)a->max_errors, &bad)) {
        cli_error("%s", dt_last_error());
        return EXIT_FAIL;
    }
    *nbad = bad.count;
    if (!bad.count && !*crc_bad) {
        printf("  %s: OK, %zu sample%s of %dx%dx%d read, every label in 0..%d, every value finite%s\n", s->split,
               s->count, cli_s((long)s->count), s->c, s->h, s->w, s->classes - 1,
               strcmp(s->format, "dts") == 0 ? ", payload CRC-32 matches" : "");
        return EXIT_OK;
    }
    if (bad.count) printf("  %s: %zu of %zu sample%s bad:\n", s->split, bad.count, s->count, cli_s((long)s->count));
    for (size_t k = 0; k < bad.listed; k++) {
        char where[4300];
        sample_where(s, bad.items[k].index, where, sizeof where);
        printf("    sample %zu%s: %s\n", bad.items[k].index, where, bad.items[k].why);
    }
    if (bad.count > bad.listed)
        printf("    ... and %zu more (--max-errors 0 names every one)\n", bad.count - bad.listed);
    if (*crc_bad)
        printf("  %s: %s%s\n", s->split, crc_msg,
               bad.count ? "" : " (every sample reads as valid: the damage is in values or labels that look right)");
    ds_bad_samples_free(&bad);
    return EXIT_OK;
}

static int data_verify(int argc, char **argv)
{
    data_args a;
    int rc = parse_args("data verify", argc, argv, 1, &a);
    if (rc) return rc < 0 ? EXIT_OK : rc;
    /* Labels (and IDX values) are left to the reads, so a bad one is listed rather than refused. */
    a.open.check_on_read = 1;
    const char *path = a.pos[0];
    ds_split *train = NULL, *test = NULL;
    if ((rc = open_split(path, &a, "train", &train))) return rc;
    printf("verifying %s: %s\n", path, train->format);
    size_t bad[2] = {0, 0};
    int crc[2] = {0, 0};
    rc = verify_split(train, &a, &bad[0], &crc[0]);
    char why[1200];
    if (!rc) open_test(path, &a, &test, why, sizeof why);
    if (!rc && test)
        rc = verify_split(test, &a, &bad[1], &crc[1]);
    else if (!rc)
        printf("  test: none (%s)\n", why);
    const size_t total = train->count + (test ? test->count : 0), nbad = bad[0] + bad[1];
    if (!rc && !nbad && !crc[0] && !crc[1]) {
        printf("OK: %zu sample%s checked\n", total, cli_s((long)total));
    } else if (!rc) {
        char per[200], crcs[200] = "";
        snprintf(per, sizeof per, "train %zu of %zu", bad[0], train->count);
        if (test) snprintf(per + strlen(per), sizeof per - strlen(per), ", test %zu of %zu", bad[1], test->count);
        if (crc[0] || crc[1])
            snprintf(crcs, sizeof crcs, "the payload CRC-32 of %s does not match",
                     crc[0] && crc[1] ? "both shards"
                     : crc[0]         ? "the train shard"
                                      : "the test shard");
        /* A shard is written whole, so its fix is a new one; other formats' samples are files or
         * records of their own. */
        const char *fix = strcmp(train->format, "dts") == 0
                              ? "write the shard again from a clean source (dtrain data convert)"
                              : "replace or remove the samples named above";
        fflush(stdout); /* the list above, before the verdict on stderr */
        if (nbad)
            cli_error("%s: %zu of %zu sample%s bad (%s)%s%s: %s, then run dtrain data verify again", path, nbad, total,
                      cli_s((long)total), per, crcs[0] ? "; " : "", crcs, fix);
        else
            cli_error("%s: %s, though every sample reads as valid (%zu checked): %s, then run dtrain data verify again",
                      path, crcs, total, fix);
        rc = EXIT_FAIL;
    }
    ds_close(train);
    ds_close(test);
    return rc;
}

int cmd_data(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        cli_help("data", argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : EXIT_OK;
    }
    if (!strcmp(argv[1], "info")) return data_info(argc - 1, argv + 1);
    if (!strcmp(argv[1], "convert")) return data_convert(argc - 1, argv + 1);
    if (!strcmp(argv[1], "verify")) return data_verify(argc - 1, argv + 1);
    cli_error("unknown data command '%s'; it is info, convert or verify (dtrain help data)", argv[1]);
    return EXIT_USAGE;
}
