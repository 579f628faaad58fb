/*
 * cpu/blas_reserve.c - OpenBLAS's working buffers taken up front, or a clear DT_ERR_NOMEM instead
 * of a process that spins for ever (backend.h, backend_cpu_blas_reserve).
 *
 * Every OpenBLAS GEMM runs in a buffer of BUFFER_SIZE bytes per thread: 32 << 22 = 128 MiB on
 * x86_64 (common_x86_64.h), mapped once and kept for the life of the process. Each of its worker
 * threads maps its own as it starts (blas_thread_server: blas_memory_alloc(2)), at library load
 * or when openblas_set_num_threads raises the count; the calling thread maps its own at its first
 * GEMM (interface/gemm.c: blas_memory_alloc(0)). When that map fails, blas_memory_alloc does not
 * return (driver/others/memory.c, 0.3.21 and still today): it tries mmap, then malloc of
 * BUFFER_SIZE + 4096, and
 *     if (((BLASLONG) map_address) == -1) base_address = 0UL;
 *     ...
 *   } while ((BLASLONG)map_address == -1);
 * so under `ulimit -v` that leaves the model room but not the buffer, the first training step
 * spins at 100% CPU, prints nothing and ignores SIGTERM (dtrain checks its flag between steps).
 *
 * So before the first GEMM of this thread the room is probed with the same kind of mapping (then
 * given back), and a GEMM large enough to skip OpenBLAS's small-matrix path (M*N*K > 100^3, which
 * uses no buffer) makes OpenBLAS map its buffer at once, into the room just freed. From then on
 * its GEMMs take no more address space, and what runs short later is dtrain's own allocations,
 * which fail with a message. The probe and the GEMM cost well under a millisecond, once.
 */
#include "kernels/backend.h"
#include "base/mem_limit.h"
#include "base/status.h"

#include <cblas.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* OpenBLAS's BUFFER_SIZE on x86_64 (the largest of the usual builds: 32 MiB on older arm64), and
 * a page of the malloc fallback's extra plus one of margin. */
#define BLAS_BUFFER_BYTES ((size_t)128 << 20)
#define BLAS_PROBE_BYTES (BLAS_BUFFER_BYTES + 2 * 4096)

/* The warm-up GEMM's side: 101^3 is past the small-matrix kernels' 100^3. */
enum { WARM_N = 101 };

/* 1 once this process's GEMM buffer is mapped. The calling thread's buffer is what is taken here;
 * a second thread that runs GEMMs at the same time gets a buffer of its own (not probed). */
static atomic_int blas_ready;

dt_status backend_cpu_blas_probe(int buffers, const char *why)
{
    if (buffers < 1) return DT_OK;
    const size_t bytes = BLAS_PROBE_BYTES * (size_t)buffers;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) {
        munmap(p, bytes);
        return DT_OK;
    }
    const int err = errno;
    char lim[160];
    mem_limit_text(lim, sizeof lim);
    const double mib = (double)BLAS_BUFFER_BYTES / 1048576.0;
    return status_set_error(
        DT_ERR_NOMEM,
        "out of memory for OpenBLAS's GEMM buffers: %s needs %d x %.0f MiB (%zu bytes) of address space%s, and mmap "
        "failed (%s), which OpenBLAS would retry for ever. Fix: %s; or fewer BLAS threads "
        "(OPENBLAS_NUM_THREADS=1 in the environment: each thread OpenBLAS starts maps %.0f MiB; --blas-threads); or "
        "a smaller model or --batch",
        why, buffers, mib, bytes, lim, strerror(err),
        lim[0] ? "raise the limit (a larger ulimit -v / ulimit -d)"
               : "free memory on this node or run fewer ranks on it",
        mib);
}

dt_status backend_cpu_blas_reserve(void)
{
    if (atomic_load_explicit(&blas_ready, memory_order_acquire)) return DT_OK;
    dt_status s = backend_cpu_blas_probe(1, "the first GEMM of this thread");
    if (s) return s;
    float *m = calloc(2 * (size_t)WARM_N * WARM_N, sizeof *m);
    if (!m) {
        char lim[160];
        return status_set_error(DT_ERR_NOMEM, "out of host memory for the OpenBLAS warm-up (%zu bytes)%s",
                                2 * (size_t)WARM_N * WARM_N * sizeof *m, mem_limit_text(lim, sizeof lim));
    }
    /* Zeros times zeros: the values do not matter, the buffer OpenBLAS maps for it does. */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, WARM_N, WARM_N, WARM_N, 1.0f, m, WARM_N, m, WARM_N, 0.0f,
                m + (size_t)WARM_N * WARM_N, WARM_N);
    free(m);
    atomic_store_explicit(&blas_ready, 1, memory_order_release);
    return DT_OK;
}
