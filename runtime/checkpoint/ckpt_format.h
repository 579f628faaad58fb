/*
 * ckpt_format.h - the on-disk layout of a checkpoint file, shared by its writer and its readers,
 * and the internal interfaces between the checkpoint files (docs/checkpoint-format.md describes
 * the layout for people).
 *
 * File DIR/ckpt-<step>.dtc, little-endian. Every version starts with the magic, the version and
 * the header's CRC, so a reader knows the layout from the first 16 bytes.
 *
 * Version 4 (written now): named sections.
 *   ckpt4_header  magic, version 4, header_crc, step, world (ranks of the job that wrote it),
 *                 nsections, table_crc (CRC of the section table)
 *   table         nsections ckpt4_entry: name (NUL-padded), bytes, CRC-32 of the bytes, ranks
 *                 (0: one blob; the world size: one blob per rank, rank r's at r * bytes/ranks)
 *   data          the sections' bytes in table order, back to back: the file is exactly
 *                 header + table + the sum of the sections' bytes.
 *   A dt_model checkpoint (dt_checkpoint_save) holds "dtrain.model" (ckpt4_model), "params"
 *   (nparams floats), "optim.m" and "optim.v" when the optimizer keeps them (SGD momentum or
 *   AdamW's first moment; AdamW's second), "scaler" (ckpt4_scaler) and "scaler.window" (a u32
 *   count, then that many overflow flags, oldest first) and "data" (ckpt4_data, then
 *   mean[channels] and std[channels]) when saved with them.
 *
 * Versions 1 to 3 (read only): a fixed layout.
 *   ckpt_header  magic, version, model fingerprint, parameter count, step, world size, optimizer
 *                kind and step counter, the float count and CRC-32 of each of the three sections;
 *                header_crc covers the header with header_crc = 0.
 *   ckpt_scaler  (version 2) the loss scaler's state, with its own CRC; present = 0 when the run
 *                had no scaler.
 *   ckpt_data    (version 3) the data position after the checkpoint's step (epoch, offset) and the
 *                normalization (kind, channels), then the per-channel mean and std (channels
 *                floats each), CRC over both with crc = 0; present = 0 when saved without it.
 *   section 0    the parameters (nparams floats)
 *   section 1    SGD momentum, or AdamW's first moment (0 floats when the optimizer keeps none)
 *   section 2    AdamW's second moment (0 floats otherwise)
 * A weights-only checkpoint (saved without an optimizer) has optim_kind CKPT_OPTIM_NONE and no
 * optimizer sections. Nothing in a file is trusted: the readers check every field against the
 * model, the optimizer, the file's name and size, and sane ranges before they allocate or copy.
 */
#ifndef DT_RUNTIME_CHECKPOINT_CKPT_FORMAT_H
#define DT_RUNTIME_CHECKPOINT_CKPT_FORMAT_H

#include "dtrain.h"

#include <stddef.h>
#include <stdint.h>

#define CKPT_MAGIC "DTCKPT1\n"
#define CKPT_VERSION 4u       /* what the writer writes; the readers take 1 to this */
#define CKPT_VERSION_FIXED 3u /* the last version of the fixed layout */
/* A version above CKPT_VERSION up to this is a newer dtrain's file (refused: ckpt_refuse_newer);
 * a larger number is no version dtrain will write soon, but damage (a flipped high bit), and the
 * file is skipped as damaged like any other. */
#define CKPT_VERSION_NEWER_MAX (CKPT_VERSION + 60u)
/* The most channels a data block may claim (as a dataset's classes bound). */
#define CKPT_MAX_CHANNELS (1u << 20)
/* optim_kind of a checkpoint saved without an optimizer (weights only). */
#define CKPT_OPTIM_NONE 0xFFFFFFFFu
/* The most ranks a header may claim: far above any job, far below anything that overflows. */
#define CKPT_MAX_WORLD (1u << 24)
/* The most digits of a step in a file name (steps stay below 10^18, so they fit a long). */
#define CKPT_MAX_STEP_DIGITS 18
#define CKPT_MAX_STEP 999999999999999999L
/* The longest checkpoint directory name: room under PATH_MAX (4096) for "/ckpt-<step>.dtc" and the
 * temporary file's ".tmp.<pid>" after it. */
#define CKPT_DIR_MAX 4000

/* ---------------------------------------------------------------- version 4 */

typedef struct ckpt4_header {
    char magic[8];
    uint32_t version, header_crc; /* crc of the header with header_crc = 0 */
    int64_t step;
    uint32_t world, nsections;
    uint32_t table_crc, reserved; /* crc of the nsections table entries; reserved 0 */
} ckpt4_header;

