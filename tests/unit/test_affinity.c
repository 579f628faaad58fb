/*
 * test_affinity.c - the pure parts of CPU placement: block splitting, cpulist formatting and
 * parsing. (Binding itself is tested with real ranks in tests/mpi/test_pinning.sh.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/placement/affinity.h"

#include <string.h>

static void test_block(void **st)
{
    (void)st;
    int f, c;
    /* 10 cores among 4 ranks: 3,3,2,2 contiguous, covering every core exactly once. */
    int want_f[] = {0, 3, 6, 8}, want_c[] = {3, 3, 2, 2};
    for (int b = 0; b < 4; b++) {
        affinity_block(10, b, 4, &f, &c);
        assert_int_equal(f, want_f[b]);
        assert_int_equal(c, want_c[b]);
    }
    affinity_block(2, 1, 2, &f, &c);
    assert_int_equal(f, 1);
    assert_int_equal(c, 1);
    affinity_block(7, 0, 1, &f, &c);
    assert_int_equal(f, 0);
    assert_int_equal(c, 7);
    /* More ranks than cores: nothing to give (the caller shares instead). */
    affinity_block(2, 3, 4, &f, &c);
    assert_int_equal(c, 0);
    /* Every split covers 0..n-1 exactly once. */
    for (int n = 1; n <= 40; n++)
        for (int size = 1; size <= n; size++) {
            int next = 0;
            for (int b = 0; b < size; b++) {
                affinity_block(n, b, size, &f, &c);
                assert_int_equal(f, next);
                assert_true(c >= 1);
                next += c;
            }
            assert_int_equal(next, n);
        }
}

static void test_format_parse(void **st)
{
    (void)st;
    cpu_set_t s;
    char buf[256];
    assert_int_equal(affinity_parse("0-3,8,10-11\n", &s), DT_OK);
    assert_int_equal(CPU_COUNT(&s), 7);
    affinity_format(&s, buf, sizeof buf);
    assert_string_equal(buf, "0-3,8,10-11");
    assert_int_equal(affinity_parse("5", &s), DT_OK);
    affinity_format(&s, buf, sizeof buf);
    assert_string_equal(buf, "5");
    CPU_ZERO(&s);
    affinity_format(&s, buf, sizeof buf);
    assert_string_equal(buf, "");
    /* Every other CPU of 1024 does not fit 16 bytes: cut with an ellipsis, still terminated. */
    CPU_ZERO(&s);
    for (int c = 0; c < CPU_SETSIZE; c += 2) CPU_SET(c, &s);
    char small[16];
    affinity_format(&s, small, sizeof small);
    assert_true(strlen(small) < sizeof small);
    assert_non_null(strstr(small, "..."));
    const char *bad[] = {"a", "3-1", "1,,2", "1-", "-1", "2000", "1 2"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cpu_set_t keep;
        CPU_ZERO(&keep);
        CPU_SET(63, &keep);
        cpu_set_t t = keep;
        assert_int_equal(affinity_parse(bad[i], &t), DT_ERR_INVALID_ARG);
        assert_true(CPU_EQUAL(&t, &keep));
        assert_non_null(strstr(dt_last_error(), bad[i]));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_block),
        cmocka_unit_test(test_format_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
