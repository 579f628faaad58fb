/*
 * reader.h - the one interface every dataset format is read through (ARCHITECTURE: runtime/data/).
 *
 * A format opens one split of a dataset ("train" or "test") into a ds_split: how many samples,
 * their shape (C x H x W; flat features are F x 1 x 1), the number of classes, and a read
 * function that puts sample i's values (as stored: 0..255 for uint8 pixels, no normalization)
 * and label into the caller's buffers. The sampler, the loader threads, augmentation and
 * normalization sit above and know no format. One file per format (idx.c, cifar.c, ...); file
 * reading shared by all of them is in file_io.c.
 *
 * Everything a file says is input from outside: a reader checks every header field, count and
 * label against the file's real size and sane bounds before it allocates or reads, and its errors
 * name the file, the offset or sample, the value found and the fix.
 */
#ifndef DT_RUNTIME_DATA_READER_H
#define DT_RUNTIME_DATA_READER_H

#include "dtrain.h"
#include "base/status.h"

#include <stddef.h>
#include <stdint.h>

/* The most bytes a reader holds in memory for one file (decompressed): 16 GiB. A header that
 * claims more is refused before anything is allocated. */
#define DS_MAX_FILE_BYTES ((size_t)-1 < (16ull << 30) ? (size_t)-1 : (size_t)(16ull << 30))
/* The most values in one sample (as the model spec's bound: 1 GiB of fp32) and classes. */
#define DS_MAX_SAMPLE_VALUES (1u << 28)
#define DS_MAX_CLASSES (1 << 20)

typedef struct ds_split ds_split;

typedef struct ds_ops {
    /* Sample i (< count, which ds_read checks for every format): c*h*w values into x, its label
     * into *label. Reads only: several threads may read one split at once. DT_ERR_CORRUPT
     * for a sample that cannot be decoded (an image file), the message naming its file: the
     * loader fails the run or, with --bad-samples skip, counts it and takes another sample. */
    dt_status (*read)(const ds_split *s, size_t i, float *x, int32_t *label);
    /* Frees the format's state (impl); ds_close frees the split itself. */
    void (*close)(ds_split *s);
} ds_ops;

struct ds_split {
    const ds_ops *ops;
    void *impl;        /* the format's own state */
    size_t count;      /* samples */
    int c, h, w;       /* shape of one sample */
    int classes;       /* labels lie in [0, classes) */
    int uint8_values;  /* 1: values are bytes 0..255 (--normalize unit divides them by 255) */
    const float *mean; /* per channel (c values) when the format stores them (dts), else NULL */
    const float *std;  /* likewise */
    char format[16];   /* "idx", "cifar10", "cifar100", "imagefolder", "dts" */
    char split[8];     /* "train" or "test" */
    char source[1024]; /* the path it came from, for messages */
};

typedef struct ds_open_opts {
    const char *format;  /* NULL or "auto": detected from the path's contents */
    const char *split;   /* "train" (NULL) or "test" */
    int cifar100_coarse; /* CIFAR-100: 1 = the 20 coarse labels, 0 = the 100 fine ones */
    /* Image folders: the shape each image is resized (shorter side) and center-cropped to, C 1
     * (gray) or 3 (RGB); 0 = not given, and an image folder fails naming --input. Other formats
     * ignore it (the caller checks their shape against the model's). */
    int c, h, w;
    /* 1: the open checks the files' structure but leaves each label (and an IDX file's values) to
     * be checked as its sample is read, so that one pass names every bad sample (dtrain data
     * verify): a read returns DT_ERR_CORRUPT naming a bad label, or the value for the caller's
     * check (ds_find_bad_samples). 0 (training, info, convert): the open refuses the first bad one,
     * so a step never meets it. Image folders check nothing at open either way. */
    int check_on_read;
} ds_open_opts;

