/*
 * dts_write.c - writes any open ds_split as a .dts shard (layout in dts.h).
 *
 * Reading is the slow part (an image folder decodes and resizes every image), so worker threads
 * read and convert chunks of samples while this thread writes them, in order: chunk k belongs to
 * worker k % T, which has two buffers, so each worker fills one while the other waits to be
 * written. Each worker also sums the statistics of the values as stored (after rounding to fp16),
 * over a fixed set of chunks, and the sums merge in worker order: the header's mean and std do not
 * depend on timing. The file is written under a temporary name in the target's directory, then
 * fsync'd, renamed over the target and the directory fsync'd: a crash or a full disk leaves either
 * the old file or the new one, never half of one. A caller writing several shards (a train and a
 * test split) has each left at its temporary name (keep_temp) and renames them with dts_commit
 * once all are whole.
 */
#include "runtime/data/dts.h"
#include "runtime/data/stats.h"
#include "base/clock.h"
#include "base/io_error.h"
#include "base/status.h"
#include "base/log.h"
#include "base/path.h"
#include "base/thread_stack.h"
#include "kernels/cast.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <zlib.h>

#define CHUNK_BYTES (1u << 20) /* samples per chunk: about this many bytes of stored values */

typedef struct chunk_slot {
    unsigned char *buf; /* stored values, chunk samples */
    int32_t *labels;
    size_t first, n; /* samples [first, first + n) */
    int full;
    dt_status status;
    status_kept msg; /* the worker's failure, for the writing thread */
} chunk_slot;

typedef struct writer {
    const ds_split *src;
    int dtype, threads;
    size_t per, row_bytes, chunk, nchunks;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int abort;
    long slow_ms; /* test hook DTRAIN_TEST_DTS_SLOW_MS: a pause per sample, to interrupt a convert midway */
} writer;

typedef struct worker {
    writer *w;
    int index;
    chunk_slot slot[2];
    ds_stats_acc acc;
    float *x;
    uint16_t *h;
} worker;

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

static uint64_t round_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

/* Sample i's values (x) into the dtype at out, and x back to the stored values for the stats. */
static dt_status store(const writer *w, size_t i, float *x, uint16_t *h, unsigned char *out)
{
    const ds_split *s = w->src;
    for (size_t j = 0; j < w->per; j++) {
        const float v = x[j];
        if (!isfinite(v))
            return status_set_error(DT_ERR_INVALID_ARG,
                                    "%s: value %zu of sample %zu is %g: a dataset must hold finite "
                                    "values",
                                    s->source, j, i, (double)v);
        /* A source of bytes (uint8_values) may hold fractions where it resampled them (an image
         * folder's resize): they are rounded to the nearest byte, as PIL's resize of an 8-bit
         * image gives bytes. Any other source must hold bytes already. */
        if (w->dtype == DTS_UINT8 && !(v >= 0 && v <= 255 && (s->uint8_values || v == floorf(v))))
            return status_set_error(DT_ERR_INVALID_ARG,
                                    "%s: value %zu of sample %zu is %g, not a byte 0..255: store "
                                    "this dataset with --dtype fp16 or fp32",
                                    s->source, j, i, (double)v);
    }
    switch (w->dtype) {
        case DTS_UINT8:
            for (size_t j = 0; j < w->per; j++) {
                out[j] = (unsigned char)floorf(x[j] + 0.5f);
                x[j] = out[j];
            }
            break;
        case DTS_FP16:
            cpu_cast_f32_to_16(DT_F16, x, h, w->per);
            for (size_t j = 0; j < w->per; j++)
                if ((h[j] & 0x7c00u) == 0x7c00u)
                    return status_set_error(DT_ERR_INVALID_ARG,
                                            "%s: value %zu of sample %zu is %g, past fp16's largest "
                                            "(65504): store this dataset with --dtype fp32",
                                            s->source, j, i, (double)x[j]);
            memcpy(out, h, w->per * sizeof *h);
            cpu_cast_16_to_f32(DT_F16, h, x, w->per);
            break;
        default: memcpy(out, x, w->per * sizeof *x); break;
    }
    return DT_OK;
}

