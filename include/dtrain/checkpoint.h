/**
 * @file
 * @brief Part of the public API: checkpoints of named sections of any state (a user's
 * own training loop), and of a dt_model with its optimizer, scaler and data block.
 * Include `<dtrain.h>`, which includes every part in order after the types they share; this file
 * is not meant to be included on its own.
 */
#ifndef DTRAIN_CHECKPOINT_H
#define DTRAIN_CHECKPOINT_H

#if !defined(DTRAIN_H) && !defined(DTRAIN_DOXYGEN) /* DTRAIN_DOXYGEN: docs/Doxyfile.in */
#error "include <dtrain.h>, which includes dtrain/checkpoint.h"
#else /* the rest only under <dtrain.h>: one error, not a cascade after it */

/** @defgroup checkpoint Checkpoint
 * Named sections of any state, and a dt_model with its optimizer, scaler and data block, written
 * atomically by one writer in one format (docs/library.md, "Checkpoints"; the bytes:
 * docs/checkpoint-format.md). */

/** @defgroup ckpt_sections Checkpoints of named sections
 * @ingroup checkpoint
 * Any state of a user's own loop, by name: rank 0 writes and reads, the other ranks take part by
 * broadcast.
 * @{ */

/** The longest section name: 1 to DT_CKPT_NAME_MAX bytes of [A-Za-z0-9._-]. */
#define DT_CKPT_NAME_MAX 63
/** The most sections one checkpoint may hold. */
#define DT_CKPT_MAX_SECTIONS 65536
/** The largest blob one rank may add to a per-rank section (64 MiB, a size_t): per-rank sections
 *  are for small state such as an RNG or a data position. C++ gets a static_cast so that programs
 *  built with -Wold-style-cast -Werror can use it; the value and type are the same. */
#ifdef __cplusplus
#define DT_CKPT_PER_RANK_MAX (static_cast<size_t>(64) << 20)
#else
#define DT_CKPT_PER_RANK_MAX ((size_t)64 << 20)
#endif

/** A checkpoint being written: from dt_ckpt_begin to dt_ckpt_commit or dt_ckpt_discard. */
typedef struct dt_ckpt_writer dt_ckpt_writer;

/** Starts checkpoint `step` of directory dir (the file dir/ckpt-STEP.dtc, written at the commit;
 *  dir is created then if missing, its parent must exist). Local: no collective, no file touched.
 *  Call it on every rank with the same dir and step (the commit checks that).
 *  @param ctx  the context (NULL: a single process)
 *  @param dir  the directory; copied
 *  @param step 0 to 10^18-1
 *  @param out  receives the writer, which the caller owns until dt_ckpt_commit or dt_ckpt_discard
 *  @return DT_OK; DT_ERR_INVALID_ARG for a NULL or empty dir or out, a step out of range or a dir
 *          name too long for a path; DT_ERR_NOMEM. */
DT_API dt_status dt_ckpt_begin(dt_ctx *ctx, const char *dir, long step, dt_ckpt_writer **out);

/** Adds section `name` of `bytes` bytes. Every rank adds the same sections (names and sizes, in
 *  the same order); the bytes written are rank 0's: data is read on rank 0 only, other ranks may
 *  pass NULL. On rank 0 data is host memory or, in a CUDA build, device memory (told apart by the
 *  CUDA runtime; no flag to get wrong), copied at this call: the caller may change or free its
 *  buffer as soon as it returns.
 *  @param w    the writer of dt_ckpt_begin()
 *  @param name 1 to DT_CKPT_NAME_MAX bytes of [A-Za-z0-9._-], unique in the checkpoint, not
 *              starting with "dtrain." (dtrain's own sections)
 *  @param data the bytes (NULL allowed when bytes is 0, and on ranks other than 0)
 *  @param bytes 0 or more
 *  @return DT_OK; DT_ERR_INVALID_ARG naming the name for a NULL writer or name, a name too long,
 *          empty, with a character outside the set, reserved or already added, more than
 *          DT_CKPT_MAX_SECTIONS sections, or a checkpoint past 2^62 bytes; these leave the writer
 *          as it was (fix the call and go on). Failures of this rank's data - NULL data on rank
 *          0, DT_ERR_NOMEM, DT_ERR_DEVICE for a failed device copy - are returned too and make the
 *          commit fail on every rank. */
