/*
 * test_config.c - configuration defaults, DTRAIN_* variables (and their malformed values), name
 * parsers, status strings and the version string.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/placement/blas.h"
#include "runtime/placement/config.h"
#include "dtrain.h"
#include "base/log.h"
#include "base/status.h"

#include <stdlib.h>
#include <string.h>
#include <stdio.h>

static void clear_env(void)
{
    unsetenv("DTRAIN_DEVICE");
    unsetenv("DTRAIN_PIN");
    unsetenv("DTRAIN_TIMEOUT");
    unsetenv("DTRAIN_BLAS_THREADS");
    unsetenv("DTRAIN_GPU_COMM");
    unsetenv("DTRAIN_COMM_THREAD");
    unsetenv("DTRAIN_COMM_WORLD1");
    unsetenv("DTRAIN_LOG");
}

static void test_defaults_and_env(void **st)
{
    (void)st;
    clear_env();
    dt_config c;
    dt_config_defaults(&c);
    assert_int_equal(c.device, DT_DEVICE_AUTO);
    assert_int_equal(c.pin, DT_PIN_AUTO);
    assert_true(c.timeout_s == 300.0);
    assert_int_equal(c.init_mpi, 1);
    assert_int_equal(c.gpu_comm, DT_GPU_COMM_NCCL);
    assert_int_equal(c.comm_thread, 1);
    assert_int_equal(c.comm_world1, 0);
    assert_int_equal(dt_config_from_env(&c), DT_OK);
    assert_int_equal(c.device, DT_DEVICE_AUTO);

    setenv("DTRAIN_DEVICE", "cpu", 1);
    setenv("DTRAIN_PIN", "none", 1);
    setenv("DTRAIN_TIMEOUT", "30.5", 1);
    setenv("DTRAIN_BLAS_THREADS", "3", 1);
    setenv("DTRAIN_GPU_COMM", "mpi", 1);
    setenv("DTRAIN_COMM_THREAD", "0", 1);
    setenv("DTRAIN_COMM_WORLD1", "1", 1);
    assert_int_equal(dt_config_from_env(&c), DT_OK);
    assert_int_equal(c.comm_thread, 0);
    assert_int_equal(c.comm_world1, 1);
    assert_int_equal(c.gpu_comm, DT_GPU_COMM_MPI);
    assert_int_equal(c.device, DT_DEVICE_CPU);
    assert_int_equal(c.pin, DT_PIN_NONE);
    assert_true(c.timeout_s == 30.5);
    assert_int_equal(c.blas_threads, 3);
    clear_env();
}

static void expect_env_error(const char *var, const char *val)
{
    clear_env();
    setenv(var, val, 1);
    dt_config c, before;
    dt_config_defaults(&c);
    before = c;
    assert_int_equal(dt_config_from_env(&c), DT_ERR_ENV);
    assert_memory_equal(&c, &before, sizeof c); /* unchanged on failure */
    const char *msg = dt_last_error();
    if (!strstr(msg, var) || !strstr(msg, val)) fail_msg("message '%s' lacks %s or '%s'", msg, var, val);
    clear_env();
}

static void test_bad_env(void **st)
{
    (void)st;
    expect_env_error("DTRAIN_DEVICE", "gpu");
    expect_env_error("DTRAIN_DEVICE", "");
    expect_env_error("DTRAIN_PIN", "yes");
    expect_env_error("DTRAIN_TIMEOUT", "ten");
    expect_env_error("DTRAIN_TIMEOUT", "-1");
    expect_env_error("DTRAIN_TIMEOUT", "nan");
    expect_env_error("DTRAIN_BLAS_THREADS", "2.5");
    expect_env_error("DTRAIN_BLAS_THREADS", "-2");
    expect_env_error("DTRAIN_GPU_COMM", "gloo");
    expect_env_error("DTRAIN_COMM_THREAD", "no");
    expect_env_error("DTRAIN_COMM_THREAD", "2");
    expect_env_error("DTRAIN_COMM_WORLD1", "yes");
    expect_env_error("DTRAIN_COMM_WORLD1", "");
    /* DTRAIN_LOG is refused with the others (bad usage), not later by dt_init (a run-time failure). */
    expect_env_error("DTRAIN_LOG", "verbose");
    /* Under a second a healthy collective can pass the deadline and the job would be aborted
     * blaming a live rank: 0 (never) or 1 s and more. */
    expect_env_error("DTRAIN_TIMEOUT", "1e-45");
    expect_env_error("DTRAIN_TIMEOUT", "0.5");
    expect_env_error("DTRAIN_TIMEOUT", "10000001");
}

