/*
 * metrics.c - the --metrics file of `dtrain train`: records written with a wall-clock time, and
 * the file kept across a resume, so a requeued job's file holds every step once (metrics.h).
 */
#include "launch/train/metrics.h"

#include "launch/cli.h"
#include "runtime/checkpoint/ckpt_write_file.h"
#include "base/io_error.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* The time now in UTC: "2026-01-31T12:00:00.123Z" (iso, for records) or "20260131T120000Z"
 * (for a file name). */
static void utc_now(char *buf, size_t n, int iso)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    size_t k = strftime(buf, n, iso ? "%Y-%m-%dT%H:%M:%S" : "%Y%m%dT%H%M%SZ", &tm);
    if (iso && k) snprintf(buf + k, n - k, ".%03ldZ", ts.tv_nsec / 1000000L);
}

/* ", "key": v" in fmt; JSON has no NaN or infinity, so a non-finite v (an fp16 step's overflowed
 * gradient norm, a diverged loss) is null. */
static void num(FILE *f, const char *key, const char *fmt, double v)
{
    fprintf(f, ", \"%s\": ", key);
    if (isfinite(v))
        fprintf(f, fmt, v);
    else
        fputs("null", f);
}

/* ", "key": v" for a figure used as fp32 (the optimizer's rate): the fewest digits that read back
 * as the same float (0.05, not %.9g's 0.0500000007), at most the 9 that any float needs. */
static void num_f32(FILE *f, const char *key, double v)
{
    const float x = (float)v;
    if (!isfinite(x)) {
        num(f, key, "%g", x);
        return;
    }
    char buf[32];
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, (double)x);
        if (strtof(buf, NULL) == x) break;
    }
    fprintf(f, ", \"%s\": %s", key, buf);
}

/* ", "epoch": v" in ten decimals without the trailing zeros (2, 0.25, 0.0000425): four decimals
 * repeated the epoch over consecutive records once a step was below 0.0001 of one (ImageNet at a
 * global batch of 128), and %g's exponents (4.25e-05) trip line-oriented readers. */
static void num_epoch(FILE *f, double v)
{
    if (!isfinite(v)) {
        num(f, "epoch", "%g", v);
        return;
    }
    char buf[64];
    snprintf(buf, sizeof buf, "%.10f", v);
    char *end = buf + strlen(buf);
    while (end > buf && end[-1] == '0') *--end = '\0';
    if (end > buf && end[-1] == '.') *--end = '\0';
    fprintf(f, ", \"epoch\": %s", buf);
}

/* The record r, formatted into f (a memory stream). */
static void format_record(FILE *f, const metrics_record *r)
{
    char when[40];
    utc_now(when, sizeof when, 1);
    fprintf(f, "{\"time\": \"%s\", \"step\": %ld", when, r->step);
    num_epoch(f, r->epoch);
    num(f, "loss", "%.7g", r->loss);
    num(f, "accuracy", "%.6f", r->accuracy);
    num(f, "samples_per_s", "%.3f", r->samples_per_s);
    /* Times in significant digits: a step of a small model takes a microsecond or less, which six
     * decimals would give as 0.000001 or 0. */
    num(f, "step_time_s", "%.6g", r->step_time_s);
    num(f, "comm_wait_s", "%.6g", r->comm_wait_s);
    num(f, "data_wait_s", "%.6g", r->data_wait_s);
    fprintf(f, ", \"precision\": \"%s\"", r->precision);
    num(f, "loss_scale", "%.9g", r->loss_scale); /* exact: 2^20 is 1048576, not %g's 1.04858e+06 */
    fprintf(f, ", \"skipped_steps\": %ld, \"skipped_total\": %ld", r->skipped_steps, r->skipped_total);
    /* Before lr: the tests pin lr, grad_norm and the eval fields next to each other and last. */
    if (r->has_straggler) {
        fprintf(f, ", \"slowest_rank\": %d", r->slowest_rank);
        num(f, "slowest_busy_s", "%.6g", r->slowest_busy_s);
        num(f, "median_busy_s", "%.6g", r->median_busy_s);
        fprintf(f, ", \"straggler\": %s", r->straggler ? "true" : "false");
        if (r->straggler) fprintf(f, ", \"straggler_phase\": \"%s\"", r->straggler_phase);
    }
    num_f32(f, "lr", r->lr);
    if (r->has_grad_norm) num(f, "grad_norm", "%.6g", r->grad_norm);
    if (r->has_eval) {
        num(f, "eval_loss", "%.7g", r->eval_loss);
        num(f, "eval_accuracy", "%.6f", r->eval_accuracy);
    }
    fprintf(f, "}\n");
}

/* The record goes out in one write() at the file's end rather than through f's buffer, so that a
 * write that fails part way (a full disk) can be taken back: the file is cut to where the record
 * began, and keeps whole records only (dtrain plot draws them, --resume appends after them),
 * with nothing left in a buffer for fclose to write after the cut. */