/* Opens one split of the dataset at path (a directory of a known layout, or one file), detecting
 * the format from what is there unless opts->format names it. opts may be NULL (auto, train).
 * A path naming one file is that file's samples, whatever split is asked for (s->split still
 * says which was asked). CIFAR-100 checks both label bytes of every record, whichever it uses;
 * cifar100_coarse means nothing to other formats.
 * DT_ERR_IO: cannot read; DT_ERR_CORRUPT: a file fails its checks; DT_ERR_INVALID_ARG: an
 * unknown format or split, or nothing recognisable at path (the message lists what was looked
 * for). The caller owns *out: ds_close. */
dt_status ds_open(const char *path, const ds_open_opts *opts, ds_split **out);
void ds_close(ds_split *s);

/* Whether the dataset directory at path has a test split of its own, whether or not it opens:
 * 1 when a file of one is there (MNIST t10k-images/t10k-labels, CIFAR-10 test_batch.bin, CIFAR-100
 * test.bin, test.dts, each maybe .gz; an image folder's val/, valid/, validation/ or test/ beside
 * train/), for the format opts->format names or the directory's layout says (opts may be NULL). 0
 * when there is none: then a test open fails for that alone, and the dataset simply has no test
 * split. One file is one split, so has none; so has a path that does not exist. Lets a caller tell
 * "no test split" (fine) from "a test split that does not open" (an error) after ds_open of "test"
 * failed. */
int ds_has_test_split(const char *path, const ds_open_opts *opts);

/* s->ops->read of sample i, or DT_ERR_INVALID_ARG when the split has no sample i. */
static inline dt_status ds_read(const ds_split *s, size_t i, float *x, int32_t *label)
{
    if (i >= s->count)
        return status_set_error(DT_ERR_INVALID_ARG, "sample %zu of %s (%s split) does not exist: it has %zu (0..%zu)",
                                i, s->source, s->split, s->count, s->count ? s->count - 1 : 0);
    return s->ops->read(s, i, x, label);
}

/* Per format, for ds_open (and the fuzz harnesses): each fills *s (zeroed by the caller) for the
 * split at path, or fails with the split untouched but for what ds_close may free. A split that
 * the caller owns itself (on the stack) is released with s->ops->close(s) when s->ops is set. */
dt_status idx_open(const char *path, const ds_open_opts *opts, ds_split *s);
dt_status cifar_open(const char *path, const ds_open_opts *opts, ds_split *s);
dt_status imagefolder_open(const char *path, const ds_open_opts *opts, ds_split *s); /* imagefolder.c */
/* An image folder's sample i (< s->count): its image's path (ROOT/<class>/...) into out, n bytes
 * (cut short to fit); 1, or 0 for another format or an i out of range. */
/* The held-out folder of an image folder's split layout: the first of "val", "valid", "validation",
 * "test" that is a folder beside root/train; NULL without root/train or any of them. */
const char *imagefolder_heldout_dir(const char *root);
int imagefolder_sample_path(const ds_split *s, size_t i, char *out, size_t n);
/* Whether the scan of an image folder's class folders met, in one of them, an entry named as a
 * dataset's marker file (ds_marker_name): then ds_open looks whether they are datasets. 0 for
 * another format. */
int imagefolder_marked(const ds_split *s);
/* Whether name (a directory entry) is one of the file names ds_open detects a dataset directory by:
 * train-images-idx3-ubyte, data_batch_1.bin, train.bin, train.dts, their test files, maybe .gz. */
int ds_marker_name(const char *name);
/* An image folder's class k (0 <= k < s->classes): its folder name; NULL for another format. */
const char *imagefolder_class_name(const ds_split *s, int k);
/* s's class folders numbered by ref's names (both image folders), and s->classes set to ref's: a
 * held-out folder missing some classes keeps training's labels. DT_ERR_INVALID_ARG names a class
 * folder of s that ref lacks. A ref of another format (no names) leaves s in its sorted order when
 * the class counts agree and refuses otherwise; an s that is no image folder: nothing changes. */
dt_status imagefolder_number_like(ds_split *s, const ds_split *ref);
dt_status dts_open(const char *path, const ds_open_opts *opts, ds_split *s); /* dts.h */

#endif
