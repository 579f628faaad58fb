/*
 * ckpt_reader.c - reading named-section checkpoints (dt_ckpt_open_latest, dt_ckpt_read,
 * dt_ckpt_read_rank and the table queries of include/dtrain/checkpoint.h).
 *
 * Rank 0 alone touches the directory: it takes the newest file whose header, table and every
 * section pass their checks (ckpt_file.c), skipping the others with a warning, and sends the
 * table to every rank, so the queries are local everywhere. A read is collective: the ranks first
 * agree that they all read the same section, then rank 0 reads the file and the bytes reach the
 * others by broadcast, 64 MiB at a time through host memory (a device destination is filled from
 * there), and the CRC, checked again on rank 0, decides on every rank whether the read succeeded.
 */
#include "runtime/checkpoint/ckpt_format.h"
#include "collectives/ctx_comm.h"
#include "kernels/backend.h"
#include "base/log.h"
#include "base/status.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHUNK ((size_t)64 << 20)

struct dt_ckpt_reader {
    dt_ctx *ctx;
    int rank, world;
    char path[4200];
    long step;
    int saved_world;
    uint32_t n;
    ckpt4_entry *e; /* rank 0: the file's table (f->e); others: rank 0's copy */
    ckpt_file *f;   /* rank 0 */
};

void dt_ckpt_close(dt_ckpt_reader *r)
{
    if (!r) return;
    if (r->f)
        ckpt_file_close(r->f);
    else
        free(r->e);
    ctx_unhold(r->ctx, CTX_HELD_CKPT_READER);
    free(r);
}

/* Rank 0: the newest sound version-4 file of dir into r (r->f NULL when none). */
static dt_status find_newest(const char *dir, dt_ckpt_reader *r)
{
    ckpt_entry *e;
    size_t n, skipped = 0;
    dt_status s = ckpt_list(dir, &e, &n);
    if (s) return s;
    for (size_t i = 0; i < n && !r->f; i++) {
        if ((size_t)snprintf(r->path, sizeof r->path, "%s/%s", dir, e[i].name) >= sizeof r->path) {
            s = status_set_error(DT_ERR_INVALID_ARG, "checkpoint directory name is too long (%zu characters)",
                                 strlen(dir));
            break;
        }
        int fd;
        uint64_t size;
        uint32_t version;
        dt_status o = ckpt_open_regular(r->path, &fd, &size, &version);
        if (o == DT_ERR_INVALID_ARG) { /* unreadable by this user: not skipped (ckpt_open_regular) */
            s = o;
            break;
        }
        if (!o && version >= 1 && version <= CKPT_VERSION_FIXED) {
            o = status_set_error(DT_ERR_CORRUPT,
                                 "checkpoint %s has format version %u, a dt_model checkpoint of an older "
                                 "dtrain (dt_checkpoint_load_latest reads it); dt_ckpt_open_latest reads version %u",
                                 r->path, version, CKPT_VERSION);
            close(fd);
        } else if (!o && version > CKPT_VERSION && version <= CKPT_VERSION_NEWER_MAX) {
            s = ckpt_refuse_newer(r->path, version); /* not skipped: see ckpt_refuse_newer */
            close(fd);
            break;
        } else if (!o) {
            o = ckpt_file_open_fd(fd, size, r->path, e[i].step, 1, &r->f);
        }
        if (o == DT_ERR_NOMEM) {
            s = o;
            break;
        }
        if (o) {
            log_msg(LOG_LEVEL_WARN, "skipping checkpoint: %s", dt_last_error());
            skipped++;
        }
    }
    if (!s && !r->f && skipped > 0)
        log_msg(LOG_LEVEL_WARN,
                "none of the %zu checkpoint file(s) in %s could be opened (see above); the files are left "
                "in place",
                skipped, dir);
    if (r->f) {
        r->step = r->f->step;
        r->saved_world = r->f->world;
        r->n = r->f->n;
        r->e = r->f->e;
    }
    ckpt_list_free(e, n);
    return s;
}

