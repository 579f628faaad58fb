/*
 * config.c - configuration defaults, the DTRAIN_* environment, name parsers, version strings.
 *
 * Precedence is flag > DTRAIN_* variable > default: callers apply dt_config_from_env() first and
 * their flags after it.
 */
#include "dtrain.h"
#include "collectives/coll.h"
#include "runtime/placement/config.h"
#include "kernels/device_info.h"
#include "base/log.h"
#include "base/parse.h"
#include "base/status.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dt_config_defaults(dt_config *cfg)
{
    if (!cfg) return;
    memset(cfg, 0, sizeof *cfg);
    cfg->device = DT_DEVICE_AUTO;
    cfg->pin = DT_PIN_AUTO;
    cfg->timeout_s = 300.0;
    cfg->init_mpi = 1;
    cfg->blas_threads = 0;
    cfg->gpu_comm = DT_GPU_COMM_NCCL;
    cfg->comm_thread = 1;
    cfg->comm_world1 = 0;
    cfg->allreduce = DT_ALLREDUCE_AUTO;
}

dt_status dt_gpu_comm_parse(const char *s, dt_gpu_comm *out)
{
    if (!out) return status_set_error(DT_ERR_INVALID_ARG, "dt_gpu_comm_parse: out is NULL");
    if (s && strcmp(s, "nccl") == 0)
        *out = DT_GPU_COMM_NCCL;
    else if (s && strcmp(s, "mpi") == 0)
        *out = DT_GPU_COMM_MPI;
    else if (!s)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "dt_gpu_comm_parse: no GPU communication given (s is NULL): use one of nccl, mpi");
    else
        return status_set_error(DT_ERR_INVALID_ARG, "GPU communication '%s' is not one of nccl, mpi", s);
    return DT_OK;
}

dt_status dt_device_kind_parse(const char *s, dt_device_kind *out)
{
    if (!out) return status_set_error(DT_ERR_INVALID_ARG, "dt_device_kind_parse: out is NULL");
    if (s && strcmp(s, "auto") == 0)
        *out = DT_DEVICE_AUTO;
    else if (s && strcmp(s, "cpu") == 0)
        *out = DT_DEVICE_CPU;
    else if (s && strcmp(s, "cuda") == 0)
        *out = DT_DEVICE_CUDA;
    else if (!s)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "dt_device_kind_parse: no device given (s is NULL): use one of auto, cpu, cuda");
    else
        return status_set_error(DT_ERR_INVALID_ARG, "device '%s' is not one of auto, cpu, cuda", s);
    return DT_OK;
}

dt_status dt_pin_mode_parse(const char *s, dt_pin_mode *out)
{
    if (!out) return status_set_error(DT_ERR_INVALID_ARG, "dt_pin_mode_parse: out is NULL");
    if (s && strcmp(s, "auto") == 0)
        *out = DT_PIN_AUTO;
    else if (s && strcmp(s, "none") == 0)
        *out = DT_PIN_NONE;
    else if (!s)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "dt_pin_mode_parse: no pin mode given (s is NULL): use one of auto, none");
    else
        return status_set_error(DT_ERR_INVALID_ARG, "pin mode '%s' is not one of auto, none", s);
    return DT_OK;
}

const char *dt_device_kind_name(dt_device_kind k)
{
    switch (k) {
        case DT_DEVICE_AUTO: return "auto";
        case DT_DEVICE_CPU: return "cpu";
        case DT_DEVICE_CUDA: return "cuda";
    }
    return "?";
}

const char *dt_launcher_name(dt_launcher l)
{
    switch (l) {
        case DT_LAUNCHER_NONE: return "none";
        case DT_LAUNCHER_OPENMPI: return "openmpi";
        case DT_LAUNCHER_SLURM: return "slurm";
        case DT_LAUNCHER_PMIX: return "pmix";
        case DT_LAUNCHER_HYDRA: return "hydra";
        case DT_LAUNCHER_TORCHRUN: return "torchrun";
    }
    return "?";
}

dt_status config_timeout_parse(const char *name, const char *value, double *out)
{
    return parse_double_or_zero(name, value, CONFIG_TIMEOUT_MIN_S, CONFIG_TIMEOUT_MAX_S, "never", out);
}

