/*
 * test_thread_stack.c - thread_altstack_install (runtime/thread_stack.h): a new thread gets an
 * alternate signal stack, a second call keeps it, someone else's stays, thread exit unmaps it, and
 * an SA_ONSTACK handler runs after a stack overflow in a thread that has one and not in one that
 * has none (the reason it exists).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/status.h"
#include "base/thread_stack.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    int before_disabled;   /* the new thread had no alternate stack */
    int rc1, rc2;          /* the two calls' statuses */
    stack_t first, second; /* the alternate stack after each call */
} install_seen;

static void *install_twice(void *arg)
{
    install_seen *r = arg;
    stack_t cur;
    sigaltstack(NULL, &cur);
    r->before_disabled = (cur.ss_flags & SS_DISABLE) != 0;
    r->rc1 = thread_altstack_install();
    sigaltstack(NULL, &r->first);
    r->rc2 = thread_altstack_install();
    sigaltstack(NULL, &r->second);
    return NULL;
}

/* Whether the page holding p is mapped: msync fails with ENOMEM on an unmapped range. */
static int page_mapped(const void *p)
{
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    return msync((void *)((uintptr_t)p & ~(pg - 1)), pg, MS_ASYNC) == 0 || errno != ENOMEM;
}

static void test_new_thread_gets_one_once_and_exit_unmaps_it(void **state)
{
    (void)state;
    install_seen r;
    memset(&r, 0, sizeof r);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, install_twice, &r), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_true(r.before_disabled); /* POSIX: a new thread starts without one */
    assert_int_equal(r.rc1, DT_OK);
    assert_int_equal(r.first.ss_flags & SS_DISABLE, 0);
    assert_true(r.first.ss_size >= THREAD_ALTSTACK_BYTES);
    assert_int_equal(r.rc2, DT_OK);
    assert_ptr_equal(r.second.ss_sp, r.first.ss_sp); /* idempotent: the same stack, no second map */
    assert_int_equal(r.second.ss_size, r.first.ss_size);
    /* The key's destructor ran at the thread's exit: the stack's pages are gone. */
    assert_false(page_mapped(r.first.ss_sp));
    assert_false(page_mapped((char *)r.first.ss_sp + r.first.ss_size - 1));
}

static char foreign_stack[128 * 1024];

static void *install_over_foreign(void *arg)
{
    install_seen *r = arg;
    stack_t st;
    memset(&st, 0, sizeof st);
    st.ss_sp = foreign_stack;
    st.ss_size = sizeof foreign_stack;
    r->before_disabled = sigaltstack(&st, NULL) == 0;
    r->rc1 = thread_altstack_install();
    sigaltstack(NULL, &r->first);
    return NULL;
}

static void test_someone_elses_stack_stays(void **state)
{
    (void)state;
    install_seen r;
    memset(&r, 0, sizeof r);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, install_over_foreign, &r), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_true(r.before_disabled);
    assert_int_equal(r.rc1, DT_OK);
    assert_ptr_equal(r.first.ss_sp, foreign_stack);
    assert_int_equal(r.first.ss_size, sizeof foreign_stack);
}

/* ---- a stack overflow, in a child process so that a crash there fails the test, not the runner */

enum { HANDLED_EXIT = 42 };
static volatile int never = -1; /* the recursion's end, never reached: keeps it a real recursion */

static int overflow(int depth)
{
    volatile char frame[512];
    frame[0] = (char)depth;
    if (depth == never) return 0;
    return overflow(depth + 1) + frame[0];
}

static void on_segv(int sig)
{
    (void)sig;
    static const char msg[] = "handled on the alternate stack\n";
    if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0) _exit(HANDLED_EXIT + 1);
    _exit(HANDLED_EXIT);
}

static void *overflow_thread(void *arg)
{
    if (*(const int *)arg && thread_altstack_install() != DT_OK) _exit(3);
    overflow(0);
    return NULL;
}

/* How a child that overflows a thread's stack ends: its exit status from waitpid. */
static int overflow_in_child(int with_altstack)
{
    const pid_t pid = fork();
    if (pid == 0) {
        const struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_segv;
        sa.sa_flags = SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, NULL);
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setstacksize(&at, 256 * 1024); /* overflows in a moment */
        pthread_t th;
        if (pthread_create(&th, &at, overflow_thread, &with_altstack) != 0) _exit(4);
        pthread_join(th, NULL);
        _exit(5); /* the recursion ended: the test is broken */
    }
    int status = 0;
    assert_true(pid > 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return status;
}

static void test_overflow_is_handled_only_with_one(void **state)
{
    (void)state;
    int st = overflow_in_child(1);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), HANDLED_EXIT);
    /* Without it the handler has no stack to run on: the kernel kills the process instead. */
    st = overflow_in_child(0);
    assert_true(WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), SIGSEGV);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_thread_gets_one_once_and_exit_unmaps_it),
        cmocka_unit_test(test_someone_elses_stack_stays),
        cmocka_unit_test(test_overflow_is_handled_only_with_one),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
