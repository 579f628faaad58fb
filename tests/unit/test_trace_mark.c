/*
 * test_trace_mark.c - what the model's pass asks of a backend's trace_mark while a trace records
 * (the GPU span marks of kernels/cuda/trace_gpu.cu), without a GPU: the CPU table with trace_mark
 * swapped for a recorder. Every layer but flatten gets a begin and then an end, named as its host
 * span, forward then backward, except a relu whose forward the conv layer before it runs and whose
 * backward the pool after it runs (dt_model_set_fused_relu: that time is in their spans); nothing
 * is marked while the trace is off.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/trace.h"
#include "collectives/ctx_comm.h"
#include "dtrain.h"
#include "kernels/backend.h"
#include "runtime/test_hooks.h"

#define MAX_MARKS 64
static struct {
    int n, open;
    int end[MAX_MARKS];
    char name[MAX_MARKS][32];
} g_marks;

static dt_status fake_mark(backend *be, int end, const char *name, int cat, int64_t arg)
{
    (void)be, (void)cat, (void)arg;
    if (g_marks.n < MAX_MARKS) {
        g_marks.end[g_marks.n] = end;
        snprintf(g_marks.name[g_marks.n], sizeof g_marks.name[0], "%s", name);
    }
    g_marks.n++;
    return DT_OK;
}

/* dt_trace_start and dt_trace_set_steps refuse bad values naming them and the fix (one context
 * per process: MPI starts once, so this runs inside the test below). */
static void check_refusals(dt_ctx *ctx)
{
    assert_int_equal(dt_trace_set_steps(ctx, 1, 2), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "call dt_trace_start first"));
    assert_int_equal(dt_trace_start(ctx, ((size_t)1 << 28) + 1), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "capacity 268435457 is above the most, 268435456 events"));
    assert_non_null(strstr(dt_last_error(), "pass at most that"));
    assert_null(ctx_trace(ctx));
}

/* dt_trace_write tries the path before recording stops: no path, or one that cannot be written,
 * fails with the spans kept, and a second call with a good path writes them all. */
static void check_write_refusals(dt_ctx *ctx, size_t events)
{
    assert_int_equal(dt_trace_write(ctx, NULL), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "the path is NULL"));
    assert_int_equal(dt_trace_write(ctx, ""), DT_ERR_INVALID_ARG);
    assert_int_equal(dt_trace_write(ctx, "/nonexistent-dtrain-dir/t.json"), DT_ERR_IO);
    assert_non_null(strstr(dt_last_error(), "/nonexistent-dtrain-dir/t.json"));
    assert_int_equal(trace_rec_count(ctx_trace(ctx)), events); /* nothing lost, still recording */
    char dir[] = "/tmp/dt-trace-mark-XXXXXX", path[64], victim[64], planted[96];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/t.json", dir);
    /* A link planted under the temporary file's first name (a shared directory): never followed,
     * so its target keeps its bytes and t.json is a file of its own. */
    snprintf(victim, sizeof victim, "%s/victim", dir);
    snprintf(planted, sizeof planted, "%s.tmp.%d", path, (int)getpid());
    FILE *v = fopen(victim, "w");
    assert_non_null(v);
    fputs("mine", v);
    fclose(v);
    assert_int_equal(symlink(victim, planted), 0);
    assert_int_equal(dt_trace_write(ctx, path), DT_OK);
    struct stat sb;
    assert_int_equal(lstat(path, &sb), 0);
    assert_true(S_ISREG(sb.st_mode));
    assert_int_equal(stat(victim, &sb), 0);
    assert_int_equal(sb.st_size, 4);
    unlink(planted);
    unlink(victim);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char text[1 << 16];
    text[fread(text, 1, sizeof text - 1, f)] = '\0';
    fclose(f);
    assert_non_null(strstr(text, "\"traceEvents\""));
    assert_non_null(strstr(text, "fwd 0 conv")); /* the spans recorded before the refusals */
    unlink(path);
    rmdir(dir);
}

static void test_marks_per_layer(void **state)
{
    (void)state;
    dt_config cfg;
    dt_config_defaults(&cfg);
    cfg.device = DT_DEVICE_CPU;
    dt_ctx *ctx = NULL;
    assert_int_equal(dt_init(&cfg, &ctx), DT_OK);
    dt_model *m = NULL;
    /* 5 layers, flatten (layer 3) among them. */
    assert_int_equal(dt_model_create(ctx, "conv:2:3:1:1,relu,pool:2,flatten,fc:3", "1x4x4", 1, 2, &m), DT_OK);
    backend_ops ops = *backend_cpu()->ops;
    ops.trace_mark = fake_mark;
    backend fake = {&ops, NULL};
    model_test_set_backend(m, &fake);
    float x[2 * 16];
    for (int i = 0; i < 32; i++) x[i] = (float)(i % 7) - 3.0f;
    const int32_t y[2] = {0, 2};
    double loss;
    int correct;
    /* Tracing off: no mark. */
    assert_int_equal(dt_model_forward_backward(m, x, y, 2, 0.5f, &loss, &correct), DT_OK);
    assert_int_equal(g_marks.n, 0);
    check_refusals(ctx);
    assert_int_equal(dt_trace_start(ctx, 0), DT_OK);
    assert_int_equal(dt_trace_set_steps(ctx, 3, 2), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "trace steps 3:2"));
    assert_int_equal(dt_trace_start(ctx, 0), DT_ERR_INVALID_ARG); /* one trace per context */
    dt_trace_step(ctx, 1);
    assert_int_equal(dt_model_forward_backward(m, x, y, 2, 0.5f, &loss, &correct), DT_OK);
    static const char *const want[] = {"fwd 0 conv", "fwd 2 pool", "fwd 4 fc", "bwd 4 fc", "bwd 2 pool", "bwd 0 conv"};
    const int nw = (int)(sizeof want / sizeof *want);
    assert_int_equal(g_marks.n, 2 * nw);
    for (int k = 0; k < nw; k++) {
        assert_int_equal(g_marks.end[2 * k], 0);
        assert_int_equal(g_marks.end[2 * k + 1], 1);
        assert_string_equal(g_marks.name[2 * k], want[k]);
        assert_string_equal(g_marks.name[2 * k + 1], want[k]);
    }
    /* The host spans are all there, flatten's too. */
    const trace_rec *r = ctx_trace(ctx);
    const size_t have = trace_rec_count(r);
    trace_event *ev = malloc(have * sizeof *ev + 1);
    const size_t n = trace_rec_snapshot(r, ev, have);
    int layers = 0;
    for (size_t i = 0; i < n; i++) layers += ev[i].cat == TRACE_CAT_FWD || ev[i].cat == TRACE_CAT_BWD;
    assert_int_equal(layers, 8);
    free(ev);
    check_write_refusals(ctx, have);
    /* One context per process: a second would share MPI with this one without owning it. */
    dt_ctx *second = NULL;
    assert_int_equal(dt_init(&cfg, &second), DT_ERR_INVALID_ARG);
    assert_null(second);
    assert_non_null(strstr(dt_last_error(), "this process has a context already"));
    dt_ctx *same = ctx; /* a caller passing its live context's own variable keeps its handle */
    assert_int_equal(dt_init(&cfg, &same), DT_ERR_INVALID_ARG);
    assert_ptr_equal(same, ctx);
    assert_int_equal(dt_init(&cfg, NULL), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "out is NULL"));
    dt_model_free(m);
    assert_int_equal(dt_finalize(ctx), DT_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_marks_per_layer)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
