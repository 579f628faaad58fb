/*
 * main.c - the `dtrain` command: the OpenBLAS kernel fix every command starts with, then the
 * dispatch to the command (cmd_*.c; help and version live in help.c and cmd_version.c).
 */
#include "launch/cli.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    cli_blas_corefix(argv);
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
    if (!strcmp(cmd, "doctor")) return cmd_doctor(argc - 1, argv + 1);
    if (!strcmp(cmd, "train")) return cmd_train(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench")) return cmd_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "data")) return cmd_data(argc - 1, argv + 1);
    if (!strcmp(cmd, "eval")) return cmd_eval(argc - 1, argv + 1);
    if (!strcmp(cmd, "plot")) return cmd_plot(argc - 1, argv + 1);
    if (!strcmp(cmd, "model-perf")) return cmd_model_perf(argc - 1, argv + 1);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) return cmd_version(argc - 1, argv + 1);
    cli_error(
        "unknown command '%s'; the commands are train, eval, bench, data, env, doctor, plot, model-perf, version, help",
        cmd);
    return EXIT_USAGE;
}
