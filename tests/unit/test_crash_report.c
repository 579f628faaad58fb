/*
 * test_crash_report.c - the dtrain command's crash report (launch/crash.c, compiled in): each
 * crash happens in a child process whose stderr the test reads. The report names the rank and
 * host (or the pid before the rank is known), the signal, and after a call through a NULL
 * function pointer the caller as FILE+0xOFFSET that lies inside the calling function; a stack
 * overflow on a thread with an alternate signal stack (thread_altstack_install) is reported, one
 * on a thread without is not; an address-space limit (ulimit -v) is named as a possible cause; the
 * process still dies of the signal it got.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "launch/cli.h"
#include "base/thread_stack.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    char text[16384]; /* the child's stderr */
    int status;       /* its waitpid status */
    pid_t pid;
} crash_run;

/* The child's RLIMIT_AS (ulimit -v), set before the report is installed; RLIM_INFINITY: none. */
static rlim_t child_as_limit = RLIM_INFINITY;

/* Runs crash() in a child with the report installed as (rank, host); collects what it said. */
static void run_crash(int rank, const char *host, void (*crash)(void), crash_run *out)
{
    memset(out, 0, sizeof *out);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        const struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        if (child_as_limit != RLIM_INFINITY) {
            const struct rlimit as = {child_as_limit, child_as_limit};
            setrlimit(RLIMIT_AS, &as);
        }
        close(fds[0]);
        dup2(fds[1], STDERR_FILENO);
        cli_crash_report_install(rank, host);
        crash();
        _exit(99); /* it did not crash: the test is broken */
    }
    close(fds[1]);
    size_t n = 0;
    ssize_t got;
    while (n < sizeof out->text - 1 && (got = read(fds[0], out->text + n, sizeof out->text - 1 - n)) > 0)
        n += (size_t)got;
    out->text[n] = '\0';
    close(fds[0]);
    assert_int_equal(waitpid(pid, &out->status, 0), pid);
    out->pid = pid;
}

static void assert_says(const crash_run *r, const char *what)
{
    if (!strstr(r->text, what)) fail_msg("the report does not say '%s'; it is:\n%s", what, r->text);
}

static void assert_died_of(const crash_run *r, int sig)
{
    if (!WIFSIGNALED(r->status) || WTERMSIG(r->status) != sig)
        fail_msg("the child ended with status 0x%x, not by signal %d; it said:\n%s", r->status, sig, r->text);
}

/* ---- a call through a NULL function pointer, whose caller only the report can name */

static void (*volatile null_fn)(void);

__attribute__((noinline)) static void call_null(void)
{
    null_fn();
    __asm__ volatile(""); /* not a tail call: the return address stays on the stack */
}

static void test_null_call_names_rank_host_and_caller(void **state)
{
    (void)state;
    crash_run r;
    run_crash(3, "nodeA", call_null, &r);
    assert_died_of(&r, SIGSEGV);
    assert_says(&r, "dtrain: rank 3 on nodeA crashed: SIGSEGV (address not mapped), fault address 0x0\n");
    assert_says(&r, "dtrain:   program counter 0x0 (in no loaded file)\n");
    assert_says(&r, "dtrain:   backtrace:\n");
    assert_says(&r, "`addr2line -f -e FILE 0xOFFSET` names the function");
#if defined(__x86_64__) || defined(__aarch64__)
    /* FILE+0xOFFSET: this executable, at an offset inside call_null (the load address is the same
     * in the child, which fork copied). */
    Dl_info self;
    assert_true(dladdr((void *)call_null, &self) != 0);
    char exe[4096];
    const ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    assert_true(len > 0);
    exe[len] = '\0';
    char want[4200];
    snprintf(want, sizeof want, "(the caller, after a call to a bad address) 0x");
    const char *line = strstr(r.text, want);
    if (!line) fail_msg("no return address line in:\n%s", r.text);
    snprintf(want, sizeof want, " = %s+0x", exe);
    const char *at = strstr(line, want);
    if (!at || strchr(line, '\n') < at) fail_msg("the return address is not given as %s+0xOFFSET:\n%s", exe, r.text);
    const unsigned long off = strtoul(at + strlen(want), NULL, 16);
    const unsigned long fn = (unsigned long)((uintptr_t)call_null - (uintptr_t)self.dli_fbase);
    if (off <= fn || off > fn + 64)
        fail_msg("the caller's offset 0x%lx is not inside call_null (at 0x%lx):\n%s", off, fn, r.text);
#endif
}