static void *worker_run(void *arg)
{
    worker *k = arg;
    writer *w = k->w;
    /* As every dtrain thread: an alternate signal stack, for the crash report of a stack overflow. */
    if (thread_altstack_install() != DT_OK)
        log_msg(LOG_LEVEL_WARN, "conversion thread: %s; a crash on it may go unreported", dt_last_error());
    for (size_t c = (size_t)k->index, round = 0; c < w->nchunks; c += (size_t)w->threads, round++) {
        chunk_slot *sl = &k->slot[round % 2];
        pthread_mutex_lock(&w->mu);
        while (sl->full && !w->abort) pthread_cond_wait(&w->cv, &w->mu);
        const int stop = w->abort;
        pthread_mutex_unlock(&w->mu);
        if (stop) break;
        sl->first = c * w->chunk;
        sl->n = w->chunk < w->src->count - sl->first ? w->chunk : w->src->count - sl->first;
        dt_status st = DT_OK;
        for (size_t j = 0; !st && j < sl->n; j++) {
            const size_t i = sl->first + j;
            st = ds_read(w->src, i, k->x, &sl->labels[j]);
            if (!st && (sl->labels[j] < 0 || sl->labels[j] >= w->src->classes))
                st = status_set_error(DT_ERR_CORRUPT, "%s: label %d of sample %zu is outside 0 to %d", w->src->source,
                                      (int)sl->labels[j], i, w->src->classes - 1);
            if (!st) st = store(w, i, k->x, k->h, sl->buf + j * w->row_bytes);
            if (!st) ds_stats_acc_add(&k->acc, k->x, sl->labels[j]);
            if (w->slow_ms) usleep((useconds_t)(w->slow_ms * 1000));
        }
        if (st) status_keep(&sl->msg);
        pthread_mutex_lock(&w->mu);
        sl->status = st;
        sl->full = 1;
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
        if (st) break;
    }
    return NULL;
}

/* The test hook DTRAIN_TEST_DTS_ENOSPC (dts.h): the file whose writes fail as on a full disk. Only
 * the writing thread of dts_write reads and sets it. */
static int g_enospc_fd = -1;

/* Writes n bytes at off; a full disk or a size limit is said as such. */
static dt_status write_at(int fd, const char *path, const void *p, size_t n, uint64_t off, uint64_t total)
{
    const unsigned char *b = p;
    while (n) {
        ssize_t r = pwrite(fd, b, n > (1u << 30) ? (1u << 30) : n, (off_t)off);
        if (fd == g_enospc_fd) r = -1, errno = ENOSPC;
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            /* A write of 0 bytes to a regular file: no room. */
            const int err = r < 0 ? errno : ENOSPC;
            char advice[IO_FIX_LEN];
            return status_set_error(DT_ERR_IO, "cannot write %s at byte %llu of %llu: %s: %s", path,
                                    (unsigned long long)off, (unsigned long long)total, strerror(err),
                                    io_error_fix(err, "shard", "DST", advice, sizeof advice));
        }
        b += r, n -= (size_t)r, off += (uint64_t)r;
    }
    return DT_OK;
}

/* Each of w's workers given its buffers (its sample's values, two chunk slots) and its statistics'
 * accumulator. */
static dt_status init_workers(writer *w, worker *ks)
{
    const ds_split *s = w->src;
    dt_status st = DT_OK;
    for (int t = 0; !st && t < w->threads; t++) {
        worker *k = &ks[t];
        k->w = w;
        k->index = t;
        k->x = malloc(w->per * sizeof *k->x);
        k->h = malloc(w->per * sizeof *k->h);
        for (int b = 0; b < 2; b++) {
            k->slot[b].buf = malloc(w->chunk * w->row_bytes);
            k->slot[b].labels = malloc(w->chunk * sizeof *k->slot[b].labels);
        }
        if (!k->x || !k->h || !k->slot[0].buf || !k->slot[1].buf || !k->slot[0].labels || !k->slot[1].labels)
            st = status_set_error(DT_ERR_NOMEM, "out of memory for the buffers of %d writer threads: lower --threads",
                                  w->threads);
        if (!st) st = ds_stats_acc_init(&k->acc, s->c, (size_t)s->h * s->w, s->classes);
    }
    return st;
}

/* The chunks in order as the workers fill them, each written at *off onward and added to *crc,
 * its labels kept in labels (the whole split's); the first failure, a worker's or a write's, ends
 * it. */
