/*
 * dts_payload.h - the payload of a .dts shard (layout in dts.h): its samples read, converted and
 * written by worker threads, then the padding and the labels (dts_payload.c); and the one write
 * that every byte of a shard goes through. Internal to the shard writer (dts_write.c).
 */
#ifndef DT_RUNTIME_DATA_DTS_PAYLOAD_H
#define DT_RUNTIME_DATA_DTS_PAYLOAD_H

#include "runtime/data/dts.h"
#include "runtime/data/stats.h"
#include "base/status.h"

#include <stddef.h>
#include <stdint.h>

/* Where a shard is written: its temporary file and that file's name and whole size (for messages). */
typedef struct dts_out {
    int fd;
    const char *path;
    uint64_t total;
    int fail_writes; /* the test hook DTRAIN_TEST_DTS_ENOSPC (dts.h): every write fails as on a full disk */
} dts_out;

/* Writes the n bytes at p at offset off of o's file, in as many calls as it takes. DT_ERR_IO,
 * naming the file, the offset and the fix (a full disk and a size limit said as such). */
dt_status dts_out_write(const dts_out *o, const void *p, size_t n, uint64_t off);

/* Writes src's samples, each of its c*h*w values stored as dtype (DTS_UINT8/FP16/FP32), from byte
 * `start` of o on, read and converted by `threads` workers (fewer when there are fewer
 * chunks of about 1 MiB; at least 1); then zeros up to DTS_ALIGN and the labels, little-endian.
 * *stats gets the channels' figures of the values as stored (the caller frees them with
 * ds_stats_free, also after a failure) and *crc the CRC-32 of every byte written. The first
 * failure ends it: a value that is not finite, not a byte for uint8 or past fp16's range
 * (DT_ERR_INVALID_ARG), a label out of range (DT_ERR_CORRUPT), the reader's own error, a write
 * (DT_ERR_IO), memory or a thread (DT_ERR_NOMEM). */
dt_status dts_write_payload(const dts_out *o, const ds_split *src, int dtype, int threads, uint64_t start,
                            ds_stats *stats, uint32_t *crc);

/* v little-endian at p. */
static inline void dts_put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* n rounded up to a multiple of a. */
static inline uint64_t dts_round_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

#endif
