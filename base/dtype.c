/*
 * dtype.c - what every layer needs to know about a dt_dtype: its size and its name, the one
 * spelling the flags (--precision, --grad-comm, --wire), the messages and the logs all share.
 */
#include "dtrain.h"
#include "base/status.h"

#include <string.h>

size_t dt_dtype_size(dt_dtype t)
{
    switch (t) {
        case DT_F32: return 4;
        case DT_F16:
        case DT_BF16: return 2;
        case DT_U8: return 1;
    }
    return 0; /* not a dt_dtype: a size of 0 moves nothing rather than a guessed amount */
}

const char *dt_dtype_name(dt_dtype t)
{
    switch (t) {
        case DT_F32: return "fp32";
        case DT_F16: return "fp16";
        case DT_BF16: return "bf16";
        case DT_U8: return "u8";
    }
    return "?";
}

dt_status dt_dtype_parse(const char *s, dt_dtype *out)
{
    if (!out) return status_set_error(DT_ERR_INVALID_ARG, "dt_dtype_parse: out is NULL");
    static const dt_dtype all[] = {DT_F32, DT_F16, DT_BF16, DT_U8};
    for (size_t i = 0; s && i < sizeof all / sizeof *all; i++)
        if (!strcmp(s, dt_dtype_name(all[i]))) {
            *out = all[i];
            return DT_OK;
        }
    if (!s)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "dt_dtype_parse: no dtype given (s is NULL): use one of fp32, fp16, bf16, u8");
    return status_set_error(DT_ERR_INVALID_ARG, "dtype '%s' is not one of fp32, fp16, bf16, u8", s);
}
