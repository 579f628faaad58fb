/*
 * crash.c - what a crashing rank says before it dies.
 *
 * MPI's own handler prints a glibc backtrace, which is empty after a call through a NULL function
 * pointer (the program counter is 0, so there is nothing to unwind from) and names neither the
 * rank nor where to look. This one prints, on stderr:
 *   dtrain: rank R on HOST crashed: SIGSEGV (address not mapped), fault address 0x...
 *   dtrain:   program counter 0x... = FILE+0xOFF
 *   dtrain:   return address on the stack 0x... = FILE+0xOFF (x86-64; the caller after a bad call)
 *   dtrain:   backtrace: glibc's frames
 *   dtrain:   `addr2line -f -e FILE 0xOFF` names the function (and the line in a -g build)
 * then restores the default action and raises the signal again, so the exit status (128 + signal)
 * and any core dump are what they would have been. Installed by the dtrain command before MPI
 * starts, so it covers a crash inside MPI_Init too (Open MPI then leaves it in place: it installs
 * its own only where no handler is set); until MPI has said the rank, the report gives the pid,
 * which mpirun's and srun's own lines about the dead process pair with its rank. Never installed
 * by the library.
 *
 * The handler may interrupt anything, malloc and stdio included, so it calls only what
 * signal-safety(7) lists as async-signal-safe: write, open, read, close, getpid, signal, raise
 * and the string functions POSIX.1-2008 TC2 added there. The numbers are formatted by hand; the
 * rank and host, which snprintf formats, are formatted at install time. The file and offset of an
 * address come from /proc/self/maps read with open/read (dladdr takes the dynamic loader's lock
 * and is not on the list). Beyond the list, two glibc calls: backtrace_symbols_fd, which glibc
 * documents as AS-Safe (it writes with writev, no malloc), and backtrace, AS-Unsafe only on its
 * first call, which loads libgcc_s: install makes that call, and the handler calls it last, after
 * every line of ours is out. The handler runs on the faulting thread's alternate signal stack
 * (thread_stack.h), so a stack overflow is reported too, on every thread that installed one.
 */
#include "launch/cli.h"
#include "base/log.h"
#include "base/thread_stack.h"

#include <elf.h>
#include <execinfo.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <ucontext.h>
#include <unistd.h>

/* "dtrain: rank R on HOST crashed: " (or the pid while the rank is unknown), formatted at install
 * time. Two buffers: an update writes the one the handler is not reading, then switches. */
static char crash_prefix[2][384];
static volatile sig_atomic_t crash_prefix_cur = -1;
static int crash_installed;
/* A line naming the address-space limit when one is set (ulimit -v), formatted at the first
 * install: under a tight one, libraries and MPI_Init crash where a map they did not check failed. */
static char crash_limit[256];

/* ---- formatting without stdio: a line in a fixed buffer, cut short rather than overrun */

typedef struct {
    char b[1024];
    size_t n;
} line;

static void put_s(line *l, const char *s)
{
    while (*s && l->n < sizeof l->b - 1) l->b[l->n++] = *s++;
}

/* v in base 10 or 16, without leading zeros. */
static void put_u(line *l, uintptr_t v, unsigned base)
{
    char d[2 * sizeof v + 1];
    size_t k = sizeof d;
    d[--k] = '\0';
    do {
        d[--k] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v && k > 0);
    put_s(l, d + k);
}

static void put_hex(line *l, uintptr_t v)
{
    put_s(l, "0x");
    put_u(l, v, 16);
}

static void put_line(line *l)
{
    const char *s = l->b;
    size_t n = l->n;
    while (n > 0) {
        const ssize_t w = write(STDERR_FILENO, s, n);
        if (w <= 0) break;
        s += w;
        n -= (size_t)w;
    }
    l->n = 0;
}

/* ---- which file holds an address: /proc/self/maps, read with open/read */

typedef struct {
    uintptr_t start, end; /* the mapping that holds the address */
    int readable;
    uintptr_t base; /* where its file is loaded (that file's mapping at offset 0), 0: unknown */
    int base_readable;
    char path[512]; /* the file, a [pseudo] name, or "" for anonymous memory */
} map_hit;

