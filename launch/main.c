/*
 * main.c - the `dtrain` command: subcommand dispatch, common flags, exit codes.
 */
#include "cli.h"
#include "coll.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
            "  train      data-parallel training on the built-in synthetic dataset:\n"
            "             --model mlp|cnn|LAYERS  --input N|CxHxW  --batch B (per rank)  --steps S\n"
            "             --optim sgd|adamw  --lr F  --momentum F  --weight-decay F  --beta1/--beta2/--eps F\n"
            "             --seed N  --log-every K  --metrics FILE.jsonl  --dump-params FILE\n"
            "             --dataset-size N (default 60000)\n"
            "             --bucket-mb F (25)  --first-bucket-mb F (1)  --no-overlap  --grad-comm fp32|fp16|bf16\n"
            "             --checkpoint-dir DIR  --checkpoint-every N  --resume auto|never\n"
            "             --precision fp32|fp16|bf16  --loss-scale dynamic|none|F (dynamic for fp16)\n"
            "             --loss-scale-init F (65536) -growth F (2) -backoff F (0.5) -interval N (2000)\n"
            "             -hysteresis N (1) -min F (1) -max F (2^24)  --loss-scale-window N (100)\n"
            "             --max-overflow-fraction F (0.5)\n"
            "             --loader-threads N|auto (auto: 0 on the CPU, cores-1 up to 8 on a GPU)\n"
            "             SIGUSR1/SIGTERM: all ranks stop after the same step, checkpoint, exit 75\n"
            "             LAYERS: fc:OUT, conv:OUT:K:STRIDE:PAD, pool:K, relu, flatten, comma-separated;\n"
            "             mlp = fc:1024,relu,fc:1024,relu,fc:10 on 784; cnn = conv:32:3:1:1,relu,pool:2,\n"
            "             conv:64:3:1:1,relu,pool:2,fc:128,relu,fc:10 on 1x28x28\n"
            "  bench      bench allreduce: bandwidth of the engine's fp32 allreduce against MPI_Allreduce,\n"
            "             per size (nccl-tests style): -b/--minbytes N (default 8)  -e/--maxbytes N (64M)\n"
            "             -f/--stepfactor F (2)  --iters N (20)  --warmup N (5)  --op sum|avg  --dtype fp32\n"
            "             sizes take K, M, G suffixes (powers of 1024); exit 1 when a result is wrong\n"
            "             bench gemm: TFLOP/s of n x n matrix products on the CPU (OpenBLAS, this rank's\n"
            "             cores) and the GPU (cuBLAS), and the ratio: --n 4096,8192,10000\n"
            "             --dtype fp32,tf32,bf16,fp16  --iters N (20)  --warmup N (1)  --max-seconds F (3)\n"
            "             --no-cpu  --no-gpu; exit 1 when a checked result is wrong\n"
            "             bench step: samples/s of training steps per precision, side by side:\n"
            "             --model M  --input S  --batch B (128)  --precision fp32,bf16,fp16  --steps N (50)\n"
            "             --warmup N (5)  --loader-threads N|auto  --profile N (then N profiled steps:\n"
            "             time per phase and per layer); on the device the placement chose\n"
            "  env        print every rank's placement: rank, local rank, node, host, launcher,\n"
            "             device, CPU cores, and the MPI/NCCL/CUDA versions\n"
            "  version    print the version of dtrain and of what it was built with\n"
            "  help       this text\n"
            "\n"
            "options of every command (flag > DTRAIN_* variable > default):\n"
            "  --device auto|cpu|cuda   DTRAIN_DEVICE    default auto (CUDA when a GPU is visible)\n"
            "  --pin auto|none          DTRAIN_PIN       default auto (split cores among local ranks)\n"
            "  --timeout SECONDS        DTRAIN_TIMEOUT   default 300 (0 = none); a collective older\n"
            "                                            than this aborts the job\n"
            "  --blas-threads N         DTRAIN_BLAS_THREADS  default 0 (one per pinned core)\n"
            "  --gpu-comm nccl|mpi      DTRAIN_GPU_COMM  default nccl; mpi: GPU collectives through host\n"
            "                                            memory (ranks may then share a GPU)\n"
            "\n"
            "Launch with srun --mpi=pmix, mpirun, or nothing (a world of 1).\n"
            "Exit codes: 0 success, 1 run-time failure, 2 bad usage, 75 stopped on a signal (checkpointed).\n");
}

int cli_long(const char *flag, const char *arg, long lo, long hi, long *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (!*arg || *end || errno || v < lo || v > hi || arg[0] == ' ') {
        cli_error("%s '%s' is not a whole number from %ld to %ld", flag, arg, lo, hi);
        return EXIT_USAGE;
    }
    *out = v;
    return EXIT_OK;
}

int cli_int(const char *flag, const char *arg, long lo, long hi, int *out)
{
    long v;
    int rc = cli_long(flag, arg, lo, hi, &v);
    if (rc == EXIT_OK) *out = (int)v;
    return rc;
}

int cli_float(const char *flag, const char *arg, double lo, double hi, float *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(arg, &end);
    if (!*arg || *end || errno || !(v >= lo && v <= hi) || arg[0] == ' ') {
        cli_error("%s '%s' is not a number from %g to %g", flag, arg, lo, hi);
        return EXIT_USAGE;
    }
    *out = (float)v;
    return EXIT_OK;
}

