/*
 * dts_payload.c - the payload of a .dts shard (layout in dts.h): its samples, then the padding and
 * the labels, for dts_write.c, which writes the header that sums them up.
 *
 * Reading is the slow part (an image folder decodes and resizes every image), so worker threads
 * read and convert chunks of samples while this thread writes them, in order: chunk k belongs to
 * worker k % T, which has two buffers, so each worker fills one while the other waits to be
 * written. Each worker also sums the statistics of the values as stored (after rounding to fp16),
 * over a fixed set of chunks, and the sums merge in worker order: the header's mean and std do not
 * depend on timing.
 */
#include "runtime/data/dts_payload.h"
#include "base/io_error.h"
#include "base/log.h"
#include "base/thread_stack.h"
#include "kernels/cast.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
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

dt_status dts_out_write(const dts_out *o, const void *p, size_t n, uint64_t off)
{
    const unsigned char *b = p;
    while (n) {
        ssize_t r = pwrite(o->fd, b, n > (1u << 30) ? (1u << 30) : n, (off_t)off);
        if (o->fail_writes) r = -1, errno = ENOSPC;
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            /* A write of 0 bytes to a regular file: no room. */
            const int err = r < 0 ? errno : ENOSPC;
            char advice[IO_FIX_LEN];
            return status_set_error(DT_ERR_IO, "cannot write %s at byte %llu of %llu: %s: %s", o->path,
                                    (unsigned long long)off, (unsigned long long)o->total, strerror(err),
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
static dt_status write_chunks(writer *w, worker *ks, const dts_out *o, int32_t *labels, uint64_t *off, uint32_t *crc)
{
    dt_status st = DT_OK;
    for (size_t c = 0; !st && c < w->nchunks; c++) {
        chunk_slot *sl = &ks[c % (size_t)w->threads].slot[(c / (size_t)w->threads) % 2];
        pthread_mutex_lock(&w->mu);
        while (!sl->full) pthread_cond_wait(&w->cv, &w->mu);
        pthread_mutex_unlock(&w->mu);
        if (sl->status) return status_restore(sl->status, &sl->msg);
        const size_t bytes = sl->n * w->row_bytes;
        st = dts_out_write(o, sl->buf, bytes, *off);
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
static dt_status write_labels(const dts_out *o, int32_t *labels, size_t count, uint64_t off, uint32_t *crc)
{
    static const unsigned char zeros[DTS_ALIGN];
    const size_t pad = (size_t)(dts_round_up(off, DTS_ALIGN) - off);
    unsigned char *lb = (unsigned char *)labels;
    for (size_t i = 0; i < count; i++) dts_put32(lb + 4 * i, (uint32_t)labels[i]);
    *crc = (uint32_t)crc32(*crc, zeros, (uInt)pad);
    dt_status st = dts_out_write(o, zeros, pad, off);
    if (!st) st = dts_out_write(o, lb, count * 4, off + pad);
    for (size_t done = 0; !st && done < count * 4;) {
        const size_t n = count * 4 - done > (1u << 30) ? (1u << 30) : count * 4 - done;
        *crc = (uint32_t)crc32(*crc, lb + done, (uInt)n);
        done += n;
    }
    return st;
}

/* The writer of src's samples in chunks of about CHUNK_BYTES, one per worker at most. */
static void writer_init(writer *w, const ds_split *src, int dtype, int threads)
{
    const size_t per = (size_t)src->c * (size_t)src->h * (size_t)src->w;
    *w = (writer){.src = src, .dtype = dtype, .per = per, .row_bytes = per * dts_dtype_size(dtype)};
    w->chunk = w->row_bytes >= CHUNK_BYTES ? 1 : CHUNK_BYTES / w->row_bytes;
    w->nchunks = (src->count + w->chunk - 1) / w->chunk;
    if (threads < 1) threads = 1;
    if ((size_t)threads > w->nchunks) threads = (int)w->nchunks;
    w->threads = threads;
    const char *slow = getenv("DTRAIN_TEST_DTS_SLOW_MS");
    w->slow_ms = slow ? strtol(slow, NULL, 10) : 0;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
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

/* Runs the workers and writes samples, padding and labels from byte start on; fills stats and crc. */
static dt_status run_workers(writer *w, const dts_out *o, uint64_t start, ds_stats *stats, uint32_t *crc_out)
{
    const ds_split *s = w->src;
    worker *ks = calloc((size_t)w->threads, sizeof *ks);
    pthread_t *tid = calloc((size_t)w->threads, sizeof *tid);
    int32_t *labels = malloc(s->count * sizeof *labels);
    dt_status st = DT_OK;
    int started = 0;
    if (!ks || !tid || !labels) st = status_set_error(DT_ERR_NOMEM, "out of memory writing %s", o->path);
    if (!st) st = init_workers(w, ks);
    for (; !st && started < w->threads; started++)
        if (pthread_create(&tid[started], NULL, worker_run, &ks[started]) != 0)
            st = status_set_error(DT_ERR_NOMEM, "cannot start writer thread %d of %d: lower --threads", started + 1,
                                  w->threads);
    uint32_t crc = 0;
    uint64_t off = start;
    if (!st) st = write_chunks(w, ks, o, labels, &off, &crc);
    pthread_mutex_lock(&w->mu);
    w->abort = 1; /* a failure stops the workers; after success they have finished anyway */
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    for (int t = 0; t < started; t++) pthread_join(tid[t], NULL);
    if (!st) st = write_labels(o, labels, s->count, off, &crc);
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

dt_status dts_write_payload(const dts_out *o, const ds_split *src, int dtype, int threads, uint64_t start,
                            ds_stats *stats, uint32_t *crc)
{
    writer w;
    writer_init(&w, src, dtype, threads);
    const dt_status st = run_workers(&w, o, start, stats, crc);
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
    return st;
}
