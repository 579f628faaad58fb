/*
 * ckpt_craft.c - makes a crafted checkpoint whose CRCs are all valid, for the command-level tests
 * of the checkpoint reader (the audit's reproductions through `dtrain train --resume auto`).
 *
 *   ckpt_craft IN OUT section0-plus N   the parameters claim N more floats, N zero floats inserted
 *   ckpt_craft IN OUT step S            the header's step becomes S
 *
 * IN is a version-4 file (named sections: the "params" section grows) or one of versions 1-3
 * (section 0 grows). The output is re-sealed with ckpt_seal (runtime/checkpoint/ckpt_format.h), so
 * only the field checks behind the CRCs can refuse it.
 */
#include "runtime/checkpoint/ckpt_format.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where the parameters end (the insertion point) and a pointer to their size field to raise. */
static int params_end(unsigned char *img, size_t n, size_t *end, uint64_t **count, int *unit)
{
    uint32_t version;
    memcpy(&version, img + 8, sizeof version);
    if (version == 4) {
        ckpt4_header h;
        memcpy(&h, img, sizeof h);
        size_t off = sizeof h + (size_t)h.nsections * sizeof(ckpt4_entry);
        for (uint32_t i = 0; i < h.nsections; i++) {
            ckpt4_entry *e = (ckpt4_entry *)(void *)(img + sizeof h + i * sizeof *e);
            off += (size_t)e->bytes;
            if (strcmp(e->name, CKPT4_PARAMS) == 0) {
                *end = off;
                *count = &e->bytes;
                *unit = sizeof(float);
                return off <= n;
            }
        }
        return 0;
    }
    ckpt_header *h = (ckpt_header *)(void *)img;
    size_t s0 = sizeof *h + (h->version >= 2 ? sizeof(ckpt_scaler) : 0);
    if (h->version >= 3) {
        ckpt_data cd;
        memcpy(&cd, img + s0, sizeof cd);
        s0 += sizeof cd + 2 * (size_t)cd.channels * sizeof(float);
    }
    *end = s0 + (size_t)h->section_n[0] * sizeof(float);
    *count = &h->section_n[0];
    *unit = 1;
    return *end <= n;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: ckpt_craft IN OUT section0-plus N | step S\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    long extra = strcmp(argv[3], "section0-plus") == 0 ? atol(argv[4]) : 0;
    unsigned char *in = malloc((size_t)n), *out = calloc(1, (size_t)n + (size_t)extra * sizeof(float));
    if (!in || !out || fread(in, 1, (size_t)n, f) != (size_t)n || n < (long)sizeof(ckpt_header)) {
        fprintf(stderr, "ckpt_craft: cannot read %s\n", argv[1]);
        return 1;
    }
    fclose(f);
    size_t len = (size_t)n + (size_t)extra * sizeof(float);
    if (extra > 0) {
        size_t end;
        uint64_t *count;
        int unit;
        if (!params_end(in, (size_t)n, &end, &count, &unit)) {
            fprintf(stderr, "ckpt_craft: %s has no parameters to grow\n", argv[1]);
            return 1;
        }
        *count += (uint64_t)extra * (uint64_t)unit; /* bytes (v4) or floats (v1-3) */
        memcpy(out, in, end);
        memcpy(out + end + (size_t)extra * sizeof(float), in + end, (size_t)n - end);
    } else if (strcmp(argv[3], "step") == 0) {
        memcpy(out, in, (size_t)n);
        uint32_t version;
        memcpy(&version, in + 8, sizeof version);
        int64_t step = atoll(argv[4]);
        memcpy(out + (version == 4 ? offsetof(ckpt4_header, step) : offsetof(ckpt_header, step)), &step, sizeof step);
    } else {
        fprintf(stderr, "ckpt_craft: unknown change '%s'\n", argv[3]);
        return 2;
    }
    ckpt_seal(out, len);
    f = fopen(argv[2], "wb");
    if (!f || fwrite(out, 1, len, f) != len || fclose(f) != 0) {
        perror(argv[2]);
        return 1;
    }
    free(in);
    free(out);
    return 0;
}
