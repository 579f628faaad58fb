/*
 * test_rank_names.c - unit tests of collectives/rank_names.c: the watchdog's list of missing
 * ranks names each run of ranks on one node once ("4,5 on node3"), keeps the ranks' order, writes
 * bare numbers where the node is unknown, and never overflows its buffer (a cut list ends "...").
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "collectives/rank_names.h"

/* Block placement of `per_node` ranks per node, nodes named node1, node2, ...; rank 99 unknown. */
typedef struct block_map {
    int per_node;
    char names[8][16];
} block_map;

static const char *block_node(const void *arg, int rank)
{
    const block_map *m = arg;
    if (rank < 0 || rank / m->per_node >= 8 || rank == 99) return NULL;
    return m->names[rank / m->per_node];
}

static block_map two_per_node(void)
{
    block_map m = {.per_node = 2};
    for (int i = 0; i < 8; i++) snprintf(m.names[i], sizeof m.names[i], "node%d", i + 1);
    return m;
}

static void one_node_run(void **state)
{
    (void)state;
    block_map m = two_per_node();
    char out[128];
    const int r[] = {4, 5};
    assert_string_equal(rank_names_format(block_node, &m, r, 2, out, sizeof out), "4,5 on node3");
    const int one[] = {0};
    assert_string_equal(rank_names_format(block_node, &m, one, 1, out, sizeof out), "0 on node1");
}

static void several_nodes(void **state)
{
    (void)state;
    block_map m = two_per_node();
    char out[128];
    const int r[] = {0, 2, 3, 5};
    assert_string_equal(rank_names_format(block_node, &m, r, 4, out, sizeof out),
                        "0 on node1, 2,3 on node2, 5 on node3");
    /* A node seen again later is named again: the order of the ranks is kept, not regrouped. */
    const int back[] = {0, 2, 1};
    assert_string_equal(rank_names_format(block_node, &m, back, 3, out, sizeof out),
                        "0 on node1, 2 on node2, 1 on node1");
}

static void unknown_nodes(void **state)
{
    (void)state;
    block_map m = two_per_node();
    char out[128];
    const int r[] = {1, 3};
    assert_string_equal(rank_names_format(NULL, NULL, r, 2, out, sizeof out), "1,3");
    assert_string_equal(rank_names_ctx(NULL, r, 2, out, sizeof out), "1,3");
    const int mixed[] = {99, 4};
    assert_string_equal(rank_names_format(block_node, &m, mixed, 2, out, sizeof out), "99, 4 on node3");
    assert_string_equal(rank_names_format(block_node, &m, r, 0, out, sizeof out), "");
}

static void never_overflows(void **state)
{
    (void)state;
    block_map m = two_per_node();
    int r[16];
    for (int i = 0; i < 16; i++) r[i] = i;
    char full[256];
    rank_names_format(block_node, &m, r, 16, full, sizeof full);
    assert_string_equal(full, "0,1 on node1, 2,3 on node2, 4,5 on node3, 6,7 on node4, 8,9 on node5, "
                              "10,11 on node6, 12,13 on node7, 14,15 on node8");
    for (size_t cap = 8; cap < strlen(full) + 1; cap++) {
        char out[256];
        memset(out, 'x', sizeof out);
        rank_names_format(block_node, &m, r, 16, out, cap);
        const size_t len = strlen(out);
        assert_true(len < cap);
        assert_int_equal(out[cap], 'x'); /* nothing written past cap */
        /* A cut list says so, and what it kept is the start of the whole one. */
        assert_string_equal(out + len - 3, "...");
        assert_memory_equal(out, full, len - 3);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_node_run),
        cmocka_unit_test(several_nodes),
        cmocka_unit_test(unknown_nodes),
        cmocka_unit_test(never_overflows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
