/*
 * fuzz_parse.c - the number, size and list parsers of variables and flags: parse_int, parse_long,
 * parse_double and parse_double_or_zero (runtime/parse.c); the command's cli_long, cli_int,
 * cli_float, cli_list, cli_clip_grad_norm and cli_loader_threads (launch/cli_values.c); bench's byte sizes with K/M/G
 * (parse_bytes, static in launch/bench/cmd_bench.c over cli_bytes, hence the #include); CPU lists (affinity_parse,
 * runtime/affinity.c); --normalize's figures (cli_normalize_spec, launch/normalize_flag.c).
 *
 * Input: one string, given to every parser. Beyond ASan/UBSan, each parser is held to what its
 * header promises, against an independent reading of the text:
 *  - parse_int/parse_long accept exactly [+-]?[0-9]+ inside [lo, hi], with that value;
 *    parse_double and parse_double_or_zero only their documented grammar, finite and inside
 *    [lo, hi] (or 0); a failure leaves *out untouched; a flag's failure is bad usage;
 *  - cli_long/cli_int accept only [+-]?[0-9]+ and cli_float only parse.h's decimal grammar
 *    ("the whole text must be a number"; parse.h: "\t1" and "0x1p3" are refused the same way for
 *    flags and variables), within [lo, hi]; --clip-grad-norm that grammar in [0, 1e30], or inf;
 *  - parse_bytes gives digits times 1, 1024, 1024^2 or 1024^3 (K, M, G), from 1 to 4G;
 *  - cli_list calls back once per non-empty comma-separated item, at most max times;
 *  - a CPU list, formatted and parsed again, is the same set;
 *  - --normalize (cli_normalize_spec) standard:M,..:S,.. is accepted exactly when an independent
 *    reading of its two lists is, with the figures that reading gives (those the command sets);
 *  - --augment (cli_augment) is none or flip and crop:N (1..4096) each at most once, comma-separated;
 *  - --lr-schedule (lr_schedule_parse, launch/train/lr_schedule.c), as given and after "step:": a step
 *    schedule's factor reads by parse_double's grammar into (0, 1], its 1..LR_MAX_MILESTONES
 *    milestones rise strictly from 1, those in epochs are the epoch times the epoch's steps.
 */
#include "fuzz_common.h"
#include "base/parse.h"
#include "runtime/placement/affinity.h"

#include "launch/bench/cmd_bench.c"
#include "launch/train/lr_schedule.h"
#include "launch/normalize_flag.h"
#include "launch/train/train_flags.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>

/* [+-]?[0-9]+ and its value, saturated far outside any range used here. */
static int ref_int(const char *s, long double *v)
{
    int neg = *s == '-';
    if (*s == '+' || *s == '-') s++;
    if (!isdigit((unsigned char)*s)) return 0;
    long double x = 0;
    for (; isdigit((unsigned char)*s); s++)
        if (x < 1e30L) x = x * 10 + (*s - '0');
    *v = neg ? -x : x;
    return *s == '\0';
}

/* parse.h's grammar for doubles: [+-]?(digits[.digits*]|.digits)([eE][+-]?digits)?. */
static int ref_double_syntax(const char *s)
{
    int digits = 0;
    if (*s == '+' || *s == '-') s++;
    for (; isdigit((unsigned char)*s); s++) digits++;
    if (*s == '.')
        for (s++; isdigit((unsigned char)*s); s++) digits++;
    if (!digits) return 0;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-') s++;
        if (!isdigit((unsigned char)*s)) return 0;
        while (isdigit((unsigned char)*s)) s++;
    }
    return *s == '\0';
}

static void check_parse_int(const char *s, long lo, long hi)
{
    int v = 0x5eed;
    long double ref;
    /* parse.h: lo and hi are clamped to the range of int. */
    const long double rlo = lo < INT_MIN ? INT_MIN : lo, rhi = hi > INT_MAX ? INT_MAX : hi;
    const int want = ref_int(s, &ref) && ref >= rlo && ref <= rhi;
    const dt_status st = parse_int("DTRAIN_FUZZ", s, lo, hi, &v);
    FUZZ_CHECK((st == DT_OK) == want, "parse_int('%s', %ld, %ld) %s", s, lo, hi, st == DT_OK ? "accepted" : "refused");
    FUZZ_CHECK(st == DT_OK ? (long double)v == ref : v == 0x5eed, "parse_int('%s') gave %d", s, v);
}

