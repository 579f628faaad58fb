/*
 * replicas.c - are the ranks' copies of a buffer bit-identical? The check `dtrain train` runs at
 * the end of a run, open to every loop: data-parallel replicas must hold the same parameters (each
 * applies the same reduced gradients), and when they do not, a loop that forgot to reduce, or a
 * rank that went wrong, shows here by name instead of as a quietly worse model.
 */
#include "dtrain.h"
#include "kernels/backend.h"
#include "collectives/rank_verdict.h"
#include "base/hash.h"
#include "base/status.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A rank's slot: its buffer's 64-bit hash, then its length, in 16-bit digits. */
enum { DIGITS = 4, SLOT = 2 * DIGITS };

/* What the shared slots say, compared with rank 0's. */
typedef struct replica_tally {
    float h0[SLOT];   /* rank 0's slot */
    int n, first;     /* ranks whose hash differs from rank 0's, and the lowest of them */
    int nlen;         /* ranks whose length differs from rank 0's */
    int first_len;    /* the lowest of them, */
    uint64_t its_len; /* and its length */
} replica_tally;

static uint64_t slot_digits(const float *e)
{
    uint64_t v = 0;
    for (int k = 0; k < DIGITS; k++) v |= (uint64_t)e[k] << (16 * k);
    return v;
}

static void tally_visit(int rank, const float *e, void *state)
{
    replica_tally *t = state;
    if (rank == 0) {
        memcpy(t->h0, e, sizeof t->h0);
    } else if (memcmp(e + DIGITS, t->h0 + DIGITS, DIGITS * sizeof *e) != 0) {
        if (t->first_len < 0) t->first_len = rank, t->its_len = slot_digits(e + DIGITS);
        t->nlen++;
    } else if (memcmp(e, t->h0, DIGITS * sizeof *e) != 0) {
        if (t->first < 0) t->first = rank;
        t->n++;
    }
}

/* failed: this rank's failure reading its copy (a dt_status; DT_OK when read). Such a rank still
 * joins: the ranks' verdict comes first (rank_verdict_status), so every rank learns who failed
 * and returns the same code, instead of reading the gap as a difference; the hashes follow only
 * when every rank has one. */
static dt_status check_replicas(dt_ctx *ctx, const void *buf, size_t bytes, dt_status failed, int *differ,
                                int *first_rank)
{
    if (differ) *differ = 0;
    if (first_rank) *first_rank = -1;
    const int world = dt_world_size(ctx);
    if (world == 1) return failed;
    const dt_status v =
        rank_verdict_status(ctx, failed, "dt_check_replicas", " (it could not read its copy), so nothing was compared");
    if (v) return v;
    /* Every rank's hash and length reach every rank, as four 16-bit digits each (exact in fp32),
     * through rank_share_slots. The lengths come first: buffers of other sizes are a caller's
     * mistake, not replicas that drifted. */
    const uint64_t h = fnv1a_buffer(buf, bytes);
    float mine[SLOT];
    for (int k = 0; k < DIGITS; k++) {
        mine[k] = (float)((h >> (16 * k)) & 0xffffu);
        mine[DIGITS + k] = (float)(((uint64_t)bytes >> (16 * k)) & 0xffffu);
    }
    replica_tally t = {.first = -1, .first_len = -1};
    const dt_status s = rank_share_slots(ctx, mine, SLOT, tally_visit, &t);
    if (s) return s;
    /* Each verdict below is every rank's: each saw every rank's slots. */
    if (t.nlen)
        return status_mark_shared(
            status_set_error(DT_ERR_INVALID_ARG,
                             "dt_check_replicas: rank %d gave %llu bytes where rank 0 gave %llu%s: every rank must "
                             "pass its copy of the same buffer, the same length on every rank, so nothing was "
                             "compared",
                             t.first_len, (unsigned long long)t.its_len, (unsigned long long)slot_digits(t.h0 + DIGITS),
                             t.nlen > 1 ? " (and other ranks differ too)" : ""));
    if (differ) *differ = t.n;
    if (first_rank) *first_rank = t.first;
    if (t.n)
        return status_mark_shared(
            status_set_error(DT_ERR_NUMERIC,
                             "the replicas differ: %d of the %d ranks hold other values than rank 0 "
                             "(the first is rank %d); every rank must apply the same reduced gradients (call "
                             "dt_model_sync_grads, or dt_allreduce the gradients, before each optimizer step)",
                             t.n, world, t.first));
    return DT_OK;
}

