/*
 * idx.h - the IDX file format (MNIST, Fashion-MNIST, KMNIST, EMNIST, or any array a user writes
 * from numpy), parsed from memory: for idx.c and the fuzz harness.
 *
 * An IDX file is two zero bytes, a type code (0x08 ubyte, 0x09 signed byte, 0x0B int16, 0x0C
 * int32, 0x0D float32, 0x0E float64), the number of dimensions, each dimension as a big-endian
 * uint32, then the values, big-endian, row-major.
 */
#ifndef DT_RUNTIME_DATA_IDX_H
#define DT_RUNTIME_DATA_IDX_H

#include "dtrain.h"

#include <stddef.h>
#include <stdint.h>

#define IDX_MAX_DIMS 4

typedef struct idx_array {
    int type;  /* the type code */
    int elem;  /* bytes per value */
    int ndims; /* 1 to IDX_MAX_DIMS */
    uint32_t dims[IDX_MAX_DIMS];
    size_t count;              /* dims[0]: samples */
    size_t per_sample;         /* product of the other dimensions (1 for a rank-1 array) */
    const unsigned char *data; /* the values, inside the parsed buffer */
} idx_array;

/* Parses and checks the IDX image in buf (len bytes; `what` names it in messages): magic, type,
 * rank, dimensions (none 0, products without overflow, a sample at most DS_MAX_SAMPLE_VALUES
 * values), and the length, which must be the header plus the values exactly. DT_ERR_CORRUPT
 * naming the field, the value and the offset otherwise. *out points into buf. */
dt_status idx_parse(const char *what, const unsigned char *buf, size_t len, idx_array *out);

/* Value j of sample i as a float (big-endian to host). */
float idx_value(const idx_array *a, size_t i, size_t j);

/* Checks a labels array: rank 1, an integer type, count samples, every label in [0,
 * DS_MAX_CLASSES); *classes = the largest label + 1. DT_ERR_CORRUPT naming the index and value.
 * skip_bad: a label outside that range is left out of *classes instead of refused (for a reader
 * that refuses it when its sample is read: ds_open_opts.check_on_read). */
dt_status idx_check_labels(const char *what, const idx_array *a, size_t count, int skip_bad, int *classes);

/* Checks that a float32/float64 array holds only finite values (naming the first that is not). */
dt_status idx_check_finite(const char *what, const idx_array *a);

#endif
