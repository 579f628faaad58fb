/*
 * crash.c - what a crashing rank says before it dies.
 *
 * MPI's own handler prints a glibc backtrace, which is empty after a call through a NULL function
 * pointer (the program counter is 0, so there is nothing to unwind from) and names neither the
 * rank nor where to look. This one prints, on stderr and with write(2) only:
 *   dtrain: rank R on HOST crashed: SIGSEGV (address not mapped), fault address 0x...
 *   dtrain:   program counter 0x... = FILE+0xOFF (symbol+0x.. when the file exports it)
 *   dtrain:   return address on the stack 0x... = FILE+0xOFF (x86-64; the caller after a bad call)
 *   dtrain:   backtrace: glibc's frames
 *   dtrain:   `addr2line -f -e FILE 0xOFF` names the function (and the line in a -g build)
 * then restores the default action and raises the signal again, so the exit status (128 + signal)
 * and any core dump are what they would have been. Installed by the dtrain command before MPI
 * starts, so it covers a crash inside MPI_Init too (Open MPI then leaves it in place: it installs
 * its own only where no handler is set); until MPI has said the rank, the report gives the pid,
 * which mpirun's and srun's own lines about the dead process pair with its rank. Never installed
 * by the library.
 */
#include "cli.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

static int crash_rank = -1; /* -1: not known yet */
static int crash_installed;
static char crash_host[128];
static char crash_stack[64 * 1024]; /* the handler's own stack: a stack overflow is reported too */

static void put(const char *s)
{
    size_t n = strlen(s);
    while (n > 0) {
        const ssize_t w = write(STDERR_FILENO, s, n);
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

/* "label 0x... = /path/file+0xoff (sym+0x..)" for an address inside a loaded file. */
static void where(const char *label, const void *addr)
{
    char line[1024];
    Dl_info info;
    memset(&info, 0, sizeof info);
    if (addr && dladdr(addr, &info) && info.dli_fname && info.dli_fname[0]) {
        const size_t off = (size_t)((const char *)addr - (const char *)info.dli_fbase);
        if (info.dli_sname && info.dli_saddr)
            snprintf(line, sizeof line, "dtrain:   %s %p = %s+0x%zx (%s+0x%zx)\n", label, addr, info.dli_fname, off,
                     info.dli_sname, (size_t)((const char *)addr - (const char *)info.dli_saddr));
        else
            snprintf(line, sizeof line, "dtrain:   %s %p = %s+0x%zx\n", label, addr, info.dli_fname, off);
    } else {
        snprintf(line, sizeof line, "dtrain:   %s %p (in no loaded file)\n", label, addr);
    }
    put(line);
}

static const char *code_name(int sig, int code)
{
    if (sig == SIGSEGV) return code == SEGV_MAPERR ? "address not mapped" : code == SEGV_ACCERR ? "no permission" : "";
    if (sig == SIGBUS) return code == BUS_ADRALN ? "misaligned" : code == BUS_ADRERR ? "no such address" : "";
    if (sig == SIGFPE) return code == FPE_INTDIV ? "integer division by zero" : "";
    return "";
}

static void on_crash(int sig, siginfo_t *si, void *uctx)
{
    char line[512];
    const char *code = code_name(sig, si ? si->si_code : 0);
    const char *abbrev = sigabbrev_np(sig);
    char name[32];
    if (abbrev) snprintf(name, sizeof name, "SIG%s", abbrev);
    else snprintf(name, sizeof name, "signal %d", sig);
    char who[64];
    if (crash_rank >= 0) snprintf(who, sizeof who, "rank %d", crash_rank);
    else snprintf(who, sizeof who, "pid %ld (its rank not known yet: dtrain was starting)", (long)getpid());
    snprintf(line, sizeof line, "dtrain: %s on %s crashed: %s%s%s%s, fault address %p\n", who,
             crash_host[0] ? crash_host : "?", name, *code ? " (" : "", code, *code ? ")" : "",
             si ? si->si_addr : NULL);
    put(line);
    const void *pc = NULL, *ret = NULL;
    const ucontext_t *uc = (const ucontext_t *)uctx;
#if defined(__x86_64__)
    if (uc) {
        pc = (const void *)(uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
        /* After a call to a bad address the top of the stack is the caller's return address. */
        const void *const *sp = (const void *const *)(uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
        if (sp && ((uintptr_t)sp & 7u) == 0) ret = *sp;
    }
#elif defined(__aarch64__)
    if (uc) {
        pc = (const void *)(uintptr_t)uc->uc_mcontext.pc;
        ret = (const void *)(uintptr_t)uc->uc_mcontext.regs[30]; /* the link register */
    }
#else
    (void)uc;
#endif
    if (uc) where("program counter", pc);
    if (ret) where("return address on the stack (the caller, after a call to a bad address)", ret);
    void *frames[48];
    const int n = backtrace(frames, 48);
    put("dtrain:   backtrace:\n");
    backtrace_symbols_fd(frames, n, STDERR_FILENO);
    put("dtrain:   `addr2line -f -e FILE 0xOFFSET` names the function of a FILE+0xOFFSET above (and the line "
        "in a build with -g); please report these lines\n");
    signal(sig, SIG_DFL);
    raise(sig);
}

void cli_crash_report_install(int rank, const char *host)
{
    crash_rank = rank;
    if (host && *host) snprintf(crash_host, sizeof crash_host, "%s", host);
    else if (gethostname(crash_host, sizeof crash_host - 1) != 0) crash_host[0] = '\0';
    if (crash_installed) return;
    crash_installed = 1;
    void *warm[1];
    backtrace(warm, 1); /* loads libgcc_s now: the handler must not be the first to need it */
    stack_t st;
    memset(&st, 0, sizeof st);
    st.ss_sp = crash_stack;
    st.ss_size = sizeof crash_stack;
    sigaltstack(&st, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_crash;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) sigaction(sigs[i], &sa, NULL);
}