static uintptr_t parse_hex(const char **p)
{
    uintptr_t v = 0;
    for (;; (*p)++) {
        const char c = **p;
        if (c >= '0' && c <= '9')
            v = v * 16 + (uintptr_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v = v * 16 + (uintptr_t)(c - 'a' + 10);
        else
            return v;
    }
}

static void copy_path(char *dst, size_t cap, const char *src)
{
    size_t n = strnlen(src, cap - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* One line "start-end perms offset dev inode   path" of the maps file. Returns 1 when it holds
 * addr (h filled); notes the load address of each file it passes, since a file's mappings are
 * listed in address order from its first one (offset 0). */
static int map_line(const char *s, uintptr_t addr, map_hit *h, char *base_path, size_t cap)
{
    const uintptr_t start = parse_hex(&s);
    if (*s++ != '-') return 0;
    const uintptr_t end = parse_hex(&s);
    if (*s++ != ' ' || strlen(s) < 5) return 0;
    const int readable = s[0] == 'r';
    s += 5;
    const uintptr_t offset = parse_hex(&s);
    for (int field = 0; field < 2 && *s; field++) { /* dev, inode */
        while (*s == ' ') s++;
        while (*s && *s != ' ') s++;
    }
    while (*s == ' ') s++;
    if (offset == 0 && *s == '/') {
        h->base = start;
        h->base_readable = readable;
        copy_path(base_path, cap, s);
    }
    if (addr < start || addr >= end) return 0;
    h->start = start;
    h->end = end;
    h->readable = readable;
    copy_path(h->path, sizeof h->path, s);
    if (h->path[0] != '/' || strcmp(h->path, base_path) != 0) h->base = 0;
    return 1;
}

/* Fills h for the mapping that holds addr; 0 when none does or the maps file cannot be read. */
static int map_find(uintptr_t addr, map_hit *h)
{
    memset(h, 0, sizeof *h);
    const int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char buf[2048], ln[768], base_path[sizeof h->path] = "";
    size_t used = 0;
    int found = 0;
    ssize_t got;
    while (!found && (got = read(fd, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < got && !found; i++) {
            if (buf[i] != '\n') {
                if (used < sizeof ln - 1) ln[used++] = buf[i]; /* a longer path is cut: never its address */
                continue;
            }
            ln[used] = '\0';
            used = 0;
            found = map_line(ln, addr, h, base_path, sizeof base_path);
        }
    }
    close(fd);
    return found;
}

/* "dtrain:   label 0x... = /path/file+0xoff" for an address inside a loaded file. The offset is
 * the address addr2line takes: from the load address for a shared object or a PIE, the address
 * itself for an executable linked at a fixed address (ET_EXEC). */
static void where(const char *label, uintptr_t addr)
{
    line l = {.n = 0};
    map_hit h;
    put_s(&l, "dtrain:   ");
    put_s(&l, label);
    put_s(&l, " ");
    put_hex(&l, addr);
    if (addr && map_find(addr, &h) && h.path[0] == '/' && h.base) {
        const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)h.base;
        const int fixed = h.base_readable && memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_type == ET_EXEC;
        put_s(&l, " = ");
        put_s(&l, h.path);
        put_s(&l, "+");
        put_hex(&l, fixed ? addr : addr - h.base);
    } else if (addr && h.path[0]) {
        put_s(&l, " (in ");
        put_s(&l, h.path);
        put_s(&l, ", no file offset)");
    } else {
        put_s(&l, " (in no loaded file)");
    }
    put_s(&l, "\n");
    put_line(&l);
}

/* The word on top of the stack, if that memory is readable (after a stack overflow it may not be). */
static int stack_top(uintptr_t sp, uintptr_t *out)
{
    map_hit h;
    if (!sp || (sp & (sizeof(void *) - 1)) || !map_find(sp, &h) || !h.readable || sp + sizeof(void *) > h.end) return 0;
    *out = *(const uintptr_t *)sp;
    return 1;
}

static const char *sig_name(int sig)
{
    switch (sig) {
        case SIGSEGV: return "SIGSEGV";
        case SIGBUS: return "SIGBUS";
        case SIGFPE: return "SIGFPE";
        case SIGILL: return "SIGILL";
        case SIGABRT: return "SIGABRT";
        default: return NULL;
    }
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
    line l = {.n = 0};
    const int cur = crash_prefix_cur;
    put_s(&l, cur >= 0 ? crash_prefix[cur] : "dtrain: crashed: ");
    const char *name = sig_name(sig);
    if (name) {
        put_s(&l, name);
    } else {
        put_s(&l, "signal ");
        put_u(&l, (uintptr_t)sig, 10);
    }
    const char *code = code_name(sig, si ? si->si_code : 0);
    if (*code) {
        put_s(&l, " (");
        put_s(&l, code);
        put_s(&l, ")");
    }
    put_s(&l, ", fault address ");
    put_hex(&l, si ? (uintptr_t)si->si_addr : 0);
    put_s(&l, "\n");
    put_line(&l);

    uintptr_t pc = 0, ret = 0;
    int have_ret = 0;
    const ucontext_t *uc = (const ucontext_t *)uctx;
#if defined(__x86_64__)
    if (uc) {
        pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
        /* After a call to a bad address the top of the stack is the caller's return address. */
        have_ret = stack_top((uintptr_t)uc->uc_mcontext.gregs[REG_RSP], &ret);
    }
#elif defined(__aarch64__)
    if (uc) {
        pc = (uintptr_t)uc->uc_mcontext.pc;
        ret = (uintptr_t)uc->uc_mcontext.regs[30]; /* the link register */
        have_ret = 1;
    }
#else
    (void)uc;
#endif
    if (uc) where("program counter", pc);
    if (have_ret && ret) where("return address on the stack (the caller, after a call to a bad address)", ret);
    put_s(&l, crash_limit);
    put_s(&l, "dtrain:   backtrace:\n");
    put_line(&l);
    void *frames[48];
    const int n = backtrace(frames, 48);
    backtrace_symbols_fd(frames, n, STDERR_FILENO);
    put_s(&l, "dtrain:   `addr2line -f -e FILE 0xOFFSET` names the function of a FILE+0xOFFSET above (and the line "
              "in a build with -g); please report these lines\n");
    put_line(&l);
    signal(sig, SIG_DFL);
    raise(sig);
}

void cli_crash_report_install(int rank, const char *host)
{
    char name[128];
    if (host && *host) {
        snprintf(name, sizeof name, "%s", host);
    } else if (gethostname(name, sizeof name - 1) != 0) {
        snprintf(name, sizeof name, "?");
    } else {
        name[sizeof name - 1] = '\0';
    }
    const int next = crash_prefix_cur == 0 ? 1 : 0;
    if (rank >= 0)
        snprintf(crash_prefix[next], sizeof crash_prefix[next], "dtrain: rank %d on %s crashed: ", rank, name);
    else
        snprintf(crash_prefix[next], sizeof crash_prefix[next],
                 "dtrain: pid %ld (its rank not known yet: dtrain was starting) on %s crashed: ", (long)getpid(), name);
    crash_prefix_cur = next;
    if (crash_installed) return;
    crash_installed = 1;
    struct rlimit as;
    if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY)
        snprintf(crash_limit, sizeof crash_limit,
                 "dtrain:   this process runs under ulimit -v %llu KiB (RLIMIT_AS): running out of address space "
                 "may be the cause (a map that failed unchecked); try a larger limit\n",
                 (unsigned long long)(as.rlim_cur / 1024));
    void *warm[1];
    backtrace(warm, 1); /* loads libgcc_s now: the handler must not be the first to need it */
    /* The main thread's alternate stack; dtrain's other threads install theirs when they start. */
    if (thread_altstack_install() != DT_OK)
        log_msg(LOG_LEVEL_WARN, "crash report: %s; a stack overflow will end the process without one", dt_last_error());
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_crash;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) sigaction(sigs[i], &sa, NULL);
}
