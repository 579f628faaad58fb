/*
 * test_gpu_span.c - unit tests of the GPU span bookkeeping (base/gpu_span.c) that the CUDA
 * backend's trace spans rest on, without a GPU: slots taken and given back, one open span per
 * track, a full pool that drops instead of waiting, the event-to-host clock conversion, and the
 * spans and drops landing in a recorder on the GPU tracks.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>

#include "base/gpu_span.h"
#include "base/trace.h"

/* begin -> end -> release walks a slot through its states; the name is copied and cut. */
static void test_slot_life(void **state)
{
    (void)state;
    gpu_span_pool *p = malloc(sizeof *p);
    assert_non_null(p);
    gpu_span_pool_init(p);
    const int i = gpu_span_begin(p, GPU_SPAN_COMPUTE, TRACE_CAT_FWD, "fwd 0 fc and a name longer than a slot", 0, -1);
    assert_true(i >= 0);
    assert_int_equal(p->slot[i].state, GPU_SLOT_OPEN);
    assert_string_equal(p->slot[i].name, "fwd 0 fc and a name longer "); /* 27 bytes */
    /* Another track has its own open span. */
    const int j = gpu_span_begin(p, GPU_SPAN_NCCL, TRACE_CAT_COMM, "allreduce b0", 0, 4096);
    assert_true(j >= 0 && j != i);
    assert_int_equal(gpu_span_end(p, GPU_SPAN_COMPUTE), i);
    assert_int_equal(p->slot[i].state, GPU_SLOT_PENDING);
    assert_int_equal(gpu_span_end(p, GPU_SPAN_COMPUTE), -1); /* nothing open any more */
    assert_int_equal(gpu_span_end(p, GPU_SPAN_NCCL), j);
    gpu_span_release(p, i);
    gpu_span_release(p, j);
    assert_int_equal(p->nfree, GPU_SPAN_POOL);
    gpu_span_release(p, i); /* twice: no double entry in the free list */
    assert_int_equal(p->nfree, GPU_SPAN_POOL);
    assert_int_equal(gpu_span_begin(p, GPU_SPAN_TRACKS, 0, "bad track", 0, -1), -1);
    assert_int_equal(gpu_span_end(p, -1), -1);
    free(p);
}

/* A begin whose end never came is given back by the next begin of its track, not leaked. */
static void test_reopen_releases(void **state)
{
    (void)state;
    gpu_span_pool *p = malloc(sizeof *p);
    gpu_span_pool_init(p);
    for (int k = 0; k < 3 * GPU_SPAN_POOL; k++) assert_true(gpu_span_begin(p, GPU_SPAN_COMPUTE, 0, "x", k, -1) >= 0);
    assert_int_equal(p->nfree, GPU_SPAN_POOL - 1);
    assert_int_equal(p->dropped, 0);
    free(p);
}

/* A pool whose every slot is pending drops the next span (counted) instead of waiting, and takes
 * spans again once one is given back. */
static void test_full_pool_drops(void **state)
{
    (void)state;
    gpu_span_pool *p = malloc(sizeof *p);
    gpu_span_pool_init(p);
    for (int k = 0; k < GPU_SPAN_POOL; k++) {
        assert_true(gpu_span_begin(p, GPU_SPAN_COMPUTE, 0, "x", k, -1) >= 0);
        assert_true(gpu_span_end(p, GPU_SPAN_COMPUTE) >= 0);
    }
    assert_int_equal(gpu_span_begin(p, GPU_SPAN_NCCL, 0, "full", 0, -1), -1);
    assert_int_equal(gpu_span_begin(p, GPU_SPAN_COMPUTE, 0, "full", 0, -1), -1);
    assert_int_equal(p->dropped, 2);
    assert_int_equal(gpu_span_end(p, GPU_SPAN_COMPUTE), -1); /* its begin was dropped */
    gpu_span_release(p, 17);
    assert_int_equal(gpu_span_begin(p, GPU_SPAN_COMPUTE, 0, "again", 0, -1), 17);
    free(p);
}

/* Milliseconds after the reference become host nanoseconds, rounded; nothing lands before it. */
static void test_host_ns(void **state)
{
    (void)state;
    assert_int_equal(gpu_span_host_ns(1000000, 0.0f), 1000000);
    assert_int_equal(gpu_span_host_ns(1000000, 1.5f), 2500000);
    assert_int_equal(gpu_span_host_ns(5, 0.001f), 5 + 1000);
    assert_int_equal(gpu_span_host_ns(1000000, -0.25f), 1000000);
    assert_int_equal(gpu_span_host_ns(7, 0.0f / 0.0f), 7);
    /* An infinite or absurd time (past 2^64 ns) is no time: it lands on the reference too, rather
     * than an undefined conversion to uint64_t. */
    assert_int_equal(gpu_span_host_ns(7, 1.0f / 0.0f), 7);
    assert_int_equal(gpu_span_host_ns(7, 3.0e13f), 7);
    /* A minute after the reference: within a float's resolution there (4 us). */
    const uint64_t t = gpu_span_host_ns(0, 60000.123f);
    assert_true(t > 60000123000ull - 4000 && t < 60000123000ull + 4000);
}

/* Pushed spans land on TRACE_TRACK_GPU + track with their name, numbers and times; drops add to
 * the recorder's count; a paused or absent recorder takes nothing. */
static void test_push_into_recorder(void **state)
{
    (void)state;
    trace_rec *r = trace_rec_create(8);
    gpu_span_pool *p = malloc(sizeof *p);
    gpu_span_pool_init(p);
    const int i = gpu_span_begin(p, GPU_SPAN_NCCL, TRACE_CAT_COMM, "allreduce b3", 3, 8192);
    gpu_span_push(r, &p->slot[i], 100, 250);
    gpu_span_drops(r, 2);
    gpu_span_push(NULL, &p->slot[i], 1, 2);
    gpu_span_drops(NULL, 5);
    trace_event ev[8];
    assert_int_equal(trace_rec_snapshot(r, ev, 8), 1);
    assert_int_equal(ev[0].track, TRACE_TRACK_GPU + GPU_SPAN_NCCL);
    assert_int_equal(ev[0].cat, TRACE_CAT_COMM);
    assert_string_equal(ev[0].name, "allreduce b3");
    assert_int_equal(ev[0].t0, 100);
    assert_int_equal(ev[0].t1, 250);
    assert_int_equal(ev[0].arg, 3);
    assert_int_equal(ev[0].arg2, 8192);
    assert_int_equal(trace_rec_dropped(r), 2);
    trace_rec_close(r);
    gpu_span_push(r, &p->slot[i], 300, 400);
    assert_int_equal(trace_rec_count(r), 1);
    free(p);
    trace_rec_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slot_life),          cmocka_unit_test(test_reopen_releases),
        cmocka_unit_test(test_full_pool_drops),    cmocka_unit_test(test_host_ns),
        cmocka_unit_test(test_push_into_recorder),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