/* What rank 0 found, for the others. */
typedef struct found_info {
    int64_t found, step, saved_world, n;
} found_info;

dt_status dt_ckpt_open_latest(dt_ctx *ctx, const char *dir, dt_ckpt_reader **out, long *step)
{
    if (!out || !step) return status_set_error(DT_ERR_INVALID_ARG, "dt_ckpt_open_latest: out or step is NULL");
    *out = NULL;
    *step = 0;
    if (!dir || !*dir)
        return status_set_error(DT_ERR_INVALID_ARG, "dt_ckpt_open_latest: no checkpoint directory given");
    dt_ckpt_reader *r = calloc(1, sizeof *r);
    dt_status s = r ? DT_OK : status_set_error(DT_ERR_NOMEM, "dt_ckpt_open_latest: out of memory");
    const int rank = ctx ? dt_rank(ctx) : 0, world = ctx ? dt_world_size(ctx) : 1;
    if (r) {
        r->ctx = ctx;
        ctx_hold(ctx, CTX_HELD_CKPT_READER); /* dt_finalize refuses while the reader lives */
        r->rank = rank;
        r->world = world;
    }
    if (!s && rank == 0) s = find_newest(dir, r);
    if ((s = ckpt_agree(ctx, s))) goto fail;
    if (world > 1) {
        found_info fi = {.found = r->f != NULL, .step = r->step, .saved_world = r->saved_world, .n = r->n};
        if ((s = ckpt_bcast_bytes(ctx, &fi, sizeof fi))) goto fail;
        if (rank != 0 && fi.found) {
            r->step = (long)fi.step;
            r->saved_world = (int)fi.saved_world;
            r->n = (uint32_t)fi.n;
            snprintf(r->path, sizeof r->path, "%s/ckpt-%010ld.dtc", dir, r->step);
            if (!(r->e = malloc(r->n ? r->n * sizeof *r->e : 1)))
                s = status_set_error(DT_ERR_NOMEM, "dt_ckpt_open_latest: out of memory for a table of %u sections",
                                     r->n);
        }
        if ((s = ckpt_agree(ctx, s))) goto fail;
        if (!fi.found) goto none;
        if ((s = ckpt_bcast_bytes(ctx, r->e, r->n * sizeof *r->e))) goto fail;
    } else if (!r->f) {
        goto none;
    }
    *out = r;
    *step = r->step;
    return DT_OK;
none:
    dt_ckpt_close(r);
    return DT_OK;
fail:
    dt_ckpt_close(r);
    return s;
}

int dt_ckpt_num_sections(const dt_ckpt_reader *r) { return r ? (int)r->n : 0; }

const char *dt_ckpt_section_name(const dt_ckpt_reader *r, int i)
{
    return r && i >= 0 && (uint32_t)i < r->n ? r->e[i].name : NULL;
}

const char *dt_ckpt_path(const dt_ckpt_reader *r) { return r ? r->path : NULL; }
int dt_ckpt_saved_world(const dt_ckpt_reader *r) { return r ? r->saved_world : 0; }

/* The index of section name, or an error naming it and listing what the file has. */
static dt_status find(const dt_ckpt_reader *r, const char *fn, const char *name, int *idx)
{
    *idx = -1;
    if (!name) return status_set_error(DT_ERR_INVALID_ARG, "%s: the section name is NULL", fn);
    for (uint32_t i = 0; i < r->n; i++)
        if (strcmp(r->e[i].name, name) == 0) {
            *idx = (int)i;
            return DT_OK;
        }
    char names[1200];
    ckpt_names_list(r->e, r->n, names, sizeof names);
    return status_set_error(DT_ERR_INVALID_ARG, "%s: checkpoint %s holds no section \"%.*s\"; its sections: %s", fn,
                            r->path, DT_CKPT_NAME_MAX + 8, name, names);
}