static dt_status write_chunks(writer *w, worker *ks, int fd, const char *tmp, uint64_t total, int32_t *labels,
                              uint64_t *off, uint32_t *crc)
{
    dt_status st = DT_OK;
    for (size_t c = 0; !st && c < w->nchunks; c++) {
        chunk_slot *sl = &ks[c % (size_t)w->threads].slot[(c / (size_t)w->threads) % 2];
        pthread_mutex_lock(&w->mu);
        while (!sl->full) pthread_cond_wait(&w->cv, &w->mu);
        pthread_mutex_unlock(&w->mu);
        if (sl->status) return status_restore(sl->status, &sl->msg);
        const size_t bytes = sl->n * w->row_bytes;
        st = write_at(fd, tmp, sl->buf, bytes, *off, total);
        *crc = (uint32_t)crc32(*crc, sl->buf, (uInt)bytes); /* a chunk is far below 4 GiB */
        *off += bytes;
        memcpy(labels + sl->first, sl->labels, sl->n * sizeof *labels);
        pthread_mutex_lock(&w->mu);
        sl->full = 0;
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
    }
    return st;
}

/* After the samples (which end at off): zeros up to DTS_ALIGN, then the count labels, little-endian
 * on disk (converted in place), both added to *crc. */
static dt_status write_labels(int fd, const char *tmp, int32_t *labels, size_t count, uint64_t off, uint64_t total,
                              uint32_t *crc)
{
    static const unsigned char zeros[DTS_ALIGN];
    const size_t pad = (size_t)(round_up(off, DTS_ALIGN) - off);
    unsigned char *lb = (unsigned char *)labels;
    for (size_t i = 0; i < count; i++) put32(lb + 4 * i, (uint32_t)labels[i]);
    *crc = (uint32_t)crc32(*crc, zeros, (uInt)pad);
    dt_status st = write_at(fd, tmp, zeros, pad, off, total);
    if (!st) st = write_at(fd, tmp, lb, count * 4, off + pad, total);
    for (size_t done = 0; !st && done < count * 4;) {
        const size_t n = count * 4 - done > (1u << 30) ? (1u << 30) : count * 4 - done;
        *crc = (uint32_t)crc32(*crc, lb + done, (uInt)n);
        done += n;
    }
    return st;
}

/* The workers' buffers and accumulators freed (ks may be NULL, or its workers never set up). */
static void free_workers(worker *ks, int threads)
{
    for (int t = 0; ks && t < threads; t++) {
        ds_stats_acc_free(&ks[t].acc);
        free(ks[t].x), free(ks[t].h);
        for (int b = 0; b < 2; b++) free(ks[t].slot[b].buf), free(ks[t].slot[b].labels);
    }
    free(ks);
}

/* Runs the workers and writes samples, padding and labels at their offsets; fills stats and crc. */
static dt_status write_payload(writer *w, int fd, const char *tmp, uint64_t header_bytes, uint64_t total,
                               ds_stats *stats, uint32_t *crc_out)
{
    const ds_split *s = w->src;
    worker *ks = calloc((size_t)w->threads, sizeof *ks);
    pthread_t *tid = calloc((size_t)w->threads, sizeof *tid);
    int32_t *labels = malloc(s->count * sizeof *labels);
    dt_status st = DT_OK;
    int started = 0;
    if (!ks || !tid || !labels) st = status_set_error(DT_ERR_NOMEM, "out of memory writing %s", tmp);
    if (!st) st = init_workers(w, ks);
    for (; !st && started < w->threads; started++)
        if (pthread_create(&tid[started], NULL, worker_run, &ks[started]) != 0)
            st = status_set_error(DT_ERR_NOMEM, "cannot start writer thread %d of %d: lower --threads", started + 1,
                                  w->threads);
    uint32_t crc = 0;
    uint64_t off = header_bytes;
    if (!st) st = write_chunks(w, ks, fd, tmp, total, labels, &off, &crc);
    pthread_mutex_lock(&w->mu);
    w->abort = 1; /* a failure stops the workers; after success they have finished anyway */
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    for (int t = 0; t < started; t++) pthread_join(tid[t], NULL);
    if (!st) st = write_labels(fd, tmp, labels, s->count, off, total, &crc);
    if (!st) {
        for (int t = 1; t < w->threads; t++) ds_stats_acc_merge(&ks[0].acc, &ks[t].acc);
        st = ds_stats_acc_finish(&ks[0].acc, stats);
    }
    free_workers(ks, w->threads);
    free(tid);
    free(labels);
    *crc_out = crc;
    return st;
}

