/*
 * ckpt_writer.c - the one checkpoint writer (dt_ckpt_begin / _add / _add_per_rank / _commit /
 * _discard in include/dtrain/checkpoint.h): users' sections and dt_model's alike.
 *
 * Adding is local: a section's name and size are checked (the same verdict on every rank, since
 * every rank adds the same sections) and its bytes are copied where they will be needed - rank 0's
 * for a plain section, every rank's own blob for a per-rank one. The commit is the one collective:
 * every rank's sections, dir and step are compared with rank 0's, the per-rank blobs are gathered
 * to rank 0, rank 0 writes the file (ckpt_write_file.c), and every step's outcome reaches every
 * rank through ckpt_agree, so all go on or all report the same failure.
 */
#include "runtime/checkpoint/ckpt_format.h"
#include "runtime/checkpoint/ckpt_write_file.h"
#include "collectives/ctx_comm.h"
#include "kernels/backend.h"
#include "base/status.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct wsec {
    char name[DT_CKPT_NAME_MAX + 1];
    size_t bytes; /* a per-rank section: one rank's blob */
    int per_rank;
    const void *data; /* host bytes to write (rank 0), or this rank's blob (per-rank); NULL elsewhere */
    void *owned;      /* freed with the writer */
} wsec;

struct dt_ckpt_writer {
    dt_ctx *ctx;
    int rank, world;
    long step;
    char *dir;
    wsec *s;
    uint32_t n, cap;
    uint64_t total;   /* the file's bytes so far */
    dt_status failed; /* a failure of this rank's data, reported by the commit */
    char *fail_msg;
};

dt_status dt_ckpt_begin(dt_ctx *ctx, const char *dir, long step, dt_ckpt_writer **out)
{
    if (!out) return status_set_error(DT_ERR_INVALID_ARG, "dt_ckpt_begin: out is NULL");
    *out = NULL;
    if (!dir || !*dir) return status_set_error(DT_ERR_INVALID_ARG, "dt_ckpt_begin: no checkpoint directory given");
    if (strlen(dir) > CKPT_DIR_MAX)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "dt_ckpt_begin: checkpoint directory name is too long (%zu "
                                "characters; at most %d)",
                                strlen(dir), CKPT_DIR_MAX);
    if (step < 0 || step > CKPT_MAX_STEP)
        return status_set_error(DT_ERR_INVALID_ARG, "dt_ckpt_begin: step %ld must be 0 to 10^18-1", step);
    dt_ckpt_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->dir = strdup(dir))) {
        free(w);
        return status_set_error(DT_ERR_NOMEM, "dt_ckpt_begin: out of memory");
    }
    w->ctx = ctx;
    ctx_hold(ctx, CTX_HELD_CKPT_WRITER); /* dt_finalize refuses while the writer lives */
    w->rank = ctx ? dt_rank(ctx) : 0;
    w->world = ctx ? dt_world_size(ctx) : 1;
    w->step = step;
    w->total = sizeof(ckpt4_header);
    *out = w;
    return DT_OK;
}

int ckpt_writer_rank(const dt_ckpt_writer *w) { return w->rank; }

dt_status ckpt_writer_fail(dt_ckpt_writer *w, dt_status s)
{
    if (!w->failed) {
        w->failed = s;
        w->fail_msg = strdup(dt_last_error());
    }
    return s;
}