dt_status dt_ckpt_section_size(const dt_ckpt_reader *r, const char *name, size_t *bytes)
{
    if (!r || !bytes) return status_set_error(DT_ERR_INVALID_ARG, "dt_ckpt_section_size: reader or bytes is NULL");
    *bytes = 0;
    int i;
    dt_status s = find(r, "dt_ckpt_section_size", name, &i);
    if (!s) *bytes = (size_t)r->e[i].bytes;
    return s;
}

/* This rank's request checked against the table (the same on every rank), then against rank
 * 0's, and the verdict of every rank to all. per_rank: bytes is one rank's blob. */
static dt_status agree_request(dt_ckpt_reader *r, const char *fn, const char *name, const void *dst, size_t bytes,
                               int per_rank, int *idx)
{
    dt_status mine = find(r, fn, name, idx);
    if (!mine) {
        const ckpt4_entry *x = &r->e[*idx];
        const uint64_t want = per_rank && x->ranks ? x->bytes / x->ranks : x->bytes;
        if (per_rank && !x->ranks)
            mine = status_set_error(DT_ERR_INVALID_ARG,
                                    "%s: section \"%s\" of %s is not per-rank: read it with "
                                    "dt_ckpt_read",
                                    fn, name, r->path);
        else if (per_rank && r->saved_world != r->world)
            mine =
                status_set_error(DT_ERR_INVALID_ARG,
                                 "%s: section \"%s\" of %s holds one blob for each of the %d ranks "
                                 "that wrote it, and this job has %d: a blob per rank cannot be split or merged; read "
                                 "all of them with dt_ckpt_read (%llu bytes) and decide",
                                 fn, name, r->path, r->saved_world, r->world, (unsigned long long)x->bytes);
        else if (bytes != want)
            mine =
                status_set_error(DT_ERR_INVALID_ARG, "%s: section \"%s\" of %s is %llu bytes%s; the call asks for %zu",
                                 fn, name, r->path, (unsigned long long)want, per_rank ? " per rank" : "", bytes);
        else if (!dst && bytes)
            mine = status_set_error(DT_ERR_INVALID_ARG, "%s: the destination of section \"%s\" (%zu bytes) is NULL", fn,
                                    name, bytes);
    }
    if (r->world <= 1) return mine;
    struct {
        int64_t idx, bytes;
    } req = {mine ? -1 : *idx, (int64_t)bytes}, me = req;
    dt_status c;
    if ((c = ckpt_bcast_bytes(r->ctx, &req, sizeof req))) return c;
    if (!mine && req.idx >= 0 && (uint64_t)req.idx < r->n && (req.idx != me.idx || req.bytes != me.bytes))
        mine = status_set_error(DT_ERR_INVALID_ARG,
                                "%s: rank %d reads section \"%s\" (%zu bytes) where rank 0 reads "
                                "\"%s\" (%lld bytes): every rank reads the same sections in the same order",
                                fn, r->rank, name, bytes, r->e[req.idx].name, (long long)req.bytes);
    return ckpt_agree(r->ctx, mine);
}