static int resolve_dtype(const ds_split *src, const dts_write_opts *o)
{
    return o && o->dtype ? o->dtype : src->uint8_values ? DTS_UINT8 : DTS_FP32;
}

static uint64_t header_size(const ds_split *src) { return round_up(DTS_FIXED_BYTES + 8 * (uint64_t)src->c, DTS_ALIGN); }

/* The payload's size: the samples padded to DTS_ALIGN, then the labels. */
static uint64_t payload_size(const ds_split *src, size_t esize)
{
    const uint64_t row = (uint64_t)src->c * (uint64_t)src->h * (uint64_t)src->w * esize;
    return round_up((uint64_t)src->count * row, DTS_ALIGN) + 4 * (uint64_t)src->count; /* count < 2^61 in memory */
}

uint64_t dts_file_bytes(const ds_split *src, const dts_write_opts *opts)
{
    const size_t esize = dts_dtype_size(resolve_dtype(src, opts));
    if (!esize || src->c < 1 || src->h < 1 || src->w < 1 || src->count < 1) return 0;
    return header_size(src) + payload_size(src, esize);
}

int dts_free_bytes(const char *dir, uint64_t *out)
{
    const char *fake = getenv("DTRAIN_TEST_DTS_FREE");
    if (fake && *fake) {
        *out = strtoull(fake, NULL, 10);
        return 0;
    }
    struct statvfs vf;
    if (statvfs(dir, &vf) != 0 || !vf.f_frsize) return -1;
    *out = (uint64_t)vf.f_bavail * vf.f_frsize;
    return 0;
}

/* tmp renamed to path (over it with force, else only where path is absent), then dir fsync'd. */
static dt_status place(const char *tmp, const char *path, const char *dir, int force)
{
    /* Without --force the rename must not replace a file made since the caller's check. */
    int r = force ? rename(tmp, path) : renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE);
    if (r != 0 && !force && (errno == EINVAL || errno == ENOSYS)) r = link(tmp, path) == 0 ? unlink(tmp) : -1;
    const int err = errno;
    char advice[IO_FIX_LEN];
    if (r != 0)
        return err == EEXIST ? status_set_error(DT_ERR_INVALID_ARG, "%s exists: give --force to replace it", path)
                             : status_set_error(DT_ERR_IO, "cannot rename %s to %s: %s: %s", tmp, path, strerror(err),
                                                io_error_fix(err, "shard", "DST", advice, sizeof advice));
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd); /* the rename itself durable; a filesystem that cannot fsync a directory is no failure */
        close(dfd);
    }
    return DT_OK;
}

dt_status dts_commit(const char *path, int force)
{
    char dir[4200], tmp[4300];
    path_parent_dir(path, dir, sizeof dir);
    dts_temp_path(path, tmp, sizeof tmp);
    dt_status st = place(tmp, path, dir, force);
    if (st) unlink(tmp);
    return st;
}

/* The Nth call of this process, for DTRAIN_TEST_DTS_ENOSPC=N. */
static int enospc_hook_due(void)
{
    static long calls;
    const char *v = getenv("DTRAIN_TEST_DTS_ENOSPC");
    return ++calls == (v ? strtol(v, NULL, 10) : 0);
}

/* That src can be a .dts shard: a known dtype, shape and classes in bounds, a sample at least. */
static dt_status check_source(const ds_split *src, const dts_write_opts *o, size_t esize)
{
    if (!esize) return status_set_error(DT_ERR_INVALID_ARG, "dtype %d is not uint8, fp16 or fp32", o->dtype);
    const uint64_t per = (uint64_t)src->c * (uint64_t)src->h * (uint64_t)src->w;
    if (src->c < 1 || src->h < 1 || src->w < 1 || per > DS_MAX_SAMPLE_VALUES || src->count < 1 || src->classes < 1 ||
        src->classes > DS_MAX_CLASSES)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "%s: %zu samples of %dx%dx%d in %d classes cannot be a .dts shard "
                                "(1 to %u values a sample, 1 to %d classes, at least one sample)",
                                src->source, src->count, src->c, src->h, src->w, src->classes, DS_MAX_SAMPLE_VALUES,
                                DS_MAX_CLASSES);
    return DT_OK;
}