typedef struct ckpt4_entry {
    char name[DT_CKPT_NAME_MAX + 1]; /* 1 to DT_CKPT_NAME_MAX of [A-Za-z0-9._-], then NULs */
    uint64_t bytes;                  /* all ranks' together for a per-rank section */
    uint32_t crc, ranks;             /* crc32 of the bytes; 0, or the header's world */
    uint64_t reserved;               /* 0 */
} ckpt4_entry;

/* dt_model's sections. */
#define CKPT4_MODEL "dtrain.model"
#define CKPT4_PARAMS "params"
#define CKPT4_MOMENT1 "optim.m"
#define CKPT4_MOMENT2 "optim.v"
#define CKPT4_SCALER "scaler"
#define CKPT4_SCALER_WINDOW "scaler.window"
/* The most flags "scaler.window" may hold: --loss-scale-window's own limit. */
#define CKPT_MAX_SCALER_WINDOW (1 << 20)
#define CKPT4_DATA "data"
/* Names that start so are dtrain's own: dt_ckpt_add refuses them. */
#define CKPT4_RESERVED_PREFIX "dtrain."

typedef struct ckpt4_model {
    uint64_t fingerprint, nparams;
    uint32_t optim_kind; /* a dt_optim_kind, or CKPT_OPTIM_NONE */
    int32_t optim_t;     /* the optimizer's step counter */
    uint64_t reserved;   /* 0 */
} ckpt4_model;

typedef struct ckpt4_scaler {
    double scale;
    int32_t good_steps, hysteresis_left;
    int64_t updates, skipped;
} ckpt4_scaler;

/* Followed by mean[channels] and std[channels] (floats). */
typedef struct ckpt4_data {
    int64_t epoch, offset;
    uint32_t normalize, channels;
} ckpt4_data;

/* ---------------------------------------------------------------- versions 1 to 3 */

typedef struct ckpt_header {
    char magic[8];
    uint32_t version, header_crc; /* crc of the header with header_crc = 0 */
    uint64_t fingerprint, nparams;
    int64_t step;
    uint32_t world, optim_kind;
    int32_t optim_t, reserved;
    uint64_t section_n[3]; /* floats in each section */
    uint32_t section_crc[3], pad;
} ckpt_header;

/* Version 2: right after the header. */
typedef struct ckpt_scaler {
    uint32_t present, crc; /* crc of the block with crc = 0 */
    double scale;
    int32_t good_steps, hysteresis_left;
    int64_t updates, skipped;
} ckpt_scaler;

/* Version 3: right after the scaler block, followed by mean[channels] and std[channels]. */
typedef struct ckpt_data {
    uint32_t present, crc; /* crc of the block (crc = 0) and its floats */
    int64_t epoch, offset;
    uint32_t normalize, channels;
} ckpt_data;

/* ---------------------------------------------------------------- shared pieces (ckpt_format.c) */

/* CRC-32 (zlib) of any number of bytes; ckpt_crc_more continues a running one. */
uint32_t ckpt_crc(const void *p, size_t bytes);
uint32_t ckpt_crc_more(uint32_t crc, const void *p, size_t bytes);

/* The step a directory entry's name stands for: exactly the name the writer gives that step,
 * "ckpt-%010ld.dtc" (at least 10 digits, zero-padded, at most 18), and nothing else. Returns 1 and
 * sets *step, else 0. */
int ckpt_name_step(const char *name, long *step);

/* 1 when name is 1 to DT_CKPT_NAME_MAX characters of [A-Za-z0-9._-], else 0. */
int ckpt_name_valid(const char *name);

/* The directory's entries named like checkpoints, newest first; a missing directory holds none.
 * Free with ckpt_list_free. DT_ERR_IO when dir exists but cannot be read. */
typedef struct ckpt_entry {
    long step;
    char *name;
} ckpt_entry;
dt_status ckpt_list(const char *dir, ckpt_entry **out, size_t *count);
void ckpt_list_free(ckpt_entry *e, size_t n);

/* Opens path for reading without blocking (a FIFO named like a checkpoint cannot hang it) and
 * refuses anything but a regular file (DT_ERR_CORRUPT naming what it is); *size its bytes, *version
 * what its first 16 bytes say (0 when it is shorter or its magic is not dtrain's). A file this
 * user may not read is DT_ERR_INVALID_ARG (a search for the newest stops there), any other open
 * failure DT_ERR_IO. */
dt_status ckpt_open_regular(const char *path, int *fd, uint64_t *size, uint32_t *version);

/* The refusal of a file whose magic is dtrain's and whose version is above CKPT_VERSION (up to
 * CKPT_VERSION_NEWER_MAX): a newer
 * dtrain wrote it. DT_ERR_INVALID_ARG, not damage, so the readers of a directory stop there rather
 * than skip it: skipping would resume from an older file (or step 0) and, as the run goes on, write
 * over the newer file of the same step. The message names the version and the ways on. */