DT_API dt_status dt_ckpt_add(dt_ckpt_writer *w, const char *name, const void *data, size_t bytes);

/** Adds per-rank section `name`: every rank's own `bytes` bytes (its RNG state, say), host or
 *  device memory, copied at this call. Every rank passes the same name and bytes; the file holds
 *  world * bytes, rank r's blob at r * bytes, read back with dt_ckpt_read_rank.
 *  @param w    the writer of dt_ckpt_begin()
 *  @param name as for dt_ckpt_add()
 *  @param data this rank's bytes (host or device memory)
 *  @param bytes 0 to DT_CKPT_PER_RANK_MAX
 *  @return as dt_ckpt_add; DT_ERR_INVALID_ARG also for bytes over DT_CKPT_PER_RANK_MAX, and NULL
 *          data with bytes > 0 on any rank fails the commit on every rank. */
DT_API dt_status dt_ckpt_add_per_rank(dt_ckpt_writer *w, const char *name, const void *data, size_t bytes);

/** Writes the checkpoint and frees w, whatever the outcome. Collective: every rank calls it.
 *  First every rank's sections, dir and step are compared with rank 0's; then the per-rank
 *  sections are gathered; then rank 0 writes the temporary file, fsyncs it, renames it into place
 *  and fsyncs the directory. An existing file of the same step is replaced.
 *  @return DT_OK on every rank, or the same failure on every rank: DT_ERR_INVALID_ARG when a rank's
 *          sections, dir or step differ from rank 0's (naming the rank and both lists) or
 *          w is NULL (that rank only: pass the writer); DT_ERR_IO naming the file and the cause
 *          (full disk, quota, file-size limit, a directory that cannot be made) with its fix, and
 *          the temporary file removed; an earlier data failure of dt_ckpt_add (DT_ERR_NOMEM,
 *          DT_ERR_DEVICE, DT_ERR_INVALID_ARG) on any rank; DT_ERR_MPI or DT_ERR_TIMEOUT from the
 *          collectives. Ranks other than the one that failed say "rank R: " and its message. */
DT_API dt_status dt_ckpt_commit(dt_ckpt_writer *w);

/** Frees w and what it copied without writing anything. Local: to drop a checkpoint call it on
 *  every rank in place of dt_ckpt_commit (a rank left in the commit would wait for the others until
 *  the collective timeout, DTRAIN_TIMEOUT). NULL is ignored. */
DT_API void dt_ckpt_discard(dt_ckpt_writer *w);

/** An open checkpoint: its table of sections on every rank, the file on rank 0. */
typedef struct dt_ckpt_reader dt_ckpt_reader;

/** Opens the newest checkpoint of dir whose header, table and every section pass their checks
 *  and CRCs; damaged or crafted files are skipped for older ones, each with a warning naming the
 *  file and the reason, and so are files of format versions 1 to 3 (dt_model checkpoints of an
 *  older dtrain, which dt_checkpoint_load_latest reads). A file of a newer format version (a newer
 *  dtrain's), or one this user may not read, is not skipped but refused, so nothing older is taken
 *  in its place (a later save of that step would overwrite it). Collective: rank 0
 *  reads the directory and picks; every rank gets the same checkpoint's table.
 *  @param ctx  the context (NULL: a single process)
 *  @param dir  the directory
 *  @param out  receives the reader (the caller owns it: dt_ckpt_close), or NULL when dir holds no
 *              sound checkpoint or does not exist
 *  @param step receives the checkpoint's step, 0 when none (a checkpoint of step 0 also gives 0:
 *              test *out)
 *  @return DT_OK (also when there is none); DT_ERR_INVALID_ARG for NULL or empty dir, out or step,
 *          or a file of a newer format version (naming its version) or one this user may not read
 *          (naming it) met before a sound one;
 *          DT_ERR_IO when dir exists but cannot be read; DT_ERR_NOMEM; on every rank alike. */
DT_API dt_status dt_ckpt_open_latest(dt_ctx *ctx, const char *dir, dt_ckpt_reader **out, long *step);

