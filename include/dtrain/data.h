/**
 * @file
 * @brief Part of the public API: datasets (every format), sampling, transforms, the
 * background loader and evaluation.
 * Include `<dtrain.h>`, which includes every part in order after the types they share; this file
 * is not meant to be included on its own.
 */
#ifndef DTRAIN_DATA_H
#define DTRAIN_DATA_H

#if !defined(DTRAIN_H) && !defined(DTRAIN_DOXYGEN) /* DTRAIN_DOXYGEN: docs/Doxyfile.in */
#error "include <dtrain.h>, which includes dtrain/data.h"
#else /* the rest only under <dtrain.h>: one error, not a cascade after it */

/** @defgroup data Data
 * Datasets of every format with their sampler and transforms, evaluation, and the background
 * loader. */

/** @defgroup datasets Datasets
 * @ingroup data
 * One split of samples with the sampler that says which samples each rank takes at each step
 * (docs/library.md, "Datasets and sampling").
 * @{ */

/** One split of a dataset with its sampler and transforms. Opaque; made by dt_dataset_open(),
 * dt_synthetic_create() or dt_synthetic_open(), freed by dt_dataset_free(). */
typedef struct dt_dataset dt_dataset;

/** How sample values are normalized after augmentation. */
typedef enum dt_normalize {
    DT_NORMALIZE_NONE = 0,    /**< values as read */
    DT_NORMALIZE_UNIT = 1,    /**< bytes / 255 (other values as read) */
    DT_NORMALIZE_STANDARD = 2 /**< (value - mean[c]) / std[c] per channel (in the values' own units) */
} dt_normalize;

/** How to open a dataset: fill with dt_data_defaults(), then edit. Its flags (cifar100_coarse,
 * holdout_part, shuffle, drop_last, flip, skip_bad) are 0 or 1. */
typedef struct dt_data_config {
    const char *format;     /**< NULL or "auto": detected; or idx, cifar10, cifar100, imagefolder, dts */
    const char *split;      /**< "train" (NULL) or "test" (MNIST t10k-*, CIFAR test, an image folder's val/) */
    int cifar100_coarse;    /**< CIFAR-100: 1 the 20 coarse labels, 0 the 100 fine ones */
    int c;                  /**< channels images are decoded to (image folders); 0 = not given */
    int h;                  /**< height images are decoded to (image folders); 0 = not given */
    int w;                  /**< width images are decoded to (image folders); 0 = not given */
    dt_normalize normalize; /**< the normalization (see mean and std for DT_NORMALIZE_STANDARD) */
    /** DT_NORMALIZE_STANDARD with given per-channel statistics (c floats each, copied): a
     * checkpoint's or the training split's, so evaluation uses the training figures. NULL: the
     * file's own (a .dts header), else computed once over this split. */
    const float *mean;
    const float *std; /**< the per-channel standard deviations, given with mean (or NULL) */
    double holdout;   /**< 0, or in (0, 1): this fraction of the split is kept aside */
    int holdout_part; /**< with holdout: 0 the samples trained on, 1 those kept aside */
    uint64_t seed;    /**< the epoch orders and the augmentation */
    int shuffle;      /**< 1: a new order each epoch; 0: file order */
    int drop_last;    /**< 1: drop the samples that do not fill a last whole step; 0: pad it */
    int crop_pad;     /**< augmentation: random crop after padding each side by this many zeros */
    int flip;         /**< augmentation: horizontal flip with probability 1/2 */
    int skip_bad;     /**< a sample that cannot be decoded: 0 fails, 1 is replaced (and counted) */
    int threads;      /**< threads for computing the statistics at open (0: one) */
    /** Image folders: the class folders numbered by this dataset's class names (the training
     * set's, also an image folder), so a held-out folder that lacks some classes keeps training's
     * labels; a class folder it does not have fails, naming it. A classes_like of another format
     * (no names: a .dts, IDX or CIFAR set) keeps the folder's own sorted order when the class
     * counts agree and fails (DT_ERR_INVALID_ARG, naming both counts) when they do not, as a
     * missing class would shift the labels after it. NULL: the folder's own sorted order (an image
     * folder's val/ split always takes its train/'s). Other formats opened: ignored. */
    const dt_dataset *classes_like;
} dt_data_config;

/** Fills c with the defaults: train split, auto format, DT_NORMALIZE_STANDARD, no holdout, seed 1,
 * shuffle on, padding, no augmentation, bad samples fail, 1 thread. NULL is a no-op. */
