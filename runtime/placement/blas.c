/*
 * blas.c - which OpenBLAS kernel this process runs, and a better one when OpenBLAS guessed low.
 *
 * OpenBLAS picks its kernels from the CPU model number. On virtual machines that hide the model
 * ("Intel(R) Xeon(R) Processor") it falls back to its SSE3 "Prescott" kernels even where the CPU
 * has AVX-512: measured here, the mlp step then takes 4x longer than with the SkylakeX kernels.
 * The choice is made when the library loads, so the fix is OPENBLAS_CORETYPE in the environment
 * of a fresh process; `dtrain` re-executes itself with it (see launch/main.c), and dt_init warns
 * programs that embed libdtrain.
 */
#include "runtime/placement/blas.h"
#include "dtrain.h"

#include <cblas.h>
#include <string.h>
#include <strings.h>

/* OpenBLAS's kernels that use AVX2 and FMA or better. */
static int blas_core_has_avx2(const char *core)
{
    static const char *const good[] = {"haswell", "zen", "skylakex", "cooperlake", "sapphirerapids"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        if (strcasecmp(core, good[i]) == 0) return 1;
    return 0;
}

static int blas_core_has_avx512(const char *core)
{
    return strcasecmp(core, "skylakex") == 0 || strcasecmp(core, "cooperlake") == 0 ||
           strcasecmp(core, "sapphirerapids") == 0;
}

const char *blas_advice_for(const char *core, int cpu_avx512, int cpu_avx2_fma)
{
    if (!core || !*core) return NULL;
    if (cpu_avx512 && !blas_core_has_avx512(core)) return "SkylakeX";
    if (cpu_avx2_fma && !blas_core_has_avx2(core)) return "Haswell";
    return NULL;
}

const char *dt_blas_corename(void)
{
    const char *c = openblas_get_corename();
    return c ? c : "unknown";
}

const char *dt_blas_coretype_advice(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return blas_advice_for(dt_blas_corename(), avx512, avx2);
#else
    return NULL;
#endif
}