/** The number of sections of r (0 for NULL). Local. */
DT_API int dt_ckpt_num_sections(const dt_ckpt_reader *r);
/** The name of section i, 0 <= i < dt_ckpt_num_sections(r), in the order they were added; NULL
 *  for another i or a NULL r. The string belongs to r. Local. */
DT_API const char *dt_ckpt_section_name(const dt_ckpt_reader *r, int i);
/** The path of the open checkpoint (belongs to r; NULL for a NULL r). Local. */
DT_API const char *dt_ckpt_path(const dt_ckpt_reader *r);
/** The number of ranks of the job that wrote it (0 for a NULL r). Local. */
DT_API int dt_ckpt_saved_world(const dt_ckpt_reader *r);

/** The size in bytes of section name into *bytes (for a per-rank section: all ranks' blobs
 *  together). Local.
 *  @return DT_OK; DT_ERR_INVALID_ARG for NULL arguments, or naming the name and listing the
 *          sections the file has when it holds none of that name (*bytes then 0). */
DT_API dt_status dt_ckpt_section_size(const dt_ckpt_reader *r, const char *name, size_t *bytes);

/** Reads section name into dst (host memory, or device memory in a CUDA build) on every rank.
 *  Collective: every rank reads the same sections in the same order. Rank 0 reads the file and
 *  checks the section's CRC again (the file may have changed since it was opened); the bytes reach
 *  the other ranks by broadcast, 64 MiB at a time. A per-rank section reads whole: every rank gets
 *  all ranks' blobs.
 *  @param r    the reader of dt_ckpt_open_latest()
 *  @param name the section
 *  @param dst  receives the bytes (host memory, or device memory in a CUDA build)
 *  @param bytes must equal the section's size
 *  @return DT_OK on every rank, or on every rank: DT_ERR_INVALID_ARG naming the name for a missing
 *          section (listing those the file has), a size other than the section's (naming both),
 *          a NULL name or dst (a NULL r fails on that rank only, as there is no context to
 *          reach the others), or a rank that asked for another section or size than rank 0;
 *          DT_ERR_CORRUPT or DT_ERR_IO when the file fails its CRC or cannot be read now;
 *          DT_ERR_NOMEM; DT_ERR_DEVICE. On a failure dst's contents are unspecified. */
DT_API dt_status dt_ckpt_read(dt_ckpt_reader *r, const char *name, void *dst, size_t bytes);

/** Reads this rank's blob of per-rank section name into dst (host or device memory). Collective,
 *  like dt_ckpt_read; rank 0 checks the whole section's CRC before any rank's dst is written.
 *  @param r    the reader of dt_ckpt_open_latest()
 *  @param name the per-rank section
 *  @param dst  receives this rank's blob
 *  @param bytes must equal one rank's blob (the section's size divided by dt_ckpt_saved_world)
 *  @return as dt_ckpt_read; DT_ERR_INVALID_ARG also for a section that is not per-rank, and for a
 *          job whose rank count is not the one that wrote it (a blob per rank cannot be split or
 *          merged: read all of them with dt_ckpt_read and decide). */
DT_API dt_status dt_ckpt_read_rank(dt_ckpt_reader *r, const char *name, void *dst, size_t bytes);

/** Closes r and frees it (NULL is ignored). Local. */
DT_API void dt_ckpt_close(dt_ckpt_reader *r);

/** @} */

/** @defgroup ckpt_model Checkpoints of a model
 * @ingroup checkpoint
 * A dt_model with its optimizer, loss scaler and data block (format version 4; versions 1 to 3 are
 * read too).
 * @{ */

/** What a checkpoint keeps about the data, so a resumed run and `dtrain eval` use what training
 * used: the data position after the checkpoint's step (dt_dataset_position's epoch and offset:
 * a run resumed on another rank count continues mid-epoch from it) and the normalization (a
 * dt_normalize, and for DT_NORMALIZE_STANDARD the per-channel mean and std). */