static void test_before_the_rank_the_pid(void **state)
{
    (void)state;
    crash_run r;
    run_crash(-1, "nodeB", call_null, &r);
    assert_died_of(&r, SIGSEGV);
    char want[160];
    snprintf(want, sizeof want,
             "dtrain: pid %ld (its rank not known yet: dtrain was starting) on nodeB crashed: SIGSEGV", (long)r.pid);
    assert_says(&r, want);
}

/* Under ulimit -v (Open MPI's MPI_Init crashed in a map that failed) the report names the limit;
 * without one it says nothing of it. The limit here is set but too large to matter. */
static void test_address_space_limit_named(void **state)
{
    (void)state;
    crash_run r;
    run_crash(-1, "nodeC", call_null, &r);
    if (strstr(r.text, "ulimit -v")) fail_msg("no limit set, yet the report names one:\n%s", r.text);
    child_as_limit = (rlim_t)1 << 50;
    run_crash(-1, "nodeC", call_null, &r);
    child_as_limit = RLIM_INFINITY;
    assert_died_of(&r, SIGSEGV);
    char want[128];
    snprintf(want, sizeof want, "this process runs under ulimit -v %llu KiB (RLIMIT_AS)", (1ULL << 50) / 1024);
    assert_says(&r, want);
}

static void do_abort(void) { abort(); }

static void test_abort_is_reported_and_still_aborts(void **state)
{
    (void)state;
    crash_run r;
    run_crash(0, "nodeC", do_abort, &r);
    assert_died_of(&r, SIGABRT);
    assert_says(&r, "dtrain: rank 0 on nodeC crashed: SIGABRT, fault address 0x");
}

/* ---- a stack overflow on a thread other than the main one */

static volatile int never = -1;

static int overflow(int depth)
{
    volatile char frame[512];
    frame[0] = (char)depth;
    if (depth == never) return 0;
    return overflow(depth + 1) + frame[0];
}

static int with_altstack;

static void *overflow_thread(void *arg)
{
    (void)arg;
    if (with_altstack && thread_altstack_install() != 0) _exit(98);
    overflow(0);
    return NULL;
}

static void overflow_on_a_thread(void)
{
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 256 * 1024);
    pthread_t th;
    if (pthread_create(&th, &at, overflow_thread, NULL) != 0) _exit(97);
    pthread_join(th, NULL);
}

static void test_thread_stack_overflow_reported_with_altstack(void **state)
{
    (void)state;
    crash_run r;
    with_altstack = 1;
    run_crash(2, "nodeD", overflow_on_a_thread, &r);
    assert_died_of(&r, SIGSEGV);
    assert_says(&r, "dtrain: rank 2 on nodeD crashed: SIGSEGV");
    assert_says(&r, "dtrain:   program counter 0x");
    /* Without one, the handler has nowhere to run: the kernel kills the process unreported. */
    with_altstack = 0;
    run_crash(2, "nodeD", overflow_on_a_thread, &r);
    assert_died_of(&r, SIGSEGV);
    assert_null(strstr(r.text, "crashed"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_null_call_names_rank_host_and_caller),
        cmocka_unit_test(test_before_the_rank_the_pid),
        cmocka_unit_test(test_address_space_limit_named),
        cmocka_unit_test(test_abort_is_reported_and_still_aborts),
        cmocka_unit_test(test_thread_stack_overflow_reported_with_altstack),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