dt_status ckpt_refuse_newer(const char *path, uint32_t version);

/* Test hook: recomputes every CRC of the checkpoint image in buf (any version: header, blocks,
 * table, and each section the image holds in full), so tests and the fuzz harnesses can craft
 * files whose CRCs are valid and reach the checks behind them. Does nothing to an image too short
 * for a header. */
void ckpt_seal(void *buf, size_t len);

/* ---------------------------------------------------------------- one version-4 file (ckpt_file.c) */

/* Said while one rank reads or writes a checkpoint alone (rank 0 writing one while the others wait
 * for its verdict, or reading the newest at a resume): fn(arg) before every CKPT_IO_CHUNK bytes
 * (and before a write's fsync), so that the waiting ranks hear that it is alive (ctx_busy_beat)
 * and their deadline counts from its last word; a rank stuck in one read or write falls silent. */
typedef struct ckpt_beat {
    void (*fn)(void *arg);
    void *arg;
} ckpt_beat;
#define CKPT_IO_CHUNK ((size_t)64 << 20)

/* beat said, when there is one (NULL: nothing). */
void ckpt_beat_now(const ckpt_beat *beat);
/* DTRAIN_TEST_SLOW_CKPT=SECONDS, the test hook of a slow file system: each checkpoint write and
 * read takes that much longer, in 50 ms slices with beat said between them. */
void ckpt_test_slow(const ckpt_beat *beat);

/* A version-4 file open on this process, its header and table checked. */
typedef struct ckpt_file {
    int fd;
    const char *path; /* the caller's, which must outlive the handle */
    long step;
    int world;
    uint32_t n;
    ckpt4_entry *e;
    uint64_t *off; /* each section's offset in the file */
    uint64_t size;
    const ckpt_beat *beat; /* said between reads (NULL: nothing); the caller's */
} ckpt_file;

/* Takes fd (from ckpt_open_regular, size bytes; closed by ckpt_file_close, or here on failure) and
 * checks the header (CRC, version, step = name_step, world) and the table (CRC, every name valid
 * and unique, reserved fields 0, per-rank sections of the header's world, and the sections' sizes
 * adding up to the file's size exactly) before it allocates by any size the file gives; verify 1
 * also checks every section's CRC (streamed, 1 MiB at a time). DT_ERR_CORRUPT names the file, the
 * field and both values. */
dt_status ckpt_file_open_fd(int fd, uint64_t size, const char *path, long name_step, int verify, ckpt_file **out);
/* The index of section name, or -1. */
int ckpt_file_find(const ckpt_file *f, const char *name);
/* n bytes of section i from byte `at` of it into host memory dst. DT_ERR_CORRUPT/IO when the read
 * comes short (the file changed under us). */
dt_status ckpt_file_pread(const ckpt_file *f, uint32_t i, uint64_t at, void *dst, size_t n);
/* All of section i into dst, CRC checked (DT_ERR_CORRUPT naming the section on a mismatch). */
dt_status ckpt_file_read(const ckpt_file *f, uint32_t i, void *dst);
void ckpt_file_close(ckpt_file *f);
/* The names of f's (or any table's) sections for an error message: "a, b, c" (the first few, then
 * "and N more"). */
void ckpt_names_list(const ckpt4_entry *e, uint32_t n, char *buf, size_t len);

/* ---------------------------------------------------------------- the writer's internal adds (ckpt_writer.c) */

/* dt_ckpt_add without the copy and the check of the reserved prefix, for dtrain's own sections:
 * data (host memory; may be NULL on ranks other than 0) must stay unchanged until the commit or
 * discard. */
dt_status ckpt_writer_add_ref(dt_ckpt_writer *w, const char *name, const void *data, size_t bytes);
/* The same, taking buf (malloc'd) over: commit and discard free it. */
dt_status ckpt_writer_add_owned(dt_ckpt_writer *w, const char *name, void *buf, size_t bytes);
/* Marks w failed on this rank with s and the current error message: commit then writes nothing
 * and every rank returns that failure. Returns s. */
dt_status ckpt_writer_fail(dt_ckpt_writer *w, dt_status s);
int ckpt_writer_rank(const dt_ckpt_writer *w);

/* Rank 0's part of the commit (ckpt_write_file.c): writes DIR/ckpt-<step>.dtc atomically from the
 * table e (names, bytes and ranks filled; the CRCs are filled here) and each section's bytes
 * data[i], saying beat (NULL: nothing; ckpt_write_file.h) while it writes. DT_ERR_IO names the
 * file, the cause and the fix; the temporary file is then removed. */
