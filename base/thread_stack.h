/*
 * thread_stack.h - an alternate signal stack for the calling thread.
 *
 * A handler installed with SA_ONSTACK (the dtrain command's crash report, launch/crash.c) runs on
 * the alternate stack of the thread that faulted; a thread without one runs it on its own stack,
 * which after a stack overflow is gone, so the process dies without a word. POSIX gives each thread
 * its own alternate stack and a new thread none, so every thread dtrain starts calls
 * thread_altstack_install() first. Installing one changes nothing while no SA_ONSTACK handler is
 * set, so the library does it too, without installing any handler.
 */
#ifndef DT_BASE_THREAD_STACK_H
#define DT_BASE_THREAD_STACK_H

#ifdef __cplusplus
extern "C" {
#endif

/* Usable bytes of the stack thread_altstack_install() maps (a guard page below them is extra):
 * room for the crash report, its /proc/self/maps scan and glibc's unwinder. */
#define THREAD_ALTSTACK_BYTES (64 * 1024)

/* Gives the calling thread an alternate signal stack of at least THREAD_ALTSTACK_BYTES, with an
 * inaccessible guard page below it, and registers it so that it is disabled and unmapped when the
 * thread exits (a pthread key destructor; the main thread's lasts until the process ends).
 * Idempotent: a thread that has an alternate stack already (this function's or anyone's) keeps
 * it. Returns DT_OK (0), or DT_ERR_NOMEM / DT_ERR_INTERNAL with dt_last_error() saying why; the
 * thread then runs on without one, as before, and only loses the report of a stack overflow. */
int thread_altstack_install(void);

#ifdef __cplusplus
}
#endif

#endif
