/*
 * thread_stack.c - an alternate signal stack per thread (thread_stack.h): mapped on first use,
 * registered with sigaltstack(2), released by a pthread key destructor at thread exit.
 *
 * mmap rather than malloc: the stack is page-aligned, a PROT_NONE page below it turns an overflow
 * of the handler itself into a clean second fault instead of a write into the heap, and the pages
 * cost nothing until a signal touches them.
 */
#include "base/thread_stack.h"

#include "base/status.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t key;
static int key_err; /* pthread_key_create's error, 0 when the key exists */

/* The mapping's layout, fixed once: one guard page, then the stack rounded up to whole pages. */
static size_t page_bytes, stack_bytes;

static void stack_sizes(void)
{
    const long pg = sysconf(_SC_PAGESIZE);
    page_bytes = pg > 0 ? (size_t)pg : 4096;
    size_t want = THREAD_ALTSTACK_BYTES;
#ifdef _SC_MINSIGSTKSZ
    /* The kernel's signal frame grows with the CPU's register state (AVX-512, AMX tiles): keep
     * several frames' worth above what it says is the minimum. */
    const long min = sysconf(_SC_MINSIGSTKSZ);
    if (min > 0 && (size_t)min * 4 > want) want = (size_t)min * 4;
#endif
    stack_bytes = (want + page_bytes - 1) / page_bytes * page_bytes;
}

/* At thread exit, on the thread's own stack: switch the alternate stack off before unmapping it,
 * or a signal in the rest of the thread's exit would run on unmapped memory. */
static void stack_release(void *map)
{
    stack_t cur;
    if (sigaltstack(NULL, &cur) == 0 && (char *)cur.ss_sp == (char *)map + page_bytes) {
        stack_t off;
        memset(&off, 0, sizeof off);
        off.ss_flags = SS_DISABLE;
        sigaltstack(&off, NULL);
    }
    munmap(map, page_bytes + stack_bytes);
}

static void key_make(void)
{
    stack_sizes();
    key_err = pthread_key_create(&key, stack_release);
}

int thread_altstack_install(void)
{
    pthread_once(&key_once, key_make);
    if (key_err)
        return status_set_error(DT_ERR_INTERNAL,
                                "no thread key for the alternate signal stack (%s): too many pthread keys "
                                "in this process",
                                strerror(key_err));
    if (pthread_getspecific(key)) return DT_OK; /* this thread has ours already */
    stack_t cur;
    if (sigaltstack(NULL, &cur) != 0)
        return status_set_error(DT_ERR_INTERNAL, "sigaltstack cannot say this thread's alternate signal stack (%s)",
                                strerror(errno));
    if (!(cur.ss_flags & SS_DISABLE)) return DT_OK; /* someone else's: leave it */

    const size_t len = page_bytes + stack_bytes;
    char *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (map == MAP_FAILED)
        return status_set_error(DT_ERR_NOMEM,
                                "cannot map %zu bytes for this thread's alternate signal stack (%s): the "
                                "process is out of memory or address space (ulimit -v)",
                                len, strerror(errno));
    if (mprotect(map, page_bytes, PROT_NONE) != 0) {
        const int e = errno;
        munmap(map, len);
        return status_set_error(DT_ERR_NOMEM,
                                "cannot make the guard page of the alternate signal stack (%s): the process "
                                "has too many memory mappings (vm.max_map_count)",
                                strerror(e));
    }
    stack_t st;
    memset(&st, 0, sizeof st);
    st.ss_sp = map + page_bytes;
    st.ss_size = stack_bytes;
    if (sigaltstack(&st, NULL) != 0) {
        const int e = errno;
        munmap(map, len);
        return status_set_error(DT_ERR_INTERNAL, "sigaltstack refused a %zu-byte alternate signal stack (%s)",
                                stack_bytes, strerror(e));
    }
    const int e = pthread_setspecific(key, map);
    if (e) {
        /* Without the key nothing would unmap it at thread exit: undo rather than leak per thread. */
        stack_release(map);
        return status_set_error(
            DT_ERR_NOMEM, "cannot register the alternate signal stack for release at thread exit (%s)", strerror(e));
    }
    return DT_OK;
}