/* bytes of device memory at buf into host, after everything queued on the device, on any stream,
 * has finished (the caller's kernels on a stream of its own included), as the buffer utilities
 * promise. */
static dt_status device_to_host(const char *fn, void *host, const void *buf, size_t bytes)
{
    if (!host) return status_set_error(DT_ERR_NOMEM, "%s: out of host memory (%zu MiB)", fn, bytes >> 20);
    backend *be = NULL;
    dt_status s = backend_for_memory(DT_MEMORY_DEVICE, &be);
    if (!s && (s = be->ops->settle(be)))
        s = status_set_error(s, "%s: the device reported an error from earlier work: %s", fn, dt_last_error());
    return s ? s : be->ops->to_host(be, host, buf, bytes);
}

dt_status dt_check_replicas(dt_ctx *ctx, const void *buf, size_t bytes, int *differ, int *first_rank)
{
    /* Without a context no other rank can be told: this rank fails alone. */
    if (!ctx) return status_null_arg("dt_check_replicas", "ctx", "pass the context of dt_init (on every rank)");
    /* A NULL buffer is this rank's failure: it still joins, as one that cannot read its copy. */
    if (!buf && bytes)
        return check_replicas(ctx, NULL, 0,
                              status_set_error(DT_ERR_INVALID_ARG,
                                               "dt_check_replicas: buf is NULL with bytes %zu: pass this rank's "
                                               "copy (the same size on every rank)",
                                               bytes),
                              differ, first_rank);
    /* No buffer holds more than PTRDIFF_MAX bytes: a larger count (a negative one converted to
     * size_t) would have the hash read past the buffer. A failure of this rank, joined as above. */
    if (bytes > (size_t)PTRDIFF_MAX || (uintptr_t)buf + bytes < (uintptr_t)buf)
        return check_replicas(ctx, NULL, 0,
                              status_set_error(DT_ERR_INVALID_ARG,
                                               "dt_check_replicas: bytes %zu is more than the buffer at %p can "
                                               "hold (at most PTRDIFF_MAX): pass the size of this rank's copy in "
                                               "bytes",
                                               bytes, buf),
                              differ, first_rank);
    if (!bytes || !backend_is_device_ptr(buf)) return check_replicas(ctx, buf, bytes, DT_OK, differ, first_rank);
    /* Device memory comes down first. Every rank joins the collective even when that failed, so
     * none waits for it; the failing rank reports its own cause. */
    void *host = malloc(bytes);
    const dt_status s = device_to_host("dt_check_replicas", host, buf, bytes);
    const dt_status c = check_replicas(ctx, host, bytes, s, differ, first_rank); /* s's message kept */
    free(host);
    return c;
}

dt_status dt_buffer_checksum(const void *buf, size_t bytes, dt_memory mem, uint64_t *sum)
{
    if (!sum || (!buf && bytes))
        return status_set_error(DT_ERR_INVALID_ARG, "dt_buffer_checksum: the buffer or sum is NULL");
    if (mem != DT_MEMORY_HOST && mem != DT_MEMORY_DEVICE)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "dt_buffer_checksum: memory kind %d must be DT_MEMORY_HOST or "
                                "DT_MEMORY_DEVICE",
                                (int)mem);
    /* As dt_check_replicas: no buffer holds more than PTRDIFF_MAX bytes, and the hash would read
     * past this one. */
    if (bytes > (size_t)PTRDIFF_MAX || (uintptr_t)buf + bytes < (uintptr_t)buf)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "dt_buffer_checksum: bytes %zu is more than the buffer at %p can hold (at most "
                                "PTRDIFF_MAX): pass its size in bytes (a negative size converted to size_t looks "
                                "like this)",
                                bytes, buf);
    if (bytes && backend_is_device_ptr(buf) != (mem == DT_MEMORY_DEVICE))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "dt_buffer_checksum: the buffer %p is %s memory but was given as %s", buf,
                                mem == DT_MEMORY_DEVICE ? "host" : "CUDA device",
                                mem == DT_MEMORY_DEVICE ? "DT_MEMORY_DEVICE" : "DT_MEMORY_HOST");
    if (mem == DT_MEMORY_HOST || !bytes) {
        *sum = fnv1a_buffer(buf, bytes);
        return DT_OK;
    }
    void *host = malloc(bytes);
    const dt_status s = device_to_host("dt_buffer_checksum", host, buf, bytes);
    if (!s) *sum = fnv1a_buffer(host, bytes);
    free(host);
    return s;
}
