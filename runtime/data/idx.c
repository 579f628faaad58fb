/*
 * idx.c - MNIST-style IDX datasets through the reader interface (reader.h, idx.h).
 *
 * A directory holds train-images-idx3-ubyte + train-labels-idx1-ubyte and t10k-images-idx3-ubyte +
 * t10k-labels-idx1-ubyte, each optionally .gz; a path naming one images file takes the labels file
 * beside it (the same name with "images" -> "labels" and "idx<r>" -> "idx1"). The images array's
 * rank gives the sample shape: N x H x W -> 1 x H x W, N x F -> F x 1 x 1, N x C x H x W -> C x H x W,
 * N -> 1 x 1 x 1. Both files are checked whole at open (header, sizes, every label, finite floats),
 * so a step never meets a bad sample, and kept in memory, read-only, for any number of threads.
 */
#include "runtime/data/idx.h"
#include "runtime/data/file_io.h"
#include "runtime/data/reader.h"
#include "base/status.h"
#include "kernels/cast.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int type_size(int type)
{
    switch (type) {
        case 0x08:
        case 0x09: return 1;
        case 0x0B: return 2;
        case 0x0C:
        case 0x0D: return 4;
        case 0x0E: return 8;
        default: return 0;
    }
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

dt_status idx_parse(const char *what, const unsigned char *buf, size_t len, idx_array *out)
{
    memset(out, 0, sizeof *out);
    if (len < 4)
        return status_set_error(DT_ERR_CORRUPT, "%s is %zu bytes, too short for an IDX header (4 bytes at least)", what,
                                len);
    if (buf[0] != 0 || buf[1] != 0 || !type_size(buf[2]))
        return status_set_error(DT_ERR_CORRUPT,
                                "%s is not an IDX file: its first bytes are %02x %02x %02x, an IDX file "
                                "starts 00 00 then a type code 08, 09, 0b, 0c, 0d or 0e",
                                what, buf[0], buf[1], buf[2]);
    const int nd = buf[3];
    if (nd < 1 || nd > IDX_MAX_DIMS)
        return status_set_error(DT_ERR_CORRUPT,
                                "%s: byte 3 says %d dimensions; dtrain reads 1 to %d (N, N x F, N x H x W, "
                                "N x C x H x W)",
                                what, nd, IDX_MAX_DIMS);
    const size_t hdr = 4 + 4 * (size_t)nd;
    if (len < hdr)
        return status_set_error(DT_ERR_CORRUPT, "%s is truncated: %zu bytes, its header needs %zu", what, len, hdr);
    out->type = buf[2];
    out->elem = type_size(buf[2]);
    out->ndims = nd;
    uint64_t per = 1;
    for (int d = 0; d < nd; d++) {
        out->dims[d] = be32(buf + 4 + 4 * d);
        if (out->dims[d] == 0)
            return status_set_error(DT_ERR_CORRUPT, "%s: dimension %d (offset %d) is 0", what, d, 4 + 4 * d);
        if (d > 0) {
            per *= out->dims[d]; /* at most 2^28 before this step, times < 2^32: no overflow */
            if (per > DS_MAX_SAMPLE_VALUES)
                return status_set_error(DT_ERR_CORRUPT,
                                        "%s: a sample has more than %u values (dimensions 1 to %d); "
                                        "dtrain takes at most that many per sample",
                                        what, DS_MAX_SAMPLE_VALUES, d);
        }
    }
    out->count = out->dims[0];
    out->per_sample = (size_t)per;
    /* count < 2^32 and per <= 2^28 and elem <= 8: the product fits 64 bits. */
    const uint64_t payload = (uint64_t)out->count * per * (uint64_t)out->elem;
    if ((uint64_t)(len - hdr) != payload)
        return status_set_error(DT_ERR_CORRUPT,
                                "%s is %zu bytes; its header (%zu bytes) describes %llu bytes of values "
                                "(%s): %s",
                                what, len, hdr, (unsigned long long)payload,
                                (uint64_t)(len - hdr) < payload ? "truncated" : "data after the values",
                                (uint64_t)(len - hdr) < payload ? "download it again" : "is it another format?");
    out->data = buf + hdr;
    return DT_OK;
}

float idx_value(const idx_array *a, size_t i, size_t j)
{
    const unsigned char *p = a->data + (i * a->per_sample + j) * (size_t)a->elem;
    switch (a->type) {
        case 0x08: return (float)p[0];
        case 0x09: return (float)(int8_t)p[0];
        case 0x0B: return (float)(int16_t)((uint16_t)p[0] << 8 | p[1]);
        case 0x0C: return (float)(int32_t)be32(p);
        case 0x0D: {
            uint32_t u = be32(p);
            float f;
            memcpy(&f, &u, 4);
            return f;
        }
        default: { /* 0x0E */
            uint64_t u = (uint64_t)be32(p) << 32 | be32(p + 4);
            double d;
            memcpy(&d, &u, 8);
            return (float)d;
        }
    }
}

/* Label v of sample i of the labels file what, outside the class range. */
static dt_status label_error(const char *what, float v, size_t i)
{
    return status_set_error(DT_ERR_CORRUPT,
                            "%s: label %.0f of sample %zu is outside 0 to %d: a label is a class number; "
                            "correct it or remove the sample",
                            what, (double)v, i, DS_MAX_CLASSES - 1);
}

dt_status idx_check_labels(const char *what, const idx_array *a, size_t count, int skip_bad, int *classes)
{
    if (a->ndims != 1)
        return status_set_error(DT_ERR_CORRUPT, "%s: a labels file has one dimension (N); this one has %d", what,
                                a->ndims);
    if (a->type == 0x0D || a->type == 0x0E)
        return status_set_error(DT_ERR_CORRUPT,
                                "%s: labels must be integers (type 08, 09, 0b or 0c), not floating point "
                                "(type %02x)",
                                what, a->type);
    if (a->count != count)
        return status_set_error(DT_ERR_CORRUPT,
                                "%s holds %zu labels but its images file %zu images: the two files must "
                                "come from the same split",
                                what, a->count, count);
    float top = -1;
    for (size_t i = 0; i < a->count; i++) {
        float v = idx_value(a, i, 0);
        if (v < 0 || v >= (float)DS_MAX_CLASSES) {
            if (skip_bad) continue;
            return label_error(what, v, i);
        }
        if (v > top) top = v;
    }
    *classes = (int)top + 1;
    return DT_OK;
}

dt_status idx_check_finite(const char *what, const idx_array *a)
{
    if (a->type != 0x0D && a->type != 0x0E) return DT_OK;
    for (size_t i = 0; i < a->count; i++)
        for (size_t j = 0; j < a->per_sample; j++) {
            float v = idx_value(a, i, j);
            if (!isfinite(v))
                return status_set_error(DT_ERR_CORRUPT,
                                        "%s: value %zu of sample %zu is %g (as float); a dataset must "
                                        "hold finite values",
                                        what, j, i, (double)v);
        }
    return DT_OK;
}

/* ---------------------------------------------------------------- the reader */

typedef struct idx_split {
    unsigned char *img_buf, *lab_buf;
    idx_array img, lab;
    char *lab_path; /* ds_open_opts.check_on_read: the labels file, for idx_read's refusals; else NULL */
} idx_split;

static dt_status idx_read(const ds_split *s, size_t i, float *x, int32_t *label)
{
    const idx_split *d = s->impl;
    const size_t per = d->img.per_sample;
    if (d->img.type == 0x08) {
        /* Bytes (MNIST and every IDX image set in use): one vectorized conversion, where a call of
         * idx_value per value, with its switch on the type, read MNIST at half the rate of the
         * same bytes in a .dts. The same floats. */
        cpu_cast_u8_to_f32(d->img.data + i * per, x, per);
    } else
        for (size_t j = 0; j < per; j++) x[j] = idx_value(&d->img, i, j);
    const float v = idx_value(&d->lab, i, 0);
    /* Checked here only when the open did not (a float past int32 must not be converted). */
    if (d->lab_path && (v < 0 || v >= (float)DS_MAX_CLASSES)) return label_error(d->lab_path, v, i);
    *label = (int32_t)v;
    return DT_OK;
}

static void idx_close(ds_split *s)
{
    idx_split *d = s->impl;
    if (!d) return;
    free(d->img_buf);
    free(d->lab_buf);
    free(d->lab_path);
    free(d);
    s->impl = NULL;
}

static const ds_ops idx_ops = {idx_read, idx_close};

/* A labels file whose labels in range are fewer than 2 classes. With check_on_read the bad ones
 * were left out of the count rather than refused, so the message names them: "every label is 0"
 * would be false of labels that are out of range. */
static dt_status too_few_classes(const char *what, const idx_array *a)
{
    size_t nbad = 0, first = 0;
    float first_v = 0;
    for (size_t i = a->count; i-- > 0;) {
        const float v = idx_value(a, i, 0);
        if (v < 0 || v >= (float)DS_MAX_CLASSES) nbad++, first = i, first_v = v;
    }
    if (!nbad)
        return status_set_error(DT_ERR_CORRUPT,
                                "%s: every label is 0; a classification dataset needs at least 2 classes", what);
    const size_t rest = a->count - nbad;
    char many[96], others[64];
    if (rest)
        snprintf(many, sizeof many, "%zu of its %zu labels are", nbad, a->count);
    else
        snprintf(many, sizeof many, "every one of its %zu labels is", a->count);
    if (rest > 1)
        snprintf(others, sizeof others, " and the other %zu are all 0", rest);
    else
        snprintf(others, sizeof others, "%s", rest ? " and the other 1 is 0" : "");
    return status_set_error(DT_ERR_CORRUPT,
                            "%s: %s outside 0 to %d (the first: label %.0f of sample %zu)%s, which leaves fewer "
                            "than the 2 classes a classification dataset needs: a label is a class number; correct "
                            "the labels",
                            what, many, DS_MAX_CLASSES - 1, (double)first_v, first, others);
}

/* The labels file beside an images file: "images" -> "labels", "idx<r>" -> "idx1". */
static int labels_name_for(const char *images, char *out, size_t n)
{
    const char *base = strrchr(images, '/');
    base = base ? base + 1 : images;
    const char *im = strstr(base, "images"), *ix = strstr(base, "idx");
    if (!im || !ix || !ix[3]) return 0;
    snprintf(out, n, "%s", images);
    size_t off = (size_t)(base - images);
    memcpy(out + off + (size_t)(im - base), "labels", 6);
    out[off + (size_t)(ix - base) + 3] = '1';
    return 1;
}

dt_status idx_open(const char *path, const ds_open_opts *opts, ds_split *s)
{
    const int test = opts && opts->split && strcmp(opts->split, "test") == 0;
    char img_path[4200], lab_path[4200], want[4200];
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        const char *stem = test ? "t10k" : "train";
        snprintf(want, sizeof want, "%s/%s-images-idx3-ubyte", path, stem);
        if (!ds_find_file(want, img_path, sizeof img_path))
            return status_set_error(DT_ERR_IO, "%s has no %s split: %s[.gz] is missing", path, test ? "test" : "train",
                                    want);
        snprintf(want, sizeof want, "%s/%s-labels-idx1-ubyte", path, stem);
    } else {
        snprintf(img_path, sizeof img_path, "%s", path);
        char base[4200];
        snprintf(base, sizeof base, "%s", path);
        size_t bl = strlen(base);
        if (bl > 3 && strcmp(base + bl - 3, ".gz") == 0) base[bl - 3] = '\0';
        if (!labels_name_for(base, want, sizeof want))
            return status_set_error(DT_ERR_INVALID_ARG,
                                    "%s: an IDX images file needs its labels file beside it, named "
                                    "like it with 'labels' for 'images' and 'idx1' (train-images-idx3-ubyte -> "
                                    "train-labels-idx1-ubyte); give the directory instead",
                                    path);
    }
    if (!ds_find_file(want, lab_path, sizeof lab_path))
        return status_set_error(DT_ERR_IO, "the labels of %s are missing: %s[.gz] does not exist", img_path, want);
    idx_split *d = calloc(1, sizeof *d);
    if (!d) return status_set_error(DT_ERR_NOMEM, "out of memory opening %s", path);
    s->ops = &idx_ops;
    s->impl = d;
    size_t n;
    dt_status st;
    /* check_on_read: bad labels and values are left for the reads, so one pass names them all. */
    const int later = opts && opts->check_on_read;
    if (later && !(d->lab_path = strdup(lab_path)))
        return status_set_error(DT_ERR_NOMEM, "out of memory opening %s", path);
    if ((st = ds_read_file(img_path, DS_MAX_FILE_BYTES, &d->img_buf, &n)) ||
        (st = idx_parse(img_path, d->img_buf, n, &d->img)) || (!later && (st = idx_check_finite(img_path, &d->img))) ||
        (st = ds_read_file(lab_path, DS_MAX_FILE_BYTES, &d->lab_buf, &n)) ||
        (st = idx_parse(lab_path, d->lab_buf, n, &d->lab)) ||
        (st = idx_check_labels(lab_path, &d->lab, d->img.count, later, &s->classes)))
        return st;
    const uint32_t *dm = d->img.dims;
    switch (d->img.ndims) {
        case 1: s->c = 1, s->h = 1, s->w = 1; break;
        case 2: s->c = (int)dm[1], s->h = 1, s->w = 1; break;
        case 3: s->c = 1, s->h = (int)dm[1], s->w = (int)dm[2]; break;
        default: s->c = (int)dm[1], s->h = (int)dm[2], s->w = (int)dm[3]; break;
    }
    if (s->classes < 2) return too_few_classes(lab_path, &d->lab);
    s->count = d->img.count;
    s->uint8_values = d->img.type == 0x08;
    return DT_OK;
}