DT_API void dt_data_defaults(dt_data_config *c);
/** Opens the dataset at path (a directory of a known layout, or one file) as c says (NULL: the
 * defaults). The caller owns *out (dt_dataset_free; NULL on failure). DT_ERR_IO: unreadable;
 * DT_ERR_CORRUPT: a file fails its checks (the message names the file, the offset or sample, and
 * the fix); DT_ERR_INVALID_ARG: a NULL path or out, an unknown format or split, nothing
 * recognisable, bad settings (a flag of c other than 0 or 1 is refused, naming it, before any
 * file is read); DT_ERR_NOMEM. */
DT_API dt_status dt_dataset_open(const char *path, const dt_data_config *c, dt_dataset **out);
/** The built-in synthetic data: size samples of shape (c, h, w) with `classes` labels (a flat
 * input is (n, 1, 1)). Images (h or w > 1) are spatially smooth, like natural ones: each channel
 * is a coarse random grid (one value per 4x4 pixels) interpolated bilinearly, so pooling keeps
 * what the label depends on. Flat inputs are independent uniform values in [-1, 1). Labels come
 * from a fixed random teacher network drawn from seed. dt_synthetic_create: seed drives the
 * order too, no normalization, drop_last on; dt_synthetic_open: cfg's sampler, transforms and
 * seed (cfg->format, split, c/h/w and holdout are ignored). The caller owns *out
 * (dt_dataset_free; NULL on failure). DT_ERR_INVALID_ARG: a NULL out, c, h or w < 1, samples of
 * over 2^28 values, classes outside 2..2^20, size outside 1..2^32-1, bad settings of cfg;
 * DT_ERR_NOMEM. */
DT_API dt_status dt_synthetic_create(int c, int h, int w, int classes, size_t size, uint64_t seed, dt_dataset **out);
/** The synthetic data of dt_synthetic_create() (samples and labels drawn from data_seed) with cfg's
 * sampler, transforms and seed (cfg NULL: dt_data_defaults()'s, as for dt_dataset_open): see there,
 * errors included. */
DT_API dt_status dt_synthetic_open(int c, int h, int w, int classes, size_t size, uint64_t data_seed,
                                   const dt_data_config *cfg, dt_dataset **out);
/** Where a loader makes the batches of a synthetic dataset (dt_dataset_set_synthetic_on). */
typedef enum dt_synthetic_on {
    DT_SYNTHETIC_AUTO = 0,  /**< (default) on the device when the loader's context is placed on a GPU
                                 and no augmentation applies (crop_pad and flip 0), else on the host */
    DT_SYNTHETIC_HOST = 1,  /**< on the host, by the loader's threads, like a file's samples */
    DT_SYNTHETIC_DEVICE = 2 /**< on the device; dt_loader_create fails (DT_ERR_INVALID_ARG, naming
                                 why) when the context is not on a GPU or augmentation applies */
} dt_synthetic_on;
/** Where loaders made from now on make d's batches, when d is synthetic data (dt_synthetic_create,
 * dt_synthetic_open). On the device a batch is made by one kernel from its sample indices, the
 * same bits as on the host (normalization included), on the stream the model's kernels use: no
 * loader thread is started and no input is copied, so a GPU step is never bound by the host's
 * cores making data. DT_ERR_INVALID_ARG: a NULL d, where is not in the enum, or DT_SYNTHETIC_DEVICE
 * for a dataset that is not synthetic (d unchanged). */
DT_API dt_status dt_dataset_set_synthetic_on(dt_dataset *d, dt_synthetic_on where);
/** Closes the dataset's files and frees it. NULL is a no-op. Free the loaders that read d first
 * (dt_loader_free; dt_evaluate's own is gone when it returns): while any lives, d is not freed
 * (their threads read it ahead of use), dt_last_error() says DT_ERR_INVALID_ARG naming how many,
 * the same line is logged as an error, and a call after their dt_loader_free frees it. */
DT_API void dt_dataset_free(dt_dataset *d);
/** Samples in the dataset (after the holdout); 0 for a NULL d. */
DT_API size_t dt_dataset_size(const dt_dataset *d);
/** The shape of a sample: channels, height, width (0 each for a NULL d). A NULL output is skipped. */
DT_API void dt_dataset_shape(const dt_dataset *d, int *c, int *h, int *w);
/** Classes: labels lie in [0, classes); 0 for a NULL d. */
DT_API int dt_dataset_num_classes(const dt_dataset *d);
/** The format's name (idx, cifar10, cifar100, imagefolder, dts, synthetic); owned by d. "?" for a
 * NULL d. */
