/*
 * cli.c - the command line of every `dtrain` subcommand: the flags they all take and each
 * command's own (getopt_long over one table), and the refusal of a word it does not know, with
 * the closest flag. The flags' values are cli_values.c's; how a command starts and ends
 * (dt_init, dt_finalize) is prologue.c's.
 */
#include "launch/cli.h"
#include "runtime/placement/config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Edit distance of a and b (insertions, deletions, substitutions and swaps of neighbours, each
 * 1), or a number above limit once it must exceed it. Names longer than 63 are never close. */
static int edit_distance(const char *a, size_t na, const char *b, int limit)
{
    enum { MAXLEN = 64 };
    const size_t nb = strlen(b);
    if (na >= MAXLEN || nb >= MAXLEN) return limit + 1;
    int d[MAXLEN][MAXLEN];
    for (size_t i = 0; i <= na; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= nb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= na; i++) {
        for (size_t j = 1; j <= nb; j++) {
            int v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < v) v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    }
    return d[na][nb];
}

/* cli.h. getopt_long's own state says which word it refused: optind and optopt. */
void cli_unknown_option(int argc, char **argv, const char *cmd, const struct option *opts)
{
    /* A long option always ends its word; an unknown short one is the first letter of its word
     * (-h, the only short option, exits), which getopt_long has not passed yet when more follow. */
    const char *word = optopt && optind < argc && argv[optind][0] == '-' && argv[optind][1] == optopt
                           ? argv[optind]
                           : argv[optind - 1];
    const char *name = word;
    while (*name == '-') name++;
    const size_t len = strcspn(name, "=");
    const struct option *best = NULL, *exact = NULL;
    int best_d = 0, prefixed = 0;
    char several[256] = "";
    /* Close enough to be a slip rather than another word: 1 edit in a short name, 2 in a longer. */
    const int limit = len <= 4 ? 1 : 2;
    for (const struct option *o = opts; o->name; o++) {
        if (strlen(o->name) == len && !strncmp(o->name, name, len)) exact = o;
        if (len && !strncmp(o->name, name, len)) {
            size_t used = strlen(several);
            snprintf(several + used, sizeof several - used, "%s--%s", prefixed++ ? ", " : "", o->name);
        }
        const int dist = edit_distance(name, len, o->name, limit);
        if (dist <= limit && (!best || dist < best_d)) {
            best = o;
            best_d = dist;
        }
    }
    if (exact && name[len] == '=' && exact->has_arg == no_argument)
        cli_error("--%s takes no value: '%s' (see dtrain help %s)", exact->name, word, cmd);
    else if (!exact && prefixed > 1 && word[0] == '-' && word[1] == '-')
        cli_error("option '%s' is ambiguous: it could be %s (see dtrain help %s)", word, several, cmd);
    else if (best)
        cli_error("unknown option '%s'; did you mean --%s? (see dtrain help %s)", word, best->name, cmd);
    else
        cli_error("unknown option '%s' (see dtrain help %s)", word, cmd);
}

/* The flags every command takes, before a command's own in the table. */
static const struct option common_opts[] = {
    {"device", required_argument, NULL, 'd'},   {"pin", required_argument, NULL, 'p'},
    {"timeout", required_argument, NULL, 't'},  {"blas-threads", required_argument, NULL, 'b'},
    {"gpu-comm", required_argument, NULL, 'g'}, {"help", no_argument, NULL, 'h'},
};
/* Room for the common flags, a command's own and the terminator. */
enum { NCOMMON = sizeof common_opts / sizeof *common_opts, MAXOPTS = 128 };

/* getopt_long's table for cmd: the common flags, extra's (may be NULL), the terminator. A command
 * with more flags than fit is a bug of dtrain that must not pass quietly: the flags past the end
 * used to be refused as unknown options, with nothing to say why. EXIT_OK, or EXIT_FAIL after
 * saying so. */