static void check_parse_long(const char *s)
{
    long v = 0x5eed;
    long double ref;
    const int want = ref_int(s, &ref) && ref >= LONG_MIN && ref <= LONG_MAX;
    const dt_status st = parse_long("--fuzz", s, LONG_MIN, LONG_MAX, &v);
    FUZZ_CHECK((st == DT_OK) == want, "parse_long('%s') %s", s, st == DT_OK ? "accepted" : "refused");
    FUZZ_CHECK(st == DT_OK ? (long double)v == ref : v == 0x5eed, "parse_long('%s') gave %ld", s, v);
    FUZZ_CHECK(st == DT_OK || st == DT_ERR_INVALID_ARG, "a flag's refusal is bad usage, not status %d", (int)st);
}

/* zero: also accept 0 outside [lo, hi] (parse_double_or_zero). */
static void check_parse_double(const char *name, const char *s, double lo, double hi, int zero)
{
    double v = -0.125;
    const dt_status st = zero ? parse_double_or_zero(name, s, lo, hi, "never", &v) : parse_double(name, s, lo, hi, &v);
    int want = 0;
    double ref = 0;
    if (ref_double_syntax(s)) {
        errno = 0;
        ref = strtod(s, NULL);
        want = errno != ERANGE && isfinite(ref) && ((ref >= lo && ref <= hi) || (zero && ref == 0));
    }
    FUZZ_CHECK((st == DT_OK) == want, "parse_double%s('%s', %g, %g) %s", zero ? "_or_zero" : "", s, lo, hi,
               st == DT_OK ? "accepted" : "refused");
    if (st == DT_OK)
        FUZZ_CHECK(v == ref, "parse_double('%s') gave %.17g", s, v);
    else
        FUZZ_CHECK(v == -0.125, "a refusal of '%s' changed *out to %.17g", s, v);
}

static void check_cli_numbers(const char *s)
{
    long double ref;
    const int whole = ref_int(s, &ref);
    long l = 12345;
    if (cli_long("--fuzz", s, LONG_MIN, LONG_MAX, &l) == EXIT_OK)
        FUZZ_CHECK(whole && (long double)l == ref, "cli_long accepted '%s' as %ld", s, l);
    else
        FUZZ_CHECK(l == 12345, "cli_long changed *out on '%s'", s);
    int i = 777;
    if (cli_int("--fuzz", s, 0, 4096, &i) == EXIT_OK)
        FUZZ_CHECK(whole && i >= 0 && i <= 4096 && (long double)i == ref, "cli_int accepted '%s' as %d", s, i);
    float f = 0.25f;
    if (cli_float("--fuzz", s, 0, 1e7, &f) == EXIT_OK)
        FUZZ_CHECK(ref_double_syntax(s) && f >= 0 && f <= 1e7f, "cli_float accepted '%s' as %g", s, f);
    double clip = -3;
    if (cli_clip_grad_norm(s, &clip) == EXIT_OK)
        FUZZ_CHECK(!strcmp(s, "inf") ? isinf(clip) && clip > 0
                                     : ref_double_syntax(s) && clip >= 0 && clip <= (double)1e30f,
                   "--clip-grad-norm '%s' gave %g", s, clip);
    else
        FUZZ_CHECK(clip == -3, "--clip-grad-norm changed *out on '%s'", s);
    int threads = -2;
    if (cli_loader_threads(s, &threads) == EXIT_OK)
        FUZZ_CHECK(threads == -1 || (threads >= 0 && threads <= 256), "--loader-threads '%s' gave %d", s, threads);
}

