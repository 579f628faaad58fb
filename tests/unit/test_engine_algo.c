/*
 * test_engine_algo.c - unit tests of the engine's choice of algorithm (engine_pick_algo): two
 * ranks with a communication thread use MPI_Allreduce, whose count is an int, only for buckets
 * that fit one; a larger bucket (up to 2^31 - 1 elements a part, which the engine takes) goes the
 * engine's own way instead of a negative MPI count. One rank sends nothing; a 16-bit wire and the
 * halves stay direct.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <string.h>

#include "collectives/engine_impl.h"

static engine two_ranks_threaded(void)
{
    engine e;
    memset(&e, 0, sizeof e);
    e.size = 2;
    e.nodes = 2;
    e.block = 1;
    e.node_ranks = 1;
    e.threaded = 1;
    e.algo = DT_ALLREDUCE_AUTO;
    e.chain_seg = 1 << 16;
    e.chain_min_bytes = 1 << 20;
    return e;
}

static void test_mpi_allreduce_only_for_int_counts(void **state)
{
    (void)state;
    engine e = two_ranks_threaded();
    assert_int_equal(engine_pick_algo(&e, REQ_ALLREDUCE, 1000, DT_F32), ALGO_MPI);
    assert_int_equal(engine_pick_algo(&e, REQ_ALLREDUCE, (size_t)INT_MAX, DT_F32), ALGO_MPI);
    const int big = engine_pick_algo(&e, REQ_ALLREDUCE, (size_t)INT_MAX + 1, DT_F32);
    assert_true(big == ALGO_DIRECT || big == ALGO_CHAIN);
    e.threaded = 0; /* inline: the engine's own algorithm at any count */
    assert_int_not_equal(engine_pick_algo(&e, REQ_ALLREDUCE, 1000, DT_F32), ALGO_MPI);
}

static void test_other_cases(void **state)
{
    (void)state;
    engine e = two_ranks_threaded();
    assert_int_equal(engine_pick_algo(&e, REQ_ALLREDUCE, 1000, DT_BF16), ALGO_DIRECT);
    assert_int_equal(engine_pick_algo(&e, REQ_REDUCE_SCATTER, 1000, DT_F32), ALGO_DIRECT);
    e.size = 1;
    assert_int_equal(engine_pick_algo(&e, REQ_ALLREDUCE, 1000, DT_F32), ALGO_NONE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mpi_allreduce_only_for_int_counts),
        cmocka_unit_test(test_other_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
