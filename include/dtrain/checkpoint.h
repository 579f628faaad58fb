/*
 * dtrain/checkpoint.h - part of the public API: checkpoints of a model, its optimizer and scaler, and the data block.
 * Include <dtrain.h>, which includes every part in order after the types they share; this
 * file is not meant to be included on its own.
 */
#ifndef DTRAIN_CHECKPOINT_H
#define DTRAIN_CHECKPOINT_H

#ifndef DTRAIN_H
#error "include <dtrain.h>, which includes dtrain/checkpoint.h"
#endif

/* ---------------------------------------------------------------- checkpoints
 *
 * DIR/ckpt-<step>.dtc holds the parameters, the optimizer state, the loss scaler's state (the
 * _scaled calls) and the step, each section with a CRC-32, written atomically (temporary file,
 * fsync, rename, fsync of the directory): a crash, a full disk or a file-size limit leaves the
 * previous checkpoint or the new one, never half of one. The data position needs no saving: a
 * step's batches follow from (seed, step, world).
 *
 * Reading trusts nothing in a file: every header field is checked against the model, the
 * optimizer, the file's name and size and sane ranges before anything is allocated or copied, each
 * section's CRC and values (finite; AdamW's second moment >= 0) are checked before the model is
 * touched, and only regular files are opened (a FIFO or directory named like a checkpoint is
 * skipped with a warning, never waited on). */

/* Writes the checkpoint of `step` (0 to 10^18-1; rank 0 writes, every rank holds the same state).
 * o NULL writes the weights only (enough for inference and evaluation; it cannot resume an
 * optimizer). Every rank learns whether it worked: DT_ERR_IO names the cause (full disk, quota,
 * file-size limit) and the fix, and the temporary file is removed. DT_ERR_INVALID_ARG for a NULL
 * model or dir, or a step out of range. Collective. */
DT_API dt_status dt_checkpoint_save(dt_ctx *ctx, const char *dir, const dt_model *m, const dt_optimizer *o,
                                    long step);

/* Loads the newest checkpoint in dir that passes every check into m and o and sets *step to its
 * step; damaged or crafted files are skipped for an older one with a warning naming the file, the
 * field and both values. No loadable checkpoint (or no dir): *step = 0 and DT_OK. A sound
 * checkpoint of another model or optimizer fails with DT_ERR_INVALID_ARG and loads nothing. o NULL
 * loads the weights only (of a full or a weights-only checkpoint); a weights-only checkpoint with o
 * non-NULL is DT_ERR_INVALID_ARG. DT_ERR_IO when dir exists but cannot be read. Collective. */
DT_API dt_status dt_checkpoint_load_latest(dt_ctx *ctx, const char *dir, dt_model *m, dt_optimizer *o,
                                           long *step);

/* The same, with the loss scaler's state (scale, good-step run, hysteresis, counts) saved and
 * restored too, so a resumed fp16 run scales exactly as the uninterrupted one would. sc may be NULL;
 * a checkpoint without scaler state (or with sound state out of range for this run's settings, e.g.
 * another growth interval) leaves sc at its initial state with a warning; damaged scaler state
 * (a NaN scale, negative counts) makes the file damaged. */
DT_API dt_status dt_checkpoint_save_scaled(dt_ctx *ctx, const char *dir, const dt_model *m,
                                           const dt_optimizer *o, const dt_scaler *sc, long step);
DT_API dt_status dt_checkpoint_load_latest_scaled(dt_ctx *ctx, const char *dir, dt_model *m, dt_optimizer *o,
                                                  dt_scaler *sc, long *step);
/* What a checkpoint keeps about the data, so a resumed run and `dtrain eval` use what training
 * used: the data position after the checkpoint's step (dt_dataset_position's epoch and offset:
 * a run resumed on another rank count continues mid-epoch from it) and the normalization (a
 * dt_normalize, and for DT_NORMALIZE_STANDARD the per-channel mean and std). */
typedef struct dt_ckpt_data {
    int present;        /* load: 1 when the checkpoint held this block (saved by dtrain 0.1 wave 2 on) */
    long epoch, offset;
    int normalize;      /* a dt_normalize */
    int channels;       /* save: entries in mean and std (0 when not standard); load: their room */
    float *mean, *std;  /* the caller's buffers */
} dt_ckpt_data;
/* dt_checkpoint_save_scaled with the data block (data may be NULL: none saved). */
DT_API dt_status dt_checkpoint_save_data(dt_ctx *ctx, const char *dir, const dt_model *m, const dt_optimizer *o,
                                         const dt_scaler *sc, const dt_ckpt_data *data, long step);
/* dt_checkpoint_load_latest_scaled that also reads the data block into *data (may be NULL), on
 * every rank: present 0 when the checkpoint has none (an older one) or nothing was loaded. A block
 * whose channel count is not data->channels fails with DT_ERR_INVALID_ARG (other data). */
DT_API dt_status dt_checkpoint_load_latest_data(dt_ctx *ctx, const char *dir, dt_model *m, dt_optimizer *o,
                                                dt_scaler *sc, dt_ckpt_data *data, long *step);

#endif /* DTRAIN_CHECKPOINT_H */
