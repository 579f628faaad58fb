/*
 * bench_args.c - `dtrain bench allreduce`'s command line in the long forms cli_parse takes: the
 * short -b/-e/-f of nccl-tests (bench_args.h).
 */
#include "launch/bench/bench_args.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

/* Short forms, as nccl-tests spells them; cli_parse takes long options only, so they are rewritten
 * before it runs. */
static const struct {
    const char *shrt, *lng;
} bench_short[] = {{"-b", "--minbytes"}, {"-e", "--maxbytes"}, {"-f", "--stepfactor"}};

/* Takes a long option's value from the next word (no '=' in it)? Then that word is not a flag. */
static int takes_next(const char *a)
{
    if (strncmp(a, "--", 2) != 0 || strchr(a, '=') || !a[2]) return 0;
    return strcmp(a, "--help") != 0;
}

/* argv without the benchmark name, with -b/-e/-f (also -b8 and the like) as their long forms.
 * Returns a NULL-terminated array whose strings are argv's or malloc'd (listed in *owned). */
char **bench_rewrite_args(int argc, char **argv, int *nargc, char ***owned, int *nowned)
{
    char **out = calloc((size_t)argc + 1, sizeof *out);
    char **own = calloc((size_t)argc + 1, sizeof *own);
    if (!out || !own) {
        free(out);
        free(own);
        return NULL;
    }
    int n = 0, no = 0, raw = 0;
    out[n++] = argv[0];
    for (int i = 2; i < argc; i++) {
        char *a = argv[i];
        if (raw || (i > 2 && takes_next(argv[i - 1]))) {
            out[n++] = a; /* a value, or everything after "--" */
            continue;
        }
        if (!strcmp(a, "--")) raw = 1;
        int done = 0;
        for (size_t k = 0; k < sizeof bench_short / sizeof *bench_short && !done; k++) {
            size_t sl = strlen(bench_short[k].shrt);
            if (strncmp(a, bench_short[k].shrt, sl) != 0) continue;
            done = 1;
            if (!a[sl]) {
                out[n++] = (char *)bench_short[k].lng;
                if (i + 1 < argc) out[n++] = argv[++i]; /* its value, whatever it looks like */
            } else {
                size_t len = strlen(bench_short[k].lng) + 1 + strlen(a + sl) + 1;
                char *s = malloc(len);
                if (!s) {
                    for (int j = 0; j < no; j++) free(own[j]);
                    free(own);
                    free(out);
                    return NULL;
                }
                snprintf(s, len, "%s=%s", bench_short[k].lng, a + sl);
                own[no++] = s;
                out[n++] = s;
            }
        }
        if (!done) out[n++] = a;
    }
    out[n] = NULL;
    *nargc = n;
    *owned = own;
    *nowned = no;
    return out;
}
