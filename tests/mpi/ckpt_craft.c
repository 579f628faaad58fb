/*
 * ckpt_craft.c - makes a crafted checkpoint whose CRCs are all valid, for the command-level tests
 * of the checkpoint reader (the audit's reproductions through `dtrain train --resume auto`).
 *
 *   ckpt_craft IN OUT section0-plus N   section 0 claims N more floats, N zero floats inserted
 *   ckpt_craft IN OUT step S            the header's step becomes S
 *
 * The output is re-sealed with ckpt_seal (runtime/checkpoint/ckpt_format.h), so only the field
 * checks behind the CRCs can refuse it.
 */
#include "checkpoint/ckpt_format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    if (!in || !out || fread(in, 1, (size_t)n, f) != (size_t)n || n < (long)(sizeof(ckpt_header) + sizeof(ckpt_scaler))) {
        fprintf(stderr, "ckpt_craft: cannot read %s\n", argv[1]);
        return 1;
    }
    fclose(f);
    ckpt_header h;
    memcpy(&h, in, sizeof h);
    size_t s0 = sizeof h + sizeof(ckpt_scaler), p0 = (size_t)h.section_n[0] * sizeof(float);
    if (extra > 0) {
        memcpy(out, in, s0 + p0);
        memcpy(out + s0 + p0 + (size_t)extra * sizeof(float), in + s0 + p0, (size_t)n - s0 - p0);
        h.section_n[0] += (uint64_t)extra;
    } else if (strcmp(argv[3], "step") == 0) {
        memcpy(out, in, (size_t)n);
        h.step = atoll(argv[4]);
    } else {
        fprintf(stderr, "ckpt_craft: unknown change '%s'\n", argv[3]);
        return 2;
    }
    memcpy(out, &h, sizeof h);
    size_t len = (size_t)n + (size_t)extra * sizeof(float);
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
