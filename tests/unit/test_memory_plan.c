/*
 * test_memory_plan.c - the memory plan without a model (dt_model_plan_memory) against the model
 * itself: its kinds equal dt_model_memory of the real model and optimizer, and its total equals
 * the bytes the CPU backend holds once the model is made, for several specs, precisions, batches,
 * optimizers and accumulation; dt_model_max_batch's answer fits and one more does not; the test
 * limit on the CPU backend (backend_cpu_set_limit) fails an allocation past it with DT_ERR_NOMEM.
 * Under ZeRO-1 (zero_world W) the optimizer line is one rank's share: the ranks' shares add up to
 * the whole state, rank 0 holds the most, one bucket splits as the engine splits it, and a rank
 * outside the world is refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dtrain.h"
#include "collectives/engine.h"
#include "kernels/backend.h"

#include <stdlib.h>
#include <string.h>

typedef struct plan_case {
    const char *spec, *input;
    int batch;
    dt_dtype compute;
    int adam, momentum, accum;
} plan_case;

static const plan_case cases[] = {
    {"fc:64,relu,fc:10", "64", 8, DT_F32, 0, 1, 1},
    {"fc:64,relu,fc:10", "64", 33, DT_F16, 1, 0, 2},
    {"conv:8:3:1:1,relu,pool:2,fc:10", "3x16x16", 16, DT_F32, 1, 0, 1},
    {"conv:8:3:1:1,relu,pool:2,fc:10", "3x16x16", 5, DT_BF16, 0, 1, 3},
    {"conv:16:5:2:2,relu,conv:8:3:1:1,relu,pool:2,flatten,fc:32,relu,fc:10", "1x28x28", 64, DT_F16, 0, 0, 1},
};

static void plan_config(const plan_case *c, dt_optim_config *o, dt_memory_plan_config *pc)
{
    dt_optim_defaults(o);
    if (c->adam) o->kind = DT_OPTIM_ADAMW;
    if (!c->momentum) o->momentum = 0;
    dt_memory_plan_defaults(pc);
    pc->spec = c->spec, pc->input = c->input, pc->batch = c->batch;
    pc->compute = c->compute, pc->optim = o, pc->accum_steps = c->accum;
}

static void test_plan_equals_model(void **st)
{
    (void)st;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const plan_case *c = &cases[i];
        dt_optim_config oc;
        dt_memory_plan_config pc;
        plan_config(c, &oc, &pc);
        dt_memory_plan p;
        assert_int_equal(dt_model_plan_memory(NULL, &pc, &p), DT_OK);
        const size_t before = backend_cpu_held();
        dt_model *m;
        dt_optimizer *o;
        assert_int_equal(dt_model_create(NULL, c->spec, c->input, 1, c->batch, &m), DT_OK);
        assert_int_equal(dt_optimizer_create(&oc, dt_model_num_params(m), &o), DT_OK);
        if (c->accum > 1) assert_int_equal(dt_model_set_accum_steps(m, c->accum), DT_OK);
        assert_int_equal(dt_model_set_precision(m, c->compute, DT_F32), DT_OK);
        dt_memory_summary real;
        dt_model_memory(m, o, &real);
        print_message("%s on %s batch %d %s: plan total %zu peak %zu, held %zu; top: %s %zu\n", c->spec, c->input,
                      c->batch, dt_dtype_name(c->compute), p.total, p.peak, backend_cpu_held() - before, p.top[0].what,
                      p.top[0].bytes);
        assert_memory_equal(&p.kinds, &real, sizeof real);
        /* Everything the backend holds for the model; the CPU optimizer's state is host memory
         * the optimizer mallocs itself, outside the backend. */
        assert_int_equal(backend_cpu_held() - before, p.total - p.kinds.optimizer);
        assert_true(p.peak >= p.total);
        assert_true(p.n_top > 0);
        for (int j = 1; j < p.n_top; j++) assert_true(p.top[j - 1].bytes >= p.top[j].bytes);
        dt_optimizer_free(o);
        dt_model_free(m);
        assert_int_equal(backend_cpu_held(), before);
    }
}