/* The argument checks, the same on every rank: nothing here depends on a rank's data. */
static dt_status check_name(const dt_ckpt_writer *w, const char *fn, const char *name, size_t bytes, int per_rank,
                            int user)
{
    if (!w) return status_set_error(DT_ERR_INVALID_ARG, "%s: the writer is NULL", fn);
    if (!name) return status_set_error(DT_ERR_INVALID_ARG, "%s: the section name is NULL", fn);
    const size_t len = strlen(name);
    if (len == 0) return status_set_error(DT_ERR_INVALID_ARG, "%s: the section name is empty", fn);
    if (len > DT_CKPT_NAME_MAX)
        return status_set_error(DT_ERR_INVALID_ARG, "%s: section name \"%.*s...\" is %zu bytes; at most %d", fn, 32,
                                name, len, DT_CKPT_NAME_MAX);
    if (!ckpt_name_valid(name)) {
        size_t at = strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-");
        return status_set_error(DT_ERR_INVALID_ARG,
                                "%s: section name \"%s\" has character 0x%02x at byte %zu; names "
                                "are made of [A-Za-z0-9._-]",
                                fn, name, (unsigned char)name[at], at);
    }
    if (user && strncmp(name, CKPT4_RESERVED_PREFIX, strlen(CKPT4_RESERVED_PREFIX)) == 0)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "%s: section name \"%s\" starts with \"%s\", which dtrain keeps for "
                                "its own sections: choose another name",
                                fn, name, CKPT4_RESERVED_PREFIX);
    for (uint32_t i = 0; i < w->n; i++)
        if (strcmp(w->s[i].name, name) == 0)
            return status_set_error(DT_ERR_INVALID_ARG,
                                    "%s: section \"%s\" was already added to the checkpoint of step "
                                    "%ld: names are unique in a checkpoint",
                                    fn, name, w->step);
    if (w->n >= DT_CKPT_MAX_SECTIONS)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "%s: the checkpoint of step %ld already holds %d sections, the most "
                                "a file may hold (section \"%s\"): put small pieces together in one section",
                                fn, w->step, DT_CKPT_MAX_SECTIONS, name);
    if (per_rank && bytes > DT_CKPT_PER_RANK_MAX)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "%s: per-rank section \"%s\" of %zu bytes is larger than %zu: "
                                "per-rank sections are for small state; save large state as a plain section",
                                fn, name, bytes, DT_CKPT_PER_RANK_MAX);
    const uint64_t file_bytes = per_rank ? (uint64_t)bytes * (uint64_t)w->world : (uint64_t)bytes;
    if (file_bytes > ((uint64_t)1 << 62) - w->total - sizeof(ckpt4_entry))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "%s: section \"%s\" of %zu bytes would make the checkpoint larger "
                                "than 2^62 bytes",
                                fn, name, bytes);
    return DT_OK;
}

enum { ADD_COPY, ADD_REF, ADD_OWNED };

static dt_status add(dt_ckpt_writer *w, const char *fn, const char *name, const void *data, size_t bytes, int per_rank,
                     int mode)
{
    dt_status s = check_name(w, fn, name, bytes, per_rank, mode == ADD_COPY);
    if (s) {
        if (mode == ADD_OWNED) free((void *)data);
        return s;
    }
    if (w->n == w->cap) {
        uint32_t ncap = w->cap ? 2 * w->cap : 16;
        wsec *ns = realloc(w->s, ncap * sizeof *ns);
        if (!ns) {
            if (mode == ADD_OWNED) free((void *)data);
            return ckpt_writer_fail(
                w, status_set_error(DT_ERR_NOMEM, "%s: out of memory adding section \"%s\"", fn, name));
        }
        w->s = ns;
        w->cap = ncap;
    }
    /* Recorded whatever happens next, so every rank's list stays the same and the commit reports
     * this rank's data failure rather than a list that differs. */
    wsec *x = &w->s[w->n++];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s", name);
    x->bytes = bytes;
    x->per_rank = per_rank;
    w->total += sizeof(ckpt4_entry) + (per_rank ? (uint64_t)bytes * (uint64_t)w->world : bytes);
    if (mode == ADD_OWNED) {
        x->owned = (void *)data;
        x->data = data;
        return DT_OK;
    }
    const int needed = per_rank || w->rank == 0; /* whose bytes reach the file */
    if (!needed || bytes == 0) return DT_OK;
    if (!data)
        return ckpt_writer_fail(w, status_set_error(DT_ERR_INVALID_ARG,
                                                    "%s: section \"%s\" of %zu bytes has no data "
                                                    "(NULL) on rank %d",
                                                    fn, name, bytes, w->rank));
    if (mode == ADD_REF) {
        x->data = data;
        return DT_OK;
    }
    if (!(x->owned = malloc(bytes)))
        return ckpt_writer_fail(w, status_set_error(DT_ERR_NOMEM,
                                                    "%s: out of host memory copying section \"%s\" "
                                                    "(%.1f MiB) on rank %d",
                                                    fn, name, (double)bytes / 1048576.0, w->rank));
    if (backend_is_device_ptr(data)) {
        backend *be = NULL;
        if ((s = backend_for_memory(DT_MEMORY_DEVICE, &be)) || (s = be->ops->to_host(be, x->owned, data, bytes)))
            return ckpt_writer_fail(w, s);
    } else {
        memcpy(x->owned, data, bytes);
    }
    x->data = x->owned;
    return DT_OK;
}

dt_status dt_ckpt_add(dt_ckpt_writer *w, const char *name, const void *data, size_t bytes)
{
    return add(w, "dt_ckpt_add", name, data, bytes, 0, ADD_COPY);
}