typedef struct dt_ckpt_data {
    int present;   /**< load: 1 when the checkpoint held this block (saved by dtrain 0.1 wave 2 on) */
    long epoch;    /**< the data position's epoch after the checkpoint's step */
    long offset;   /**< the data position's offset in that epoch */
    int normalize; /**< a dt_normalize; load: -1 for DT_NORMALIZE_STANDARD saved without figures,
                        where the caller's own statistics stand (mean and std untouched) */
    int channels;  /**< save: entries in mean and std (no figures are saved when it is 0 or either
                        buffer is NULL); load: their room */
    float *mean;   /**< the caller's buffer of channels per-channel means */
    float *std;    /**< the caller's buffer of channels per-channel standard deviations */
} dt_ckpt_data;

/** Writes the checkpoint of `step` of model m and what goes with it; rank 0 writes, every rank
 * holds the same state. Collective.
 * @param ctx  the context (NULL: a single process)
 * @param dir  the directory (created if missing; its parent must exist)
 * @param m    the model: its parameters
 * @param o    its optimizer's state, or NULL for the weights only (enough for inference and
 *             evaluation; such a checkpoint cannot resume an optimizer)
 * @param sc   the loss scaler, whose state (scale, good-step run, hysteresis, counts, and the
 *             window of recent overflows that max_overflow_fraction judges) is saved so that a
 *             resumed fp16 run scales, and gives up, exactly as the uninterrupted one would;
 *             NULL: none
 * @param data the data block (position and normalization), or NULL: none
 * @param step 0 to 10^18-1
 * @return DT_OK on every rank, or on every rank: DT_ERR_IO naming the cause (full disk, quota,
 *         file-size limit) and the fix, the temporary file removed; DT_ERR_INVALID_ARG for a NULL
 *         model or dir, a step out of range or a data block out of range (a mean that is not
 *         finite, a std that is not finite and >= 0 included); DT_ERR_NUMERIC naming the first
 *         parameter or optimizer value that is not finite (or a negative AdamW second moment):
 *         the readers refuse such a file, so none is written; DT_ERR_NOMEM; DT_ERR_DEVICE;
 *         DT_ERR_MPI or DT_ERR_TIMEOUT from the collectives. A refusal leaves no file behind. */
DT_API dt_status dt_checkpoint_save(dt_ctx *ctx, const char *dir, const dt_model *m, const dt_optimizer *o,
                                    const dt_scaler *sc, const dt_ckpt_data *data, long step);

/** Loads the newest checkpoint in dir that passes every check into m (and o, sc, data where not
 * NULL) and sets *step to its step; damaged or crafted files are skipped for an older one with a
 * warning naming the file, the field and both values. Collective.
 * @param ctx  the context (NULL: a single process)
 * @param dir  the directory
 * @param m    receives the parameters
 * @param o    receives the optimizer state, or NULL to load the weights only (of a full or a
 *             weights-only checkpoint); a weights-only checkpoint with o non-NULL is refused
 * @param sc   receives the loss scaler's state, or NULL. A checkpoint without scaler state (or with
 *             sound state out of range for this run's settings, e.g. another growth interval)
 *             leaves sc at its initial state with a warning; damaged scaler state (a NaN scale,
 *             negative counts) makes the file damaged (an older one is tried)
 * @param data receives the data block on every rank, or NULL: present 0 when the checkpoint has
 *             none (an older one) or nothing was loaded; mean and std are the caller's buffers of
 *             data->channels floats
 * @param step receives the step; 0 when dir holds no loadable checkpoint or does not exist (m, o,
 *             sc untouched), and also when the newest loadable one is of step 0 (loaded)
 * @return DT_OK (also when there is nothing to load); DT_ERR_INVALID_ARG, loading nothing, for a
 *         sound checkpoint of another model or optimizer, a weights-only one with o non-NULL, a
 *         data block whose channel count is not data->channels, or a newest sound file without
 *         dt_model state (written with dt_ckpt_commit: open it with dt_ckpt_open_latest), or a file
 *         of a newer format version (a newer dtrain's) or one this user may not read met before a
 *         sound one; DT_ERR_IO when dir exists but cannot be read. */
DT_API dt_status dt_checkpoint_load_latest(dt_ctx *ctx, const char *dir, dt_model *m, dt_optimizer *o, dt_scaler *sc,
                                           dt_ckpt_data *data, long *step);

/** @} */

#endif /* DTRAIN_H */
#endif /* DTRAIN_CHECKPOINT_H */
