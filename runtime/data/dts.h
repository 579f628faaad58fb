/*
 * dts.h - dtrain shards (.dts): one split of a dataset in one file, read by mmap without copying
 * (dts_read.c) and written from any open ds_split (dts_write.c; its temporary files: dts_temp.c).
 * docs/dts-format.md is the user's description, with a numpy reader.
 *
 * Layout, every integer little-endian, every offset from the start of the file:
 *
 *   offset  size  field
 *        0     8  magic          "DTSHARD1" (no NUL)
 *        8     4  version        1
 *       12     4  header_bytes   where the payload starts: 64 + 8*C rounded up to a multiple of 64,
 *                                so the mapped samples are 64-byte aligned
 *       16     4  c              channels  } the shape of one sample, each >= 1 and
 *       20     4  h              height    } c*h*w <= DS_MAX_SAMPLE_VALUES (flat features
 *       24     4  w              width     } are F x 1 x 1)
 *       28     4  dtype          1 uint8, 2 fp16 (IEEE binary16), 3 fp32
 *       32     8  count          samples, >= 1
 *       40     4  classes        labels lie in [0, classes), 1 <= classes <= DS_MAX_CLASSES
 *       44     4  header_crc     zlib crc32 of bytes [0, header_bytes) with this field read as 0
 *       48     8  payload_bytes  the file's size minus header_bytes (checked against both)
 *       56     4  payload_crc    zlib crc32 of bytes [header_bytes, header_bytes + payload_bytes)
 *       60     4  flags          bit 0 (DTS_FLAG_BYTES): the values are in byte units, 0..255, as
 *                                the source's were (an image's, resampled: fp16/fp32 keep the
 *                                fractions), so --normalize unit divides them by 255 as it does
 *                                uint8's; every other bit 0 (a newer writer's: refused)
 *       64  4*C   mean           per channel, fp32, in stored units (0..255 for uint8)
 *    64+4C  4*C   std            per channel, fp32, population std, >= 0
 *                 zero padding up to header_bytes
 *
 *   header_bytes               samples: count rows of c*h*w values of dtype, row-major (C, H, W),
 *                              sample i at header_bytes + i * c*h*w * sizeof(dtype)
 *   labels_offset              labels: count int32, at header_bytes + (the samples' bytes rounded
 *                              up to a multiple of 64), zero padding between the two
 *   file size                = labels_offset + 4 * count = header_bytes + payload_bytes
 *
 * Labels are int32 (as the reader interface's labels are) and lie inside the payload, so the
 * payload CRC covers them; they are also checked against classes at open, because they are small
 * (4 bytes a sample, against hundreds for the sample) and a step must never meet a bad one.
 * Opening checks every header field against the file's real size and the DS_MAX_* bounds, with
 * overflow-checked arithmetic, and the header CRC; it does not read the samples, so the payload
 * CRC and the finiteness of fp values are checked by dts_verify, and by `dtrain data verify` (the
 * payload CRC with dts_check_payload, then every sample and label through ds_find_bad_samples).
 */
#ifndef DT_RUNTIME_DATA_DTS_H
#define DT_RUNTIME_DATA_DTS_H

#include "runtime/data/reader.h"

#include <stddef.h>
#include <stdint.h>

#define DTS_MAGIC "DTSHARD1"
#define DTS_VERSION 1u
#define DTS_FLAG_BYTES 1u   /* the header's flags: values in byte units (0..255) */
#define DTS_FIXED_BYTES 64u /* the fixed fields, before mean and std */
#define DTS_ALIGN 64u

typedef enum dts_dtype { DTS_UINT8 = 1, DTS_FP16 = 2, DTS_FP32 = 3 } dts_dtype;

/* "uint8", "fp16", "fp32" (NULL for anything else), and back (0 for an unknown name). */
const char *dts_dtype_name(int dtype);
int dts_dtype_parse(const char *name);
/* Bytes of one value of dtype: 1, 2 or 4 (0 for an unknown dtype). */
size_t dts_dtype_size(int dtype);

/* ds_open's "dts" format (declared in reader.h): a .dts file, or a directory holding train.dts
 * (test.dts for the test split). */

