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
 *
 * The workers race the calling thread for the buffers. OpenBLAS keeps them in one table and hands
 * out the first slot not in use; a worker takes one when the scheduler FIRST RUNS it (not when it
 * is created) and keeps it, the calling thread takes one per GEMM and gives it back. A worker that
 * first runs after the calling thread gave its slot back takes that one, mapped already, and the
 * calling thread maps a new one at its next GEMM; a worker that first runs inside a GEMM, after
 * the model took the room, cannot map its own: either way a GEMM waits for ever (under taskset -c
 * 0 and ulimit -v 1300000, `dtrain train --model mlp --blas-threads 2` did, in the model's
 * warm-up). Probing for the workers when their count is raised does not help: the room is gone
 * by the time they run. So under a memory limit (RLIMIT_AS or RLIMIT_DATA) the count is raised
 * only by backend_cpu_blas_set_threads, which probes for the new workers' buffers and stacks and
 * the calling thread's buffer, raises the count, and runs the warm-up as a GEMM that every worker
 * takes part in (64 rows a thread: OpenBLAS splits M over all of them and hands each worker one
 * part): when it returns, each worker holds its buffer and the calling thread's is mapped and free
 * for its next GEMM, before the model allocates anything. The workers OpenBLAS starts at load (one
 * fewer than the cores, or OPENBLAS_NUM_THREADS) run whenever the scheduler lets them, so under a
 * limit `dtrain` starts OpenBLAS with OPENBLAS_NUM_THREADS=1 (launch/prologue.c) and a program of
 * its own should too (docs/library.md); a pool started at load is warmed up the same way, its
 * buffers counted as not mapped yet. Without a limit nothing changes: the count is set at once.
 */
#include "kernels/backend.h"
#include "base/mem_limit.h"
#include "base/status.h"

#include <cblas.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* OpenBLAS's BUFFER_SIZE on x86_64 (the largest of the usual builds: 32 MiB on older arm64), and
 * a page of the malloc fallback's extra plus one of margin. */
#define BLAS_BUFFER_BYTES ((size_t)128 << 20)
#define BLAS_PROBE_BYTES (BLAS_BUFFER_BYTES + 2 * 4096)

/* The warm-up GEMM: K = N = 101 and M at least 101 (101^3 is past the small-matrix kernels'
 * 100^3); with more than one BLAS thread, 64 rows for each, so that OpenBLAS splits M over all of
 * them (it gives each part at least SWITCH_RATIO rows, 16 at most in its builds). */
enum { WARM_N = 101, WARM_ROWS_PER_THREAD = 64 };

/* 1 once this process's GEMM buffer is mapped. The calling thread's buffer is what is taken here;
 * a second thread that runs GEMMs at the same time gets a buffer of its own (not probed). */
static atomic_int blas_ready;

/* The probe of `buffers` buffers and `extra` bytes more (new threads' stacks) at once. */
static dt_status probe(int buffers, size_t extra, const char *why)
{
    if (buffers < 1 && !extra) return DT_OK;
    const size_t bytes = BLAS_PROBE_BYTES * (size_t)buffers + extra;
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
        "out of memory for OpenBLAS's GEMM buffers: %s needs %d x %.0f MiB (%zu bytes%s) of address space%s, and "
        "mmap failed (%s), which OpenBLAS would retry for ever. Fix: %s; or fewer BLAS threads (--blas-threads 1; "
        "OPENBLAS_NUM_THREADS=1 in the environment: each thread OpenBLAS starts maps %.0f MiB); or a smaller model "
        "or --batch",
        why, buffers, mib, bytes, extra ? " with the new threads' stacks" : "", lim, strerror(err),
        lim[0] ? "raise the limit (a larger ulimit -v / ulimit -d)"
               : "free memory on this node or run fewer ranks on it",
        mib);
}

dt_status backend_cpu_blas_probe(int buffers, const char *why) { return probe(buffers, 0, why); }

/* The warm-up GEMM on OpenBLAS's count as it stands, every thread of it taking part; then this
 * thread's buffer is mapped (blas_ready). Zeros times zeros: the values do not matter, the buffers
 * OpenBLAS maps for it do. */