DT_API const char *dt_dataset_format(const dt_dataset *d);
/** The path (or a description) the samples came from; owned by d. "?" for a NULL d. */
DT_API const char *dt_dataset_source(const dt_dataset *d);
/** The normalization in use: its kind, and for DT_NORMALIZE_STANDARD the per-channel mean and std
 * (dt_dataset_shape's c floats each, owned by d), else NULL. A NULL mean or std is skipped; a NULL
 * d gives DT_NORMALIZE_NONE. */
DT_API dt_normalize dt_dataset_normalization(const dt_dataset *d, const float **mean, const float **std);
/** Replaces the normalization (a checkpoint's, so a resumed run and evaluation use training's
 * figures): mean and std (c floats each, copied) for DT_NORMALIZE_STANDARD, else ignored. Not while
 * a loader uses d: from dt_loader_create to dt_loader_free (dt_evaluate's own loader included) the
 * call is refused. DT_ERR_INVALID_ARG: a NULL d, a loader using d (naming how many), a kind not in
 * the enum, missing (NULL) or non-finite figures (d unchanged); DT_ERR_NOMEM. */
DT_API dt_status dt_dataset_set_normalization(dt_dataset *d, dt_normalize kind, const float *mean, const float *std);
/** Whether the values are bytes 0..255 (uint8 images), as DT_NORMALIZE_UNIT divides them; 0 for a
 * NULL d. */
DT_API int dt_dataset_uint8(const dt_dataset *d);
/** Samples that could not be decoded (skip_bad), so far: replaced in training batches, left out by
 * dt_evaluate (each counted at every read); 0 for a NULL d. */
DT_API long dt_dataset_bad_samples(const dt_dataset *d);
/** Steps in a whole epoch for `world` ranks of `batch` (0: drop_last and the dataset is smaller
 * than one global batch; a NULL d, world < 1 or batch < 1). */
DT_API long dt_dataset_steps_per_epoch(const dt_dataset *d, int world, int batch);
/** The data position at the start of `step`: the epoch and the samples of its order already taken
 * (a checkpoint saves it). DT_ERR_INVALID_ARG for a NULL d, epoch or offset, world or batch < 1,
 * a step before the anchor or a global batch the dataset cannot fill. */
DT_API dt_status dt_dataset_position(const dt_dataset *d, long step, int world, int batch, long *epoch, long *offset);
/** Anchors the position: at `step`, (epoch, offset) as dt_dataset_position gave it in the run
 * that saved the checkpoint, whatever its rank count. DT_ERR_INVALID_ARG for a NULL d, or when it
 * cannot be a position of this dataset (a negative step or epoch, offset outside 0..size-1). */
DT_API dt_status dt_dataset_set_position(dt_dataset *d, long step, long epoch, long offset);
/** Fills x (batch, input_size) and labels (batch) for `rank` of `world` at global step `step`
 * (the sampling above; x and labels are the caller's, in host memory). DT_ERR_INVALID_ARG for a
 * NULL d, x or labels, a bad step, rank, world or batch, or a global batch the dataset cannot fill;
 * a sample that cannot be decoded fails (DT_ERR_CORRUPT) unless dt_data_config::skip_bad replaces
 * it; DT_ERR_IO: a file that cannot be read; DT_ERR_NOMEM. */
DT_API dt_status dt_dataset_batch(dt_dataset *d, long step, int rank, int world, int batch, float *x, int32_t *labels);

/** @} */

/** @defgroup evaluate Evaluation
 * @ingroup data
 * A model's loss, accuracy, per-class figures and confusion matrix over a whole dataset.
 * @{ */

/** The figures of a model over a whole dataset (dt_evaluate). The caller provides the arrays it
 * wants (classes entries each, classes x classes for the confusion matrix, row = true label,
 * column = prediction) or NULL. */