int cli_list(const char *flag, const char *arg, int max, int (*each)(const char *item, void *ud), void *ud)
{
    char buf[512];
    if (strlen(arg) >= sizeof buf) {
        cli_error("%s '%.40s...' is too long", flag, arg);
        return EXIT_USAGE;
    }
    strcpy(buf, arg);
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n == max) {
            cli_error("%s '%s': at most %d items", flag, arg, max);
            return EXIT_USAGE;
        }
        int rc = each(tok, ud);
        if (rc) return rc;
        n++;
    }
    if (!n) {
        cli_error("%s '%s' names nothing: give a comma-separated list", flag, arg);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

int cli_parse(int argc, char **argv, const char *cmd, dt_config *cfg, const cli_extra *extra)
{
    dt_config_defaults(cfg);
    if (dt_config_from_env(cfg)) {
        cli_error("%s", dt_last_error());
        return EXIT_USAGE;
    }
    static const struct option common[] = {
        {"device", required_argument, NULL, 'd'},  {"pin", required_argument, NULL, 'p'},
        {"timeout", required_argument, NULL, 't'}, {"blas-threads", required_argument, NULL, 'b'},
        {"gpu-comm", required_argument, NULL, 'g'}, {"help", no_argument, NULL, 'h'},
    };
    enum { NCOMMON = sizeof common / sizeof *common, MAXOPTS = 64 };
    struct option opts[MAXOPTS];
    int n = 0;
    for (int i = 0; i < NCOMMON; i++) opts[n++] = common[i];
    for (const struct option *o = extra ? extra->opts : NULL; o && o->name && n < MAXOPTS - 1; o++) opts[n++] = *o;
    memset(&opts[n], 0, sizeof opts[n]);

    optind = 1;
    opterr = 0;
    int o;
    while ((o = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        int rc = EXIT_OK;
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
        case 't': {
            float t;
            if ((rc = cli_float("--timeout", optarg, 0, 1e7, &t))) return rc;
            cfg->timeout_s = t;
            break;
        }
        case 'b':
            if ((rc = cli_int("--blas-threads", optarg, 0, 4096, &cfg->blas_threads))) return rc;
            break;
        case 'g':
            if (dt_gpu_comm_parse(optarg, &cfg->gpu_comm)) {
                cli_error("--gpu-comm %s: %s", optarg, dt_last_error());
                return EXIT_USAGE;
            }
            break;
        case 'h':
            usage(stdout);
            exit(EXIT_OK);
        case ':':
            cli_error("dtrain %s: option %s needs a value", cmd, argv[optind - 1]);
            return EXIT_USAGE;
        case '?':
            cli_error("dtrain %s: unknown option '%s'; see dtrain help", cmd, argv[optind - 1]);
            return EXIT_USAGE;
        default:
            if (!extra || (rc = extra->handle(o, optarg, extra->ud))) return rc ? rc : EXIT_USAGE;
        }
    }
    if (optind < argc) {
        cli_error("dtrain %s: unexpected argument '%s'; see dtrain help", cmd, argv[optind]);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

int cli_loader_threads(const char *arg, int *out)
{
    if (!strcmp(arg, "auto")) {
        *out = -1;
        return EXIT_OK;
    }
    return cli_int("--loader-threads", arg, 0, 256, out);
}

int cli_loader_auto(const dt_ctx *ctx, int requested)
{
    if (requested >= 0) return requested;
    dt_placement pl;
    if (dt_get_placement(ctx, &pl) || pl.device != DT_DEVICE_CUDA) return 0;
    /* A GPU step is faster than one core makes its batch: keep one core for the training thread. */
    const int n = pl.num_cores - 1;
    return n < 1 ? 1 : n > 8 ? 8 : n;
}

dt_ctx *cli_init(const dt_config *cfg)
{
    dt_ctx *ctx = NULL;
    cli_crash_report_install(-1, NULL); /* before MPI_Init: a crash in it is reported too */
    dt_status s = dt_init(cfg, &ctx);
    if (s == DT_OK) {
        dt_placement pl;
        dt_get_placement(ctx, &pl);
        cli_crash_report_install(pl.rank, pl.hostname);
        return ctx;
    }
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
    /* Before MPI starts a CUDA-built Open MPI can only say that it was built so. */
    const int aware = coll_mpi_cuda_aware();
    printf("dtrain %s\nMPI: %s (%s)\nNCCL: %s\nCUDA: %s\n", dt_version_string(), mpi,
           aware > 0 ? "CUDA-aware" : aware < 0 ? "CUDA-aware build" : "not CUDA-aware", nccl, cuda);
    return EXIT_OK;
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
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        usage(stdout);
        return EXIT_OK;
    }
    if (!strcmp(cmd, "env")) return cmd_env(argc - 1, argv + 1);
    if (!strcmp(cmd, "train")) return cmd_train(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench")) return cmd_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) return cmd_version(argc - 1, argv + 1);
    cli_error("unknown command '%s'; the commands are train, bench, env, version, help", cmd);
    return EXIT_USAGE;
}
