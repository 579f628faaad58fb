/*
 * cli.c - what the `dtrain` subcommands share on their command lines: the common flags and each
 * command's own, strict flag values, the data flags, and error messages. How a command starts
 * and ends (dt_init, dt_finalize) is prologue.c's.
 */
#include "launch/cli.h"
#include "runtime/placement/config.h"
#include "base/parse.h"
#include "base/status.h"
#include "base/path.h"
#include "base/printable.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Who prints the errors, once dt_init knows (cli_error_identity): in a job of several ranks the
 * launcher merges every rank's stderr into one stream, and a failure that only some ranks meet (a
 * dataset missing on one node) must say which, or it reads as the whole job's. */
static int g_err_rank = -1, g_err_world;
static char g_err_host[64];

void cli_error_identity(int rank, int world, const char *host)
{
    g_err_rank = rank;
    g_err_world = world;
    snprintf(g_err_host, sizeof g_err_host, "%s", host ? host : "?");
}

/* Set by cli_error_capture: cli_error's messages go here, for cli_agree_failure to print once. */
static char *g_capture;
static size_t g_capture_n;

void cli_error_capture(char *buf, size_t n)
{
    g_capture = buf && n ? buf : NULL;
    g_capture_n = n;
    if (g_capture) g_capture[0] = '\0';
}

/* cli_error's and cli_error_job's printing; identity: end with the rank that prints it. */
static void error_vprint(int identity, const char *fmt, va_list ap)
{
    char raw[4096], msg[4096];
    vsnprintf(raw, sizeof raw, fmt, ap);
    text_escape_controls(raw, msg, sizeof msg); /* names from a dataset or another user's file */
    if (g_capture) {                            /* a second message follows the first: none is lost */
        const size_t used = strlen(g_capture);
        snprintf(g_capture + used, g_capture_n - used, "%s%s", used ? "; " : "", msg);
        return;
    }
    if (identity && g_err_world > 1)
        fprintf(stderr, "dtrain: error: %s (rank %d of %d, on %s)\n", msg, g_err_rank, g_err_world, g_err_host);
    else
        fprintf(stderr, "dtrain: error: %s\n", msg);
}

void cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vprint(1, fmt, ap);
    va_end(ap);
}

void cli_error_job(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vprint(0, fmt, ap);
    va_end(ap);
}

int cli_peer_failure(dt_status s) { return status_shared(s) && status_from_peer(); }

const char *cli_status_text(char *buf, size_t n, const char *what, dt_status s)
{
    if (what)
        snprintf(buf, n, "%s: %s (%s)", what, dt_last_error(), dt_strerror(s));
    else
        snprintf(buf, n, "%s (%s)", dt_last_error(), dt_strerror(s));
    return buf;
}

void cli_status_error(const char *what, dt_status s)
{
    char line[4096]; /* error_vprint's own limit: the line is cut where it would cut it */
    cli_error("%s", cli_status_text(line, sizeof line, what, s));
}

/* The command's numbers go through runtime/parse.c, the one parser of numbers for flags and
 * variables: "\t5", " 5" and "0x10" are refused alike, with the range in the message. */
