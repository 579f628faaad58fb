/*
 * main.c - the `dtrain` command: subcommand dispatch, the usage, `dtrain version`.
 */
#include "launch/cli.h"
#include "collectives/coll.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int cmd_version(int argc, char **argv)
{
    dt_config cfg;
    int rc = cli_parse_common(argc, argv, "version", &cfg);
    if (rc) return rc;
    char mpi[128], nccl[128], cuda[128];
    dt_versions(mpi, nccl, cuda, sizeof mpi);
    /* Before MPI starts a CUDA-built Open MPI can only say that it was built so. */
    const int aware = coll_mpi_cuda_aware();
    printf("dtrain %s\nMPI: %s (%s)\nNCCL: %s\nCUDA: %s\n", dt_version_string(), mpi,
           aware > 0 ? "CUDA-aware" : aware < 0 ? "CUDA-aware build" : "not CUDA-aware", nccl, cuda);
    return EXIT_OK;
}

/* `dtrain help [COMMAND [BENCHMARK]]`: the overview, or one command's screen, on stdout. */
static int cmd_help(int argc, char **argv)
{
    if (argc < 2) {
        cli_usage(stdout);
        return EXIT_OK;
    }
    char topic[128] = "";
    for (int i = 1; i < argc; i++) {
        size_t used = strlen(topic);
        snprintf(topic + used, sizeof topic - used, "%s%s", i > 1 ? " " : "", argv[i]);
    }
    if (cli_help(topic, stdout) == 0) return EXIT_OK;
    if (!strcmp(argv[1], "bench"))
        cli_error("no help for '%s': the benchmarks are allreduce, gemm, step, data, reducer (dtrain help bench gemm)", topic);
    else
        cli_error("no help for '%s': the commands are train, eval, bench, data, env, version, help", topic);
    return EXIT_USAGE;
}

/* OpenBLAS picks its kernels when it loads; when it guessed below this CPU (VMs that hide the
 * CPU model get the SSE3 kernels), start again with the right OPENBLAS_CORETYPE. A user's own
 * OPENBLAS_CORETYPE always wins, and DTRAIN_BLAS_COREFIX=0 turns this off. */
static void blas_corefix(char **argv)
{
    const char *fix = getenv("DTRAIN_BLAS_COREFIX");
    if (getenv("OPENBLAS_CORETYPE") || (fix && strcmp(fix, "0") == 0)) return;
    const char *better = dt_blas_coretype_advice();
    if (!better) return;
    setenv("OPENBLAS_CORETYPE", better, 1);
    setenv("DTRAIN_BLAS_COREFIX", "0", 1); /* never loop */
    execv("/proc/self/exe", argv);
    /* exec failed: carry on with the slower kernels, and say so. */
    unsetenv("OPENBLAS_CORETYPE");
    fprintf(stderr, "dtrain: warning: OpenBLAS runs its %s kernels on a CPU that can run %s ones; "
            "set OPENBLAS_CORETYPE=%s for faster GEMM\n", dt_blas_corename(), better, better);
}

int main(int argc, char **argv)
{
    blas_corefix(argv);
    if (argc < 2) {
        cli_usage(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        cli_usage(stdout);
        return EXIT_OK;
    }
    if (!strcmp(cmd, "help")) return cmd_help(argc - 1, argv + 1);
    if (!strcmp(cmd, "env")) return cmd_env(argc - 1, argv + 1);
    if (!strcmp(cmd, "train")) return cmd_train(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench")) return cmd_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "data")) return cmd_data(argc - 1, argv + 1);
    if (!strcmp(cmd, "eval")) return cmd_eval(argc - 1, argv + 1);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) return cmd_version(argc - 1, argv + 1);
    cli_error("unknown command '%s'; the commands are train, eval, bench, data, env, version, help", cmd);
    return EXIT_USAGE;
}
