/*
 * device_info_none.c - device discovery in a build without CUDA, see kernels/device_info.h: no
 * device, and every answer says that the build, not the machine, is why. Built only when CUDA is
 * not (a CUDA build takes kernels/cuda/device_info.c instead).
 */
#include "kernels/device_info.h"
#include "base/status.h"

#include <stdio.h>

#define NO_CUDA_FIX "Fix: rebuild with the CUDA toolkit installed (cmake -DDTRAIN_CUDA=ON), or use --device cpu"

int device_info_cuda_built(void) { return 0; }

int device_info_count(char *why, size_t n)
{
    snprintf(why, n, "this dtrain was built without CUDA. " NO_CUDA_FIX);
    return 0;
}

dt_status device_info_select(int ordinal, char *bus_id, size_t n)
{
    if (n) bus_id[0] = '\0';
    return status_set_error(DT_ERR_UNSUPPORTED,
                            "cannot select GPU %d: this dtrain was built without CUDA. " NO_CUDA_FIX, ordinal);
}

void device_info_cuda_version(char *out, size_t n) { snprintf(out, n, "-"); }
