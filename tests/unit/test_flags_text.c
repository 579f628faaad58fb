/*
 * test_flags_text.c - launch/flags_text.c: the text of the flags the ranks compare. Numbers in
 * their shortest exact form (equal values give equal text, different values different text, down
 * to one unit in the last place of a double), path flags as given or not, and a text longer than
 * its buffer cut at the end with its length kept inside the buffer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "launch/cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void test_numbers_shortest(void **unused)
{
    (void)unused;
    char b[32];
    assert_string_equal(cli_flags_num(b, 0.01f, 1), "0.01"); /* not 0.00999999978 */
    assert_string_equal(cli_flags_num(b, 0.1, 0), "0.1");
    assert_string_equal(cli_flags_num(b, 25, 0), "25");
    assert_string_equal(cli_flags_num(b, 1234567, 0), "1234567");
    assert_string_equal(cli_flags_num(b, 1e-8, 0), "1e-08");
    assert_string_equal(CLI_F32_TEXT(0.9f), "0.9");
    assert_string_equal(CLI_F64_TEXT(0.5), "0.5");
}

/* Every double reads back from its text exactly, also one that needs all 17 digits: two values
 * one unit in the last place apart never share a text (they would be taken as one setting). */
static void test_numbers_exact(void **unused)
{
    (void)unused;
    const double v[] = {
        0.1,    nextafter(0.1, 1), nextafter(0.1, 0), 1.0 / 3, nextafter(1.0 / 3, 1), 2.0 / 3, nextafter(1e300, 0),
        5e-324, 123456.789};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        char b[32];
        cli_flags_num(b, v[i], 0);
        assert_true(strtod(b, NULL) == v[i]);
    }
    char a[32], c[32];
    assert_string_not_equal(cli_flags_num(a, 0.1, 0), cli_flags_num(c, nextafter(0.1, 1), 0));
    /* As a float: the float's shortest text, and floats apart stay apart. */
    const float f[] = {0.1f, nextafterf(0.1f, 1), 1.0f / 3, 3.4028235e38f, 1e-45f};
    for (size_t i = 0; i < sizeof f / sizeof *f; i++) {
        char b[32];
        cli_flags_num(b, f[i], 1);
        assert_true(strtof(b, NULL) == f[i]);
    }
    assert_string_not_equal(cli_flags_num(a, 0.1f, 1), cli_flags_num(c, nextafterf(0.1f, 1), 1));
}

static void test_lines_and_paths(void **unused)
{
    (void)unused;
    cli_flags_text t = {{0}, 0};
    cli_flags_line(&t, "--batch %d", 64);
    cli_flags_path(&t, "--data", "/scratch/node3/mnist");
    cli_flags_path(&t, "--eval-data", NULL);
    assert_string_equal(t.s, "--batch 64\n--data PATH\nno --eval-data\n");
    assert_int_equal(t.len, strlen(t.s));
}

/* A text past the buffer: cut at its end, NUL-terminated, len the bytes kept; later lines add nothing. */
static void test_cut_at_the_end(void **unused)
{
    (void)unused;
    cli_flags_text t = {{0}, 0};
    char word[1000];
    memset(word, 'x', sizeof word - 1);
    word[sizeof word - 1] = '\0';
    for (int i = 0; i < 6; i++) cli_flags_line(&t, "--list %s", word);
    assert_int_equal(t.len, sizeof t.s - 1);
    assert_int_equal(t.s[sizeof t.s - 1], '\0');
    assert_int_equal(strlen(t.s), sizeof t.s - 1);
    cli_flags_line(&t, "--more %d", 1);
    cli_flags_path(&t, "--data", "x");
    assert_int_equal(t.len, sizeof t.s - 1);
    assert_int_equal(strlen(t.s), sizeof t.s - 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numbers_shortest),
        cmocka_unit_test(test_numbers_exact),
        cmocka_unit_test(test_lines_and_paths),
        cmocka_unit_test(test_cut_at_the_end),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
