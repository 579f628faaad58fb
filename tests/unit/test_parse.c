/*
 * test_parse.c - unit tests of runtime/parse.c: parse_int, parse_long and parse_double accept
 * exactly the documented decimal forms inside [lo, hi], and every rejection returns DT_ERR_ENV (a
 * variable) or DT_ERR_INVALID_ARG (a flag) with a message that names the variable or flag and quotes
 * the value, leaving the output untouched.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dtrain.h"
#include "base/parse.h"
#include "base/status.h"
#include "base/printable.h"

/* A value no test expects, to prove a failing parse did not write the output. */
#define INT_SENTINEL 123456
#define DOUBLE_SENTINEL -777.25

/* Fails the test, showing the message, unless the last error contains needle, as a message
 * writes it: its control characters as C escapes (base/printable.h). */
static void expect_error_contains(const char *needle)
{
    const char *msg = dt_last_error();
    char shown[1024];
    text_escape_controls(needle, shown, sizeof shown);
    if (strstr(msg, shown) == NULL) fail_msg("last error \"%s\" does not contain \"%s\"", msg, shown);
}

/* ---------------------------------------------------------------- parse_int: accepted */

typedef struct int_ok_case {
    const char *value;
    long lo, hi;
    int expected;
} int_ok_case;

static void test_parse_int_accepts(void **state)
{
    (void)state;
    static const int_ok_case cases[] = {
        {"0", 0, 10, 0},
        {"42", 0, 100, 42},
        {"+7", 0, 10, 7},
        {"-5", -10, 10, -5},
        {"-0", 0, 10, 0},
        {"007", 0, 10, 7}, /* leading zeros are still decimal, never octal */
        {"010", 0, 100, 10},
        {"3", 3, 3, 3},          /* lo == hi */
        {"0", 0, 2147483646, 0}, /* both ends of the range are inclusive */
        {"2147483646", 0, 2147483646, 2147483646},
        {"2147483647", 0, LONG_MAX, INT_MAX}, /* hi clamped to INT_MAX, INT_MAX still accepted */
        {"-2147483648", LONG_MIN, 0, INT_MIN},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int out = INT_SENTINEL;
        status_clear_error();
        dt_status st = parse_int("SLURM_PROCID", cases[i].value, cases[i].lo, cases[i].hi, &out);
        if (st != DT_OK) fail_msg("parse_int('%s') failed: %s", cases[i].value, dt_last_error());
        assert_int_equal(out, cases[i].expected);
        assert_string_equal(dt_last_error(), "");
    }
}

/* ---------------------------------------------------------------- parse_int: rejected */

typedef struct int_bad_case {
    const char *value;
    long lo, hi;
    const char *fragment; /* what the message must say besides NAME='value' */
} int_bad_case;

