/*
 * main.c - the `dtrain` command: subcommand dispatch, common flags, exit codes.
 */
#include "cli.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cli_error(const char *fmt, ...)
{
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "dtrain: error: %s\n", msg);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: dtrain <command> [options]\n"
            "\n"
            "commands:\n"
            "  env        print every rank's placement: rank, local rank, node, host, launcher,\n"
            "             device, CPU cores, and the MPI/NCCL/CUDA versions\n"
            "  version    print the version of dtrain and of what it was built with\n"
            "  help       this text\n"
            "\n"
            "options of every command (flag > DTRAIN_* variable > default):\n"
            "  --device auto|cpu|cuda   DTRAIN_DEVICE    default auto (CUDA when a GPU is visible)\n"
            "  --pin auto|none          DTRAIN_PIN       default auto (split cores among local ranks)\n"
            "  --timeout SECONDS        DTRAIN_TIMEOUT   default 600 (0 = none); a collective older\n"
            "                                            than this aborts the job\n"
            "  --blas-threads N         DTRAIN_BLAS_THREADS  default 0 (one per pinned core)\n"
            "\n"
            "Launch with srun --mpi=pmix, mpirun, or nothing (a world of 1).\n"
            "Exit codes: 0 success, 1 run-time failure, 2 bad usage.\n");
}

int cli_parse_common(int argc, char **argv, const char *cmd, dt_config *cfg)
{
    dt_config_defaults(cfg);
    if (dt_config_from_env(cfg)) {
        cli_error("%s", dt_last_error());
        return EXIT_USAGE;
    }
    static const struct option opts[] = {
        {"device", required_argument, NULL, 'd'},  {"pin", required_argument, NULL, 'p'},
        {"timeout", required_argument, NULL, 't'}, {"blas-threads", required_argument, NULL, 'b'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
    };
    optind = 1;
    opterr = 0;
    int o;
    while ((o = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        char *end = NULL;
        switch (o) {
        case 'd':
            if (dt_device_kind_parse(optarg, &cfg->device)) {
                cli_error("--device %s: %s", optarg, dt_last_error());
                return EXIT_USAGE;
            }
            break;
        case 'p':
            if (dt_pin_mode_parse(optarg, &cfg->pin)) {
                cli_error("--pin %s: %s", optarg, dt_last_error());
                return EXIT_USAGE;
            }
            break;
        case 't':
            cfg->timeout_s = strtod(optarg, &end);
            if (!*optarg || *end || !(cfg->timeout_s >= 0 && cfg->timeout_s <= 1e7)) {
                cli_error("--timeout '%s' is not a number of seconds from 0 to 10000000", optarg);
                return EXIT_USAGE;
            }
            break;
        case 'b': {
            long v = strtol(optarg, &end, 10);
            if (!*optarg || *end || v < 0 || v > 4096) {
                cli_error("--blas-threads '%s' is not a whole number from 0 to 4096", optarg);
                return EXIT_USAGE;
            }
            cfg->blas_threads = (int)v;
            break;
        }
        case 'h':
            usage(stdout);
            exit(EXIT_OK);
        case ':':
            cli_error("dtrain %s: option %s needs a value", cmd, argv[optind - 1]);
            return EXIT_USAGE;
        default:
            cli_error("dtrain %s: unknown option '%s'; see dtrain help", cmd, argv[optind - 1]);
            return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        cli_error("dtrain %s: unexpected argument '%s'; see dtrain help", cmd, argv[optind]);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

dt_ctx *cli_init(const dt_config *cfg)
{
    dt_ctx *ctx = NULL;
    dt_status s = dt_init(cfg, &ctx);
    if (s == DT_OK) return ctx;
    cli_error("%s (%s)", dt_last_error(), dt_strerror(s));
    /* Peers that initialized fine would otherwise wait for this rank forever. */
    dt_abort_job(NULL, EXIT_FAIL);
    return NULL;
}

static int cmd_version(int argc, char **argv)
{
    dt_config cfg;
    int rc = cli_parse_common(argc, argv, "version", &cfg);
    if (rc) return rc;
    char mpi[128], nccl[128], cuda[128];
    dt_versions(mpi, nccl, cuda, sizeof mpi);
    printf("dtrain %s\nMPI: %s\nNCCL: %s\nCUDA: %s\n", dt_version_string(), mpi, nccl, cuda);
    return EXIT_OK;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        usage(stdout);
        return EXIT_OK;
    }
    if (!strcmp(cmd, "env")) return cmd_env(argc - 1, argv + 1);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) return cmd_version(argc - 1, argv + 1);
    cli_error("unknown command '%s'; the commands are env, version, help", cmd);
    return EXIT_USAGE;
}
