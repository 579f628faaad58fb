/*
 * params_io.c - flat fp32 parameter files (params_io.h): written through the checkpoint's atomic
 * writer, read by rank 0 and broadcast.
 */
#include "launch/train/params_io.h"

#include "launch/cli.h"
#include "base/io_error.h"
#include "runtime/checkpoint/ckpt_write_file.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int host_is_little(void)
{
    const uint16_t probe = 1;
    return *(const uint8_t *)&probe == 1;
}

/* Writes the parameters as raw little-endian fp32 through the checkpoint's atomic writer (a
 * temporary file in the same directory, fsync, rename, the directory fsynced), so a crash or a
 * full disk leaves the old file or the new one, never half of one. */
int params_dump(const char *path, const float *p, size_t n)
{
    /* The file is little-endian: a big-endian host writes a swapped copy. */
    uint32_t *swapped = NULL;
    if (!host_is_little()) {
        if (!(swapped = malloc(n * sizeof *swapped))) {
            cli_error("out of host memory for a little-endian copy of the %zu parameters of --dump-params %s", n, path);
            return EXIT_FAIL;
        }
        for (size_t i = 0; i < n; i++) {
            memcpy(&swapped[i], &p[i], 4);
            swapped[i] = __builtin_bswap32(swapped[i]);
        }
    }
    const ckpt_part part = {swapped ? (const void *)swapped : (const void *)p, n * sizeof *p};
    const dt_status s = ckpt_write_file_atomic(path, "--dump-params file", "--dump-params path", &part, 1);
    free(swapped);
    if (s != DT_OK) {
        cli_error("%s", dt_last_error());
        return EXIT_FAIL;
    }
    return EXIT_OK;
}

/* Rank 0's read: EXIT_OK, else a message in why and the exit code it calls for: EXIT_USAGE for a
 * path that cannot be used (missing, unreadable, not a file, another model's size: the command
 * line named the wrong file), EXIT_FAIL for a file that is there but damaged (a read that fails,
 * a value that is not finite), as a damaged --data file is, and for an open that the system
 * failed (EIO, EMFILE: the same command may work again; cli_input_exit's rule). */
static int read_params(const char *path, float *p, size_t n, char *why, size_t len)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat sb;
    if (fd < 0) {
        const int err = errno;
        char advice[IO_FIX_LEN];
        snprintf(why, len, "cannot open --init-params %s: %s: %s", path, strerror(err),
                 io_error_fix(err, "--init-params file", NULL, advice, sizeof advice));
        /* A path that is not a regular file is the command line's mistake however the open failed
         * (a socket's is ENXIO); so are a missing or unreadable one (cli_input_exit). */
        struct stat sp;
        return stat(path, &sp) == 0 && !S_ISREG(sp.st_mode) ? EXIT_USAGE : cli_input_exit(DT_ERR_IO, path);
    }
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        snprintf(why, len, "--init-params %s is not a regular file", path);
        close(fd);
        return EXIT_USAGE;
    }
    if ((unsigned long long)sb.st_size != (unsigned long long)n * 4) {
        snprintf(why, len,
                 "--init-params %s holds %lld bytes; this model has %zu parameters, %zu bytes of fp32: "
                 "write it from the same --model and --input (dtrain train --dump-params, or numpy's "
                 "tofile of a float32 array in the layout of docs/training.md, Parameter files)",
                 path, (long long)sb.st_size, n, n * 4);
        close(fd);
        return EXIT_USAGE;
    }
    size_t got = 0;
    char *b = (char *)p;
    while (got < n * 4) {
        ssize_t r = read(fd, b + got, n * 4 - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            snprintf(why, len, "reading --init-params %s failed: %s", path, r < 0 ? strerror(errno) : "end of file");
            close(fd);
            return EXIT_FAIL;
        }
        got += (size_t)r;
    }
    close(fd);
    if (!host_is_little())
        for (size_t i = 0; i < n; i++) {
            uint32_t v;
            memcpy(&v, &p[i], 4);
            v = __builtin_bswap32(v);
            memcpy(&p[i], &v, 4);
        }
    for (size_t i = 0; i < n; i++)
        if (!isfinite(p[i])) {
            snprintf(why, len, "--init-params %s: parameter %zu (byte offset %zu) is %g, not a finite number", path, i,
                     i * 4, (double)p[i]);
            return EXIT_FAIL;
        }
    return EXIT_OK;
}

int params_load(dt_ctx *ctx, dt_model *m, const char *path, int *agreed)
{
    *agreed = 0;
    const size_t n = dt_model_num_params(m);
    float *p = malloc(n * sizeof *p);
    char why[1024] = "";
    float failed = EXIT_OK;
    if (!p) {
        cli_error("out of memory for the %zu parameters of --init-params", n);
        failed = EXIT_USAGE;
    } else if (dt_rank(ctx) == 0) {
        const int rc = read_params(path, p, n, why, sizeof why);
        if (rc != EXIT_OK) cli_error("%s", why);
        failed = (float)rc;
    }
    /* Rank 0's verdict is everyone's (only rank 0 reads, so the sum is its exit code, unless memory
     * failed elsewhere too): then all start from its values, or all stop with one code. */
    dt_status s = dt_world_size(ctx) > 1 ? dt_allreduce(ctx, &failed, 1, DT_F32, DT_SUM) : DT_OK;
    if (!s && !failed && dt_world_size(ctx) > 1) s = dt_broadcast(ctx, p, n, DT_F32, 0);
    if (!s && !failed) s = dt_model_set_params(m, p);
    free(p);
    if (s) {
        cli_error("%s", dt_last_error());
        return EXIT_FAIL;
    }
    if (failed == EXIT_OK) return EXIT_OK;
    *agreed = 1;
    return failed == EXIT_FAIL ? EXIT_FAIL : EXIT_USAGE;
}
