/*
 * cmd_data.c - `dtrain data info|convert|verify`: the dispatch to the three commands (one file
 * each: cmd_data_info.c, cmd_data_convert.c, cmd_data_verify.c) and what they share (cmd_data.h):
 * the flags, and the opens of a dataset's splits. They read datasets through the one reader
 * interface (runtime/data/reader.h), so every command works on every format. One process, no MPI:
 * they only read and write files.
 */
#include "launch/data/cmd_data.h"

#include "launch/cli.h"
#include "runtime/data/dts.h"
#include "base/log.h"
#include "base/parse.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { OPT_FORMAT = 256, OPT_CIFAR100_LABELS, OPT_THREADS, OPT_SPLIT, OPT_INPUT, OPT_DTYPE, OPT_FORCE, OPT_MAX_ERRORS };

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

/* The flags of the three commands; convert takes them all, info and verify the reading ones. */
static const struct option data_options[] = {{"data-format", required_argument, NULL, OPT_FORMAT},
                                             {"cifar100-labels", required_argument, NULL, OPT_CIFAR100_LABELS},
                                             {"threads", required_argument, NULL, OPT_THREADS},
                                             {"split", required_argument, NULL, OPT_SPLIT},
                                             {"input", required_argument, NULL, OPT_INPUT},
                                             {"dtype", required_argument, NULL, OPT_DTYPE},
                                             {"force", no_argument, NULL, OPT_FORCE},
                                             {"max-errors", required_argument, NULL, OPT_MAX_ERRORS},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};

/* A flag of convert or verify given to another data command: refused by name, with the command it
 * belongs to. Returns EXIT_USAGE once it said so, EXIT_OK for a flag that cmd takes. */
static int refuse_other_commands_flag(const char *cmd, int c)
{
    const int convert = strcmp(cmd, "data convert") == 0, verify = strcmp(cmd, "data verify") == 0;
    /* --input is the decode size of an image folder: info and verify need it too. */
    const int convert_only = c == OPT_SPLIT || c == OPT_DTYPE || c == OPT_FORCE;
    const int refused = (!convert && convert_only) || (!verify && c == OPT_MAX_ERRORS);
    if (!refused) return EXIT_OK;
    const char *name = "";
    for (const struct option *q = data_options; q->name; q++)
        if (q->val == c) name = q->name;
    cli_error("%s takes no --%s (it is an option of dtrain data %s)", cmd, name, convert_only ? "convert" : "verify");
    return EXIT_USAGE;
}

static int parse_split(const char *arg, const char **split)
{
    if (strcmp(arg, "train") != 0 && strcmp(arg, "test") != 0 && strcmp(arg, "all") != 0) {
        cli_error("--split '%s' is not train, test or all", arg);
        return EXIT_USAGE;
    }
    *split = arg;
    return EXIT_OK;
}