static void check_bytes(const char *s)
{
    unsigned long long v = 99;
    if (parse_bytes("--fuzz", s, &v) != EXIT_OK) {
        FUZZ_CHECK(v == 99, "parse_bytes changed *out on '%s'", s);
        return;
    }
    size_t n = strspn(s, "0123456789");
    FUZZ_CHECK(n >= 1, "parse_bytes accepted '%s'", s);
    unsigned long long digits = strtoull(s, NULL, 10), unit = 1;
    switch (s[n]) {
        case '\0': break;
        case 'k':
        case 'K': unit = 1ull << 10; break;
        case 'm':
        case 'M': unit = 1ull << 20; break;
        case 'g':
        case 'G': unit = 1ull << 30; break;
        default: FUZZ_CHECK(0, "parse_bytes accepted the suffix of '%s'", s);
    }
    FUZZ_CHECK(s[n] == '\0' || s[n + 1] == '\0', "parse_bytes accepted trailing text in '%s'", s);
    FUZZ_CHECK(v >= 1 && v <= BENCH_MAX_BYTES && v == digits * unit, "parse_bytes('%s') gave %llu", s, v);
}

typedef struct list_seen {
    int n;
    char items[64][512];
} list_seen;

static int list_item(const char *item, void *ud)
{
    list_seen *l = ud;
    FUZZ_CHECK(item[0] && !strchr(item, ','), "cli_list gave item '%s'", item);
    FUZZ_CHECK(l->n < 64, "cli_list gave more items than its max");
    snprintf(l->items[l->n++], sizeof l->items[0], "%s", item);
    return EXIT_OK;
}

static void check_list(const char *s)
{
    static list_seen seen;
    seen.n = 0;
    const int max = 8;
    if (cli_list("--fuzz", s, max, list_item, &seen) != EXIT_OK) return;
    FUZZ_CHECK(seen.n >= 1 && seen.n <= max, "cli_list accepted '%s' with %d items", s, seen.n);
    /* The items, rejoined with commas, are the text without its empty items. */
    int k = 0;
    for (const char *p = s; *p;) {
        size_t len = strcspn(p, ",");
        if (len) {
            FUZZ_CHECK(k < seen.n && strlen(seen.items[k]) == len && memcmp(seen.items[k], p, len) == 0,
                       "cli_list item %d of '%s'", k, s);
            k++;
        }
        p += len;
        if (*p) p++;
    }
    FUZZ_CHECK(k == seen.n, "cli_list gave %d items for '%s', expected %d", seen.n, s, k);
}

static void check_cpulist(const char *s)
{
    cpu_set_t set;
    if (affinity_parse(s, &set) != DT_OK) return;
    /* What it parsed, formatted and parsed again, is the same set. */
    char text[8192];
    affinity_format(&set, text, sizeof text);
    cpu_set_t again;
    FUZZ_CHECK(affinity_parse(text, &again) == DT_OK || CPU_COUNT(&set) == 0,
               "'%s' formats as '%s', which "
               "does not parse",
               s, text);
    if (CPU_COUNT(&set)) FUZZ_CHECK(CPU_EQUAL(&set, &again), "'%s' -> '%s' is another set", s, text);
}

/* parse_step_range: accepted only as two whole numbers joined by one ':', 1 <= A <= B <= max, with
 * those values; a refusal leaves the outputs alone. */
static void check_step_range(const char *s)
{
    long a = -3, b = -3;
    const long max = 1000;
    if (parse_step_range("--trace-steps", s, max, &a, &b) != DT_OK) {
        FUZZ_CHECK(a == -3 && b == -3, "parse_step_range changed its outputs on '%s'", s);
        return;
    }
    const char *colon = strchr(s, ':');
    FUZZ_CHECK(colon && !strchr(colon + 1, ':'), "parse_step_range accepted '%s' without exactly one ':'", s);
    char left[64];
    const size_t n = (size_t)(colon - s);
    FUZZ_CHECK(n < sizeof left, "parse_step_range accepted a first step of %zu characters in '%s'", n, s);
    memcpy(left, s, n), left[n] = '\0';
    long double ra, rb;
    FUZZ_CHECK(ref_int(left, &ra) && ref_int(colon + 1, &rb), "parse_step_range accepted '%s'", s);
    FUZZ_CHECK((long double)a == ra && (long double)b == rb && 1 <= a && a <= b && b <= max,
               "parse_step_range('%s') gave %ld:%ld", s, a, b);
}

/* One list of --normalize standard:MEANS:STDS by an independent reading: 1 to CLI_NORM_MAX_C
 * comma-separated items, none empty or of 128 characters or more, each of parse.h's grammar, finite
 * and within +-1e30, a std above 0 as the float it is kept in. The count, or 0 when refused. */