dt_status dt_ckpt_add_per_rank(dt_ckpt_writer *w, const char *name, const void *data, size_t bytes)
{
    return add(w, "dt_ckpt_add_per_rank", name, data, bytes, 1, ADD_COPY);
}

dt_status ckpt_writer_add_ref(dt_ckpt_writer *w, const char *name, const void *data, size_t bytes)
{
    return add(w, "checkpoint", name, data, bytes, 0, ADD_REF);
}

dt_status ckpt_writer_add_owned(dt_ckpt_writer *w, const char *name, void *buf, size_t bytes)
{
    return add(w, "checkpoint", name, buf, bytes, 0, ADD_OWNED);
}

void dt_ckpt_discard(dt_ckpt_writer *w)
{
    if (!w) return;
    for (uint32_t i = 0; i < w->n; i++) free(w->s[i].owned);
    free(w->s);
    free(w->dir);
    free(w->fail_msg);
    ctx_unhold(w->ctx, CTX_HELD_CKPT_WRITER);
    free(w);
}

/* What every rank must agree on, as rank 0 broadcasts it: the step, the dir and the list. */
typedef struct list_key {
    int64_t step;
    uint32_t n, crc; /* crc of the dir and of each (name, bytes, per_rank) */
} list_key;

typedef struct list_item {
    char name[DT_CKPT_NAME_MAX + 1];
    uint64_t bytes, per_rank;
} list_item;

static void item_of(const wsec *x, list_item *it)
{
    memset(it, 0, sizeof *it);
    memcpy(it->name, x->name, sizeof it->name);
    it->bytes = x->bytes;
    it->per_rank = (uint64_t)x->per_rank;
}

static list_key key_of(const dt_ckpt_writer *w)
{
    list_key k = {.step = w->step, .n = w->n};
    uint32_t c = ckpt_crc(w->dir, strlen(w->dir) + 1);
    for (uint32_t i = 0; i < w->n; i++) {
        list_item it;
        item_of(&w->s[i], &it);
        c = ckpt_crc_more(c, &it, sizeof it);
    }
    k.crc = c;
    return k;
}

/* This rank's difference from rank 0's list (ours), as an error; rank 0's items in theirs. */
static dt_status describe_difference(const dt_ckpt_writer *w, const list_key *k0, const list_item *theirs)
{
    if (k0->step != w->step)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "dt_ckpt_commit: rank %d commits step %ld, rank 0 step %lld: every "
                                "rank commits the same step",
                                w->rank, w->step, (long long)k0->step);
    for (uint32_t i = 0; i < w->n && i < k0->n; i++) {
        list_item it;
        item_of(&w->s[i], &it);
        if (memcmp(&it, &theirs[i], sizeof it) != 0)
            return status_set_error(DT_ERR_INVALID_ARG,
                                    "dt_ckpt_commit: section %u is \"%s\" (%llu bytes%s) on rank %d "
                                    "but \"%s\" (%llu bytes%s) on rank 0: every rank adds the same sections, with the "
                                    "same sizes, in the same order",
                                    i, it.name, (unsigned long long)it.bytes, it.per_rank ? ", per rank" : "", w->rank,
                                    theirs[i].name, (unsigned long long)theirs[i].bytes,
                                    theirs[i].per_rank ? ", per rank" : "");
    }
    if (w->n != k0->n)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "dt_ckpt_commit: rank %d added %u sections, rank 0 %u (the first %u "
                                "alike; the next is \"%s\" on rank %d): every rank adds the same sections",
                                w->rank, w->n, k0->n, w->n < k0->n ? w->n : k0->n,
                                w->n < k0->n ? theirs[w->n].name : w->s[k0->n].name, w->n < k0->n ? 0 : w->rank);
    return status_set_error(DT_ERR_INVALID_ARG,
                            "dt_ckpt_commit: rank %d writes to checkpoint directory %s, which is "
                            "not rank 0's: every rank passes the same dir to dt_ckpt_begin",
                            w->rank, w->dir);
}