int metrics_write(FILE *f, const metrics_record *r)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) return -1;
    format_record(m, r);
    if (fclose(m) != 0) {
        free(buf);
        return -1;
    }
    const int fd = fileno(f);
    if (fflush(f) != 0) {
        free(buf);
        return -1;
    }
    /* A pipe or a terminal (--metrics /dev/stdout) has no end to seek to, nor anything to cut. */
    const off_t start = lseek(fd, 0, SEEK_END);
    const int seekable = start >= 0;
    if (!seekable && errno != ESPIPE) {
        free(buf);
        return -1;
    }
    size_t done = 0;
    errno = 0;
    while (done < len) {
        const ssize_t w = write(fd, buf + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        done += (size_t)w;
    }
    free(buf);
    if (done == len) return 0;
    const int err = errno ? errno : EIO;
    if (seekable && done && ftruncate(fd, start) == 0) lseek(fd, start, SEEK_SET);
    errno = err;
    return -1;
}

/* The step of a record line (len bytes, without its newline): the line is one JSON object, {...},
 * with "step": N in it. Returns N, or -1 when the line is not a record. */
static long record_step(const char *line, size_t len)
{
    if (len < 2 || line[0] != '{' || line[len - 1] != '}' || memchr(line, '\0', len)) return -1;
    const char *key = strstr(line, "\"step\":");
    if (!key || key >= line + len) return -1;
    const char *p = key + 7;
    while (*p == ' ') p++;
    if (*p < '0' || *p > '9') return -1;
    char *end;
    errno = 0;
    long step = strtol(p, &end, 10);
    if (errno || (*end != ',' && *end != '}')) return -1;
    return step;
}

/* Moves a file that is not ours aside, never over another: path.bad-<UTC time>[-N]. */
static int keep_aside(const char *path, char *bad, size_t n)
{
    char when[32];
    utc_now(when, sizeof when, 0);
    for (int i = 0; i < 100; i++) {
        if (i)
            snprintf(bad, n, "%s.bad-%s-%d", path, when, i);
        else
            snprintf(bad, n, "%s.bad-%s", path, when);
        if (link(path, bad) == 0) return unlink(path);
        if (errno == EEXIST) continue;
        /* No hard links here: rename, after checking that the name is free. */
        if (access(bad, F_OK) == 0) continue;
        return rename(path, bad);
    }
    errno = EEXIST;
    return -1;
}

int metrics_try(const char *path, int resume, char *why, size_t len)
{
    struct stat sb;
    unsigned owner;
    if (ckpt_link_foreign(path, &owner)) {
        /* metrics_open would refuse it after the training's start-up. */
        snprintf(why, len,
                 "--metrics %s is a symbolic link of another user (uid %u): dtrain does not write through it (it "
                 "could lead this run to truncate any file this user may write); remove it, or use another --metrics",
                 path, owner);
        return -1;
    }
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode) || access(path, resume ? R_OK | W_OK : W_OK) == 0) return 0;
    /* Said of the file: the directory's advice (io_error_fix's for a new file) would send the user
     * to a directory that is writable already, and the open at the start would fail with exit 1. */
    snprintf(why, len,
             "--metrics %s cannot be %s: %s: this user may not %s the file: fix its permissions or owner (ls -l, "
             "chmod), remove it, or use another --metrics",
             path, resume ? "read and appended to" : "written", strerror(errno), resume ? "read or write" : "write");
    return -1;
}

/* fopen(path, fresh ? "w" : "r+"), with O_NOFOLLOW when nofollow: a link is then not opened
 * (ELOOP). NULL with errno. */
static FILE *open_stream(const char *path, int fresh, int nofollow)
{
    const int flags = (fresh ? O_WRONLY | O_CREAT | O_TRUNC : O_RDWR) | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0);
    const int fd = open(path, flags, 0666);
    FILE *f = fd < 0 ? NULL : fdopen(fd, fresh ? "w" : "r+");
    if (fd >= 0 && !f) close(fd);
    return f;
}

/* The fopen of path failed (errno): why, with the fix. NULL. */
static FILE *open_failed(const char *path)
{
    const int err = errno;
    char advice[IO_FIX_LEN];
    unsigned owner;
    if (err == ELOOP && ckpt_link_foreign(path, &owner)) {
        cli_error("cannot write --metrics %s: it is a symbolic link of another user (uid %u), which dtrain does not "
                  "write through; remove it, or use another --metrics",
                  path, owner);
        return NULL;
    }
    cli_error("cannot write --metrics %s: %s: %s", path, strerror(err),
              io_error_fix(err, "--metrics file", "--metrics", advice, sizeof advice));
    return NULL;
}

/* What the read of a resumed run's file found. */
typedef struct metrics_scan {
    long cut;                   /* where the records after first_step begin; -1: none */
    long lineno, kept, dropped; /* the lines read; the records kept and dropped */
    long last_step;             /* the last record kept's step */
    long drop_first, drop_last; /* the steps of the first and last record dropped */
    int torn;                   /* the last line was cut short */
    const char *why;            /* line lineno is not this run's record: why; NULL when it is */
} metrics_scan;

/* Reads f's records: those up to first_step are kept, those after it (and a last line cut short)
 * are to be cut; a line that is no record, or a step not after the line before's, stops the read
 * (sc->why). */