/* Reads the whole .dts file at path and checks its payload CRC and that every fp value is finite,
 * on top of what opening checks. DT_OK, or DT_ERR_CORRUPT naming the file, the byte range or
 * sample and the fix; DT_ERR_IO when it cannot be read. */
dt_status dts_verify(const char *path);

/* A pass over s in file order (on 1: a CRC, the statistics of `data info` and `verify`) asks the
 * kernel to read ahead; 0 goes back to the open's advice for training's shuffled reads (no
 * read-around). Nothing for another format. Advice only: results never change. */
void dts_advise_in_order(const ds_split *s, int on);

/* The payload CRC-32 of an open "dts" split against its header's. DT_OK, or DT_ERR_CORRUPT naming
 * the file and the payload's byte range: the damage is somewhere in it, and which sample it hit is
 * for a read of every sample to find (a damaged byte of a uint8 sample reads as a valid value). */
dt_status dts_check_payload(const ds_split *s);

/* The byte offset of sample i's values in the .dts file an open "dts" split reads; for messages. */
uint64_t dts_sample_offset(const ds_split *s, size_t i);

typedef struct dts_write_opts {
    int dtype;   /* DTS_UINT8/FP16/FP32; 0: uint8 when the source's values are bytes, else fp32 */
    int threads; /* reading threads (0 or 1: one) */
    int force;   /* replace an existing file at path */
    /* 1: leave the finished, fsync'd file at its temporary name (dts_temp_path) for dts_commit,
     * so a caller writing several shards puts them in place only once every one is whole; 0:
     * rename it into place. */
    int keep_temp;
} dts_write_opts;

typedef struct dts_write_result {
    size_t count;
    uint64_t bytes; /* the file's size */
    int dtype;
    double seconds;
} dts_write_result;

/* Writes every sample of src, in order, to a new .dts file at path, with the per-channel mean and
 * std of the stored values in its header. Atomic: the file is written under a temporary name in
 * the same directory, fsync'd and renamed, so path is either absent/old or whole. A value the dtype
 * cannot hold (not a byte 0..255 for uint8, past 65504 for fp16, not finite) is DT_ERR_INVALID_ARG
 * naming the sample; a full disk or a file-size limit DT_ERR_IO naming them; an existing path
 * without opts->force DT_ERR_INVALID_ARG. The temporary file never outlives a failure. res may be
 * NULL. */
dt_status dts_write(const ds_split *src, const char *path, const dts_write_opts *opts, dts_write_result *res);

/* The temporary file dts_write(path) writes in this process (DIR/.NAME.tmp.PID), for a caller that
 * must remove it when a signal ends the process mid-write (dtrain data convert). */
void dts_temp_path(const char *path, char *out, size_t n);

/* Removes the temporary files that earlier writes of DIR/BASE left when they were killed (SIGKILL,
 * a node crash: no handler ran), and says each in a warning: .BASE.tmp.<pid> in dir whose process
 * is gone from this host and that nobody has written for 10 minutes (a convert on another node
 * sharing the directory keeps its file fresh). dts_write calls it before writing. */
void dts_remove_stale_temps(const char *dir, const char *base);

/* The size of the file dts_write(src, path, opts) writes (opts->dtype 0 resolved as there), for
 * a caller that checks the room for several shards before writing any; 0 when src cannot be a
 * shard (dts_write then says why). */
uint64_t dts_file_bytes(const ds_split *src, const dts_write_opts *opts);

/* The bytes an unprivileged writer may still put in dir's filesystem, into *out; -1 when statvfs
 * cannot tell (no check is then possible). Test hook: DTRAIN_TEST_DTS_FREE=BYTES is taken as the
 * answer, so the space checks run without a small filesystem. */
int dts_free_bytes(const char *dir, uint64_t *out);

/* Puts the temporary file that dts_write(path) with keep_temp left in place at path: renamed over
 * it with force, else only where path does not exist (DT_ERR_INVALID_ARG "exists: give --force"),
 * then the directory fsync'd. On a failure the temporary file is removed. */
dt_status dts_commit(const char *path, int force);

/* Test hook: DTRAIN_TEST_DTS_ENOSPC=N makes the Nth dts_write of this process (1 the first) meet a
 * full disk at its first payload byte, so the failure paths of a convert of several shards run
 * without a full filesystem. */

#endif