static void test_timeout_rule(void **st)
{
    (void)st;
    static const struct {
        const char *v;
        double t;
    } ok[] = {{"0", 0}, {"-0", 0}, {"1", 1}, {"2.5", 2.5}, {"300", 300}, {"1e7", 1e7}};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        double t = -1;
        assert_int_equal(config_timeout_parse("--timeout", ok[i].v, &t), DT_OK);
        assert_true(t == ok[i].t);
        assert_true(config_timeout_valid(t));
    }
    static const char *const bad[] = {"1e-45", "0.999", "0.5", "-1", "10000001", "1e-400", "0x1p3", "\t5"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        double t = -1;
        assert_int_equal(config_timeout_parse("--timeout", bad[i], &t), DT_ERR_INVALID_ARG);
        assert_true(t == -1);
        if (!strstr(dt_last_error(), "(expected 0 (never) or a number from 1 to 10000000)"))
            fail_msg("--timeout '%s': '%s' does not give the range", bad[i], dt_last_error());
    }
    double t = -1;
    assert_int_equal(config_timeout_parse("DTRAIN_TIMEOUT", "1e-45", &t), DT_ERR_ENV);
    assert_string_equal(dt_last_error(),
                        "DTRAIN_TIMEOUT='1e-45' is out of range (expected 0 (never) or a number from 1 to 10000000)");
    assert_false(config_timeout_valid(1e-45));
    assert_false(config_timeout_valid(-1));
    assert_false(config_timeout_valid(2e7));
}

static void test_log_level_from_env(void **st)
{
    (void)st;
    clear_env();
    log_level before = log_get_level();
    setenv("DTRAIN_LOG", "debug", 1);
    dt_config c;
    dt_config_defaults(&c);
    assert_int_equal(dt_config_from_env(&c), DT_OK);
    assert_int_equal(log_get_level(), LOG_LEVEL_DEBUG);
    /* Anything else wrong: the level stays. */
    log_set_level(before);
    setenv("DTRAIN_LOG", "info", 1);
    setenv("DTRAIN_PIN", "yes", 1);
    assert_int_equal(dt_config_from_env(&c), DT_ERR_ENV);
    assert_int_equal(log_get_level(), before);
    clear_env();
    setenv("DTRAIN_LOG", "verbose", 1);
    assert_int_equal(dt_config_from_env(&c), DT_ERR_ENV);
    assert_string_equal(dt_last_error(), "DTRAIN_LOG='verbose' is not a log level; use error, warn, info or debug");
    clear_env();
    log_set_level(before);
}

/* A parser given no string names the call and what was missing, and prints no "(null)". */
static void expect_no_value(const char *needle)
{
    const char *e = dt_last_error();
    if (!strstr(e, needle) || strstr(e, "(null)")) fail_msg("\"%s\": want \"%s\" and no \"(null)\"", e, needle);
}

static void test_names(void **st)
{
    (void)st;
    dt_device_kind k;
    assert_int_equal(dt_device_kind_parse("cuda", &k), DT_OK);
    assert_int_equal(k, DT_DEVICE_CUDA);
    assert_int_equal(dt_device_kind_parse("CUDA", &k), DT_ERR_INVALID_ARG);
    /* No value: said so, without printing a NULL string (glibc's "(null)", or a crash elsewhere). */
    assert_int_equal(dt_device_kind_parse(NULL, &k), DT_ERR_INVALID_ARG);
    expect_no_value("dt_device_kind_parse: no device given");
    dt_pin_mode pm;
    assert_int_equal(dt_pin_mode_parse(NULL, &pm), DT_ERR_INVALID_ARG);
    expect_no_value("dt_pin_mode_parse: no pin mode given");
    dt_gpu_comm gc;
    assert_int_equal(dt_gpu_comm_parse(NULL, &gc), DT_ERR_INVALID_ARG);
    expect_no_value("dt_gpu_comm_parse: no GPU communication given");
    dt_allreduce_algo aa;
    assert_int_equal(dt_allreduce_algo_parse(NULL, &aa), DT_ERR_INVALID_ARG);
    expect_no_value("dt_allreduce_algo_parse: no allreduce algorithm given");
    assert_string_equal(dt_device_kind_name(DT_DEVICE_CPU), "cpu");
    assert_string_equal(dt_launcher_name(DT_LAUNCHER_SLURM), "slurm");
    assert_string_equal(dt_launcher_name(DT_LAUNCHER_TORCHRUN), "torchrun");
    for (int s = DT_OK; s <= DT_ERR_COMM; s++) assert_string_not_equal(dt_strerror((dt_status)s), "unknown status");
    assert_string_equal(dt_strerror(DT_ERR_COMM), "NCCL error");
    /* The string and the number both follow the header's DT_VERSION_* macros. */
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d ", DT_VERSION_MAJOR, DT_VERSION_MINOR, DT_VERSION_PATCH);
    assert_int_equal(strncmp(dt_version_string(), want, strlen(want)), 0);
    assert_int_equal(dt_version_code(), DT_VERSION_CODE);
    assert_int_equal(dt_dtype_size(DT_F32), 4);
    assert_int_equal(dt_dtype_size(DT_BF16), 2);
    assert_int_equal(dt_dtype_size((dt_dtype)7), 0);
}

