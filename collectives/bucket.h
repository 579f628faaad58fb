/*
 * bucket.h - gradient buckets: contiguous slices of the flat gradient buffer, filled in backward
 * (reverse layer) order, each allreduced as soon as every layer in it has its gradients.
 */
#ifndef DT_COLLECTIVES_BUCKET_H
#define DT_COLLECTIVES_BUCKET_H

#include "dtrain.h"

#include <stddef.h>

typedef struct bucket {
    size_t off, n;           /* the slice [off, off + n) of the flat buffer, in elements */
    int first_layer, nlayers; /* the parameter layers it holds: first_layer .. first_layer+nlayers-1 */
} bucket;

typedef struct bucket_plan {
    bucket *b;      /* b[0] is filled first in backward: it holds the last layers */
    int nb;
    int *of_layer;  /* of_layer[l]: the bucket of parameter layer l */
    int nlayers;
} bucket_plan;

/* Plans buckets over nlayers parameter slices (forward order, contiguous: off[l+1] = off[l] + n[l]),
 * walking them backward: a bucket takes layers while it stays within its cap (first_cap_bytes for
 * the first bucket, cap_bytes after), and a layer larger than the cap gets a bucket of its own.
 * elem_bytes is the size of one element. Caps of 0 put everything in one bucket. */
dt_status bucket_plan_build(const size_t *off, const size_t *n, int nlayers, size_t elem_bytes,
                            size_t first_cap_bytes, size_t cap_bytes, bucket_plan *out);
void bucket_plan_free(bucket_plan *p);

/* A fingerprint of the plan (bucket count and boundaries), equal on ranks with equal plans. */
unsigned long long bucket_plan_hash(const bucket_plan *p);

#endif
