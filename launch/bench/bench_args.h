/*
 * bench_args.h - the short flags of `dtrain bench allreduce`, as nccl-tests spells them
 * (bench_args.c).
 */
#ifndef DT_LAUNCH_BENCH_ARGS_H
#define DT_LAUNCH_BENCH_ARGS_H

/* argv (argv[1] the benchmark's name) without the benchmark name, with -b/-e/-f (also -b8 and the
 * like) as their long forms --minbytes, --maxbytes, --stepfactor. Returns a NULL-terminated array
 * of *nargc words, argv's or malloc'd (listed in *owned, *nowned of them: the caller frees those
 * and the two arrays), or NULL when out of memory. */
char **bench_rewrite_args(int argc, char **argv, int *nargc, char ***owned, int *nowned);

#endif