static int ref_norm_list(const char *list, int positive, float *out)
{
    int n = 0;
    for (const char *p = list;; p++) {
        const size_t len = strcspn(p, ",");
        char item[128];
        if (len == 0 || len >= sizeof item || n == CLI_NORM_MAX_C) return 0;
        memcpy(item, p, len);
        item[len] = '\0';
        if (!ref_double_syntax(item)) return 0;
        errno = 0;
        const double v = strtod(item, NULL);
        if (errno == ERANGE || !isfinite(v) || v < -1e30 || v > 1e30 || (positive && !((float)v > 0))) return 0;
        out[n++] = (float)v;
        if (!p[len]) return n;
        p += len;
    }
}

/* --normalize's figures (cli_normalize_spec): accepted exactly as none, unit, standard, or
 * standard:M,..:S,.. with as many means as standard deviations (ref_norm_list), and then with the
 * figures an independent reading of the text gives, the ones the command sets on its dataset; a
 * refusal leaves no figures. Tried as given and after "standard:". */
static void check_normalize(const char *s)
{
    for (int prefixed = 0; prefixed < 2; prefixed++) {
        char arg[4200];
        if (snprintf(arg, sizeof arg, "%s%s", prefixed ? "standard:" : "", s) >= (int)sizeof arg) continue;
        cli_norm_figures fig, ref;
        memset(&fig, 0, sizeof fig);
        memset(&ref, 0, sizeof ref);
        int normalize = -1;
        const int rc = cli_normalize_spec(arg, &normalize, &fig);
        const int plain = !strcmp(arg, "none")       ? DT_NORMALIZE_NONE
                          : !strcmp(arg, "unit")     ? DT_NORMALIZE_UNIT
                          : !strcmp(arg, "standard") ? DT_NORMALIZE_STANDARD
                                                     : -2;
        const char *colon = strncmp(arg, "standard:", 9) ? NULL : strchr(arg + 9, ':');
        int want = plain != -2;
        if (colon && !strchr(colon + 1, ':')) {
            char means[sizeof arg];
            snprintf(means, sizeof means, "%.*s", (int)(colon - arg - 9), arg + 9);
            const int nm = ref_norm_list(means, 0, ref.mean), ns = nm ? ref_norm_list(colon + 1, 1, ref.std) : 0;
            ref.n = nm && nm == ns ? nm : 0;
            want = ref.n > 0;
        }
        FUZZ_CHECK((rc == EXIT_OK) == want, "--normalize '%s' %s", arg, rc == EXIT_OK ? "accepted" : "refused");
        if (rc != EXIT_OK) {
            FUZZ_CHECK(rc == EXIT_USAGE && fig.n == 0, "--normalize '%s' refused with rc %d, %d figures", arg, rc,
                       fig.n);
            continue;
        }
        FUZZ_CHECK(normalize == (fig.n ? DT_NORMALIZE_STANDARD : plain), "--normalize '%s' gave mode %d", arg,
                   normalize);
        FUZZ_CHECK(fig.n == ref.n, "--normalize '%s' gave %d channels, expected %d", arg, fig.n, ref.n);
        for (int c = 0; c < fig.n; c++)
            FUZZ_CHECK(fig.mean[c] == ref.mean[c] && fig.std[c] == ref.std[c],
                       "--normalize '%s' channel %d: mean %.9g std %.9g, the text says %.9g and %.9g", arg, c,
                       fig.mean[c], fig.std[c], ref.mean[c], ref.std[c]);
    }
}

/* One part of --augment by an independent reading: 1 flip, 2 crop:N with N a whole number in
 * 1..4096 (*pad), 0 anything else. */
static int ref_augment_part(const char *p, size_t len, int *pad)
{
    char item[300];
    if (len >= sizeof item) return 0;
    memcpy(item, p, len);
    item[len] = '\0';
    if (!strcmp(item, "flip")) return 1;
    long double v;
    if (strncmp(item, "crop:", 5) || !ref_int(item + 5, &v) || v < 1 || v > 4096) return 0;
    *pad = (int)v;
    return 2;
}

/* --augment (cli_augment): none, or one or two comma-separated parts, flip and crop:N, each at
 * most once; anything else (an empty part among them) refused with *crop_pad and *flip as they
 * were; an accepted text gives its parts' values. */
