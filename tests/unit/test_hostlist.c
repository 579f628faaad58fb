/*
 * test_hostlist.c - unit tests of runtime/hostlist.c: SLURM host lists expand to exactly the
 * names SLURM would give (zero padding, several groups, suffixes), SLURM_TASKS_PER_NODE expands to
 * exactly its counts, and every malformed input fails with DT_ERR_ENV, a message quoting the input
 * and the fault's position, NULL/0 outputs and nothing leaked (run under valgrind).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain.h"
#include "runtime/placement/hostlist.h"
#include "base/status.h"
#include "base/printable.h"

/* Fails the test, showing the message, unless the last error contains needle, as a message
 * writes it: its control characters as C escapes (base/printable.h). */
static void expect_error_contains(const char *needle)
{
    const char *msg = dt_last_error();
    char shown[1024];
    text_escape_controls(needle, shown, sizeof shown);
    if (strstr(msg, shown) == NULL) fail_msg("last error \"%s\" does not contain \"%s\"", msg, shown);
}

/* Non-NULL garbage the parsers must overwrite with NULL / 0 on failure. */
static char *names_sentinel[1];
static int counts_sentinel[1];

/* ================================================================ hostlist_parse: accepted */

#define MAX_EXPECTED 16

typedef struct host_ok_case {
    const char *input;
    const char *expected[MAX_EXPECTED]; /* NULL-terminated */
} host_ok_case;

