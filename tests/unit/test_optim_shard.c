/*
 * test_optim_shard.c - a ZeRO-1 sharded optimizer's state (runtime/model/optimizer.c): cut to the
 * owned slices with their values kept, shown at full size for a checkpoint (owned slices, zeros
 * elsewhere until the allgather fills them), taken back from the full view after a load, its bytes
 * 1/W, and the refusals (another shard, dt_optimizer_step on a shard).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/model/model.h"

#include <string.h>

enum { N = 100 };

static dt_optimizer *adamw_with_values(void)
{
    dt_optim_config c;
    dt_optim_defaults(&c);
    c.kind = DT_OPTIM_ADAMW;
    dt_optimizer *o = NULL;
    assert_int_equal(dt_optimizer_create(&c, N, &o), DT_OK);
    optimizer_view v = optimizer_state(o);
    assert_int_equal(v.n1, N);
    for (int i = 0; i < N; i++) v.s1[i] = (float)i, v.s2[i] = (float)(1000 + i);
    return o;
}

static void test_shard_keeps_owned_values(void **st)
{
    (void)st;
    dt_optimizer *o = adamw_with_values();
    /* Two slices, as two buckets' parts: [10, 17) and [60, 85). */
    const size_t off[2] = {10, 60}, cnt[2] = {7, 25};
    assert_int_equal(optimizer_shard(o, off, cnt, 2), DT_OK);
    assert_true(optimizer_sharded(o));
    assert_int_equal(optimizer_state_bytes(o), (7 + 25) * 2 * sizeof(float));
    /* Without a full view a checkpoint would find nothing to take for the whole state. */
    optimizer_view v = optimizer_state(o);
    assert_null(v.s1);
    assert_int_equal(v.n1, 0);
    float *f1, *f2;
    assert_int_equal(optimizer_full_begin(o, &f1, &f2), DT_OK);
    v = optimizer_state(o);
    assert_ptr_equal(v.s1, f1);
    assert_int_equal(v.n1, N);
    for (int i = 0; i < N; i++) {
        const int own = (i >= 10 && i < 17) || (i >= 60 && i < 85);
        assert_true(f1[i] == (own ? (float)i : 0.0f));
        assert_true(f2[i] == (own ? (float)(1000 + i) : 0.0f));
    }
    /* A load writes the full view; the owned slices are taken back from it. */
    for (int i = 0; i < N; i++) f1[i] = -(float)i, f2[i] = 5.0f;
    optimizer_host_changed(o);
    optimizer_full_end(o);
    assert_int_equal(optimizer_full_begin(o, &f1, &f2), DT_OK);
    for (int i = 0; i < N; i++) {
        const int own = (i >= 10 && i < 17) || (i >= 60 && i < 85);
        assert_true(f1[i] == (own ? -(float)i : 0.0f));
        assert_true(f2[i] == (own ? 5.0f : 0.0f));
    }
    optimizer_full_end(o);
    /* The same shard again is a no-op; another is refused. */
    assert_int_equal(optimizer_shard(o, off, cnt, 2), DT_OK);
    const size_t off2[1] = {0}, cnt2[1] = {50};
    assert_int_equal(optimizer_shard(o, off2, cnt2, 1), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "already sharded"));
    /* A plain step over whole buffers would read past the shard: refused naming the fix. */
    float p[N] = {0}, g[N] = {0};
    assert_int_equal(dt_optimizer_step(o, p, g), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "dt_model_optimizer_step"));
    dt_optimizer_free(o);
}

static void test_sgd_without_momentum_has_no_state(void **st)
{
    (void)st;
    dt_optim_config c;
    dt_optim_defaults(&c);
    c.momentum = 0.0f;
    dt_optimizer *o = NULL;
    assert_int_equal(dt_optimizer_create(&c, N, &o), DT_OK);
    const size_t off[1] = {0}, cnt[1] = {N / 2};
    assert_int_equal(optimizer_shard(o, off, cnt, 1), DT_OK);
    assert_int_equal(optimizer_state_bytes(o), 0);
    float *f1, *f2;
    assert_int_equal(optimizer_full_begin(o, &f1, &f2), DT_OK);
    assert_null(f1);
    assert_null(f2);
    optimizer_full_end(o);
    dt_optimizer_free(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shard_keeps_owned_values),
        cmocka_unit_test(test_sgd_without_momentum_has_no_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
