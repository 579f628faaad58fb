/*
 * cmp_params.c - compares two --dump-params files (raw little-endian fp32).
 *
 *   cmp_params A B TOL   exit 0 when every element satisfies |a - b| <= TOL * (|b| + rms(b))
 *   cmp_params A B exact exit 0 when the files are bit-identical
 *
 * The rms(b) term keeps parameters that happen to sit near zero from demanding more than fp32
 * summation order allows; it is the size of a typical parameter, not a loosening of the bound.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float *load(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cmp_params: cannot open %s\n", path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (bytes <= 0 || bytes % 4) {
        fprintf(stderr, "cmp_params: %s has %ld bytes, not a whole number of floats\n", path, bytes);
        exit(2);
    }
    float *p = malloc((size_t)bytes);
    if (!p || fread(p, 1, (size_t)bytes, f) != (size_t)bytes) {
        fprintf(stderr, "cmp_params: cannot read %s\n", path);
        exit(2);
    }
    fclose(f);
    *n = (size_t)bytes / 4;
    return p;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: cmp_params A B TOL|exact\n");
        return 2;
    }
    size_t na, nb;
    float *a = load(argv[1], &na), *b = load(argv[2], &nb);
    /* Every return frees both: under LeakSanitizer (make test-asan) a leak here would fail the
     * comparison with exit 66 whatever its verdict. */
    if (na != nb) {
        printf("FAIL: %zu vs %zu parameters\n", na, nb);
        free(a);
        free(b);
        return 1;
    }
    if (strcmp(argv[3], "exact") == 0) {
        int same = memcmp(a, b, na * 4) == 0;
        printf("%s: %zu parameters %s\n", same ? "ok" : "FAIL", na, same ? "bit-identical" : "differ");
        free(a);
        free(b);
        return same ? 0 : 1;
    }
    double tol = atof(argv[3]), ss = 0, worst = 0, maxabs = 0;
    for (size_t i = 0; i < na; i++) ss += (double)b[i] * b[i];
    double rms = sqrt(ss / (double)na);
    size_t bad = 0, worst_i = 0;
    for (size_t i = 0; i < na; i++) {
        double d = fabs((double)a[i] - b[i]), r = d / (fabs(b[i]) + rms);
        if (!isfinite(a[i]) || !isfinite(b[i])) r = INFINITY;
        if (r > worst) worst = r, worst_i = i;
        if (d > maxabs) maxabs = d;
        if (r > tol) bad++;
    }
    printf("%s: %zu parameters, max |a-b| %.3g, max |a-b|/(|b|+rms) %.3g at %zu (rms %.3g, tolerance %g), "
           "%zu beyond\n",
           bad ? "FAIL" : "ok", na, maxabs, worst, worst_i, rms, tol, bad);
    free(a);
    free(b);
    return bad ? 1 : 0;
}