dt_status dt_ckpt_read(dt_ckpt_reader *r, const char *name, void *dst, size_t bytes)
{
    if (!r) return status_set_error(DT_ERR_INVALID_ARG, "dt_ckpt_read: the reader is NULL");
    int idx;
    dt_status s = agree_request(r, "dt_ckpt_read", name, dst, bytes, 0, &idx);
    if (s) return s;
    const int dev = backend_is_device_ptr(dst);
    backend *be = NULL; /* the device's, for a dst in device memory */
    unsigned char *stage = NULL;
    if (dev && bytes && !(stage = malloc(bytes < CHUNK ? bytes : CHUNK)))
        s = status_set_error(DT_ERR_NOMEM, "dt_ckpt_read: out of host memory staging section \"%s\"", name);
    if (!s && dev) s = backend_for_memory(DT_MEMORY_DEVICE, &be);
    if ((s = ckpt_agree(r->ctx, s))) {
        free(stage);
        return s;
    }
    /* Every rank goes through every chunk, whatever fails on the way, so none is left waiting;
     * the first failure of each rank is what it reports to the others at the end. */
    dt_status local = DT_OK;
    status_kept local_why;
    uint32_t crc = ckpt_crc(NULL, 0);
    for (size_t off = 0; off < bytes;) {
        const size_t n = bytes - off < CHUNK ? bytes - off : CHUNK;
        unsigned char *buf = dev ? stage : (unsigned char *)dst + off;
        if (r->rank == 0) {
            dt_status rs = local ? local : ckpt_file_pread(r->f, (uint32_t)idx, off, buf, n);
            if (rs && !local) {
                local = rs;
                status_keep(&local_why);
            }
            if (local) memset(buf, 0, n);
            crc = ckpt_crc_more(crc, buf, n);
        }
        if ((s = ckpt_bcast_bytes(r->ctx, buf, n))) {
            free(stage);
            return s;
        }
        if (dev && !local) {
            dt_status ds = be->ops->to_device(be, (unsigned char *)dst + off, buf, n);
            if (ds) {
                local = ds;
                status_keep(&local_why);
            }
        }
        off += n;
    }
    free(stage);
    if (r->rank == 0 && !local && crc != r->e[idx].crc)
        local = status_set_error(DT_ERR_CORRUPT,
                                 "dt_ckpt_read: checkpoint %s: section \"%s\" is damaged (CRC mismatch; "
                                 "it changed since it was opened)",
                                 r->path, name);
    else if (local)
        status_restore(local, &local_why);
    return ckpt_agree(r->ctx, local);
}

dt_status dt_ckpt_read_rank(dt_ckpt_reader *r, const char *name, void *dst, size_t bytes)
{
    if (!r) return status_set_error(DT_ERR_INVALID_ARG, "dt_ckpt_read_rank: the reader is NULL");
    int idx;
    dt_status s = agree_request(r, "dt_ckpt_read_rank", name, dst, bytes, 1, &idx);
    if (s || bytes == 0) return s;
    const int dev = backend_is_device_ptr(dst);
    backend *be = NULL; /* the device's, for a dst in device memory */
    unsigned char *all = NULL, *mine = dev ? NULL : dst;
    if (r->rank == 0 && !(all = malloc((size_t)r->e[idx].bytes)))
        s = status_set_error(DT_ERR_NOMEM, "dt_ckpt_read_rank: out of host memory for section \"%s\" (%.1f MiB)", name,
                             (double)r->e[idx].bytes / 1048576.0);
    if (!s && dev && !(mine = malloc(bytes)))
        s = status_set_error(DT_ERR_NOMEM, "dt_ckpt_read_rank: out of host memory staging section \"%s\"", name);
    if (!s && dev) s = backend_for_memory(DT_MEMORY_DEVICE, &be);
    if (!s && r->rank == 0) s = ckpt_file_read(r->f, (uint32_t)idx, all); /* the CRC before any rank's dst */
    if ((s = ckpt_agree(r->ctx, s))) goto done;
    if (r->world > 1) {
        int rc = MPI_Scatter(all, (int)bytes, MPI_BYTE, mine, (int)bytes, MPI_BYTE, 0, ctx_world_comm(r->ctx));
        if (rc != MPI_SUCCESS)
            s = status_set_error(DT_ERR_MPI,
                                 "dt_ckpt_read_rank: MPI_Scatter of section \"%s\" failed (a peer may have "
                                 "died)",
                                 name);
    } else {
        memcpy(mine, all, bytes);
    }
    if (!s && dev) s = be->ops->to_device(be, dst, mine, bytes);
    s = ckpt_agree(r->ctx, s);
done:
    free(all);
    if (dev) free(mine);
    return s;
}
