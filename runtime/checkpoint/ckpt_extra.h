/*
 * ckpt_extra.h - one section of the caller's own beside dt_model's in the same checkpoint file:
 * written by the same atomic commit as the model (so the two never disagree about the step), and
 * read back from the very file dt_checkpoint_load_latest loaded. `dtrain train` keeps its run
 * record there (launch/train/train_record.h), which the public dt_ckpt_data block has no room for.
 */
#ifndef DT_RUNTIME_CHECKPOINT_CKPT_EXTRA_H
#define DT_RUNTIME_CHECKPOINT_CKPT_EXTRA_H

#include "dtrain.h"

#include <stddef.h>

typedef struct ckpt_extra {
    const char *name; /* a section name; the "dtrain." prefix is allowed here (dtrain's own) */
    const void *data; /* bytes, the same on every rank (rank 0's are written) */
    size_t bytes;
} ckpt_extra;

/* dt_checkpoint_save, with the section extra added to the file when extra is not NULL. Returns as
 * dt_checkpoint_save; a bad extra name is DT_ERR_INVALID_ARG on every rank. Collective. */
dt_status ckpt_save_model_with(dt_ctx *ctx, const char *dir, const dt_model *m, const dt_optimizer *o,
                               const dt_scaler *sc, const dt_ckpt_data *data, long step, const ckpt_extra *extra);

/* Section `name` of the checkpoint of `step` in dir (the file dt_checkpoint_load_latest returned
 * that step for): when the file holds it with exactly `bytes` bytes, its bytes (CRC checked) into
 * dst on every rank. *found_bytes: the section's size in the file (0: no such section, or a file of
 * an older format, which holds none; another size than `bytes` leaves dst untouched). Rank 0 reads
 * the file; every rank gets the same answer. DT_ERR_CORRUPT / DT_ERR_IO naming the file when it
 * cannot be read (the caller decides whether that matters); DT_ERR_INVALID_ARG for a NULL
 * argument; DT_ERR_MPI / DT_ERR_TIMEOUT from the broadcast. Collective. */
dt_status ckpt_read_extra(dt_ctx *ctx, const char *dir, long step, const char *name, void *dst, size_t bytes,
                          size_t *found_bytes);

/* The normalization figures of the checkpoint dt_checkpoint_load_latest will load from dir, read
 * before it can be (the model is not made yet), so that a resumed run opens its data without the
 * statistics pass whose figures the load would replace: rank 0 reads the header, the table and the
 * "data" section (its CRC checked) of the newest file that has them sound, and every rank gets them.
 * *figures (malloc'd, the caller frees): mean[*channels] then std[*channels], of the checkpoint of
 * *step; NULL, *channels 0 and *step -1 when the newest loadable file keeps no standard figures
 * (none, an older format, another normalization) or dir holds no checkpoint or cannot be read (the
 * load says why). The file the load picks can still be older (a damaged section the peek does not
 * read): its own figures then win. DT_ERR_NOMEM, DT_ERR_MPI / DT_ERR_TIMEOUT on every rank alike.
 * Collective. */
dt_status ckpt_peek_figures(dt_ctx *ctx, const char *dir, long *step, int *channels, float **figures);

#endif