static void test_hostlist_accepts(void **state)
{
    (void)state;
    static const host_ok_case cases[] = {
        {"node[01-04,07],gpu-a[1-2],login",
         {"node01", "node02", "node03", "node04", "node07", "gpu-a1", "gpu-a2", "login"}},
        {"login", {"login"}},
        {"n[008-011]", {"n008", "n009", "n010", "n011"}},
        {"r[1-2]n[1-2]", {"r1n1", "r1n2", "r2n1", "r2n2"}},
        {"a[1-2]-ib", {"a1-ib", "a2-ib"}},
        {"x[5]", {"x5"}},
        {"x[05]", {"x05"}},
        {"x[0]", {"x0"}},
        {"x[000]", {"x000"}},
        {"n[9-11]", {"n9", "n10", "n11"}},
        {"n[98-101]", {"n98", "n99", "n100", "n101"}},
        {"n[098-101]", {"n098", "n099", "n100", "n101"}},
        {"n[1-3,05-06,9]", {"n1", "n2", "n3", "n05", "n06", "n9"}}, /* padding per range */
        {"n[1,3-4,1]", {"n1", "n3", "n4", "n1"}},                   /* duplicates kept */
        {"[1-3]", {"1", "2", "3"}},
        {"a[1-2]b[7]c[8-9]d", {"a1b7c8d", "a1b7c9d", "a2b7c8d", "a2b7c9d"}},
        {"r[1-2]n[1-2]s[1,3]", {"r1n1s1", "r1n1s3", "r1n2s1", "r1n2s3", "r2n1s1", "r2n1s3", "r2n2s1", "r2n2s3"}},
        {"a.b-c_d,e", {"a.b-c_d", "e"}},
        {"n[1-2],m[3],n[1]", {"n1", "n2", "m3", "n1"}},
        {"n[123456789012345678]", {"n123456789012345678"}},
        {"n[000000000000000001-000000000000000002]", {"n000000000000000001", "n000000000000000002"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char **names = names_sentinel;
        int count = -1;
        status_clear_error();
        dt_status st = hostlist_parse("SLURM_JOB_NODELIST", cases[i].input, &names, &count);
        if (st != DT_OK) fail_msg("hostlist_parse('%s') failed: %s", cases[i].input, dt_last_error());
        int expected = 0;
        while (expected < MAX_EXPECTED && cases[i].expected[expected] != NULL) expected++;
        if (count != expected) fail_msg("hostlist_parse('%s'): %d names, expected %d", cases[i].input, count, expected);
        for (int j = 0; j < count; j++)
            if (strcmp(names[j], cases[i].expected[j]) != 0)
                fail_msg("hostlist_parse('%s'): name %d is '%s', expected '%s'", cases[i].input, j, names[j],
                         cases[i].expected[j]);
        hostlist_free(names, count);
    }
}

/* n[1-10]: the padding comes from the lower bound's text, so there is none. */
static void test_hostlist_no_padding_from_upper_bound(void **state)
{
    (void)state;
    char **names;
    int count;
    assert_int_equal(hostlist_parse("SLURM_JOB_NODELIST", "n[1-10]", &names, &count), DT_OK);
    assert_int_equal(count, 10);
    assert_string_equal(names[0], "n1");
    assert_string_equal(names[8], "n9");
    assert_string_equal(names[9], "n10");
    hostlist_free(names, count);

    assert_int_equal(hostlist_parse("SLURM_JOB_NODELIST", "n[01-100]", &names, &count), DT_OK);
    assert_int_equal(count, 100);
    assert_string_equal(names[0], "n01");
    assert_string_equal(names[98], "n99");
    assert_string_equal(names[99], "n100");
    hostlist_free(names, count);
}

/* Exactly HOSTLIST_MAX_ENTRIES names is allowed, in one range or spread over elements. */
static void test_hostlist_at_the_limit(void **state)
{
    (void)state;
    char **names;
    int count;
    assert_int_equal(hostlist_parse("SLURM_JOB_NODELIST", "n[1-1000000]", &names, &count), DT_OK);
    assert_int_equal(count, 1000000);
    assert_string_equal(names[0], "n1");
    assert_string_equal(names[999999], "n1000000");
    hostlist_free(names, count);

    assert_int_equal(hostlist_parse("SLURM_JOB_NODELIST", "a[1-500],b[0001-1000]c[1-999],d", &names, &count), DT_OK);
    assert_int_equal(count, 500 + 1000 * 999 + 1);
    assert_string_equal(names[499], "a500");
    assert_string_equal(names[500], "b0001c1");
    assert_string_equal(names[500 + 998], "b0001c999");
    assert_string_equal(names[500 + 999], "b0002c1");
    assert_string_equal(names[count - 2], "b1000c999");
    assert_string_equal(names[count - 1], "d");
    hostlist_free(names, count);
}

/* The bytes of the expanded list are bounded, not only the count of names: a long prefix times a
 * big range is refused before anything is allocated (it reached gigabytes before). */
static void test_hostlist_byte_limit(void **state)
{
    (void)state;
    char **names = names_sentinel;
    int count = 77;
    /* A 100,000-character prefix and a million numbers: about 100 GB. */
    const size_t plen = 100000;
    char *s = malloc(plen + 32);
    assert_non_null(s);
    memset(s, 'p', plen);
    strcpy(s + plen, "[1-1000000]");
    assert_int_equal(hostlist_parse("SLURM_JOB_NODELIST", s, &names, &count), DT_ERR_ENV);
    assert_null(names);
    assert_int_equal(count, 0);
    expect_error_contains("it expands to more than 32 MiB of names (the limit is passed by the element at position 1: "
                          "1000000 names of up to 100007 characters)");
    free(s);

    /* Over several elements: 40 elements of 1,000 names of 1,004 characters. */
    const size_t elen = 1000 + 8;
    s = malloc(40 * (elen + 1) + 1);
    assert_non_null(s);
    char *q = s;
    for (int e = 0; e < 40; e++) {
        memset(q, 'a' + e % 26, 1000);
        memcpy(q + 1000, "[1-1000]", 8);
        q += elen;
        *q++ = ',';
    }
    q[-1] = '\0';
    names = names_sentinel;
    assert_int_equal(hostlist_parse("SLURM_JOB_NODELIST", s, &names, &count), DT_ERR_ENV);
    assert_null(names);
    /* 1,000 names take 1000 * (1003.9 + 1 + 8) bytes: element 34 passes 32 MiB. */
    char where[64];
    snprintf(where, sizeof where, "element at position %zu:", 33 * (elen + 1) + 1);
    expect_error_contains(where);
    free(s);

    if (sizeof(char *) != 8) skip();
    /* Exactly at the limit: 524,288 names of 55 characters take 524288 * (55 + 1 + 8) = 32 MiB. */
    char exact[80];
    memset(exact, 'x', 49);
    strcpy(exact + 49, "[000000-524287]");
    assert_int_equal(hostlist_parse("SLURM_JOB_NODELIST", exact, &names, &count), DT_OK);
    assert_int_equal(count, 524288);
    assert_int_equal(strlen(names[count - 1]), 55);
    hostlist_free(names, count);
    strcpy(exact + 49, "[000000-524288]");
    assert_int_equal(hostlist_parse("SLURM_JOB_NODELIST", exact, &names, &count), DT_ERR_ENV);
    expect_error_contains("more than 32 MiB of names");
}

static void test_hostlist_free_null(void **state)
{
    (void)state;
    hostlist_free(NULL, 0);
    hostlist_free(NULL, 5);
}

/* ================================================================ hostlist_parse: rejected */

typedef struct host_bad_case {
    const char *input;
    const char *fragment; /* what the message must say besides SLURM_JOB_NODELIST='input' */
} host_bad_case;

static void test_hostlist_rejects(void **state)
{
    (void)state;
    static const host_bad_case cases[] = {
        {"", "it is empty"},
        {"a,,b", "empty element at position 3"},
        {"a,", "empty element at position 3"},
        {",a", "empty element at position 1"},
        {",", "empty element at position 1"},
        {"n[1-2],", "empty element at position 8"},
        {"node[01-04", "the '[' at position 5 is never closed"},
        {"node[01-04,", "the '[' at position 5 is never closed"},
        {"node[01-", "the '[' at position 5 is never closed"},
        {"node[", "the '[' at position 5 is never closed"},
        {"a[1],b[2", "the '[' at position 7 is never closed"},
        {"node01]", "the ']' at position 7 has no matching '['"},
        {"]", "the ']' at position 1 has no matching '['"},
        {"a[1]]", "the ']' at position 5 has no matching '['"},
        {"a[[1]]", "nested '[' at position 3"},
        {"a[1[2]]", "nested '[' at position 4"},
        {"a[1-[2]]", "nested '[' at position 5"},
        {"n[]", "empty range at position 3"},
        {"n[1,]", "empty range at position 5"},
        {"n[,1]", "empty range at position 3"},
        {"n[1,,2]", "empty range at position 5"},
        {"n[1-]", "the range at position 3 has no upper bound"},
        {"n[1-,2]", "the range at position 3 has no upper bound"},
        {"n[-3]", "the range at position 3 has no lower bound"},
        {"n[5-3]", "the range 5-3 at position 3 is descending"},
        {"n[1,10-09]", "the range 10-09 at position 5 is descending"},
        {"n[a-b]", "'a' at position 3 is not a digit"},
        {"n[1-b]", "'b' at position 5 is not a digit"},
        {"n[1x]", "'x' at position 4 is not a digit"},
        {"n[1-2x]", "'x' at position 6 is not a digit"},
        {"n[ 1]", "a blank at position 3 is not a digit"},
        {"n[1-2-3]", "the range at position 3 has more than one '-'"},
        {"n[1234567890123456789]", "the number at position 3 is too large (at most 18 digits)"},
        {"n[1-1234567890123456789]", "the number at position 5 is too large"},
        {"n[99999999999999999999999999]", "the number at position 3 is too large"},
        {"n[1-1000001]", "it expands to more than 1000000 names"},
        {"n[0-999999999999999999]", "it expands to more than 1000000 names"},
        {"n[1-1000]m[1-1001]", "it expands to more than 1000000 names"}, /* cartesian product */
        {"a[1-1000]b[1-1000]c[1-1000]d[1-1000]", "it expands to more than 1000000 names"},
        {"n[1-999999],a,b", "the limit is passed by the element at position 15"},
        {"n[3-1000000000000000]x,y", "it expands to more than 1000000 names"},
        {"node 1", "a blank at position 5 cannot be part of a host name"},
        {" node1", "a blank at position 1 cannot be part of a host name"},
        {"node1 ", "a blank at position 6 cannot be part of a host name"},
        {"node\t1", "character 0x09 at position 5 cannot be part of a host name"},
        {"node1,\nnode2", "character 0x0a at position 7"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char **names = names_sentinel;
        int count = 77;
        char quoted[256];
        status_clear_error();
        dt_status st = hostlist_parse("SLURM_JOB_NODELIST", cases[i].input, &names, &count);
        if (st != DT_ERR_ENV)
            fail_msg("hostlist_parse('%s') returned %d, expected DT_ERR_ENV", cases[i].input, (int)st);
        assert_null(names);
        assert_int_equal(count, 0);
        snprintf(quoted, sizeof quoted, "SLURM_JOB_NODELIST='%s' is not a valid host list: ", cases[i].input);
        expect_error_contains(quoted);
        expect_error_contains(cases[i].fragment);
    }
}

static void test_hostlist_unset_and_generic_name(void **state)
{
    (void)state;
    char **names = names_sentinel;
    int count = 77;
    assert_int_equal(hostlist_parse("SLURM_STEP_NODELIST", NULL, &names, &count), DT_ERR_ENV);
    assert_null(names);
    assert_int_equal(count, 0);
    assert_string_equal(dt_last_error(), "SLURM_STEP_NODELIST is not set");

    /* Without a variable name the message still quotes the input and explains the fault. */
    assert_int_equal(hostlist_parse(NULL, "node[01-04", &names, &count), DT_ERR_ENV);
    assert_null(names);
    expect_error_contains("host list 'node[01-04' is not valid: the '[' at position 5 is never closed");
    expect_error_contains("expected comma-separated names such as node[01-04,07]");
    assert_int_equal(hostlist_parse(NULL, NULL, &names, &count), DT_ERR_ENV);
    assert_string_equal(dt_last_error(), "host list is not set");
}

/* A long list is quoted in part; the position and the explanation still make it into the message. */
static void test_hostlist_long_input(void **state)
{
    (void)state;
    size_t n = 5000;
    char *s = malloc(n + 8);
    assert_non_null(s);
    for (size_t i = 0; i < n; i += 2) {
        s[i] = 'a';
        s[i + 1] = ',';
    }
    strcpy(s + n, "b[2-1]");
    char **names = names_sentinel;
    int count = 77;
    assert_int_equal(hostlist_parse("SLURM_JOB_NODELIST", s, &names, &count), DT_ERR_ENV);
    assert_null(names);
    assert_int_equal(count, 0);
    expect_error_contains("SLURM_JOB_NODELIST='a,a,a,");
    expect_error_contains("...' is not a valid host list: the range 2-1 at position 5003 is descending");
    free(s);
}

static void test_hostlist_caller_bugs(void **state)
{
    (void)state;
    char **names;
    int count;
    assert_int_equal(hostlist_parse("X", "a", NULL, &count), DT_ERR_INTERNAL);
    assert_int_equal(hostlist_parse("X", "a", &names, NULL), DT_ERR_INTERNAL);
}

/* ================================================================ hostlist_tasks_per_node_parse: accepted */

typedef struct tpn_ok_case {
    const char *input;
    int n;
    int expected[8];
} tpn_ok_case;

static void test_tasks_per_node_accepts(void **state)
{
    (void)state;
    static const tpn_ok_case cases[] = {
        {"2(x3),1", 4, {2, 2, 2, 1}},
        {"4", 1, {4}},
        {"1(x2)", 2, {1, 1}},
        {"1(x1)", 1, {1}},
        {"3,2(x2),1(x1)", 4, {3, 2, 2, 1}},
        {"8,8,8", 3, {8, 8, 8}},
        {"02(x02)", 2, {2, 2}}, /* leading zeros are decimal */
        {"2147483647", 1, {2147483647}},
        {"1(x2),3(x2),5", 5, {1, 1, 3, 3, 5}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int *counts = counts_sentinel;
        int n = -1;
        status_clear_error();
        dt_status st = hostlist_tasks_per_node_parse("SLURM_TASKS_PER_NODE", cases[i].input, &counts, &n);
        if (st != DT_OK) fail_msg("hostlist_tasks_per_node_parse('%s') failed: %s", cases[i].input, dt_last_error());
        if (n != cases[i].n)
            fail_msg("hostlist_tasks_per_node_parse('%s'): %d entries, expected %d", cases[i].input, n, cases[i].n);
        for (int j = 0; j < n; j++)
            if (counts[j] != cases[i].expected[j])
                fail_msg("hostlist_tasks_per_node_parse('%s'): entry %d is %d, expected %d", cases[i].input, j,
                         counts[j], cases[i].expected[j]);
        free(counts);
    }
}

static void test_tasks_per_node_at_the_limit(void **state)
{
    (void)state;
    int *counts;
    int n;
    assert_int_equal(hostlist_tasks_per_node_parse("SLURM_TASKS_PER_NODE", "16(x999999),4", &counts, &n), DT_OK);
    assert_int_equal(n, 1000000);
    assert_int_equal(counts[0], 16);
    assert_int_equal(counts[999998], 16);
    assert_int_equal(counts[999999], 4);
    free(counts);
}

/* ================================================================ hostlist_tasks_per_node_parse: rejected */

typedef struct tpn_bad_case {
    const char *input;
    const char *fragment;
} tpn_bad_case;

static void test_tasks_per_node_rejects(void **state)
{
    (void)state;
    static const tpn_bad_case cases[] = {
        {"", "it is empty"},
        {"2(x0)", "the repeat count at position 4 is 0"},
        {"0", "the task count at position 1 is 0"},
        {"1,0(x2)", "the task count at position 3 is 0"},
        {"(x3)", "the '(' at position 1 has no task count before it"},
        {"1,(x3)", "the '(' at position 3 has no task count before it"},
        {"2(x3", "the '(' at position 2 is never closed"},
        {"2(x", "the '(' at position 2 is never closed"},
        {"2(", "the '(' at position 2 is never closed"},
        {"2(3)", "'3' at position 3 where 'x' was expected"},
        {"2(X3)", "'X' at position 3 where 'x' was expected"},
        {"2(x)", "')' at position 4 where a repeat count was expected"},
        {"2(x3,1", "',' at position 5 where ')' was expected"},
        {"2(x3))", "')' at position 6 where ',' or '(xN)' was expected"},
        {"2x3", "'x' at position 2 where ',' or '(xN)' was expected"},
        {"2(x3)1", "'1' at position 6 where ',' or '(xN)' was expected"},
        {"2(x3)x", "'x' at position 6 where ',' or '(xN)' was expected"},
        {"4abc", "'a' at position 2 where ',' or '(xN)' was expected"},
        {"2(x3),", "empty element at position 7"},
        {"1,,2", "empty element at position 3"},
        {",1", "empty element at position 1"},
        {"-1", "negative task count at position 1"},
        {"2(x-1)", "negative repeat count at position 4"},
        {"+2", "'+' at position 1 where a task count was expected"},
        {"abc", "'a' at position 1 where a task count was expected"},
        {" 2", "a blank at position 1 where a task count was expected"},
        {"2 ", "a blank at position 2 where ',' or '(xN)' was expected"},
        {"2, 1", "a blank at position 3 where a task count was expected"},
        {"2147483648", "the task count at position 1 is too large (at most 2147483647)"},
        {"99999999999999999999", "the task count at position 1 is too large"},
        {"1(x2147483648)", "the repeat count at position 4 is too large"},
        {"1(x1000001)", "it expands to more than 1000000 entries"},
        {"1(x600000),1(x400001)", "it expands to more than 1000000 entries"},
        {"1(x2147483647),1(x2147483647)", "it expands to more than 1000000 entries"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int *counts = counts_sentinel;
        int n = 77;
        char quoted[256];
        status_clear_error();
        dt_status st = hostlist_tasks_per_node_parse("SLURM_TASKS_PER_NODE", cases[i].input, &counts, &n);
        if (st != DT_ERR_ENV)
            fail_msg("hostlist_tasks_per_node_parse('%s') returned %d, expected DT_ERR_ENV", cases[i].input, (int)st);
        assert_null(counts);
        assert_int_equal(n, 0);
        snprintf(quoted, sizeof quoted,
                 "SLURM_TASKS_PER_NODE='%s' is not a valid tasks-per-node list: ", cases[i].input);
        expect_error_contains(quoted);
        expect_error_contains(cases[i].fragment);
    }
}

static void test_tasks_per_node_unset_and_generic_name(void **state)
{
    (void)state;
    int *counts = counts_sentinel;
    int n = 77;
    assert_int_equal(hostlist_tasks_per_node_parse("SLURM_TASKS_PER_NODE", NULL, &counts, &n), DT_ERR_ENV);
    assert_null(counts);
    assert_int_equal(n, 0);
    assert_string_equal(dt_last_error(), "SLURM_TASKS_PER_NODE is not set");

    assert_int_equal(hostlist_tasks_per_node_parse(NULL, "2(x3", &counts, &n), DT_ERR_ENV);
    expect_error_contains("tasks-per-node list '2(x3' is not valid: the '(' at position 2 is never closed");
    expect_error_contains("expected comma-separated task counts such as 2(x3),1");

    assert_int_equal(hostlist_tasks_per_node_parse("X", "1", NULL, &n), DT_ERR_INTERNAL);
    assert_int_equal(hostlist_tasks_per_node_parse("X", "1", &counts, NULL), DT_ERR_INTERNAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hostlist_accepts),
        cmocka_unit_test(test_hostlist_no_padding_from_upper_bound),
        cmocka_unit_test(test_hostlist_at_the_limit),
        cmocka_unit_test(test_hostlist_byte_limit),
        cmocka_unit_test(test_hostlist_free_null),
        cmocka_unit_test(test_hostlist_rejects),
        cmocka_unit_test(test_hostlist_unset_and_generic_name),
        cmocka_unit_test(test_hostlist_long_input),
        cmocka_unit_test(test_hostlist_caller_bugs),
        cmocka_unit_test(test_tasks_per_node_accepts),
        cmocka_unit_test(test_tasks_per_node_at_the_limit),
        cmocka_unit_test(test_tasks_per_node_rejects),
        cmocka_unit_test(test_tasks_per_node_unset_and_generic_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
