/*
 * fuzz_config.c - configuration from the environment: dt_config_from_env (runtime/config.c:
 * DTRAIN_DEVICE, DTRAIN_PIN, DTRAIN_TIMEOUT, DTRAIN_BLAS_THREADS, DTRAIN_GPU_COMM, DTRAIN_COMM_THREAD,
 * DTRAIN_COMM_WORLD1, DTRAIN_ALLREDUCE), DTRAIN_LOG
 * (log_init_from_env, runtime/log.c) and the DTRAIN_FAULT test hook of `dtrain train` (fault_parse,
 * launch/train/fault_inject.c, from the launch archive).
 *
 * Input: lines NAME=VALUE, the whole environment of the run (see fuzz_env_set); "DTRAIN_" is put
 * before names that lack it, so "TIMEOUT=5" sets DTRAIN_TIMEOUT.
 * Beyond ASan/UBSan: a success gives a configuration inside the documented ranges (timeout 0 or
 * 1 to 1e7 s, 0 to 4096 BLAS threads, comm_thread and comm_world1 0 or 1, allreduce one of the
 * three algorithms), equal to what each
 * variable says; a failure leaves cfg
 * unchanged (dtrain.h) and names a variable.
 */
#include "fuzz_common.h"
#include "base/log.h"
#include "base/parse.h"

#include <strings.h>

#include "launch/cli.h"
#include "launch/train/fault_inject.h"

static int cfg_same(const dt_config *a, const dt_config *b)
{
    return a->device == b->device && a->pin == b->pin && a->timeout_s == b->timeout_s &&
           a->blas_threads == b->blas_threads && a->gpu_comm == b->gpu_comm && a->comm_thread == b->comm_thread &&
           a->comm_world1 == b->comm_world1 && a->allreduce == b->allreduce;
}