typedef struct dt_eval_result {
    double loss_sum;     /**< summed cross-entropy over every sample */
    long correct;        /**< top-1 correct */
    long count;          /**< samples */
    long *class_correct; /**< the caller's classes entries, or NULL: top-1 correct per true label */
    long *class_count;   /**< the caller's classes entries, or NULL: samples per true label */
    long *confusion;     /**< the caller's classes x classes entries, or NULL: [true label][prediction] */
} dt_eval_result;
/** Evaluates m over every sample of d once (no padding, no augmentation): rank r of W takes
 * samples r, r + W, ... in batches of up to `batch` (<= the model's max batch), read by `threads`
 * loader threads, and the sums are added over the ranks, so every rank gets the same figures and
 * the counts are exact whatever the rank count. With skip_bad, a sample that cannot be decoded is
 * left out (counted by dt_dataset_bad_samples), not replaced as in training: r->count is then
 * below dt_dataset_size(d) by the samples left out. Collective: every rank calls it with the same model,
 * dataset and r arrays (present or NULL); r is written only on success. DT_ERR_INVALID_ARG: a NULL
 * ctx, m, d or r, batch outside 1..the model's max batch, threads outside 0..256, a dataset with
 * more classes or another sample size than the model; DT_ERR_NOMEM; a sample's DT_ERR_IO or
 * DT_ERR_CORRUPT; the model's DT_ERR_DEVICE; dt_allreduce's errors. A failure on one rank fails
 * every rank: it returns its own status, the others that of the lowest failing rank with a message
 * naming it (a NULL ctx fails alone, before any collective, leaving its peers waiting). While ctx
 * traces (dt_trace_start), the call is one "eval" span on the training track, its forward passes
 * inside it. */
DT_API dt_status dt_evaluate(dt_ctx *ctx, dt_model *m, dt_dataset *d, int batch, int threads, dt_eval_result *r);

/** @} */

/** @defgroup loader The background loader
 * @ingroup data
 * Batches made ahead of their use by worker threads, into pinned memory on a GPU.
 * @{ */

/** A background loader and its worker threads. Opaque; made by dt_loader_create(). */
typedef struct dt_loader dt_loader;
/** Starts a background loader: `threads` worker threads make the batches of steps first_step,
 * first_step + 1, ... ahead of their use, at most `depth` of them (the one in use included), into
 * host buffers that are page-locked (pinned) when ctx's device is a GPU, so that the model's copy to
 * the device runs asynchronously. A batch is made by all workers together (chunks of its samples)
 * and is the same as dt_dataset_batch's for that step. threads 0: no threads, each batch is made by
 * the caller inside dt_loader_next. The loader uses d alone while it lives (call no dt_dataset_batch
 * on d meanwhile). threads 0..256, depth 2..64 (ignored when threads is 0). A loader that makes
 * synthetic batches on the device (dt_loader_on_device) starts no threads: dt_loader_next queues
 * each batch itself, and threads and depth are ignored. ctx may be NULL: host buffers, no trace.
 * The caller owns *out (dt_loader_free). DT_ERR_INVALID_ARG: a NULL d or out, rank outside
 * 0..world-1, batch or world < 1, a negative first_step, threads or depth out of range, a global
 * batch (world x batch) the dataset cannot fill (drop_last), a first_step before the data
 * position's anchor (dt_dataset_set_position), or DT_SYNTHETIC_DEVICE asked where it cannot be
 * honoured (the message says why); DT_ERR_NOMEM (a
 * loader thread that cannot start too); DT_ERR_DEVICE: ctx's GPU unusable. */
DT_API dt_status dt_loader_create(const dt_ctx *ctx, dt_dataset *d, int rank, int world, int batch, long first_step,
                                  int threads, int depth, dt_loader **out);
/** The next step's batch, in step order: *step, inputs *x (batch x input size) and *labels. The
 * buffers stay valid until the next call, which hands them back for refilling. An error of a
 * worker (a sample that cannot be read, ...) is returned here. When the loader makes
 * its batches on the device (dt_loader_on_device), x and labels are device memory, written by
 * work queued on the stream of ctx's backend (the default stream of ctx's GPU) when this returns:
 * work queued after it on that stream, such as dt_model_train_step's, sees the batch.
 * DT_ERR_INVALID_ARG: a NULL l, step, x or labels; a
 * sample's DT_ERR_CORRUPT (unless skip_bad) or DT_ERR_IO; DT_ERR_DEVICE from the batch's kernel on
 * the device. */
DT_API dt_status dt_loader_next(dt_loader *l, long *step, const float **x, const int32_t **labels);
/** 1 when l makes its batches on the device (a synthetic dataset on a GPU: see
 * dt_dataset_set_synthetic_on), so dt_loader_next hands out device memory; 0 when they are host
 * memory (pinned on a GPU) or l is NULL. */
DT_API int dt_loader_on_device(const dt_loader *l);
/** Seconds dt_loader_next spent waiting for a batch that was not ready yet, since creation; 0 for
 * a NULL l. */
DT_API double dt_loader_wait_s(const dt_loader *l);
/** Stops the workers and frees the buffers; NULL is fine. */
DT_API void dt_loader_free(dt_loader *l);

/** @} */

#endif /* DTRAIN_H */
#endif /* DTRAIN_DATA_H */
