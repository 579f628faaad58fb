/*
 * ckpt_format.h - the on-disk layout of a checkpoint file, shared by its writer and its reader,
 * and the test hooks that craft and read single files (unit tests, the fuzz harness).
 *
 * File DIR/ckpt-<step>.dtc, little-endian, in this order:
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
 * A weights-only checkpoint (saved without an optimizer) has optim_kind CKPT_OPTIM_NONE and empty
 * sections 1 and 2. Nothing in the file is trusted: the reader checks every field against the
 * model, the optimizer, the file's name and size, and sane ranges before it allocates or copies.
 */
#ifndef DT_CKPT_FORMAT_H
#define DT_CKPT_FORMAT_H

#include "dtrain.h"

#include <stddef.h>
#include <stdint.h>

#define CKPT_MAGIC "DTCKPT1\n"
#define CKPT_VERSION 3u
/* The most channels a data block may claim (as a dataset's classes bound). */
#define CKPT_MAX_CHANNELS (1u << 20)
/* optim_kind of a checkpoint saved without an optimizer (weights only). */
#define CKPT_OPTIM_NONE 0xFFFFFFFFu
/* The most ranks a header may claim: far above any job, far below anything that overflows. */
#define CKPT_MAX_WORLD (1u << 24)
/* The most digits of a step in a file name (steps stay below 10^18, so they fit a long). */
#define CKPT_MAX_STEP_DIGITS 18

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

/* CRC-32 (zlib) of any number of bytes. */
uint32_t ckpt_crc(const void *p, size_t bytes);

/* The step a directory entry's name stands for: exactly the name the writer gives that step,
 * "ckpt-%010ld.dtc" (at least 10 digits, zero-padded, at most 18), and nothing else. Returns 1 and
 * sets *step, else 0. */
int ckpt_name_step(const char *name, long *step);

/* Reads and checks one checkpoint file into m, o (may be NULL: weights only) and sc (may be NULL)
 * on this process, without any collective: the reader behind dt_checkpoint_load_latest.
 * name_step is the step its file name says. Nothing in m, o or sc changes unless DT_OK.
 * DT_ERR_CORRUPT (or DT_ERR_IO): a damaged or crafted file, the caller may try an older one;
 * DT_ERR_INVALID_ARG: a sound file of another model or optimizer. */
dt_status ckpt_read_file(const char *path, long name_step, dt_model *m, dt_optimizer *o, dt_scaler *sc,
                         long *step, int *world);
/* The same, and the data block into *data when not NULL (data->channels: the room in its mean
 * and std on entry; present 0 when the file has none). A data block whose channels differ from
 * that room is DT_ERR_INVALID_ARG (a checkpoint of other data). */
dt_status ckpt_read_file_data(const char *path, long name_step, dt_model *m, dt_optimizer *o, dt_scaler *sc,
                              dt_ckpt_data *data, long *step, int *world);

/* Test hook: recomputes every CRC of the checkpoint image in buf (header, scaler block, and each
 * section the image holds in full), so tests and the fuzz harness can craft files whose CRCs are
 * valid and reach the checks behind them. Does nothing to an image too short for a header. */
void ckpt_seal(void *buf, size_t len);

#endif