/* The header of src's shard (header_bytes, payload total bytes of CRC pcrc, the channels' figures
 * in stats) into hdr, zeroed, its own CRC last. */
static void fill_header(unsigned char *hdr, const ds_split *src, int dtype, uint64_t header_bytes, uint64_t total,
                        uint32_t pcrc, const ds_stats *stats)
{
    memcpy(hdr, DTS_MAGIC, 8);
    put32(hdr + 8, DTS_VERSION);
    put32(hdr + 12, (uint32_t)header_bytes);
    put32(hdr + 16, (uint32_t)src->c);
    put32(hdr + 20, (uint32_t)src->h);
    put32(hdr + 24, (uint32_t)src->w);
    put32(hdr + 28, (uint32_t)dtype);
    put64(hdr + 32, src->count);
    put32(hdr + 40, (uint32_t)src->classes);
    put64(hdr + 48, total);
    put32(hdr + 56, pcrc);
    /* A source of bytes stays one in fp16/fp32: --normalize unit divides by 255 either way.
     * (uint8 says it by its dtype, and keeps 0 here, which every dtrain reads.) */
    put32(hdr + 60, src->uint8_values && dtype != DTS_UINT8 ? DTS_FLAG_BYTES : 0u);
    for (int c = 0; c < src->c; c++) {
        const float m = (float)stats->mean[c], sd = (float)stats->std[c];
        uint32_t u;
        memcpy(&u, &m, 4);
        put32(hdr + DTS_FIXED_BYTES + 4 * (size_t)c, u);
        memcpy(&u, &sd, 4);
        put32(hdr + DTS_FIXED_BYTES + 4 * ((size_t)src->c + (size_t)c), u);
    }
    put32(hdr + 44, (uint32_t)crc32(0, hdr, (uInt)header_bytes)); /* with the field still 0 */
}

/* fd (the temporary file of path) made durable and closed: a failed fsync or close is a
 * failed write (NFS reports a full quota at close). */
static dt_status finish_file(int fd, const char *path, dt_status st)
{
    char advice[IO_FIX_LEN];
    if (!st && fsync(fd) != 0) {
        const int err = errno;
        st = status_set_error(DT_ERR_IO, "cannot write %s: fsync failed (%s): %s", path, strerror(err),
                              io_error_fix(err, "shard", "DST", advice, sizeof advice));
    }
    g_enospc_fd = -1;
    if (close(fd) != 0 && !st) {
        const int err = errno;
        st = status_set_error(DT_ERR_IO, "cannot write %s: close failed (%s): %s", path, strerror(err),
                              io_error_fix(err, "shard", "DST", advice, sizeof advice));
    }
    return st;
}

/* What src's shard is: its dtype and sizes in bytes. */
typedef struct shard_layout {
    int dtype;
    uint64_t per;     /* values a sample */
    uint64_t row;     /* bytes a sample */
    uint64_t header;  /* bytes of the header, padded */
    uint64_t payload; /* bytes of the samples, padded, and the labels */
    uint64_t file;    /* header + payload */
} shard_layout;

static shard_layout layout_of(const ds_split *src, int dtype, size_t esize)
{
    shard_layout l = {.dtype = dtype};
    l.per = (uint64_t)src->c * (uint64_t)src->h * (uint64_t)src->w;
    l.row = l.per * esize;
    l.header = header_size(src);
    l.payload = payload_size(src, esize);
    l.file = l.header + l.payload;
    return l;
}

/* Creates path's temporary file in its directory (their names into tmp and dir), the stale ones
 * of earlier runs cleared first. */
static dt_status create_temp(const char *path, char *dir, size_t dir_n, char *tmp, size_t tmp_n, int *fd)
{
    const char *base = path_parent_dir(path, dir, dir_n);
    dts_remove_stale_temps(dir, base);
    dts_temp_path(path, tmp, tmp_n);
    /* 0666: the umask decides, as for checkpoints (a group project space keeps it group-writable). */
    *fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (*fd >= 0) return DT_OK;
    const int err = errno;
    char advice[IO_FIX_LEN];
    return status_set_error(DT_ERR_IO, "cannot create %s (for %s): %s: %s", tmp, path, strerror(err),
                            io_error_fix(err, "shard", "DST", advice, sizeof advice));
}