int cli_long(const char *flag, const char *arg, long lo, long hi, long *out)
{
    if (parse_long(flag, arg, lo, hi, out)) {
        cli_error("%s", dt_last_error());
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

int cli_int(const char *flag, const char *arg, long lo, long hi, int *out)
{
    long v;
    int rc = cli_long(flag, arg, lo, hi, &v);
    if (rc == EXIT_OK) *out = (int)v;
    return rc;
}

int cli_bytes(const char *flag, const char *arg, unsigned long long max, const char *examples, unsigned long long *out)
{
    unsigned long long v = 0;
    const char *p = arg;
    int ok = *p >= '0' && *p <= '9';
    for (; ok && *p >= '0' && *p <= '9'; p++) {
        v = v * 10 + (unsigned long long)(*p - '0');
        if (v > max) ok = 0; /* past any limit: stop before overflowing */
    }
    unsigned shift = 0;
    if (ok && *p) {
        const char u = *p >= 'a' && *p <= 'z' ? (char)(*p - 'a' + 'A') : *p;
        shift = u == 'K' ? 10 : u == 'M' ? 20 : u == 'G' ? 30 : 0;
        ok = shift && !p[1];
    }
    if (ok && v > (max >> shift)) ok = 0;
    if (ok) v <<= shift;
    if (!ok || v == 0) {
        cli_error("%s '%s' is not a size from 1 byte to %lluG: a whole number of bytes, optionally followed by K, M "
                  "or G (powers of 1024), e.g. %s",
                  flag, arg, max >> 30, examples);
        return EXIT_USAGE;
    }
    *out = v;
    return EXIT_OK;
}

int cli_float(const char *flag, const char *arg, double lo, double hi, float *out)
{
    double v;
    if (parse_double(flag, arg, lo, hi, &v)) {
        cli_error("%s", dt_last_error());
        return EXIT_USAGE;
    }
    /* A value inside the range can still be too small for a float (--lr 1e-50 would become 0). */
    if (v != 0 && (float)v == 0.0f) {
        cli_error("%s '%s' is too small for single precision (the smallest is about 1e-38)", flag, arg);
        return EXIT_USAGE;
    }
    *out = (float)v;
    return EXIT_OK;
}

int cli_list(const char *flag, const char *arg, int max, int (*each)(const char *item, void *ud), void *ud)
{
    char buf[512];
    if (strlen(arg) >= sizeof buf) {
        cli_error("%s '%.40s...' is too long", flag, arg);
        return EXIT_USAGE;
    }
    strcpy(buf, arg);
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n == max) {
            cli_error("%s '%s': at most %d items", flag, arg, max);
            return EXIT_USAGE;
        }
        int rc = each(tok, ud);
        if (rc) return rc;
        n++;
    }
    if (!n) {
        cli_error("%s '%s' names nothing: give a comma-separated list", flag, arg);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

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

int cli_parse(int argc, char **argv, const char *cmd, dt_config *cfg, const cli_extra *extra)
{
    dt_config_defaults(cfg);
    if (dt_config_from_env(cfg)) {
        cli_error("%s", dt_last_error());
        return EXIT_USAGE;
    }
    static const struct option common[] = {
        {"device", required_argument, NULL, 'd'},   {"pin", required_argument, NULL, 'p'},
        {"timeout", required_argument, NULL, 't'},  {"blas-threads", required_argument, NULL, 'b'},
        {"gpu-comm", required_argument, NULL, 'g'}, {"help", no_argument, NULL, 'h'},
    };
    /* Room for the common flags, a command's own and the terminator. A command with more flags
     * than fit is a bug of dtrain that must not pass quietly: the flags past the end used to be
     * refused as unknown options, with nothing to say why. */
    enum { NCOMMON = sizeof common / sizeof *common, MAXOPTS = 128 };
    struct option opts[MAXOPTS];
    int n = 0;
    for (int i = 0; i < NCOMMON; i++) opts[n++] = common[i];
    for (const struct option *o = extra ? extra->opts : NULL; o && o->name; o++) {
        if (n == MAXOPTS - 1) {
            cli_error("internal error: dtrain %s has more than %d options; raise MAXOPTS in launch/cli.c", cmd,
                      MAXOPTS - 1 - NCOMMON);
            return EXIT_FAIL;
        }
        opts[n++] = *o;
    }
    memset(&opts[n], 0, sizeof opts[n]);

    optind = 1;
    opterr = 0;
    int o;
    while ((o = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        int rc = EXIT_OK;
        switch (o) {
            case 'd':
                if (dt_device_kind_parse(optarg, &cfg->device)) {
                    cli_error("--device %s: %s", optarg, dt_last_error());
                    return EXIT_USAGE;
                }
                break;
            case 'p':
                if (dt_pin_mode_parse(optarg, &cfg->pin)) {
                    cli_error("--pin %s: %s", optarg, dt_last_error());
                    return EXIT_USAGE;
                }
                break;
            case 't':
                if (config_timeout_parse("--timeout", optarg, &cfg->timeout_s)) {
                    cli_error("%s", dt_last_error());
                    return EXIT_USAGE;
                }
                break;
            case 'b':
                if ((rc = cli_int("--blas-threads", optarg, 0, 4096, &cfg->blas_threads))) return rc;
                break;
            case 'g':
                if (dt_gpu_comm_parse(optarg, &cfg->gpu_comm)) {
                    /* A shortened --gpu-comm ("--gpu 1") is most likely a try at choosing a GPU. */
                    const char *word = optarg == argv[optind - 1] && optind >= 2 ? argv[optind - 2] : argv[optind - 1];
                    const int shortened = strncmp(word, "--gpu-comm", 10) != 0 || (word[10] && word[10] != '=');
                    cli_error("--gpu-comm %s: %s%s", optarg, dt_last_error(),
                              shortened ? " (a shortened --gpu-comm: dtrain has no flag that chooses GPUs; "
                                          "CUDA_VISIBLE_DEVICES does, e.g. CUDA_VISIBLE_DEVICES=1 dtrain ...)"
                                        : "");
                    return EXIT_USAGE;
                }
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

int cli_float_dtype(const char *flag, const char *arg, dt_dtype *out)
{
    dt_dtype t;
    if (dt_dtype_parse(arg, &t) || t == DT_U8) {
        cli_error("%s '%s' is not one of fp32, fp16, bf16", flag, arg);
        return EXIT_USAGE;
    }
    *out = t;
    return EXIT_OK;
}

/* --augment crop:P,flip (either or both, in any order). */
int cli_augment(const char *arg, int *crop_pad, int *flip)
{
    char buf[256];
    if (strlen(arg) >= sizeof buf) {
        cli_error("--augment '%.40s...' is too long: it is crop:P, flip, or crop:P,flip", arg);
        return EXIT_USAGE;
    }
    if (!strcmp(arg, "none")) {
        *crop_pad = 0, *flip = 0;
        return EXIT_OK;
    }
    snprintf(buf, sizeof buf, "%s", arg);
    /* Split by hand, not strtok: an empty part ("," or "flip,") is a typo to name, not nothing. */
    int pad = 0, flipped = 0;
    for (char *tok = buf, *end;; tok = end + 1) {
        end = strchr(tok, ',');
        if (end) *end = '\0';
        if (!*tok) {
            cli_error("--augment '%s' has an empty part: give crop:P, flip or both, e.g. --augment crop:4,flip (none: "
                      "no augmentation)",
                      arg);
            return EXIT_USAGE;
        }
        const int is_flip = !strcmp(tok, "flip"), is_crop = !strncmp(tok, "crop:", 5);
        if (is_flip ? flipped : is_crop && pad) {
            cli_error("--augment '%s' gives %s twice: give each once", arg, is_flip ? "flip" : "crop");
            return EXIT_USAGE;
        }
        if (is_flip) {
            flipped = 1;
        } else if (is_crop) {
            if (cli_int("--augment crop:P (the padding in pixels)", tok + 5, 1, 4096, &pad)) return EXIT_USAGE;
        } else {
            cli_error("--augment part '%s' is not crop:P (random crop after padding P pixels) or flip (random "
                      "horizontal flip); e.g. --augment crop:4,flip",
                      tok);
            return EXIT_USAGE;
        }
        if (!end) break;
    }
    *crop_pad = pad, *flip = flipped;
    return EXIT_OK;
}

int cli_cifar100_labels(const char *arg, int *coarse)
{
    if (strcmp(arg, "fine") && strcmp(arg, "coarse")) {
        cli_error("--cifar100-labels '%s' is not fine or coarse", arg);
        return EXIT_USAGE;
    }
    *coarse = !strcmp(arg, "coarse");
    return EXIT_OK;
}

int cli_bad_samples(const char *arg, const char *skip_means, int *skip)
{
    if (strcmp(arg, "fail") && strcmp(arg, "skip")) {
        cli_error("--bad-samples '%s' is not fail (stop at the first undecodable sample) or skip (%s)", arg,
                  skip_means);
        return EXIT_USAGE;
    }
    *skip = !strcmp(arg, "skip");
    return EXIT_OK;
}

int cli_clip_grad_norm(const char *arg, double *out)
{
    if (!strcmp(arg, "inf")) {
        *out = INFINITY;
        return EXIT_OK;
    }
    float v;
    if (cli_float("--clip-grad-norm (the largest global gradient norm, 0 = off, inf = the norm reported, not clipped)",
                  arg, 0, 1e30, &v))
        return EXIT_USAGE;
    *out = v;
    return EXIT_OK;
}

int cli_normalize(const char *arg, int *out)
{
    if (!strcmp(arg, "none"))
        *out = DT_NORMALIZE_NONE;
    else if (!strcmp(arg, "unit"))
        *out = DT_NORMALIZE_UNIT;
    else if (!strcmp(arg, "standard"))
        *out = DT_NORMALIZE_STANDARD;
    else {
        cli_error("--normalize '%s' is not one of none, unit (bytes / 255), standard (per-channel mean/std)", arg);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

int cli_loader_threads(const char *arg, int *out)
{
    if (!strcmp(arg, "auto")) {
        *out = -1;
        return EXIT_OK;
    }
    return cli_int("--loader-threads", arg, 0, 256, out);
}

/* A flag of three named settings: arg as names[i] gives values[i]; anything else is refused with
 * the names and what they mean (help). */
static int cli_choice3(const char *flag, const char *arg, const char *const names[3], const int values[3],
                       const char *help, int *out)
{
    for (int i = 0; i < 3; i++)
        if (!strcmp(arg, names[i])) {
            *out = values[i];
            return EXIT_OK;
        }
    cli_error("%s '%s' is not one of %s, %s, %s (%s)", flag, arg, names[0], names[1], names[2], help);
    return EXIT_USAGE;
}

static const char *const auto_on_off[3] = {"auto", "1", "0"};

int cli_step_overlap(const char *arg, dt_step_overlap *out)
{
    const int values[3] = {DT_STEP_OVERLAP_AUTO, DT_STEP_OVERLAP_ON, DT_STEP_OVERLAP_OFF};
    int v;
    const int rc = cli_choice3("--step-overlap", arg, auto_on_off, values,
                               "auto: the optimizer step overlapped with backward, or with the buckets' allreduces, "
                               "for models of 8M parameters or more; 1: for any model; 0: once after backward and "
                               "the allreduce",
                               &v);
    if (!rc) *out = (dt_step_overlap)v;
    return rc;
}

int cli_graphs(const char *arg, dt_graphs *out)
{
    const int values[3] = {DT_GRAPHS_AUTO, DT_GRAPHS_ON, DT_GRAPHS_OFF};
    int v;
    const int rc = cli_choice3("--graphs", arg, auto_on_off, values,
                               "1: on a GPU each step's forward and backward recorded once and replayed as one "
                               "launch; auto: so for models under 8M parameters; 0: launched kernel by kernel",
                               &v);
    if (!rc) *out = (dt_graphs)v;
    return rc;
}

int cli_fused_relu(const char *arg, int *out)
{
    return cli_int("--fused-relu (1: relu layers run inside their neighbours, 0: on their own)", arg, 0, 1, out);
}

int cli_synthetic_on(const char *arg, dt_synthetic_on *out)
{
    static const char *const names[3] = {"auto", "host", "device"};
    const int values[3] = {DT_SYNTHETIC_AUTO, DT_SYNTHETIC_HOST, DT_SYNTHETIC_DEVICE};
    int v;
    const int rc = cli_choice3("--synthetic-on", arg, names, values,
                               "where synthetic batches are made: device: by a kernel on the GPU, without loader "
                               "threads or a copy; host: by the loader threads; auto: on the GPU unless --augment "
                               "asks for crops or flips",
                               &v);
    if (!rc) *out = (dt_synthetic_on)v;
    return rc;
}

int cli_loader_auto(const dt_ctx *ctx, int requested)
{
    if (requested >= 0) return requested;
    dt_placement pl;
    if (dt_get_placement(ctx, &pl) || pl.device != DT_DEVICE_CUDA) return 0;
    /* A GPU step is faster than one core makes its batch: every core of the rank but the training
     * thread's. One core makes about 80,000 synthetic 3x32x32 samples/s (`dtrain bench data --data
     * synthetic`, docs/performance.md), and an H200 steps the cnn on 270,000 a second (bench/GPU-NOTES.md), which 8
     * threads did not feed. A worker with nothing to make sleeps; the cap keeps a single rank on a
     * host of very many cores from starting threads that would only wait. */
    const int n = pl.num_cores - 1;
    return n < 1 ? 1 : n > CLI_LOADER_MAX_AUTO ? CLI_LOADER_MAX_AUTO : n;
}

/* path with its parent directory resolved where it can be. */
static void resolved_path(const char *path, char *out, size_t n)
{
    char dir[PATH_MAX], real[PATH_MAX];
    const char *base = path_parent_dir(path, dir, sizeof dir);
    if (realpath(dir, real))
        snprintf(out, n, "%s/%s", real, base);
    else
        snprintf(out, n, "%s", path);
}

int cli_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (!strcmp(a, b)) return 1;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    char ra[PATH_MAX + NAME_MAX + 2], rb[PATH_MAX + NAME_MAX + 2];
    resolved_path(a, ra, sizeof ra);
    resolved_path(b, rb, sizeof rb);
    return !strcmp(ra, rb);
}

int cli_input_exit(dt_status s, const char *path)
{
    if (s == DT_ERR_INVALID_ARG) return EXIT_USAGE;
    if (s != DT_ERR_IO || !path) return EXIT_FAIL;
    /* Asked of the path after the open failed, so the reader's own message stays the one shown:
     * the path as named cannot be reached (missing, a file on its way, a loop, too long, no search
     * permission), or this user may not read what is there. */
    struct stat sb;
    if (stat(path, &sb) != 0)
        return errno == ENOENT || errno == ENOTDIR || errno == EACCES || errno == ELOOP || errno == ENAMETOOLONG
                   ? EXIT_USAGE
                   : EXIT_FAIL;
    return access(path, R_OK) != 0 && (errno == EACCES || errno == EPERM) ? EXIT_USAGE : EXIT_FAIL;
}

dt_status cli_rank0_verdict(dt_ctx *ctx, char *why, size_t len, int *refused)
{
    *refused = 0;
    const dt_status s = dt_broadcast(ctx, why, len, DT_U8, 0);
    if (s) return s;
    why[len - 1] = '\0';
    *refused = why[0] != '\0';
    if (*refused && dt_rank(ctx) == 0) cli_error("%s", why);
    return DT_OK;
}