static void test_zero_share(void **st)
{
    (void)st;
    dt_optim_config oc;
    dt_memory_plan_config pc;
    plan_config(&cases[4], &oc, &pc); /* a CNN of several layers */
    oc.kind = DT_OPTIM_ADAMW;         /* two moments */
    dt_memory_plan whole, p;
    assert_int_equal(dt_model_plan_memory(NULL, &pc, &whole), DT_OK);
    const size_t np = whole.kinds.optimizer / 8;
    for (int W = 2; W <= 5; W++) {
        for (int caps = 0; caps < 2; caps++) {
            /* caps 0: one bucket; 1: a bucket about every layer (tiny caps) */
            pc.zero_world = W;
            pc.bucket_mb = pc.first_bucket_mb = caps ? 0.000001 : 0;
            size_t sum = 0, first = 0;
            for (int r = 0; r < W; r++) {
                pc.zero_rank = r;
                assert_int_equal(dt_model_plan_memory(NULL, &pc, &p), DT_OK);
                if (r == 0) first = p.kinds.optimizer;
                assert_true(p.kinds.optimizer <= first);
                assert_true(p.total == whole.total - whole.kinds.optimizer + p.kinds.optimizer);
                if (!caps) {
                    size_t off, cnt;
                    engine_part(np, r, W, &off, &cnt);
                    assert_int_equal(p.kinds.optimizer, 8 * cnt);
                }
                sum += p.kinds.optimizer;
            }
            print_message("ZeRO-1 over %d ranks, %s: rank 0 holds %zu of %zu optimizer bytes\n", W,
                          caps ? "a bucket a layer" : "one bucket", first, whole.kinds.optimizer);
            assert_int_equal(sum, whole.kinds.optimizer);
            assert_true(first < whole.kinds.optimizer);
        }
    }
    pc.zero_rank = pc.zero_world;
    assert_int_equal(dt_model_plan_memory(NULL, &pc, &p), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "zero_rank"));
}

static void test_max_batch(void **st)
{
    (void)st;
    dt_optim_config oc;
    dt_memory_plan_config pc;
    plan_config(&cases[2], &oc, &pc);
    dt_memory_plan p, q;
    int b = -1;
    const size_t budget = 8u << 20;
    assert_int_equal(dt_model_max_batch(NULL, &pc, budget, &b, &p), DT_OK);
    print_message("largest batch in %zu bytes: %d (peak %zu)\n", budget, b, p.peak);
    assert_true(b > 1);
    assert_true(p.peak <= budget);
    pc.batch = b + 1;
    assert_int_equal(dt_model_plan_memory(NULL, &pc, &q), DT_OK);
    assert_true(q.peak > budget);
    /* Nothing fits: 0, and the plan of batch 1 says what the least is. */
    assert_int_equal(dt_model_max_batch(NULL, &pc, 1000, &b, &p), DT_OK);
    assert_int_equal(b, 0);
    assert_true(p.peak > 1000);
    pc.batch = 0;
    assert_int_equal(dt_model_plan_memory(NULL, &pc, &q), DT_ERR_INVALID_ARG);
}

static void test_limit(void **st)
{
    (void)st;
    dt_optim_config oc;
    dt_memory_plan_config pc;
    plan_config(&cases[2], &oc, &pc);
    int b;
    dt_memory_plan p;
    const size_t budget = backend_cpu_held() + (4u << 20);
    assert_int_equal(dt_model_max_batch(NULL, &pc, 4u << 20, &b, &p), DT_OK);
    backend_cpu_set_limit(budget);
    dt_model *m = NULL;
    assert_int_equal(dt_model_create(NULL, pc.spec, pc.input, 1, b, &m), DT_OK);
    dt_model_free(m);
    assert_int_equal(dt_model_create(NULL, pc.spec, pc.input, 1, 4 * b, &m), DT_ERR_NOMEM);
    assert_non_null(strstr(dt_last_error(), "DTRAIN_TEST_MEM_LIMIT"));
    backend_cpu_set_limit(0);
}

/* A model whose activations pass 2^64 bytes (8191 pool:1 layers on a 16384 x 16384 map at the
 * command's largest batch, 2^51 bytes each): the plan says SIZE_MAX and the model is refused, where
 * the wrapped sum once gave a 16 MiB pool that the first forward pass wrote past. */
static void test_pool_past_size_max(void **st)
{
    (void)st;
    enum { POOLS = 8191 };
    char *spec = malloc(POOLS * 7 + 32);
    assert_non_null(spec);
    spec[0] = '\0';
    for (int i = 0; i < POOLS; i++) memcpy(spec + 7 * i, "pool:1,", 8);
    strcat(spec, "pool:16384,fc:2");
    dt_memory_plan_config c;
    dt_memory_plan_defaults(&c);
    c.spec = spec;
    c.input = "1x16384x16384";
    c.batch = 1 << 20;
    dt_memory_plan p;
    assert_int_equal(dt_model_plan_memory(NULL, &c, &p), DT_OK);
    assert_true(p.total == SIZE_MAX && p.kinds.pool == SIZE_MAX);
    dt_model *m = NULL;
    assert_int_equal(dt_model_create(NULL, spec, "1x16384x16384", 1, 1 << 20, &m), DT_ERR_NOMEM);
    assert_null(m);
    assert_non_null(strstr(dt_last_error(), "need more than 2^64 bytes"));
    free(spec);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_equals_model),  cmocka_unit_test(test_zero_share),
        cmocka_unit_test(test_max_batch),          cmocka_unit_test(test_limit),
        cmocka_unit_test(test_pool_past_size_max),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