/* A full disk found now rather than after an hour of decoding images. */
static dt_status check_free_space(const char *path, const char *dir, uint64_t file_bytes)
{
    uint64_t avail;
    if (dts_free_bytes(dir, &avail) == 0 && avail < file_bytes)
        return status_set_error(DT_ERR_IO,
                                "cannot write %s: it needs %llu bytes and its filesystem has %llu free: free "
                                "space there or write the shard to another directory",
                                path, (unsigned long long)file_bytes, (unsigned long long)avail);
    return DT_OK;
}

/* The writer of src's samples in chunks of about CHUNK_BYTES, one per worker at most. */
static void writer_init(writer *w, const ds_split *src, const shard_layout *l, int threads)
{
    *w = (writer){.src = src, .dtype = l->dtype, .per = (size_t)l->per, .row_bytes = (size_t)l->row};
    w->chunk = l->row >= CHUNK_BYTES ? 1 : CHUNK_BYTES / (size_t)l->row;
    w->nchunks = (src->count + w->chunk - 1) / w->chunk;
    if (threads < 1) threads = 1;
    if ((size_t)threads > w->nchunks) threads = (int)w->nchunks;
    w->threads = threads;
    const char *slow = getenv("DTRAIN_TEST_DTS_SLOW_MS");
    w->slow_ms = slow ? strtol(slow, NULL, 10) : 0;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
}

/* The header, which sums up the payload written (its CRC pcrc, the channels' figures), at the
 * start of fd (the temporary file tmp of path). */
static dt_status write_header(int fd, const char *tmp, const char *path, const ds_split *src, const shard_layout *l,
                              uint32_t pcrc, const ds_stats *stats)
{
    unsigned char *hdr = calloc(1, (size_t)l->header);
    if (!hdr) return status_set_error(DT_ERR_NOMEM, "out of memory writing the header of %s", path);
    fill_header(hdr, src, l->dtype, l->header, l->payload, pcrc, stats);
    const dt_status st = write_at(fd, tmp, hdr, (size_t)l->header, 0, l->file);
    free(hdr);
    return st;
}

/* The whole shard into fd (the temporary file tmp of path): the payload, then its header. */
static dt_status write_shard(int fd, const char *tmp, const char *path, const ds_split *src, const shard_layout *l,
                             int threads)
{
    writer w;
    writer_init(&w, src, l, threads);
    ds_stats stats = {0};
    uint32_t pcrc = 0;
    dt_status st = write_payload(&w, fd, tmp, l->header, l->file, &stats, &pcrc);
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
    if (!st) st = write_header(fd, tmp, path, src, l, pcrc, &stats);
    ds_stats_free(&stats);
    return st;
}

dt_status dts_write(const ds_split *src, const char *path, const dts_write_opts *opts, dts_write_result *res)
{
    const double t0 = clock_now_s();
    dts_write_opts o = {0};
    if (opts) o = *opts;
    const int dtype = resolve_dtype(src, &o);
    const size_t esize = dts_dtype_size(dtype);
    dt_status st = check_source(src, &o, esize);
    if (st) return st;
    struct stat sb;
    if (!o.force && stat(path, &sb) == 0)
        return status_set_error(DT_ERR_INVALID_ARG, "%s exists: give --force to replace it, or another name", path);
    const shard_layout l = layout_of(src, dtype, esize);
    char dir[4200], tmp[4300];
    int fd;
    if ((st = create_temp(path, dir, sizeof dir, tmp, sizeof tmp, &fd))) return st;
    if (enospc_hook_due()) g_enospc_fd = fd;
    st = check_free_space(path, dir, l.file);
    if (!st) st = write_shard(fd, tmp, path, src, &l, o.threads);
    st = finish_file(fd, path, st);
    if (!st && !o.keep_temp) st = place(tmp, path, dir, o.force);
    if (st) {
        unlink(tmp);
        return st;
    }
    if (res) {
        res->count = src->count;
        res->bytes = l.file;
        res->dtype = dtype;
        res->seconds = clock_now_s() - t0;
    }
    return DT_OK;
}