static int option_table(const char *cmd, const cli_extra *extra, struct option opts[MAXOPTS])
{
    int n = 0;
    for (int i = 0; i < NCOMMON; i++) opts[n++] = common_opts[i];
    for (const struct option *o = extra ? extra->opts : NULL; o && o->name; o++) {
        if (n == MAXOPTS - 1) {
            cli_error("internal error: dtrain %s has more than %d options; raise MAXOPTS in launch/cli.c", cmd,
                      MAXOPTS - 1 - NCOMMON);
            return EXIT_FAIL;
        }
        opts[n++] = *o;
    }
    memset(&opts[n], 0, sizeof opts[n]);
    return EXIT_OK;
}

/* The refusal of --gpu-comm's value, called as getopt_long returned it (optind tells its word). */
static void gpu_comm_refused(char **argv, const char *arg)
{
    /* A shortened --gpu-comm ("--gpu 1") is most likely a try at choosing a GPU. */
    const char *word = arg == argv[optind - 1] && optind >= 2 ? argv[optind - 2] : argv[optind - 1];
    const int shortened = strncmp(word, "--gpu-comm", 10) != 0 || (word[10] && word[10] != '=');
    cli_error("--gpu-comm %s: %s%s", arg, dt_last_error(),
              shortened ? " (a shortened --gpu-comm: dtrain has no flag that chooses GPUs; "
                          "CUDA_VISIBLE_DEVICES does, e.g. CUDA_VISIBLE_DEVICES=1 dtrain ...)"
                        : "");
}

/* One of common_opts but --help (o: its val), with its value arg, into cfg. EXIT_OK, or
 * EXIT_USAGE after saying why. */
static int common_flag(int o, const char *arg, char **argv, dt_config *cfg)
{
    switch (o) {
        case 'd':
            if (dt_device_kind_parse(arg, &cfg->device)) {
                cli_error("--device %s: %s", arg, dt_last_error());
                return EXIT_USAGE;
            }
            return EXIT_OK;
        case 'p':
            if (dt_pin_mode_parse(arg, &cfg->pin)) {
                cli_error("--pin %s: %s", arg, dt_last_error());
                return EXIT_USAGE;
            }
            return EXIT_OK;
        case 't':
            if (config_timeout_parse("--timeout", arg, &cfg->timeout_s)) {
                cli_error("%s", dt_last_error());
                return EXIT_USAGE;
            }
            return EXIT_OK;
        case 'b': return cli_int("--blas-threads", arg, 0, 4096, &cfg->blas_threads);
        case 'g':
            if (dt_gpu_comm_parse(arg, &cfg->gpu_comm)) {
                gpu_comm_refused(argv, arg);
                return EXIT_USAGE;
            }
            return EXIT_OK;
    }
    return EXIT_USAGE;
}

int cli_parse(int argc, char **argv, const char *cmd, dt_config *cfg, const cli_extra *extra)
{
    dt_config_defaults(cfg);
    if (dt_config_from_env(cfg)) {
        cli_error("%s", dt_last_error());
        return EXIT_USAGE;
    }
    struct option opts[MAXOPTS];
    int rc = option_table(cmd, extra, opts);
    if (rc) return rc;

    optind = 1;
    opterr = 0;
    int o;
    while ((o = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (o) {
            case 'd':
            case 'p':
            case 't':
            case 'b':
            case 'g':
                if ((rc = common_flag(o, optarg, argv, cfg))) return rc;
                break;
            case 'h':
                if (cli_help(cmd, stdout) != 0) cli_usage(stdout);
                exit(cli_close_stdout(EXIT_OK));
            case ':': cli_error("%s needs a value (see dtrain help %s)", argv[optind - 1], cmd); return EXIT_USAGE;
            case '?': cli_unknown_option(argc, argv, cmd, opts); return EXIT_USAGE;
            default:
                if (!extra || (rc = extra->handle(o, optarg, extra->ud))) return rc ? rc : EXIT_USAGE;
        }
    }
    if (optind < argc) {
        cli_error("unexpected argument '%s' (see dtrain help %s)", argv[optind], cmd);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}
