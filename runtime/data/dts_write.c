/*
 * dts_write.c - writes any open ds_split as a .dts shard (layout in dts.h): its payload (the
 * samples by worker threads, the labels: dts_payload.c), then the header that sums it up.
 *
 * The file is written under a temporary name in the target's directory, then fsync'd, renamed
 * over the target and the directory fsync'd: a crash or a full disk leaves either the old file or
 * the new one, never half of one. A caller writing several shards (a train and a test split) has
 * each left at its temporary name (keep_temp) and renames them with dts_commit once all are whole.
 */
#include "runtime/data/dts.h"
#include "runtime/data/dts_payload.h"
#include "runtime/data/stats.h"
#include "base/clock.h"
#include "base/io_error.h"
#include "base/status.h"
#include "base/path.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <zlib.h>

static void put64(unsigned char *p, uint64_t v)
{
    dts_put32(p, (uint32_t)v);
    dts_put32(p + 4, (uint32_t)(v >> 32));
}

static int resolve_dtype(const ds_split *src, const dts_write_opts *o)
{
    return o && o->dtype ? o->dtype : src->uint8_values ? DTS_UINT8 : DTS_FP32;
}

static uint64_t header_size(const ds_split *src)
{
    return dts_round_up(DTS_FIXED_BYTES + 8 * (uint64_t)src->c, DTS_ALIGN);
}

/* The payload's size: the samples padded to DTS_ALIGN, then the labels. */
static uint64_t payload_size(const ds_split *src, size_t esize)
{
    const uint64_t row = (uint64_t)src->c * (uint64_t)src->h * (uint64_t)src->w * esize;
    return dts_round_up((uint64_t)src->count * row, DTS_ALIGN) + 4 * (uint64_t)src->count; /* count < 2^61 in memory */
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
    dts_put32(hdr + 8, DTS_VERSION);
    dts_put32(hdr + 12, (uint32_t)header_bytes);
    dts_put32(hdr + 16, (uint32_t)src->c);
    dts_put32(hdr + 20, (uint32_t)src->h);
    dts_put32(hdr + 24, (uint32_t)src->w);
    dts_put32(hdr + 28, (uint32_t)dtype);
    put64(hdr + 32, src->count);
    dts_put32(hdr + 40, (uint32_t)src->classes);
    put64(hdr + 48, total);
    dts_put32(hdr + 56, pcrc);
    /* A source of bytes stays one in fp16/fp32: --normalize unit divides by 255 either way.
     * (uint8 says it by its dtype, and keeps 0 here, which every dtrain reads.) */
    dts_put32(hdr + 60, src->uint8_values && dtype != DTS_UINT8 ? DTS_FLAG_BYTES : 0u);
    for (int c = 0; c < src->c; c++) {
        const float m = (float)stats->mean[c], sd = (float)stats->std[c];
        uint32_t u;
        memcpy(&u, &m, 4);
        dts_put32(hdr + DTS_FIXED_BYTES + 4 * (size_t)c, u);
        memcpy(&u, &sd, 4);
        dts_put32(hdr + DTS_FIXED_BYTES + 4 * ((size_t)src->c + (size_t)c), u);
    }
    dts_put32(hdr + 44, (uint32_t)crc32(0, hdr, (uInt)header_bytes)); /* with the field still 0 */
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
    uint64_t header;  /* bytes of the header, padded */
    uint64_t payload; /* bytes of the samples, padded, and the labels */
    uint64_t file;    /* header + payload */
} shard_layout;

static shard_layout layout_of(const ds_split *src, int dtype, size_t esize)
{
    shard_layout l = {.dtype = dtype};
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

/* The header, which sums up the payload written (its CRC pcrc, the channels' figures), at the
 * start of o's file (the temporary file of path). */
static dt_status write_header(const dts_out *o, const char *path, const ds_split *src, const shard_layout *l,
                              uint32_t pcrc, const ds_stats *stats)
{
    unsigned char *hdr = calloc(1, (size_t)l->header);
    if (!hdr) return status_set_error(DT_ERR_NOMEM, "out of memory writing the header of %s", path);
    fill_header(hdr, src, l->dtype, l->header, l->payload, pcrc, stats);
    const dt_status st = dts_out_write(o, hdr, (size_t)l->header, 0);
    free(hdr);
    return st;
}

/* The whole shard into o's file (the temporary file of path): the payload, then its header. */
static dt_status write_shard(const dts_out *o, const char *path, const ds_split *src, const shard_layout *l,
                             int threads)
{
    ds_stats stats = {0};
    uint32_t pcrc = 0;
    dt_status st = dts_write_payload(o, src, l->dtype, threads, l->header, &stats, &pcrc);
    if (!st) st = write_header(o, path, src, l, pcrc, &stats);
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
    const dts_out out = {.fd = fd, .path = tmp, .total = l.file, .fail_writes = enospc_hook_due()};
    st = check_free_space(path, dir, l.file);
    if (!st) st = write_shard(&out, path, src, &l, o.threads);
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