static void check_config(const fuzz_env *env)
{
    const log_level level = log_get_level(); /* dt_config_from_env sets it from DTRAIN_LOG */
    dt_config def, cfg;
    dt_config_defaults(&def);
    cfg = def;
    const dt_status st = dt_config_from_env(&cfg);
    log_set_level(level);
    if (st != DT_OK) {
        FUZZ_CHECK(cfg_same(&cfg, &def), "a refused environment changed the configuration");
        FUZZ_CHECK(strstr(dt_last_error(), "DTRAIN_"), "the error names no variable: %s", dt_last_error());
        return;
    }
    FUZZ_CHECK(cfg.timeout_s == 0 || (cfg.timeout_s >= 1 && cfg.timeout_s <= 1e7), "timeout %g", cfg.timeout_s);
    FUZZ_CHECK(cfg.blas_threads >= 0 && cfg.blas_threads <= 4096, "blas threads %d", cfg.blas_threads);
    dt_device_kind k;
    dt_pin_mode p;
    dt_gpu_comm g;
    int n;
    const char *v;
    if ((v = fuzz_env_get(env, "DTRAIN_DEVICE")))
        FUZZ_CHECK(dt_device_kind_parse(v, &k) == DT_OK && k == cfg.device, "DTRAIN_DEVICE='%s'", v);
    else
        FUZZ_CHECK(cfg.device == def.device, "device changed with DTRAIN_DEVICE unset");
    if ((v = fuzz_env_get(env, "DTRAIN_PIN")))
        FUZZ_CHECK(dt_pin_mode_parse(v, &p) == DT_OK && p == cfg.pin, "DTRAIN_PIN='%s'", v);
    else
        FUZZ_CHECK(cfg.pin == def.pin, "pin changed with DTRAIN_PIN unset");
    if ((v = fuzz_env_get(env, "DTRAIN_GPU_COMM")))
        FUZZ_CHECK(dt_gpu_comm_parse(v, &g) == DT_OK && g == cfg.gpu_comm, "DTRAIN_GPU_COMM='%s'", v);
    else
        FUZZ_CHECK(cfg.gpu_comm == def.gpu_comm, "gpu comm changed with DTRAIN_GPU_COMM unset");
    if ((v = fuzz_env_get(env, "DTRAIN_COMM_THREAD")))
        FUZZ_CHECK(parse_int("DTRAIN_COMM_THREAD", v, 0, 1, &n) == DT_OK && n == cfg.comm_thread,
                   "DTRAIN_COMM_THREAD='%s' gave %d", v, cfg.comm_thread);
    else
        FUZZ_CHECK(cfg.comm_thread == def.comm_thread, "comm thread changed with DTRAIN_COMM_THREAD unset");
    if ((v = fuzz_env_get(env, "DTRAIN_COMM_WORLD1")))
        FUZZ_CHECK(parse_int("DTRAIN_COMM_WORLD1", v, 0, 1, &n) == DT_OK && n == cfg.comm_world1,
                   "DTRAIN_COMM_WORLD1='%s' gave %d", v, cfg.comm_world1);
    else
        FUZZ_CHECK(cfg.comm_world1 == def.comm_world1, "comm world1 changed with DTRAIN_COMM_WORLD1 unset");
    dt_allreduce_algo al;
    FUZZ_CHECK(cfg.allreduce == DT_ALLREDUCE_AUTO || cfg.allreduce == DT_ALLREDUCE_DIRECT ||
                   cfg.allreduce == DT_ALLREDUCE_CHAIN,
               "allreduce %d", (int)cfg.allreduce);
    if ((v = fuzz_env_get(env, "DTRAIN_ALLREDUCE")))
        FUZZ_CHECK(dt_allreduce_algo_parse(v, &al) == DT_OK && al == cfg.allreduce &&
                       strcmp(dt_allreduce_algo_name(al), v) == 0,
                   "DTRAIN_ALLREDUCE='%s'", v);
    else
        FUZZ_CHECK(cfg.allreduce == def.allreduce, "allreduce changed with DTRAIN_ALLREDUCE unset");
    if (!fuzz_env_get(env, "DTRAIN_TIMEOUT"))
        FUZZ_CHECK(cfg.timeout_s == def.timeout_s, "timeout changed with DTRAIN_TIMEOUT unset");
    if (!fuzz_env_get(env, "DTRAIN_BLAS_THREADS"))
        FUZZ_CHECK(cfg.blas_threads == def.blas_threads, "blas threads changed with DTRAIN_BLAS_THREADS unset");
}

static void check_log(const fuzz_env *env)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    const log_level before = log_get_level();
    const char *v = fuzz_env_get(env, "DTRAIN_LOG");
    if (log_init_from_env() == DT_OK) {
        const log_level l = log_get_level();
        FUZZ_CHECK(l >= LOG_LEVEL_ERROR && l <= LOG_LEVEL_DEBUG, "log level %d", (int)l);
        if (v && *v) FUZZ_CHECK(strcasecmp(v, names[l]) == 0, "DTRAIN_LOG='%s' gave level %s", v, names[l]);
    } else {
        FUZZ_CHECK(v && *v, "log_init_from_env refused an unset DTRAIN_LOG");
    }
    log_set_level(before);
}

static void check_fault(const fuzz_env *env)
{
    fault f;
    if (fault_parse(&f) != EXIT_OK) {
        FUZZ_CHECK(f.kind == FAULT_NONE, "a refused DTRAIN_FAULT armed fault %d", (int)f.kind);
        return;
    }
    const char *v = fuzz_env_get(env, "DTRAIN_FAULT");
    if (!v || !*v) {
        FUZZ_CHECK(f.kind == FAULT_NONE, "fault %d with DTRAIN_FAULT unset", (int)f.kind);
        return;
    }
    FUZZ_CHECK(f.kind > FAULT_NONE && f.kind < FAULT_NKINDS && f.rank >= 0 && f.step >= 0,
               "DTRAIN_FAULT='%s' gave %d:%d:%ld", v, (int)f.kind, f.rank, f.step);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_env env;
    fuzz_env_set(&env, data, size, "DTRAIN_");
    check_config(&env);
    check_log(&env);
    check_fault(&env);
    fuzz_env_restore(&env);
    return 0;
}