static dt_status warm_up(void)
{
    const int threads = openblas_get_num_threads();
    const size_t rows = threads > 1 ? (size_t)WARM_ROWS_PER_THREAD * (size_t)threads : WARM_N;
    const size_t floats = 2 * rows * WARM_N + (size_t)WARM_N * WARM_N;
    float *m = calloc(floats, sizeof *m);
    if (!m) {
        char lim[160];
        return status_set_error(DT_ERR_NOMEM, "out of host memory for the OpenBLAS warm-up (%zu bytes)%s",
                                floats * sizeof *m, mem_limit_text(lim, sizeof lim));
    }
    const float *a = m, *b = m + rows * WARM_N;
    float *c = m + rows * WARM_N + (size_t)WARM_N * WARM_N;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, WARM_N, WARM_N, 1.0f, a, WARM_N, b, WARM_N, 0.0f,
                c, WARM_N);
    free(m);
    atomic_store_explicit(&blas_ready, 1, memory_order_release);
    return DT_OK;
}

dt_status backend_cpu_blas_reserve(void)
{
    if (atomic_load_explicit(&blas_ready, memory_order_acquire)) return DT_OK;
    dt_status s = backend_cpu_blas_probe(1, "the first GEMM of this thread");
    return s ? s : warm_up();
}

/* The stack each thread OpenBLAS starts maps (it starts them with the default attributes): the
 * default stack size (RLIMIT_STACK's, or glibc's own when that is unlimited) and a guard page. */
static size_t thread_stack_bytes(void)
{
    pthread_attr_t attr;
    size_t stack = (size_t)8 << 20;
    if (pthread_getattr_default_np(&attr) == 0) {
        size_t got = 0;
        if (pthread_attr_getstacksize(&attr, &got) == 0 && got) stack = got;
        pthread_attr_destroy(&attr);
    }
    return stack + 4096;
}

/* OpenBLAS's pool: the most threads it has had (its workers and the calling thread; it never ends
 * a worker), 0 until the first backend_cpu_blas_set_threads, which reads the count then: the pool
 * it started at load. pool_warm: every worker of it holds its buffer (a warm-up ran on all of
 * them, or there are none). dt_init, one at a time, is the only caller. */
static int pool, pool_warm;

dt_status backend_cpu_blas_set_threads(int threads, int *got)
{
    const int before = openblas_get_num_threads();
    if (threads < 1) threads = 1;
    if (!pool) pool = before, pool_warm = before <= 1;
    *got = threads;
    mem_limit lim;
    const int limited = mem_limit_get(&lim);
    /* With no limit, a failed map means the node itself is short: the new workers' buffers are
     * probed, no more (what dtrain did before; the count is set at once, as fast as ever). */
    if (!limited) {
        char need[64];
        snprintf(need, sizeof need, "%d more BLAS thread(s) (%d asked)", threads - before, threads);
        dt_status s = threads > before ? probe(threads - before, 0, need) : DT_OK;
        if (s) *got = before;
        openblas_set_num_threads(*got);
        if (*got > pool) pool = *got, pool_warm = 0; /* its new workers map when they first run */
        return s;
    }
    /* Under a limit: every worker that takes part in a GEMM must hold its buffer before the model
     * takes the room (the file's comment). */
    const int all = threads > pool ? threads : pool;
    if (all <= 1 || (pool_warm && threads <= pool)) {
        openblas_set_num_threads(threads);
        return DT_OK;
    }
    /* A pool started at load may hold its buffers or not: counted as not. */
    const int buffers = (pool_warm ? all - pool : all - 1) + !atomic_load_explicit(&blas_ready, memory_order_acquire);
    char need[96];
    snprintf(need, sizeof need, "%d BLAS thread(s) (%d asked, OpenBLAS had %d)", all, threads, pool);
    dt_status s = probe(buffers, (size_t)(all - pool) * thread_stack_bytes(), need);
    if (s) {
        /* A worker without its buffer must take part in no GEMM: only those warmed up may. */
        *got = pool_warm ? (before < pool ? before : pool) : 1;
        openblas_set_num_threads(*got);
        return s;
    }
    openblas_set_num_threads(all);
    if ((s = warm_up())) {
        *got = 1;
        openblas_set_num_threads(1);
        return s;
    }
    pool = all, pool_warm = 1;
    if (threads < all) openblas_set_num_threads(threads);
    return DT_OK;
}