static int parse_dtype(const char *arg, int *dtype)
{
    if (!(*dtype = dts_dtype_parse(arg))) {
        cli_error("--dtype '%s' is not uint8, fp16 or fp32", arg);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

/* One flag getopt_long returned (c, with optarg). EXIT_OK, EXIT_USAGE once it said why, or -1 after
 * printing the help. */
static int data_flag(const char *cmd, int c, int argc, char **argv, data_args *a)
{
    switch (c) {
        case OPT_FORMAT: a->open.format = optarg; return EXIT_OK;
        case OPT_CIFAR100_LABELS: return cli_cifar100_labels(optarg, &a->open.cifar100_coarse);
        case OPT_THREADS: return cli_int("--threads", optarg, 1, 256, &a->threads);
        case OPT_SPLIT: return parse_split(optarg, &a->split);
        case OPT_INPUT: return parse_input(optarg, &a->open);
        case OPT_DTYPE: return parse_dtype(optarg, &a->dtype);
        case OPT_FORCE: a->force = 1; return EXIT_OK;
        case OPT_MAX_ERRORS: return cli_int("--max-errors", optarg, 0, 1000000000, &a->max_errors);
        case 'h': cli_help(cmd, stdout); return -1;
        case ':': cli_error("%s needs a value (see dtrain help %s)", argv[optind - 1], cmd); return EXIT_USAGE;
        /* '?': an unknown flag (with the closest one), an ambiguous abbreviation, or a value given
         * to a flag that takes none, in the words of every command (cli.c). The table holds the
         * three commands' flags, as getopt_long saw it: one of another command's that it
         * suggests is then refused by name (refuse_other_commands_flag), with the command it belongs to. */
        default: cli_unknown_option(argc, argv, cmd, data_options); return EXIT_USAGE;
    }
}

/* The paths after the flags: npos of them (1: PATH; 2: SRC and DST). */
static int data_positionals(const char *cmd, int argc, char **argv, int npos, data_args *a)
{
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

int data_parse_args(const char *cmd, int argc, char **argv, int npos, data_args *a)
{
    memset(a, 0, sizeof *a);
    a->threads = default_threads();
    a->max_errors = DATA_VERIFY_MAX_LISTED;
    optind = 1;
    opterr = 0;
    /* A leading ':' makes a missing value ':' rather than '?', so each error names its cause. */
    for (int c; (c = getopt_long(argc, argv, ":h", data_options, NULL)) != -1;) {
        int rc = refuse_other_commands_flag(cmd, c);
        if (!rc) rc = data_flag(cmd, c, argc, argv, a);
        if (rc) return rc;
    }
    return data_positionals(cmd, argc, argv, npos, a);
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
int data_open_split(const char *path, const data_args *a, const char *split, ds_split **out)
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
    return cli_input_exit(s, path);
}

int data_open_test(const char *path, const data_args *a, ds_split **test, char *why, size_t n)
{
    struct stat sb;
    *test = NULL;
    if (stat(path, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
        snprintf(why, n, "%s is one file, which is one split", path);
        return 0;
    }
    ds_open_opts o = a->open;
    o.split = "test";
    if (ds_open(path, &o, test) == DT_OK) return 0;
    snprintf(why, n, "%s", dt_last_error());
    /* Asked only once the open failed: what opens is a test split, whatever the files' names. */
    return ds_has_test_split(path, &o);
}

void data_test_error(const char *path, const char *why, const char *then)
{
    fflush(stdout); /* the report above, before the error on stderr */
    cli_error("%s has a test split, and it does not open: %s (%s)", path, why, then);
}

int cmd_data(int argc, char **argv)
{
    /* DTRAIN_LOG as every command reads it (cli_parse): a malformed value is bad usage here too,
     * and a good one sets the level of the readers' log lines. */
    if (log_init_from_env()) {
        cli_error("%s", dt_last_error());
        return EXIT_USAGE;
    }
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        cli_help("data", argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : EXIT_OK;
    }
    /* A data command reads (and convert writes) the whole dataset in one process with threads. */
    if (!strcmp(argv[1], "info") || !strcmp(argv[1], "convert") || !strcmp(argv[1], "verify")) {
        char cmd[32];
        snprintf(cmd, sizeof cmd, "data %s", argv[1]);
        const int one =
            cli_one_process(cmd, !strcmp(argv[1], "convert") ? "write the same .dts files and race the others for them"
                                                             : "read the whole dataset again and print its own report");
        if (one) return one;
    }
    if (!strcmp(argv[1], "info")) return cmd_data_info(argc - 1, argv + 1);
    if (!strcmp(argv[1], "convert")) return cmd_data_convert(argc - 1, argv + 1);
    if (!strcmp(argv[1], "verify")) return cmd_data_verify(argc - 1, argv + 1);
    cli_error("unknown data command '%s'; it is info, convert or verify (dtrain help data)", argv[1]);
    return EXIT_USAGE;
}
