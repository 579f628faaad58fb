/*
 * cifar.c - the CIFAR-10 and CIFAR-100 binary formats (reader.h), as distributed in
 * cifar-10-binary.tar.gz and cifar-100-binary.tar.gz.
 *
 * A file is a run of fixed-size records, no header:
 *   CIFAR-10:  1 label byte (0..9),                          then 3072 pixel bytes;
 *   CIFAR-100: 1 coarse label byte (0..19), 1 fine (0..99), then 3072 pixel bytes;
 * the pixels are 1024 red, 1024 green, 1024 blue, each a 32x32 image row by row: already the C x H
 * x W order a sample is read in. A directory holds the splits: CIFAR-10 data_batch_1.bin ..
 * data_batch_5.bin (train, all five, in that order) and test_batch.bin (test); CIFAR-100 train.bin
 * and test.bin. Any of them may be gzip-compressed (name.gz). A path that is one file is that file
 * alone, whichever split was asked for: the file is the split.
 *
 * In a directory, a file that holds another number of records than the distributed one (10000,
 * CIFAR-100's train.bin 50000) is said in a warning: cut short at a record boundary, it passes
 * every other check. At open every file is read whole into memory (as stored: 3 KiB per sample, 150 MiB for
 * CIFAR-10's train split) and checked: a whole, non-zero number of records, every label in range.
 * read() then only copies bytes out: no allocation, no checks but i, safe from any thread. With
 * ds_open_opts.check_on_read the labels are checked by read() instead, each as its record is read.
 */
#include "runtime/data/file_io.h"
#include "runtime/data/reader.h"
#include "base/log.h"
#include "base/status.h"
#include "kernels/cast.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CIFAR_PIXELS 3072 /* 3 x 32 x 32 */
#define CIFAR10_BATCHES 5
#define CIFAR_MAX_FILES CIFAR10_BATCHES

typedef struct cifar_impl {
    int nfiles;
    size_t rec;      /* bytes per record: 3073 or 3074 */
    size_t hdr;      /* label bytes before the pixels: 1 or 2 */
    size_t label_at; /* which of them is the label read: 0 (CIFAR-10, CIFAR-100 coarse) or 1 */
    unsigned char *data[CIFAR_MAX_FILES];
    size_t first[CIFAR_MAX_FILES + 1]; /* sample index of each file's first record; [nfiles] = count */
    /* ds_open_opts.check_on_read: labels checked by cifar_read, not at open; then the files' names
     * (for its messages) and the format's. */
    int labels_on_read, cifar100;
    char *file[CIFAR_MAX_FILES];
    const char *name;
} cifar_impl;

/* Record r of file (sample `sample`), at p, checked: each label byte below its class count. */
static dt_status check_record(const char *file, const char *name, int cifar100, size_t rec, size_t r, size_t sample,
                              const unsigned char *p)
{
    if (!cifar100 && p[0] >= 10)
        return status_set_error(DT_ERR_CORRUPT,
                                "%s: record %zu (sample %zu, at byte %zu) has label %d, but %s has 10 "
                                "classes (0..9): the file is damaged or not %s; download it again",
                                file, r, sample, r * rec, p[0], name, name);
    if (cifar100 && (p[0] >= 20 || p[1] >= 100)) {
        const int coarse = p[0] >= 20;
        return status_set_error(DT_ERR_CORRUPT,
                                "%s: record %zu (sample %zu, at byte %zu) has %s label %d, but %s has "
                                "%s classes (0..%d): the file is damaged or not %s; download it again",
                                file, r, sample, r * rec + (coarse ? 0 : 1), coarse ? "coarse" : "fine",
                                coarse ? p[0] : p[1], name, coarse ? "20 coarse" : "100 fine", coarse ? 19 : 99, name);
    }
    return DT_OK;
}

static dt_status cifar_read(const ds_split *s, size_t i, float *x, int32_t *label)
{
    const cifar_impl *c = s->impl;
    int f = 0;
    while (i >= c->first[f + 1]) f++;
    const unsigned char *r = c->data[f] + (i - c->first[f]) * c->rec;
    const unsigned char *px = r + c->hdr;
    cpu_cast_u8_to_f32(px, x, CIFAR_PIXELS);
    *label = (int32_t)r[c->label_at];
    return c->labels_on_read ? check_record(c->file[f], c->name, c->cifar100, c->rec, i - c->first[f], i, r) : DT_OK;
}

