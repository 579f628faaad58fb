/*
 * test_metrics.c - the --metrics record's figures as a reader gets them back (launch/train/metrics.c):
 * the epoch resolves one step of a large dataset, a figure that is not finite is null, the rate
 * reads back as the fp32 the optimizer used.
 */
#include "launch/train/metrics.h"
#include "launch/cli.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* metrics.c's one use of the CLI (a file that cannot be moved aside, not reached here): its
 * message to stderr, without the rest of the command line's code. */
void cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

/* The record r as metrics_write writes it, into buf. */
static void record_text(const metrics_record *r, char *buf, size_t n)
{
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(metrics_write(f, r), 0);
    rewind(f);
    const size_t got = fread(buf, 1, n - 1, f);
    buf[got] = '\0';
    fclose(f);
}

/* The number after "key": in text. */
static double field(const char *text, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *at = strstr(text, pat);
    if (!at) fail_msg("no %s in %s", key, text);
    return strtod(at + strlen(pat), NULL);
}

/* ImageNet's 1,281,167 samples at a global batch of 256: a step is 0.0002 of an epoch, and on
 * 60 million samples 4e-6; --log-every 1 must give each record its own epoch, as the samples
 * seen say it. */
static void test_epoch_resolves_a_step(void **st)
{
    (void)st;
    const double sizes[] = {1281167, 60e6};
    for (int k = 0; k < 2; k++) {
        double prev = -1;
        for (long step = 1; step <= 3; step++) {
            const long seen = 256 * step;
            const metrics_record r = {.step = step, .epoch = 7 + seen / sizes[k], .precision = "fp32", .lr = 0.1};
            char text[1024];
            record_text(&r, text, sizeof text);
            const double e = field(text, "epoch");
            if (fabs(e - r.epoch) > 1e-9 * r.epoch) fail_msg("epoch %.12f written as %s", r.epoch, text);
            assert_true(e > prev);
            prev = e;
        }
    }
}

/* JSON has no NaN: a diverged loss is null; the rate in the digits that read back as its float. */
static void test_null_and_rate(void **st)
{
    (void)st;
    const metrics_record r = {.step = 4, .epoch = 0.5, .loss = NAN, .precision = "fp16", .lr = 0.05f};
    char text[1024];
    record_text(&r, text, sizeof text);
    assert_non_null(strstr(text, "\"loss\": null"));
    assert_non_null(strstr(text, "\"lr\": 0.05}"));
    assert_non_null(strstr(text, "\"epoch\": 0.5,"));
    /* No exponent (a reader taking [0-9.]* would stop at 4.25e): 0.0000425 in decimals. */
    const metrics_record small = {.step = 1, .epoch = 0.0000425, .precision = "fp32", .lr = 0.1f};
    record_text(&small, text, sizeof text);
    assert_non_null(strstr(text, "\"epoch\": 0.0000425,"));
    const metrics_record whole = {.step = 8, .epoch = 2, .precision = "fp32", .lr = 0.1f};
    record_text(&whole, text, sizeof text);
    assert_non_null(strstr(text, "\"epoch\": 2,"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_epoch_resolves_a_step),
        cmocka_unit_test(test_null_and_rate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