static void test_parse_int_rejects(void **state)
{
    (void)state;
    static const int_bad_case cases[] = {
        {"", 0, 10, "is empty"},
        {" 3", 0, 10, "has leading or trailing whitespace"},
        {"3 ", 0, 10, "has leading or trailing whitespace"},
        {"3\n", 0, 10, "has leading or trailing whitespace"},
        {"\t3", 0, 10, "has leading or trailing whitespace"},
        {"abc", 0, 2147483646, "is not a whole number (expected an integer from 0 to 2147483646)"},
        {"12abc", 0, 100, "is not a whole number"},
        {"1 2", 0, 100, "is not a whole number"},
        {"0x10", 0, 100, "is not a whole number"},
        {"1.5", 0, 100, "is not a whole number"},
        {"1e3", 0, 10000, "is not a whole number"},
        {"+", 0, 10, "is not a whole number"},
        {"-", -10, 10, "is not a whole number"},
        {"--1", -10, 10, "is not a whole number"},
        {"+-1", -10, 10, "is not a whole number"},
        {"1-", 0, 10, "is not a whole number"},
        {"-1", 0, 2147483646, "is out of range (expected an integer from 0 to 2147483646)"},
        {"11", 0, 10, "is out of range (expected an integer from 0 to 10)"},
        {"-11", -10, 10, "is out of range (expected an integer from -10 to 10)"},
        {"2147483647", 0, 2147483646, "is out of range"},
        {"2147483648", 0, LONG_MAX, "is out of range (expected an integer from 0 to 2147483647)"},
        {"-2147483649", LONG_MIN, 0, "is out of range (expected an integer from -2147483648 to 0)"},
        {"99999999999999999999", 0, 10, "is out of range"}, /* strtol overflow: ERANGE */
        {"-99999999999999999999", -10, 10, "is out of range"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int out = INT_SENTINEL;
        char quoted[256];
        status_clear_error();
        dt_status st = parse_int("SLURM_PROCID", cases[i].value, cases[i].lo, cases[i].hi, &out);
        if (st != DT_ERR_ENV) fail_msg("parse_int('%s') returned %d, expected DT_ERR_ENV", cases[i].value, (int)st);
        assert_int_equal(out, INT_SENTINEL);
        snprintf(quoted, sizeof quoted, "SLURM_PROCID='%s'", cases[i].value);
        expect_error_contains(quoted);
        expect_error_contains(cases[i].fragment);
    }
}

static void test_parse_int_exact_messages(void **state)
{
    (void)state;
    int out = INT_SENTINEL;
    assert_int_equal(parse_int("SLURM_PROCID", "abc", 0, 2147483646, &out), DT_ERR_ENV);
    assert_string_equal(dt_last_error(),
                        "SLURM_PROCID='abc' is not a whole number (expected an integer from 0 to 2147483646)");
    assert_int_equal(parse_int("SLURM_PROCID", "-1", 0, 2147483646, &out), DT_ERR_ENV);
    assert_string_equal(dt_last_error(),
                        "SLURM_PROCID='-1' is out of range (expected an integer from 0 to 2147483646)");
    assert_int_equal(out, INT_SENTINEL);
}

static void test_parse_int_unset(void **state)
{
    (void)state;
    int out = INT_SENTINEL;
    assert_int_equal(parse_int("SLURM_NTASKS", NULL, 1, 100, &out), DT_ERR_ENV);
    assert_int_equal(out, INT_SENTINEL);
    expect_error_contains("SLURM_NTASKS is not set");
}

/* A huge value is quoted only in part, so the "expected ..." explanation is never cut off. */
static void test_parse_int_long_value(void **state)
{
    (void)state;
    char value[3000];
    memset(value, '7', sizeof value - 2);
    value[sizeof value - 2] = 'x';
    value[sizeof value - 1] = '\0';
    int out = INT_SENTINEL;
    assert_int_equal(parse_int("DTRAIN_BLAS_THREADS", value, 0, 64, &out), DT_ERR_ENV);
    assert_int_equal(out, INT_SENTINEL);
    expect_error_contains("DTRAIN_BLAS_THREADS='777");
    expect_error_contains("...' is not a whole number (expected an integer from 0 to 64)");
}

static void test_parse_int_caller_bugs(void **state)
{
    (void)state;
    int out = INT_SENTINEL;
    assert_int_equal(parse_int("X", "5", 10, 0, &out), DT_ERR_INTERNAL);
    assert_int_equal(out, INT_SENTINEL);
    assert_int_equal(parse_int("X", "5", 0, 10, NULL), DT_ERR_INTERNAL);
    assert_int_equal(parse_int(NULL, "5", 0, 10, &out), DT_ERR_INTERNAL);
    assert_int_equal(out, INT_SENTINEL);
}

/* ---------------------------------------------------------------- parse_double: accepted */

typedef struct double_ok_case {
    const char *value;
    double lo, hi, expected;
} double_ok_case;

static void test_parse_double_accepts(void **state)
{
    (void)state;
    static const double_ok_case cases[] = {
        {"600", 0, 86400, 600.0},     {"0", 0, 86400, 0.0},
        {"0.5", 0, 1, 0.5},           {".5", 0, 1, 0.5},
        {"5.", 0, 10, 5.0},           {"1e3", 0, 86400, 1000.0},
        {"1E+3", 0, 86400, 1000.0},   {"2.5e-1", 0, 1, 0.25},
        {"-2.5E-1", -1, 1, -0.25},    {"+1.25", 0, 10, 1.25},
        {"007.5", 0, 10, 7.5},        {"86400", 0, 86400, 86400.0}, /* both ends inclusive */
        {"1e308", 0, 1.7e308, 1e308},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double out = DOUBLE_SENTINEL;
        status_clear_error();
        dt_status st = parse_double("DTRAIN_TIMEOUT", cases[i].value, cases[i].lo, cases[i].hi, &out);
        if (st != DT_OK) fail_msg("parse_double('%s') failed: %s", cases[i].value, dt_last_error());
        assert_true(out == cases[i].expected);
        assert_string_equal(dt_last_error(), "");
    }
}

/* ---------------------------------------------------------------- parse_double: rejected */

typedef struct double_bad_case {
    const char *value;
    double lo, hi;
    const char *fragment;
} double_bad_case;

static void test_parse_double_rejects(void **state)
{
    (void)state;
    static const double_bad_case cases[] = {
        {"", 0, 86400, "is empty"},
        {" 1", 0, 86400, "has leading or trailing whitespace"},
        {"1 ", 0, 86400, "has leading or trailing whitespace"},
        {"abc", 0, 86400, "is not a number (expected a number from 0 to 86400)"},
        {"10s", 0, 86400, "is not a number"},
        {"1,5", 0, 86400, "is not a number"},
        {"1.2.3", 0, 86400, "is not a number"},
        {".", 0, 86400, "is not a number"},
        {"-", 0, 86400, "is not a number"},
        {"e3", 0, 86400, "is not a number"},
        {"1e", 0, 86400, "is not a number"},
        {"1e+", 0, 86400, "is not a number"},
        {"1e3.5", 0, 86400, "is not a number"},
        {"0x10", 0, 86400, "is not a number"},
        {"0x1p3", 0, 86400, "is not a number"},
        {"nan", 0, 86400, "is not a finite number"},
        {"NaN", 0, 86400, "is not a finite number"},
        {"-nan", 0, 86400, "is not a finite number"},
        {"inf", 0, 86400, "is not a finite number"},
        {"+INF", 0, 86400, "is not a finite number"},
        {"-infinity", -1, 86400, "is not a finite number"},
        {"-1", 0, 86400, "is out of range (expected a number from 0 to 86400)"},
        {"86400.5", 0, 86400, "is out of range"},
        {"0.25", 0.5, 1, "is out of range (expected a number from 0.5 to 1)"},
        /* 0 is taken outside [lo, hi] by parse_double_or_zero only (--lr 0 would be no step at all). */
        {"0", 1e-12, 1e3, "is out of range (expected a number from 1e-12 to 1000)"},
        {"-0.0", 0.5, 1, "is out of range"},
        {"1e999", 0, 86400, "is out of range: too large or too small in magnitude"}, /* overflow */
        {"-1e999", -1, 86400, "is out of range: too large or too small in magnitude"},
        {"1e-999", 0, 86400, "is out of range: too large or too small in magnitude"}, /* underflow */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double out = DOUBLE_SENTINEL;
        char quoted[256];
        status_clear_error();
        dt_status st = parse_double("DTRAIN_TIMEOUT", cases[i].value, cases[i].lo, cases[i].hi, &out);
        if (st != DT_ERR_ENV) fail_msg("parse_double('%s') returned %d, expected DT_ERR_ENV", cases[i].value, (int)st);
        assert_true(out == DOUBLE_SENTINEL);
        snprintf(quoted, sizeof quoted, "DTRAIN_TIMEOUT='%s'", cases[i].value);
        expect_error_contains(quoted);
        expect_error_contains(cases[i].fragment);
    }
}

static void test_parse_double_unset_and_caller_bugs(void **state)
{
    (void)state;
    double out = DOUBLE_SENTINEL;
    assert_int_equal(parse_double("DTRAIN_TIMEOUT", NULL, 0, 86400, &out), DT_ERR_ENV);
    expect_error_contains("DTRAIN_TIMEOUT is not set");
    assert_int_equal(parse_double("X", "1", 2, 1, &out), DT_ERR_INTERNAL);
    assert_int_equal(parse_double("X", "1", NAN, 1, &out), DT_ERR_INTERNAL);
    assert_int_equal(parse_double("X", "1", 0, 2, NULL), DT_ERR_INTERNAL);
    assert_int_equal(parse_double(NULL, "1", 0, 2, &out), DT_ERR_INTERNAL);
    assert_true(out == DOUBLE_SENTINEL);
}

/* parse_double_or_zero: 0 outside [lo, hi] is taken and named in the range ("off" when the caller
 * names nothing); any other value outside is refused as parse_double refuses it. */
static void test_parse_double_or_zero(void **state)
{
    (void)state;
    double out = DOUBLE_SENTINEL;
    assert_int_equal(parse_double_or_zero("DTRAIN_TIMEOUT", "0", 1, 10, "never", &out), DT_OK);
    assert_true(out == 0);
    assert_int_equal(parse_double_or_zero("DTRAIN_TIMEOUT", "10", 1, 10, "never", &out), DT_OK);
    assert_true(out == 10);
    out = DOUBLE_SENTINEL;
    assert_int_equal(parse_double_or_zero("DTRAIN_TIMEOUT", "0.5", 1, 10, "never", &out), DT_ERR_ENV);
    expect_error_contains("DTRAIN_TIMEOUT='0.5' is out of range (expected 0 (never) or a number from 1 to 10)");
    assert_int_equal(parse_double_or_zero("--x", "11", 1, 10, NULL, &out), DT_ERR_INVALID_ARG);
    expect_error_contains("--x '11' is out of range (expected 0 (off) or a number from 1 to 10)");
    assert_true(out == DOUBLE_SENTINEL);
}

/* ---------------------------------------------------------------- flags: the same rule */

/* A flag's value is held to the rule of a variable's: what DTRAIN_TIMEOUT refuses, --timeout
 * refuses too (a tab before the number, a hex float), worded as typed and as bad usage. */
static void test_flags_same_rule(void **state)
{
    (void)state;
    static const char *const bad_numbers[] = {"\t5", " 5", "5\n", "0x1p3", "0x10", "inf", "nan", "5s", ""};
    for (size_t i = 0; i < sizeof bad_numbers / sizeof bad_numbers[0]; i++) {
        double d = DOUBLE_SENTINEL, e = DOUBLE_SENTINEL;
        assert_int_equal(parse_double("DTRAIN_TIMEOUT", bad_numbers[i], 0, 1e7, &e), DT_ERR_ENV);
        dt_status st = parse_double("--timeout", bad_numbers[i], 0, 1e7, &d);
        if (st != DT_ERR_INVALID_ARG)
            fail_msg("--timeout '%s' returned %d, expected DT_ERR_INVALID_ARG", bad_numbers[i], (int)st);
        char quoted[64];
        snprintf(quoted, sizeof quoted, "--timeout '%s' ", bad_numbers[i]);
        expect_error_contains(quoted);
        expect_error_contains("(expected a number from 0 to 10000000)");
        assert_true(d == DOUBLE_SENTINEL && e == DOUBLE_SENTINEL);

        long l = 99;
        assert_int_equal(parse_long("--steps", bad_numbers[i], 0, 100, &l), DT_ERR_INVALID_ARG);
        assert_int_equal(l, 99);
    }
    double d = 0;
    assert_int_equal(parse_double("--timeout", "2.5", 0, 1e7, &d), DT_OK);
    assert_true(d == 2.5);

    int out = INT_SENTINEL;
    assert_int_equal(parse_int("--blas-threads", "1.5", 0, 4096, &out), DT_ERR_INVALID_ARG);
    assert_string_equal(dt_last_error(),
                        "--blas-threads '1.5' is not a whole number (expected an integer from 0 to 4096)");
    assert_int_equal(parse_int("--blas-threads", "\t1", 0, 4096, &out), DT_ERR_INVALID_ARG);
    assert_string_equal(dt_last_error(), "--blas-threads '\\t1' has leading or trailing whitespace (expected an "
                                         "integer from 0 to 4096)");
    assert_int_equal(parse_int("--blas-threads", NULL, 0, 4096, &out), DT_ERR_INVALID_ARG);
    assert_string_equal(dt_last_error(), "--blas-threads needs a value (expected an integer from 0 to 4096)");
    assert_int_equal(out, INT_SENTINEL);
}

/* parse_long: the whole range of long, which parse_int clamps to int. */
static void test_parse_long(void **state)
{
    (void)state;
    long out = 0;
    assert_int_equal(parse_long("--dataset-size", "4294967296", 1, LONG_MAX, &out), DT_OK);
    assert_true(out == 4294967296L);
    assert_int_equal(parse_long("--seed", "-9223372036854775808", LONG_MIN, LONG_MAX, &out), DT_OK);
    assert_true(out == LONG_MIN);
    out = 7;
    assert_int_equal(parse_long("--dataset-size", "9223372036854775808", 1, LONG_MAX, &out), DT_ERR_INVALID_ARG);
    expect_error_contains("--dataset-size '9223372036854775808' is out of range (expected an integer from 1 to "
                          "9223372036854775807)");
    assert_int_equal(parse_long("DTRAIN_X", "0", 1, 10, &out), DT_ERR_ENV);
    expect_error_contains("DTRAIN_X='0' is out of range (expected an integer from 1 to 10)");
    assert_int_equal(out, 7);
    assert_int_equal(parse_long("X", "5", 10, 0, &out), DT_ERR_INTERNAL);
    assert_int_equal(parse_long(NULL, "5", 0, 10, &out), DT_ERR_INTERNAL);
    assert_int_equal(parse_long("X", "5", 0, 10, NULL), DT_ERR_INTERNAL);
    assert_int_equal(out, 7);
}

/* parse_step_range: "A:B" with 1 <= A <= B <= max, and every other shape refused with the value
 * quoted. */
static void test_parse_step_range(void **state)
{
    (void)state;
    long a = 77, b = 77;
    assert_int_equal(parse_step_range("--trace-steps", "2:3", 100, &a, &b), DT_OK);
    assert_int_equal(a, 2);
    assert_int_equal(b, 3);
    assert_int_equal(parse_step_range("--trace-steps", "5:5", 5, &a, &b), DT_OK);
    assert_int_equal(a, 5);
    assert_int_equal(b, 5);
    static const char *const bad[] = {"",
                                      ":",
                                      "2",
                                      "2:",
                                      ":3",
                                      "3:2",
                                      "0:1",
                                      "-1:2",
                                      "2:3:4",
                                      " 2:3",
                                      "2:3 ",
                                      "2 :3",
                                      "a:b",
                                      "2:x",
                                      "0x2:3",
                                      "1:101",
                                      "99999999999999999999:1",
                                      "2::3"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        a = b = 77;
        assert_int_equal(parse_step_range("--trace-steps", bad[i], 100, &a, &b), DT_ERR_INVALID_ARG);
        assert_int_equal(a, 77);
        assert_int_equal(b, 77);
        assert_non_null(strstr(dt_last_error(), "--trace-steps '"));
    }
    assert_int_equal(parse_step_range("--trace-steps", "3:2", 100, &a, &b), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "before the first"));
    assert_int_equal(parse_step_range("DTRAIN_X", "1", 100, &a, &b), DT_ERR_ENV);
    assert_int_equal(parse_step_range("--trace-steps", NULL, 100, &a, &b), DT_ERR_INVALID_ARG);
    assert_int_equal(parse_step_range("--trace-steps", "1:2", 0, &a, &b), DT_ERR_INTERNAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_step_range),
        cmocka_unit_test(test_parse_int_accepts),
        cmocka_unit_test(test_parse_int_rejects),
        cmocka_unit_test(test_parse_int_exact_messages),
        cmocka_unit_test(test_parse_int_unset),
        cmocka_unit_test(test_parse_int_long_value),
        cmocka_unit_test(test_parse_int_caller_bugs),
        cmocka_unit_test(test_parse_double_accepts),
        cmocka_unit_test(test_parse_double_rejects),
        cmocka_unit_test(test_parse_double_unset_and_caller_bugs),
        cmocka_unit_test(test_parse_double_or_zero),
        cmocka_unit_test(test_flags_same_rule),
        cmocka_unit_test(test_parse_long),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