/* A caller that wraps the error it was given (the message it formats reads the last error itself)
 * gets both, the outer text first. */
static void test_error_wraps_last_error(void **st)
{
    (void)st;
    assert_int_equal(status_set_error(DT_ERR_IO, "inner %d", 7), DT_ERR_IO);
    assert_int_equal(status_set_error(DT_ERR_DEVICE, "outer: %s (again: %s)", dt_last_error(), dt_last_error()),
                     DT_ERR_DEVICE);
    assert_string_equal(dt_last_error(), "outer: inner 7 (again: inner 7)");
    status_clear_error();
    assert_string_equal(dt_last_error(), "");
}

/* dt_dtype_name and dt_dtype_parse are inverses on every dtype, and the parser takes nothing else. */
static void test_dtype_names(void **st)
{
    (void)st;
    static const dt_dtype all[] = {DT_F32, DT_F16, DT_BF16, DT_U8};
    static const char *const names[] = {"fp32", "fp16", "bf16", "u8"};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        assert_string_equal(dt_dtype_name(all[i]), names[i]);
        dt_dtype t = (dt_dtype)99;
        assert_int_equal(dt_dtype_parse(names[i], &t), DT_OK);
        assert_int_equal(t, all[i]);
    }
    assert_string_equal(dt_dtype_name((dt_dtype)7), "?");
    static const char *const bad[] = {"FP16", "f32", "float", "", "fp16 ", "half"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        dt_dtype t = DT_BF16;
        assert_int_equal(dt_dtype_parse(bad[i], &t), DT_ERR_INVALID_ARG);
        assert_int_equal(t, DT_BF16);
        if (!strstr(dt_last_error(), "fp32, fp16, bf16, u8")) fail_msg("'%s': %s", bad[i], dt_last_error());
    }
    dt_dtype t = DT_F32;
    assert_int_equal(dt_dtype_parse(NULL, &t), DT_ERR_INVALID_ARG);
    expect_no_value("dt_dtype_parse: no dtype given");
    assert_int_equal(dt_dtype_parse("fp16", NULL), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "dt_dtype_parse: out is NULL"));
}

/* A NULL output is a bad argument, named, not a crash; dt_config_defaults(NULL) does nothing. */
static void test_null_outputs(void **st)
{
    (void)st;
    assert_int_equal(dt_config_from_env(NULL), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "dt_config_from_env: cfg is NULL"));
    dt_config_defaults(NULL);
    assert_int_equal(dt_device_kind_parse("cpu", NULL), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "dt_device_kind_parse: out is NULL"));
    assert_int_equal(dt_pin_mode_parse("auto", NULL), DT_ERR_INVALID_ARG);
    assert_int_equal(dt_gpu_comm_parse("nccl", NULL), DT_ERR_INVALID_ARG);
    assert_int_equal(dt_allreduce_algo_parse("chain", NULL), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "dt_allreduce_algo_parse: out is NULL"));
    assert_int_equal(dt_rank(NULL), -1);
    assert_int_equal(dt_world_size(NULL), -1);
    assert_int_equal(dt_local_rank(NULL), -1);
    assert_int_equal(dt_get_placement(NULL, NULL), DT_ERR_INVALID_ARG);
    assert_string_equal(dt_device_kind_name((dt_device_kind)9), "?");
    assert_string_equal(dt_launcher_name((dt_launcher)9), "?");
}

static void test_blas_advice(void **st)
{
    (void)st;
    assert_string_equal(blas_advice_for("Prescott", 1, 1), "SkylakeX");
    assert_string_equal(blas_advice_for("Haswell", 1, 1), "SkylakeX");
    assert_string_equal(blas_advice_for("Prescott", 0, 1), "Haswell");
    assert_string_equal(blas_advice_for("sandybridge", 0, 1), "Haswell");
    assert_null(blas_advice_for("SkylakeX", 1, 1));
    assert_null(blas_advice_for("Haswell", 0, 1));
    assert_null(blas_advice_for("Zen", 0, 1));
    assert_null(blas_advice_for("Prescott", 0, 0));
    assert_null(blas_advice_for("", 1, 1));
    /* In this process: either OpenBLAS already runs the best kernels or there is advice. */
    const char *adv = dt_blas_coretype_advice();
    print_message("OpenBLAS core %s, advice %s\n", dt_blas_corename(), adv ? adv : "none");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_and_env),
        cmocka_unit_test(test_bad_env),
        cmocka_unit_test(test_timeout_rule),
        cmocka_unit_test(test_log_level_from_env),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_dtype_names),
        cmocka_unit_test(test_null_outputs),
        cmocka_unit_test(test_blas_advice),
        cmocka_unit_test(test_error_wraps_last_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