static void cifar_free(cifar_impl *c)
{
    if (!c) return;
    for (int f = 0; f < c->nfiles; f++) {
        free(c->data[f]);
        free(c->file[f]);
    }
    free(c);
}

static void cifar_close(ds_split *s)
{
    cifar_free(s->impl);
    s->impl = NULL;
}

static const ds_ops cifar_ops = {cifar_read, cifar_close};

/* Reads and checks one file of records into c->data[c->nfiles], numbering its samples on from the
 * previous files'. name: the format's name for messages. */
static dt_status load_file(cifar_impl *c, const char *file, const char *name, int cifar100)
{
    unsigned char *buf;
    size_t len;
    const size_t max = DS_MAX_FILE_BYTES;
    dt_status st = ds_read_file(file, max, &buf, &len);
    if (st) return st;
    const size_t n = len / c->rec;
    const size_t base = c->first[c->nfiles];
    if (len == 0)
        st = status_set_error(DT_ERR_CORRUPT,
                              "%s is empty: a %s file holds records of %zu bytes (the label%s, then 3072 "
                              "pixels); download the dataset again",
                              file, name, c->rec, cifar100 ? "s" : "");
    else if (len % c->rec != 0)
        st = status_set_error(DT_ERR_CORRUPT,
                              "%s is %zu bytes, not a whole number of %s records of %zu bytes: %zu "
                              "records and %zu bytes left over (cut short, or not %s: give --data-format cifar%s if it "
                              "is the other one); download it again",
                              file, len, name, c->rec, n, len % c->rec, name, cifar100 ? "10" : "100");
    /* Every label, so that training never meets a bad one (or, check_on_read, each as it is read). */
    for (size_t r = 0; !st && !c->labels_on_read && r < n; r++)
        st = check_record(file, name, cifar100, c->rec, r, base + r, buf + r * c->rec);
    if (!st && c->labels_on_read && !(c->file[c->nfiles] = strdup(file)))
        st = status_set_error(DT_ERR_NOMEM, "out of memory opening %s", file);
    if (st) {
        free(buf); /* after the messages, which read from it */
        return st;
    }
    c->data[c->nfiles] = buf;
    c->first[c->nfiles + 1] = base + n;
    c->nfiles++;
    return DT_OK;
}

/* That opts asks for a CIFAR format and split this reader has, and that path exists: *cifar100,
 * *test and *is_dir for the open. The checks in the order a user meets them: format, split, path. */
static dt_status check_request(const char *path, const ds_open_opts *opts, int *cifar100, int *test, int *is_dir)
{
    if (!opts || !opts->format || (strcmp(opts->format, "cifar10") != 0 && strcmp(opts->format, "cifar100") != 0))
        return status_set_error(DT_ERR_INVALID_ARG, "cifar_open: format '%s' is not cifar10 or cifar100",
                                opts && opts->format ? opts->format : "(none)");
    *cifar100 = strcmp(opts->format, "cifar100") == 0;
    const char *name = *cifar100 ? "CIFAR-100" : "CIFAR-10";
    const char *split = opts->split ? opts->split : "train";
    *test = strcmp(split, "test") == 0;
    if (!*test && strcmp(split, "train") != 0)
        return status_set_error(DT_ERR_INVALID_ARG, "split '%s' is not train or test", split);
    if (!path || !*path) return status_set_error(DT_ERR_INVALID_ARG, "no %s path given", name);
    struct stat sb;
    if (stat(path, &sb) != 0) {
        /* Only a missing path is "does not exist": a name too long for the system, or a folder
         * on the way that cannot be searched, is named as what it is (as ds_open names it). */
        const int err = errno;
        if (err == ENOENT) return status_set_error(DT_ERR_IO, "%s dataset %s does not exist", name, path);
        return status_set_error(DT_ERR_IO, "cannot reach %s dataset %.200s%s: %s", name, path,
                                strlen(path) > 200 ? "..." : "", strerror(err));
    }
    *is_dir = S_ISDIR(sb.st_mode);
    return DT_OK;
}

/* The file name of a directory's file number f (from 0) of the split: CIFAR-10's data_batch_N.bin
 * or test_batch.bin, CIFAR-100's train.bin or test.bin. */