/* Every rank's list against rank 0's; the failure of one (its data, or a list that differs) to all. */
static dt_status agree_on_list(dt_ckpt_writer *w)
{
    dt_status mine = DT_OK;
    if (w->failed) mine = status_set_error(w->failed, "%s", w->fail_msg ? w->fail_msg : "out of memory");
    if (w->world <= 1) return mine;
    list_key k0 = key_of(w), me = k0;
    dt_status c;
    if ((c = ckpt_bcast_bytes(w->ctx, &k0, sizeof k0))) return c;
    float differ = memcmp(&k0, &me, sizeof me) != 0 ? 1.0f : 0.0f;
    if ((c = dt_allreduce(w->ctx, &differ, 1, DT_F32, DT_SUM))) return c;
    if (differ > 0) {
        /* Rank 0's list to all, so the rank that differs can say where. */
        list_item *theirs = calloc(k0.n ? k0.n : 1, sizeof *theirs);
        if (!theirs) return status_set_error(DT_ERR_NOMEM, "dt_ckpt_commit: out of memory comparing section lists");
        if (w->rank == 0)
            for (uint32_t i = 0; i < w->n; i++) item_of(&w->s[i], &theirs[i]);
        c = ckpt_bcast_bytes(w->ctx, theirs, (size_t)k0.n * sizeof *theirs);
        if (!c && !mine && memcmp(&k0, &me, sizeof me) != 0) mine = describe_difference(w, &k0, theirs);
        free(theirs);
        if (c) return c;
    }
    return ckpt_agree(w->ctx, mine);
}

/* The per-rank blobs to rank 0 (every rank arrives here after agree_on_list). With one rank the
 * blob is the section. */
static dt_status gather_per_rank(dt_ckpt_writer *w)
{
    if (w->world <= 1) return DT_OK;
    dt_status s = DT_OK;
    if (w->rank == 0)
        for (uint32_t i = 0; i < w->n && !s; i++) {
            wsec *x = &w->s[i];
            if (!x->per_rank || x->bytes == 0) continue;
            void *all = malloc(x->bytes * (size_t)w->world);
            if (!all) {
                s = status_set_error(DT_ERR_NOMEM,
                                     "dt_ckpt_commit: out of host memory gathering per-rank section "
                                     "\"%s\" (%.1f MiB)",
                                     x->name, (double)x->bytes * w->world / 1048576.0);
                break;
            }
            memcpy(all, x->data, x->bytes); /* rank 0's blob in its place: MPI_IN_PLACE below */
            free(x->owned);
            x->owned = all;
            x->data = all;
        }
    if ((s = ckpt_agree(w->ctx, s))) return s;
    for (uint32_t i = 0; i < w->n && !s; i++) {
        wsec *x = &w->s[i];
        if (!x->per_rank || x->bytes == 0) continue;
        int rc = MPI_Gather(w->rank == 0 ? MPI_IN_PLACE : x->data, (int)x->bytes, MPI_BYTE, x->owned, (int)x->bytes,
                            MPI_BYTE, 0, ctx_world_comm(w->ctx));
        if (rc != MPI_SUCCESS)
            s = status_set_error(DT_ERR_MPI,
                                 "dt_ckpt_commit: MPI_Gather of per-rank section \"%s\" failed (a peer may "
                                 "have died)",
                                 x->name);
    }
    return ckpt_agree(w->ctx, s);
}

dt_status dt_ckpt_commit(dt_ckpt_writer *w)
{
    if (!w) return status_set_error(DT_ERR_INVALID_ARG, "dt_ckpt_commit: the writer is NULL");
    /* Each step ends in an agreement, so every rank either goes on to the next or returns the same
     * failure: none is left waiting in a collective the others skipped. */
    dt_status s = agree_on_list(w);
    if (!s) s = gather_per_rank(w);
    if (s) {
        dt_ckpt_discard(w);
        return s;
    }
    if (w->rank == 0) {
        ckpt4_entry *e = calloc(w->n ? w->n : 1, sizeof *e);
        const void **data = calloc(w->n ? w->n : 1, sizeof *data);
        if (!e || !data) {
            s = status_set_error(DT_ERR_NOMEM, "dt_ckpt_commit: out of memory");
        } else {
            for (uint32_t i = 0; i < w->n; i++) {
                memcpy(e[i].name, w->s[i].name, sizeof e[i].name);
                e[i].bytes = w->s[i].per_rank ? (uint64_t)w->s[i].bytes * (uint64_t)w->world : w->s[i].bytes;
                e[i].ranks = w->s[i].per_rank ? (uint32_t)w->world : 0;
                data[i] = w->s[i].data;
            }
            /* The other ranks wait for this write's verdict: they hear that rank 0 is alive. */
            const ckpt_beat beat = {ctx_busy_beat, w->ctx};
            s = ckpt_write_atomic(w->dir, w->step, w->world, e, w->n, data, &beat);
        }
        free(e);
        free(data);
    }
    /* The write's outcome to every rank. */
    s = ckpt_agree(w->ctx, s);
    dt_ckpt_discard(w);
    return s;
}
