/*
 * test_finalize.c - dt_init refuses a dt_config set in code with a field out of range (as the
 * DTRAIN_* variables are refused), and after dt_finalize the process is the caller's: the guard
 * that ends a rank stuck in MPI_Finalize is stopped when MPI_Finalize returns, so a program that
 * goes on working past the timeout + 3 s (post-processing, a second phase) is not killed with
 * exit 1 and a network diagnosis.
 */
#include "dtrain.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int failures;

static void refused(const char *field, void (*edit)(dt_config *), const char *says)
{
    dt_config cfg;
    dt_config_defaults(&cfg);
    edit(&cfg);
    dt_ctx *ctx = NULL;
    const dt_status s = dt_init(&cfg, &ctx);
    if (s != DT_ERR_INVALID_ARG || ctx || !strstr(dt_last_error(), says)) {
        fprintf(stderr, "FAIL: dt_config.%s: dt_init gave %d, '%s' (wanted DT_ERR_INVALID_ARG saying '%s')\n", field,
                (int)s, dt_last_error(), says);
        failures++;
    }
}

static void timeout_negative(dt_config *c) { c->timeout_s = -5; }
static void timeout_nan(dt_config *c) { c->timeout_s = NAN; }
static void timeout_half(dt_config *c) { c->timeout_s = 0.5; }
static void device_bad(dt_config *c) { c->device = (dt_device_kind)7; }
static void blas_bad(dt_config *c) { c->blas_threads = -1; }
static void thread_bad(dt_config *c) { c->comm_thread = 2; }

int main(void)
{
    refused("timeout_s", timeout_negative, "dt_config.timeout_s -5 is out of range");
    refused("timeout_s", timeout_nan, "dt_config.timeout_s nan is out of range");
    refused("timeout_s", timeout_half, "dt_config.timeout_s 0.5 is out of range");
    refused("device", device_bad, "dt_config.device 7");
    refused("blas_threads", blas_bad, "dt_config.blas_threads -1");
    refused("comm_thread", thread_bad, "comm_thread (2)");

    dt_config cfg;
    dt_config_defaults(&cfg);
    cfg.timeout_s = 1; /* the guard would end the process 4 s after MPI_Finalize began */
    cfg.device = DT_DEVICE_CPU;
    cfg.pin = DT_PIN_NONE;
    dt_ctx *ctx = NULL;
    if (dt_init(&cfg, &ctx) != DT_OK) {
        fprintf(stderr, "FAIL: dt_init: %s\n", dt_last_error());
        return 1;
    }
    const int rank = dt_rank(ctx);
    float x = 1;
    if (dt_allreduce(ctx, &x, 1, DT_F32, DT_SUM) != DT_OK || dt_finalize(ctx) != DT_OK) {
        fprintf(stderr, "FAIL rank %d: %s\n", rank, dt_last_error());
        return 1;
    }
    sleep(6);
    /* Still alive: the guard did not fire. */
    if (failures) return 1;
    printf("rank %d: alive 6 s after dt_finalize with a 1 s timeout; bad configs refused\n", rank);
    return 0;
}
