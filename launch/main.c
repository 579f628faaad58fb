/*
 * main.c - the `dtrain` command: the OpenBLAS restart every command starts with (prologue.c),
 * then the dispatch to the command (cmd_*.c; help and version live in help.c and cmd_version.c),
 * then the check that its output was written (close_stdout.c).
 */
#include "launch/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* A standard descriptor the caller closed (`dtrain ... >&-`) would be the next open()'s: a .dts,
 * checkpoint or metrics file would become fd 1 or 2, and what is printed there would land in it.
 * Each closed one is held on /dev/null, read-only, so nothing else takes it and a write to it
 * still fails (EBADF) as it did on the closed descriptor: close_stdout.c still reports output that
 * could not be written. The coreutils' and OpenSSH's rule. Before any library's constructor. */
static void std_fds_hold(int argc, char **argv, char **envp)
{
    (void)argc, (void)argv, (void)envp;
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
        const int got = open("/dev/null", O_RDONLY);
        if (got >= 0 && got != fd) close(got); /* a lower one is still closed: left as it was */
    }
}
__attribute__((section(".preinit_array"), used)) static void (*const std_fds)(int, char **, char **) = std_fds_hold;

/* The stop signals are blocked before the libraries' constructors run (cli.h); here, in the
 * program's own file, so that nothing else linking launch/ (the fuzz harnesses) blocks them. */
__attribute__((section(".preinit_array"), used)) static void (*const signals_block)(int, char **,
                                                                                    char **) = cli_signals_block;

/* The command's exit code; usage errors are the caller's. */
static int dispatch(int argc, char **argv)
{
    if (argc < 2) {
        cli_signals_unblock();
        cli_usage(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    /* train unblocks the stop signals once it handles them; every other command at once. */
    if (strcmp(cmd, "train") != 0) cli_signals_unblock();
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

int main(int argc, char **argv)
{
    cli_blas_restart(argv);
    /* Every command ends here (or in cli_parse's --help): output that could not be written makes
     * the exit code non-zero, with the reason on stderr. */
    return cli_close_stdout(dispatch(argc, argv));
}