static void check_augment(const char *s)
{
    int pad = -7, flip = -7;
    const int rc = cli_augment(s, &pad, &flip);
    int want_pad = 0, want_flip = 0, ok = !strcmp(s, "none");
    if (!ok && strlen(s) < 256) {
        const char *comma = strchr(s, ',');
        const size_t n1 = comma ? (size_t)(comma - s) : strlen(s);
        int p1 = 0, p2 = 0;
        const int k1 = ref_augment_part(s, n1, &p1);
        /* -1: no second part; 0 (refused): a bad one, or a third */
        const int k2 = !comma ? -1 : strchr(comma + 1, ',') ? 0 : ref_augment_part(comma + 1, strlen(comma + 1), &p2);
        if (k1 && (k2 == -1 || (k2 > 0 && k2 != k1))) {
            ok = 1;
            want_flip = k1 == 1 || k2 == 1;
            want_pad = k1 == 2 ? p1 : k2 == 2 ? p2 : 0;
        }
    }
    if (rc == EXIT_OK)
        FUZZ_CHECK(ok && pad == want_pad && flip == want_flip, "--augment '%s' gave crop %d flip %d", s, pad, flip);
    else
        FUZZ_CHECK(!ok && rc == EXIT_USAGE && pad == -7 && flip == -7, "--augment '%s' refused (rc %d) or changed *out",
                   s, rc);
}

/* --lr-schedule: the plain names exactly, or step:M,..:G as lr_schedule.h says; a refusal says why. */
static void check_lr_schedule(const char *s)
{
    for (int prefixed = 0; prefixed < 2; prefixed++) {
        char arg[4200], err[256] = "";
        if (snprintf(arg, sizeof arg, "%s%s", prefixed ? "step:" : "", s) >= (int)sizeof arg) continue;
        lr_schedule l;
        const long spe = 100;
        if (lr_schedule_parse(arg, spe, &l, err, sizeof err)) {
            FUZZ_CHECK(err[0], "lr_schedule_parse refused '%s' without a reason", arg);
            continue;
        }
        if (l.kind != LR_STEP) {
            const lr_kind want = !strcmp(arg, "constant") ? LR_CONSTANT
                                 : !strcmp(arg, "cosine") ? LR_COSINE
                                 : !strcmp(arg, "linear") ? LR_LINEAR
                                                          : LR_STEP;
            FUZZ_CHECK(l.kind == want, "lr_schedule_parse('%s') gave kind %d", arg, (int)l.kind);
            continue;
        }
        const char *g = strrchr(arg, ':');
        double gamma = -1;
        FUZZ_CHECK(!strncmp(arg, "step:", 5) && g && parse_double("factor", g + 1, 0, 1, &gamma) == DT_OK &&
                       gamma == l.gamma && gamma > 0,
                   "lr_schedule_parse('%s') took factor %.17g", arg, l.gamma);
        FUZZ_CHECK(l.n >= 1 && l.n <= LR_MAX_MILESTONES, "'%s': %d milestones", arg, l.n);
        for (int i = 0; i < l.n; i++) {
            FUZZ_CHECK(l.milestone[i] >= 1 && (i == 0 || l.milestone[i] > l.milestone[i - 1]),
                       "'%s': milestone %d is step %ld", arg, i, l.milestone[i]);
            FUZZ_CHECK(!l.epoch[i] || l.milestone[i] == l.epoch[i] * spe, "'%s': epoch %ld is step %ld", arg,
                       l.epoch[i], l.milestone[i]);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_str(data, size);
    check_parse_int(s, INT_MIN, INT_MAX);
    check_parse_int(s, 0, 4096);
    check_parse_int(s, -5, LONG_MAX); /* clamped to INT_MAX */
    check_parse_long(s);
    check_parse_double("DTRAIN_FUZZ", s, -1e300, 1e300, 0);
    check_parse_double("--fuzz", s, 0.0, 1e7, 0);
    check_parse_double("DTRAIN_TIMEOUT", s, 1, 1e7, 1);
    check_cli_numbers(s);
    check_bytes(s);
    check_list(s);
    check_cpulist(s);
    check_step_range(s);
    check_normalize(s);
    check_augment(s);
    check_lr_schedule(s);
    free(s);
    return 0;
}
