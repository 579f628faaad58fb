/*
 * fuzz_common.h - what the libFuzzer harnesses share: turning the fuzz input into C strings, into
 * an environment and into files in a scratch directory of the process's own, and checks that turn
 * a broken promise of the code under test into a report.
 *
 * Every harness is a plain LLVMFuzzerTestOneInput: it must return 0 for any input, and abort() (via
 * FUZZ_CHECK) when the code under test breaks what its header promises. ASan and UBSan report
 * memory errors, leaks and undefined behaviour (signed overflow included) by themselves.
 */
#ifndef DT_FUZZ_COMMON_H
#define DT_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sanitizer/common_interface_defs.h>

#include "base/log.h"

/* A promise of the code under test that this input broke: say which and die, so libFuzzer keeps the
 * input as a crash artifact. The message goes out through the sanitizers' report stream, which
 * stays open when run.sh has libFuzzer close stderr (-close_fd_mask=2) against the flood of error
 * messages that refused inputs print. */
#define FUZZ_CHECK(cond, ...)                                                                                          \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            char fuzz_msg_[1024];                                                                                      \
            int fuzz_n_ =                                                                                              \
                snprintf(fuzz_msg_, sizeof fuzz_msg_, "fuzz check failed at %s:%d: %s: ", __FILE__, __LINE__, #cond);  \
            if (fuzz_n_ > 0 && (size_t)fuzz_n_ < sizeof fuzz_msg_)                                                     \
                snprintf(fuzz_msg_ + fuzz_n_, sizeof fuzz_msg_ - (size_t)fuzz_n_, __VA_ARGS__);                        \
            __sanitizer_report_error_summary(fuzz_msg_);                                                               \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

/* The path /tmp/fuzz-NAME-PIDEXT into path (n bytes): a file or directory of this process's own, so
 * that parallel fuzzing jobs (run.sh's FUZZ_JOBS) never write each other's inputs. The process id
 * ends the name (before EXT) so that run.sh can remove what a harness left when libFuzzer ended it
 * with _Exit on a report, which runs no atexit handler (fuzz_scratch_remove_at_exit). */
static inline void fuzz_scratch_path(char *path, size_t n, const char *name, const char *ext)
{
    const int len = snprintf(path, n, "/tmp/fuzz-%s-%d%s", name, (int)getpid(), ext ? ext : "");
    if (len < 0 || (size_t)len >= n) abort();
}

static inline int fuzz_remove_one_(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

/* Removes dir and everything under it, links not followed; a missing dir is nothing to do. */
static inline void fuzz_remove_tree(const char *dir) { nftw(dir, fuzz_remove_one_, 16, FTW_DEPTH | FTW_PHYS); }

/* add: a directory to remove, with all it holds, when the process exits; NULL: remove them now. */
static inline void fuzz_scratch_list_(const char *add)
{
    static char dirs[4][256];
    static int n;
    if (!add) {
        for (int i = 0; i < n; i++) fuzz_remove_tree(dirs[i]);
        n = 0;
        return;
    }
    FUZZ_CHECK(n < 4 && strlen(add) < sizeof dirs[0], "scratch directory %s: room for 4 of 255 bytes", add);
    snprintf(dirs[n++], sizeof dirs[0], "%s", add);
}

static inline void fuzz_scratch_remove_now_(void) { fuzz_scratch_list_(NULL); }

/* dir, a scratch directory this process made, removed with everything in it when the process exits
 * normally: libFuzzer ends a run over files and a -max_total_time run with exit(0), so neither
 * leaves it in /tmp (every `make test` used to leave two per writing harness). A report ends the
 * process with _Exit instead, and run.sh removes what is left by the process id in its name. */
static inline void fuzz_scratch_remove_at_exit(const char *dir)
{
    static int registered;
    if (!registered) FUZZ_CHECK(atexit(fuzz_scratch_remove_now_) == 0, "cannot register the removal of %s", dir);
    registered = 1;
    fuzz_scratch_list_(dir);
}

/* The scratch directory of the harness `name` (fuzz_scratch_path, no extension) into dir, made at
 * the first call and removed at exit, which also lowers the library's log level to errors: the
 * warnings of millions of refused files say nothing. Later calls return at once (dir already holds
 * the path). */
static inline void fuzz_scratch_dir(char *dir, size_t n, const char *name)
{
    if (dir[0]) return;
    log_set_level(LOG_LEVEL_ERROR);
    fuzz_scratch_path(dir, n, name, NULL);
    FUZZ_CHECK(mkdir(dir, 0700) == 0 || access(dir, W_OK) == 0, "cannot make %s", dir);
    fuzz_scratch_remove_at_exit(dir);
}

/* Writes len bytes of data to path, replacing the file, or aborts naming it. */
static inline void fuzz_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    FUZZ_CHECK(f, "cannot write %s", path);
    FUZZ_CHECK(len == 0 || fwrite(data, 1, len, f) == len, "short write of %s", path);
    FUZZ_CHECK(fclose(f) == 0, "cannot close %s", path);
}

/* A NUL-terminated copy of data (an embedded NUL ends the C string early, as it would in argv or
 * the environment). */
static inline char *fuzz_str(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) abort();
    if (size) memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* Splits a copy of the input at its first NUL or newline into two strings: *a before it, *b after
 * (NULL when the input has no separator). Free *a only. */
static inline void fuzz_split(const uint8_t *data, size_t size, char **a, char **b)
{
    char *s = fuzz_str(data, size);
    *a = s;
    *b = NULL;
    for (size_t i = 0; i < size; i++)
        if (s[i] == '\0' || s[i] == '\n') {
            s[i] = '\0';
            *b = s + i + 1;
            break;
        }
}

/* The environment a harness runs the code under: the input's lines (split at newlines and NULs)
 * as NAME=VALUE entries of `environ`, and nothing else, so no variable of the shell that started
 * the fuzzer leaks into a run and no run leaks into the next. The entries point into one buffer
 * that the harness owns: no setenv(), whose copies glibc never frees, would grow the heap for
 * ever over millions of runs. prefix, when not NULL, is put before every name that does not
 * already start with it ("DTRAIN_": "TIMEOUT=5" sets DTRAIN_TIMEOUT), so the fuzzer need not
 * find the prefix by itself. Lines without '=' stay in environ, as a broken environment could
 * hold them; getenv() never matches them. */
typedef struct fuzz_env {
    char *buf;
    char **vars; /* NULL-terminated, what environ points to during the run */
    size_t n;
    char **saved; /* environ before */
} fuzz_env;

extern char **environ;

static inline void fuzz_env_set(fuzz_env *e, const uint8_t *data, size_t size, const char *prefix)
{
    size_t lines = 1, plen = prefix ? strlen(prefix) : 0;
    for (size_t i = 0; i < size; i++) lines += data[i] == '\n' || data[i] == '\0';
    e->buf = malloc(size + 1 + lines * plen);
    e->vars = calloc(lines + 1, sizeof *e->vars);
    if (!e->buf || !e->vars) abort();
    e->n = 0;
    char *w = e->buf;
    size_t start = 0;
    for (size_t i = 0; i <= size; i++) {
        if (i < size && data[i] != '\n' && data[i] != '\0') continue;
        size_t len = i - start;
        if (len) {
            char *line = w;
            if (plen && !(len >= plen && memcmp(data + start, prefix, plen) == 0)) {
                memcpy(w, prefix, plen);
                w += plen;
            }
            memcpy(w, data + start, len);
            w += len;
            *w++ = '\0';
            e->vars[e->n++] = line;
        }
        start = i + 1;
    }
    e->vars[e->n] = NULL;
    e->saved = environ;
    environ = e->vars;
}

/* The value the environment of fuzz_env_set gives name, as getenv() would: the first entry. */
static inline const char *fuzz_env_get(const fuzz_env *e, const char *name)
{
    size_t len = strlen(name);
    for (size_t i = 0; i < e->n; i++)
        if (strncmp(e->vars[i], name, len) == 0 && e->vars[i][len] == '=') return e->vars[i] + len + 1;
    return NULL;
}

static inline void fuzz_env_restore(fuzz_env *e)
{
    environ = e->saved;
    free(e->vars);
    free(e->buf);
}

#endif