dt_status config_check(const dt_config *c)
{
    if (!config_timeout_valid(c->timeout_s))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "dt_config.timeout_s %g is out of range: 0 (no deadline) or %g to %g seconds (under a "
                                "second, healthy collectives would pass the deadline)",
                                c->timeout_s, CONFIG_TIMEOUT_MIN_S, CONFIG_TIMEOUT_MAX_S);
    if (c->device != DT_DEVICE_AUTO && c->device != DT_DEVICE_CPU && c->device != DT_DEVICE_CUDA)
        return status_set_error(DT_ERR_INVALID_ARG, "dt_config.device %d is not DT_DEVICE_AUTO, _CPU or _CUDA",
                                (int)c->device);
    if (c->pin != DT_PIN_AUTO && c->pin != DT_PIN_NONE)
        return status_set_error(DT_ERR_INVALID_ARG, "dt_config.pin %d is not DT_PIN_AUTO or DT_PIN_NONE", (int)c->pin);
    if (c->blas_threads < 0 || c->blas_threads > 4096)
        return status_set_error(DT_ERR_INVALID_ARG, "dt_config.blas_threads %d is out of range: 0 (auto) to 4096",
                                c->blas_threads);
    if (c->gpu_comm != DT_GPU_COMM_NCCL && c->gpu_comm != DT_GPU_COMM_MPI)
        return status_set_error(DT_ERR_INVALID_ARG, "dt_config.gpu_comm %d is not DT_GPU_COMM_NCCL or DT_GPU_COMM_MPI",
                                (int)c->gpu_comm);
    if ((c->init_mpi != 0 && c->init_mpi != 1) || (c->comm_thread != 0 && c->comm_thread != 1) ||
        (c->comm_world1 != 0 && c->comm_world1 != 1))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "dt_config.init_mpi (%d), comm_thread (%d) and comm_world1 (%d) are each 0 or 1",
                                c->init_mpi, c->comm_thread, c->comm_world1);
    if (c->allreduce != DT_ALLREDUCE_AUTO && c->allreduce != DT_ALLREDUCE_DIRECT && c->allreduce != DT_ALLREDUCE_CHAIN)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "dt_config.allreduce %d is not DT_ALLREDUCE_AUTO, _DIRECT or _CHAIN",
                                (int)c->allreduce);
    return DT_OK;
}

dt_status dt_config_from_env(dt_config *cfg)
{
    if (!cfg) return status_set_error(DT_ERR_INVALID_ARG, "dt_config_from_env: cfg is NULL: pass a dt_config to fill");
    dt_config c = *cfg;
    const char *v;
    dt_status s;
    if ((v = getenv("DTRAIN_DEVICE")) && (s = dt_device_kind_parse(v, &c.device)))
        return status_set_error(DT_ERR_ENV, "DTRAIN_DEVICE='%s' is not one of auto, cpu, cuda; fix or unset it", v);
    if ((v = getenv("DTRAIN_PIN")) && (s = dt_pin_mode_parse(v, &c.pin)))
        return status_set_error(DT_ERR_ENV, "DTRAIN_PIN='%s' is not one of auto, none; fix or unset it", v);
    if ((v = getenv("DTRAIN_TIMEOUT")) && (s = config_timeout_parse("DTRAIN_TIMEOUT", v, &c.timeout_s))) return s;
    if ((v = getenv("DTRAIN_BLAS_THREADS")) && (s = parse_int("DTRAIN_BLAS_THREADS", v, 0, 4096, &c.blas_threads)))
        return s;
    if ((v = getenv("DTRAIN_GPU_COMM")) && (s = dt_gpu_comm_parse(v, &c.gpu_comm)))
        return status_set_error(DT_ERR_ENV, "DTRAIN_GPU_COMM='%s' is not one of nccl, mpi; fix or unset it", v);
    if ((v = getenv("DTRAIN_COMM_THREAD")) && (s = parse_int("DTRAIN_COMM_THREAD", v, 0, 1, &c.comm_thread))) return s;
    if ((v = getenv("DTRAIN_COMM_WORLD1")) && (s = parse_int("DTRAIN_COMM_WORLD1", v, 0, 1, &c.comm_world1))) return s;
    if ((v = getenv("DTRAIN_ALLREDUCE")) && (s = dt_allreduce_algo_parse(v, &c.allreduce)))
        return status_set_error(DT_ERR_ENV, "DTRAIN_ALLREDUCE='%s' is not one of auto, direct, chain; fix or unset it",
                                v);
    /* DTRAIN_LOG is read here too, not only by dt_init, so that a malformed value is refused with
     * the other DTRAIN_* variables, as bad usage, before MPI starts. Last, so that cfg and the
     * level stay as they were when anything else is wrong. */
    if ((s = log_init_from_env())) return s;
    *cfg = c;
    return DT_OK;
}

const char *dt_version_string(void)
{
    /* The build's features, asked of the layers that have them (kernels/device_info.h for CUDA,
     * collectives/coll.h for NCCL); NCCL is built only with CUDA. */
    if (!device_info_cuda_built()) return DTRAIN_VERSION " (cpu only)";
    return coll_nccl_built() ? DTRAIN_VERSION " (cuda, nccl)" : DTRAIN_VERSION " (cuda)";
}

int dt_version_code(void)
{
    /* The value of the headers this library was built from, not of the caller's. */
    return DT_VERSION_CODE;
}

void dt_versions(char *mpi, char *nccl, char *cuda, size_t n)
{
    if (mpi) {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        int len = 0;
        if (MPI_Get_library_version(lib, &len) == MPI_SUCCESS) {
            /* The first line, without Open MPI's ", package: ..." tail. */
            lib[strcspn(lib, "\n,")] = '\0';
            snprintf(mpi, n, "%s", lib);
        } else {
            snprintf(mpi, n, "-");
        }
    }
    if (nccl) coll_nccl_version(nccl, n);
    if (cuda) device_info_cuda_version(cuda, n);
}