static void scan_records(FILE *f, long first_step, metrics_scan *sc)
{
    *sc = (metrics_scan){.cut = -1, .drop_first = -1, .drop_last = -1};
    char *line = NULL;
    size_t cap = 0;
    long off = 0, prev = -1;
    ssize_t got;
    while ((got = getline(&line, &cap, f)) > 0) {
        sc->lineno++;
        const int whole = line[got - 1] == '\n';
        if (!whole && !strncmp(line, "{\"", 2)) {
            /* The last line, cut short: a write that the stop interrupted; its step runs again, or
             * (a checkpoint came just before it) its record is lost, and the note says so. */
            sc->torn = 1;
            if (sc->cut < 0) sc->cut = off;
            break;
        }
        const long step = whole ? record_step(line, (size_t)got - 1) : -1;
        if (step < 0) {
            sc->why = "is not a metrics record";
        } else if (step <= prev) {
            sc->why = "has a step that is not after the line before's";
        } else if (step > first_step) {
            if (sc->cut < 0) sc->cut = off;
        } else {
            sc->kept++;
            sc->last_step = step;
        }
        if (sc->why) break;
        if (sc->cut >= 0) {
            sc->dropped++;
            if (sc->drop_first < 0) sc->drop_first = step;
            sc->drop_last = step;
        }
        if (step >= 0) prev = step;
        off += got;
    }
    free(line);
}

/* The file is not this run's (sc->why of line sc->lineno): kept aside, and a fresh one opened. */
static FILE *start_fresh(const char *path, const metrics_scan *sc, int nofollow)
{
    char bad[4200];
    if (keep_aside(path, bad, sizeof bad) != 0) {
        cli_error("--metrics %s: line %ld %s, and moving the file aside failed (%s): move or remove it", path,
                  sc->lineno, sc->why, strerror(errno));
        return NULL;
    }
    fprintf(stderr,
            "dtrain: warning: --metrics %s: line %ld %s, so it is not this run's metrics file: kept it "
            "as %s, starting a fresh one\n",
            path, sc->lineno, sc->why, bad);
    FILE *f = open_stream(path, 1, nofollow);
    return f ? f : open_failed(path);
}

/* What a resume keeps of the file and drops (unless quiet), and a warning for the steps in no record. */
static void report_resume(const char *path, const metrics_scan *sc, long first_step, int quiet)
{
    if (!quiet) {
        printf("metrics: appending to %s after its %ld record%s up to step %ld", path, sc->kept, cli_s(sc->kept),
               sc->last_step);
        /* Which records went, so a reader of the file can tell which steps its new records redo. */
        if (sc->dropped == 1)
            printf("; dropped 1 record of step %ld (those steps run again)", sc->drop_first);
        else if (sc->dropped)
            printf("; dropped %ld records of steps %ld to %ld (those steps run again)", sc->dropped, sc->drop_first,
                   sc->drop_last);
        if (sc->torn) printf("; dropped a last line cut short (line %ld)", sc->lineno);
        printf("\n");
    }
    /* Every checkpoint step has a record (train_loop.c), so this is a record lost: one cut short
     * by the stop that wrote it, or a file of a run that logged otherwise. */
    if (sc->last_step < first_step) {
        char had[64] = "it keeps no record";
        if (sc->kept) snprintf(had, sizeof had, "its last record kept is of step %ld", sc->last_step);
        fprintf(stderr,
                "dtrain: warning: --metrics %s: %s but this run resumed after step %ld: steps %ld to %ld are in no "
                "record\n",
                path, had, first_step, sc->last_step + 1, first_step);
    }
}

FILE *metrics_open(const char *path, int resume, long first_step, int quiet)
{
    char real[4096];
    int in_place;
    ckpt_write_target(path, real, sizeof real, &in_place);
    /* A device, FIFO or stream (/dev/stdout, /dev/null): not truncated (fopen's "w" emptied the
     * job's log behind /dev/stdout) and not read back on a resume (a FIFO has nothing to read, and
     * a log is no metrics file to cut). */
    if (in_place) {
        FILE *f = ckpt_fopen_in_place(path);
        return f ? f : open_failed(path);
    }
    /* Another user's link is not opened through (ckpt_link_foreign): ELOOP, said below. */
    const int nofollow = ckpt_link_foreign(path, NULL);
    FILE *f = resume ? open_stream(path, 0, nofollow) : NULL;
    if (!f) {
        if (resume && errno != ENOENT) return open_failed(path);
        if (!(f = open_stream(path, 1, nofollow))) return open_failed(path);
        return f;
    }
    metrics_scan sc;
    scan_records(f, first_step, &sc);
    if (!sc.why && ferror(f)) {
        fclose(f);
        return open_failed(path);
    }
    if (sc.why) {
        fclose(f);
        return start_fresh(path, &sc, nofollow);
    }
    if ((sc.cut >= 0 && (fflush(f) != 0 || ftruncate(fileno(f), sc.cut) != 0)) || fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return open_failed(path);
    }
    report_resume(path, &sc, first_step, quiet);
    return f;
}
