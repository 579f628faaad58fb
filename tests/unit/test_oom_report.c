/*
 * test_oom_report.c - the out-of-memory summary's text (launch/oom_report.c, compiled in) on the
 * CPU backend under a test limit, without MPI (ctx NULL: the CPU's plan): the kinds are the
 * plan's bytes, the batch it suggests is dt_model_max_batch's and a model made at it fits under
 * the limit; a 16-bit run that fits at no batch is told the fp32 batch that does; bench step's
 * precisions that fit at no batch are named; host memory without a limit gets no batch; a short
 * buffer is cut and terminated.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dtrain.h"
#include "kernels/backend.h"
#include "launch/oom_report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1024u * 1024u)

static char text[8192];

static void plan_config(const char *spec, const char *input, int batch, dt_dtype p, const dt_optim_config *o,
                        dt_memory_plan_config *pc)
{
    dt_memory_plan_defaults(pc);
    pc->spec = spec, pc->input = input, pc->batch = batch;
    pc->compute = pc->grads = p; /* the CPU keeps 16-bit gradients, as dtrain train there */
    pc->optim = o;
}

static void format(const dt_memory_plan_config *pc, int n, int failed, int samples)
{
    const oom_case c = {.command = "train",
                        .stage = "while making the model",
                        .plans = pc,
                        .n_plans = n,
                        .failed = failed,
                        .samples = samples};
    const size_t len = oom_report_format(NULL, &c, text, sizeof text);
    assert_int_equal(len, strlen(text));
    print_message("%s", text);
}

/* The model of pc made at batch under the current limit (the optimizer's state is host memory on
 * the CPU, outside it). */
static dt_status make(const dt_memory_plan_config *pc, int batch)
{
    dt_model *m = NULL;
    dt_status s = dt_model_create(NULL, pc->spec, pc->input, 1, batch, &m);
    if (!s) s = dt_model_set_precision(m, pc->compute, pc->grads);
    dt_model_free(m);
    return s;
}

static void test_batch_that_fits(void **st)
{
    (void)st;
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    dt_memory_plan_config pc;
    plan_config("cnn", "3x32x32", 4096, DT_F32, &oc, &pc);
    backend_cpu_set_limit(64 * MIB);
    assert_int_equal(make(&pc, 4096), DT_ERR_NOMEM);
    format(&pc, 1, 0, 4096);
    dt_memory_plan p;
    assert_int_equal(dt_model_plan_memory(NULL, &pc, &p), DT_OK);
    char row[128];
    snprintf(row, sizeof row, "(%zu bytes)", p.kinds.activations);
    assert_non_null(strstr(text, row));
    snprintf(row, sizeof row, "(%zu bytes)", p.peak);
    assert_non_null(strstr(text, row));
    assert_non_null(strstr(text, "device: 64.0 MiB free of 64.0 MiB (67108864 of 67108864 bytes)"));
    int b = 0;
    assert_int_equal(dt_model_max_batch(NULL, &pc, 64 * MIB, &b, &p), DT_OK);
    assert_true(b > 0 && b < 4096);
    snprintf(row, sizeof row, "  fix: batch %d fits (", b);
    assert_non_null(strstr(text, row));
    snprintf(row, sizeof row, ": use --batch %d\n", b);
    assert_non_null(strstr(text, row));
    assert_int_equal(make(&pc, b), DT_OK);
    assert_non_null(strstr(text, "--accum-steps"));
    backend_cpu_set_limit(0);
}

/* A wide fc layer: its 16-bit scratch makes a bf16 model peak above the fp32 one. */
static void test_other_precision(void **st)
{
    (void)st;
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    dt_memory_plan_config pc[2];
    plan_config("fc:2048,relu,fc:10", "2048", 64, DT_F32, &oc, &pc[0]);
    plan_config("fc:2048,relu,fc:10", "2048", 64, DT_BF16, &oc, &pc[1]);
    const size_t limit = 52 * MIB;
    int b32 = 0, b16 = 0;
    dt_memory_plan p;
    assert_int_equal(dt_model_max_batch(NULL, &pc[0], limit, &b32, &p), DT_OK);
    assert_int_equal(dt_model_max_batch(NULL, &pc[1], limit, &b16, &p), DT_OK);
    assert_true(b32 > 0);
    assert_int_equal(b16, 0);
    backend_cpu_set_limit(limit);
    /* train --precision bf16: nothing fits in bf16; fp32 at b32 does, and is made. */
    format(&pc[1], 1, 0, 64);
    char want[96];
    snprintf(want, sizeof want, "use --precision fp32 --batch %d (it fits)", b32);
    assert_non_null(strstr(text, want));
    assert_non_null(strstr(text, "fix: even batch 1 needs"));
    assert_non_null(strstr(text, "More ranks won't help"));
    assert_int_equal(make(&pc[0], b32), DT_OK);
    /* bench step --precision fp32,bf16 with fp32 failing: bf16 is the one to leave out. */
    format(pc, 2, 0, 0);
    snprintf(want, sizeof want, "the largest batch that fits, by precision: fp32 %d bf16 0\n", b32);
    assert_non_null(strstr(text, want));
    assert_non_null(strstr(text, "fix: even batch 1 of --precision bf16 does not fit"));
    assert_null(strstr(text, "use --batch"));
    backend_cpu_set_limit(0);
}

static void test_host_memory_and_cut(void **st)
{
    (void)st;
    dt_memory_plan_config pc;
    plan_config("mlp", NULL, 128, DT_F32, NULL, &pc);
    backend_cpu_set_limit(0);
    format(&pc, 1, 0, 128);
    assert_non_null(strstr(text, "device: host memory, whose free memory dtrain does not know"));
    assert_null(strstr(text, "use --batch"));
    assert_non_null(strstr(text, "parameters (fp32)"));
    const oom_case c = {.command = "train", .plans = &pc, .n_plans = 1};
    char small[40];
    memset(small, 'x', sizeof small);
    const size_t len = oom_report_format(NULL, &c, small, sizeof small);
    assert_int_equal(len, sizeof small - 1);
    assert_int_equal(small[sizeof small - 1], '\0');
    assert_int_equal(strncmp(small, "dtrain: out of memory on rank", 29), 0);
}

/* More plans than the summary plans for: the fix says so, not some earlier error. */
static void test_too_many_plans(void **st)
{
    (void)st;
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    dt_memory_plan_config pc[9];
    for (int i = 0; i < 9; i++) plan_config("mlp", NULL, 16, DT_F32, &oc, &pc[i]);
    backend_cpu_set_limit(64 * MIB);
    format(pc, 9, 0, 0);
    backend_cpu_set_limit(0);
    assert_non_null(strstr(text, "no batch advice: 9 precisions, the summary plans at most 8"));
}

int main(void)
{
    /* No memory cgroup: the host's report is the same wherever the test runs. */
    setenv("DTRAIN_TEST_CGROUP_ROOT", "/nonexistent", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_that_fits),
        cmocka_unit_test(test_other_precision),
        cmocka_unit_test(test_host_memory_and_cut),
        cmocka_unit_test(test_too_many_plans),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