static void split_file_name(int cifar100, int test, int f, char *base, size_t n)
{
    if (cifar100)
        snprintf(base, n, "%s.bin", test ? "test" : "train");
    else if (test)
        snprintf(base, n, "test_batch.bin");
    else
        snprintf(base, n, "data_batch_%d.bin", f + 1);
}

/* The split's files of the dataset directory at path, each loaded into c in order; a file that
 * holds another number of records than the distributed one is said in a warning. */
static dt_status load_directory(cifar_impl *c, const char *path, const char *split, int test)
{
    const int cifar100 = c->cifar100;
    const char *name = c->name;
    dt_status st = DT_OK;
    const int nfiles = cifar100 || test ? 1 : CIFAR10_BATCHES;
    for (int f = 0; f < nfiles && !st; f++) {
        char base[32], want[4200], found[4200];
        split_file_name(cifar100, test, f, base, sizeof base);
        int n = snprintf(want, sizeof want, "%s/%s", path, base);
        /* Cannot trigger after check_request's stat (a path it reached is under PATH_MAX), but
         * keeps the ".gz" that ds_find_file appends inside want whatever the caller passed. */
        if (n < 0 || (size_t)n >= sizeof want - 3)
            return status_set_error(DT_ERR_INVALID_ARG, "%s dataset path %.64s... is too long (%zu characters)", name,
                                    path, strlen(path));
        if (!ds_find_file(want, found, sizeof found)) {
            if (cifar100 || test)
                return status_set_error(DT_ERR_IO,
                                        "%s %s split: %s (or %s.gz) does not exist; the binary version of "
                                        "the dataset (%s) has it",
                                        name, split, want, want,
                                        cifar100 ? "cifar-100-binary.tar.gz" : "cifar-10-binary.tar.gz");
            return status_set_error(DT_ERR_IO,
                                    "CIFAR-10 train split: %s (or %s.gz) does not exist, and the split "
                                    "is data_batch_1.bin .. data_batch_5.bin, all five (%d found before it): "
                                    "extract cifar-10-binary.tar.gz again",
                                    want, want, f);
        }
        st = load_file(c, found, name, cifar100);
        /* The distributed files hold a fixed number of records: one cut short at a record
         * boundary passes every check above, and would train on part of the set unsaid. */
        const size_t official = cifar100 && !test ? 50000 : 10000, got = st ? official : c->first[f + 1] - c->first[f];
        if (got != official)
            log_msg0(LOG_LEVEL_WARN,
                     "%s holds %zu record%s where %s's %s holds %zu: cut short (download and extract it again), "
                     "or a subset made on purpose",
                     found, got, got == 1 ? "" : "s", name, base, official);
    }
    return st;
}

dt_status cifar_open(const char *path, const ds_open_opts *opts, ds_split *s)
{
    int cifar100 = 0, test = 0, is_dir = 0;
    const dt_status bad = check_request(path, opts, &cifar100, &test, &is_dir);
    if (bad) return bad;
    const char *name = cifar100 ? "CIFAR-100" : "CIFAR-10";
    const char *split = opts->split ? opts->split : "train";

    cifar_impl *c = calloc(1, sizeof *c);
    if (!c) return status_set_error(DT_ERR_NOMEM, "out of memory opening %s", path);
    c->hdr = cifar100 ? 2 : 1;
    c->rec = c->hdr + CIFAR_PIXELS;
    c->label_at = cifar100 && !opts->cifar100_coarse ? 1 : 0;
    c->labels_on_read = opts->check_on_read;
    c->cifar100 = cifar100;
    c->name = name;

    /* One file: that file is the split (ds_read_file refuses what is not a regular file). */
    const dt_status st = is_dir ? load_directory(c, path, split, test) : load_file(c, path, name, cifar100);
    if (st) {
        cifar_free(c);
        return st;
    }
    s->ops = &cifar_ops;
    s->impl = c;
    s->count = c->first[c->nfiles];
    s->c = 3;
    s->h = 32;
    s->w = 32;
    s->uint8_values = 1;
    s->classes = cifar100 ? (opts->cifar100_coarse ? 20 : 100) : 10;
    snprintf(s->format, sizeof s->format, "%s", opts->format);
    snprintf(s->split, sizeof s->split, "%s", split);
    snprintf(s->source, sizeof s->source, "%s", path);
    return DT_OK;
}