dt_status ckpt_write_atomic(const char *dir, long step, int world, ckpt4_entry *e, uint32_t n, const void *const *data,
                            const ckpt_beat *beat);

/* ---------------------------------------------------------------- collectives (ckpt_coll.c) */

/* Every rank's verdict to every rank. mine: this rank's status (its message in dt_last_error()).
 * DT_OK when every rank passed DT_OK; else every rank fails: one that failed with its own status
 * and message, the others with the lowest failing rank's status and message ("rank R: ..."). With
 * ctx NULL or one rank, returns mine. */
dt_status ckpt_agree(dt_ctx *ctx, dt_status mine);
/* n bytes at host buf from rank 0 to every rank (dt_broadcast of DT_U8); nothing with ctx NULL, one rank or
 * n 0. */
dt_status ckpt_bcast_bytes(dt_ctx *ctx, void *buf, size_t n);

/* ---------------------------------------------------------------- dt_model's readers */

/* Reads and checks one checkpoint file (any version) into m, o (may be NULL: weights only) and sc
 * (may be NULL) on this process, without any collective: the reader behind
 * dt_checkpoint_load_latest. name_step is the step its file name says. Nothing in m, o or sc
 * changes unless DT_OK. DT_ERR_CORRUPT (or DT_ERR_IO): a damaged or crafted file, the caller may
 * try an older one; DT_ERR_INVALID_ARG: a sound file of another model or optimizer, one without
 * dt_model state (written with dt_ckpt_commit), or one of a newer format version (ckpt_refuse_newer). */
dt_status ckpt_read_file(const char *path, long name_step, dt_model *m, dt_optimizer *o, dt_scaler *sc, long *step,
                         int *world);
/* The same, and the data block into *data when not NULL (data->channels: the room in its mean
 * and std on entry; present 0 when the file has none), saying beat (NULL: nothing) while it
 * reads. A data block whose channels differ from that room is DT_ERR_INVALID_ARG (a checkpoint
 * of other data). */
dt_status ckpt_read_file_data(const char *path, long name_step, dt_model *m, dt_optimizer *o, dt_scaler *sc,
                              dt_ckpt_data *data, long *step, int *world, const ckpt_beat *beat);

/* What a file holds for dt_model, read and checked by either reader before anything is applied. */
typedef struct ckpt_state {
    float *sec[3]; /* parameters, moment 1, moment 2 (malloc'd; NULL when absent or not read) */
    size_t n[3];   /* floats in each */
    int optim_t;
    int has_scaler;
    dt_scaler_state scaler;
    unsigned char *window; /* the scaler's recent overflow flags, oldest first (malloc'd; NULL: none) */
    int window_n;
    int has_data; /* the data block: */
    long epoch, offset;
    int normalize, channels;
    float *figures; /* mean[channels] then std[channels] (malloc'd) */
    long step;
    int world;
} ckpt_state;

/* Shared checks (ckpt_apply.c). label names the section in messages ("section 0", "section
 * \"params\""). */
/* The optimizer kind and step counter and the moment counts (floats) for np parameters, against
 * what each kind keeps (DT_ERR_CORRUPT) and, when o is not NULL, against o (DT_ERR_INVALID_ARG).
 * fields names where kind and t were found ("header field"). */
dt_status ckpt_check_optim(const char *path, const char *fields, const char *label1, const char *label2, uint32_t kind,
                           int32_t t, uint64_t n1, uint64_t n2, size_t np, const dt_optimizer *o);
dt_status ckpt_check_scaler(const char *path, double scale, int32_t good_steps, int32_t hysteresis_left,
                            int64_t updates, int64_t skipped);
/* Finite values (and >= 0 when nonneg: AdamW's second moment). */
dt_status ckpt_check_values(const char *path, const char *label, const float *v, size_t n, int nonneg);
/* The data block's fields and figures (2 x channels). */
dt_status ckpt_check_data(const char *path, int64_t epoch, int64_t offset, uint32_t normalize, uint32_t channels,
                          const float *figures);
/* Copies st into m, o, sc and data (the file at path passed every check). */
dt_status ckpt_apply(const char *path, const ckpt_state *st, dt_model *m, dt_optimizer *o, dt_scaler *sc,
                     dt_ckpt_data *data);
void ckpt_state_free(ckpt_state *st);

/* The version-4 reader behind ckpt_read_file_data (ckpt_read4.c): fd as ckpt_file_open_fd takes it. */
dt_status ckpt_read4_state(int fd, uint64_t size, const char *path, long name_step, const dt_model *m,
                           const dt_optimizer *o, const dt_ckpt_data *data, ckpt_state *st, const ckpt_beat *beat);

#endif
