/*
 * cmd_train.c - `dtrain train`: data-parallel training of a layer-list model on a dataset file
 * (--data) or the synthetic data, written against include/dtrain.h alone.
 *
 * The command in order: the flags and their checks before anything starts, dt_init, the setup
 * (train_setup.c: data, model, optimizer, schedule, a resumed run's checkpoint, the loader), the
 * steps (train_loop.c), and the end: the ranks' parameters compared, --dump-params, the final
 * checkpoint. What rank 0 prints on the way is train_report.c's.
 */
#include "launch/train/train_run.h"

#include "launch/cli.h"
#include "base/status.h"
#include "launch/train/params_io.h"
#include "runtime/checkpoint/ckpt_format.h"
#include "runtime/checkpoint/ckpt_write_file.h"

#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether the failure that ends this run, reported by train_status_error, is one every rank got
 * (status_shared), for cmd_train's ending. Set by every train_status_error (read where the call
 * returned s, before anything else can record an error); a failure train_status_error reports
 * always ends the run, so a failure after it cannot meet a stale 1, and one reported only with
 * cli_error leaves the 0 it starts with: aborted. */
static int g_failure_shared;

int train_status_error(dt_status s)
{
    g_failure_shared = status_shared(s);
    if (!cli_peer_failure(s)) cli_status_error(NULL, s);
    return s == DT_ERR_INVALID_ARG ? EXIT_USAGE : EXIT_FAIL;
}

int train_shared_error(const train_run *r, int rc, const char *fmt, ...)
{
    g_failure_shared = 1;
    if (r->rank != 0) return rc;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cli_error_job("%s", msg); /* every rank has it, and rank 0 says it for all */
    return rc;
}

void train_failure_shared(void) { g_failure_shared = 1; }

/* Frees what a run holds (any of it may be NULL); the context stays. */
static void train_release(train_run *r)
{
    dt_scaler_free(r->sc);
    if (r->metrics) fclose(r->metrics);
    dt_loader_free(r->ld);
    train_data_free(&r->data);
    dt_optimizer_free(r->opt);
    dt_model_free(r->m);
    r->sc = NULL, r->metrics = NULL, r->ld = NULL, r->opt = NULL, r->m = NULL;
}

/* On the GPU, 16-bit models keep fp32 gradients (as torch.cuda.amp): grad_t becomes fp32, or a
 * 16-bit --grad-comm given with them is a usage error naming `who` chose the GPU and `alt`. */
int train_gpu_grads(train_run *r, const char *who, const char *alt)
{
    if (r->t.precision == DT_F32 || r->grad_t == DT_F32) return EXIT_OK;
    if (r->t.grad_comm_set) {
        cli_error("%s keeps the gradients of a 16-bit model in fp32 in this version: drop --grad-comm%s", who, alt);
        return EXIT_USAGE;
    }
    r->grad_t = DT_F32;
    return EXIT_OK;
}

/* Before dt_init: the flags together, the loss scaler, DTRAIN_FAULT, the stop handlers (a refusal
 * before them leaves the stop signals blocked: nothing has started, so nothing is lost). A refusal
 * here starts nothing; the caller frees r->sc. */
static int train_prepare(train_run *r, const dt_config *cfg)
{
    train_opts *t = &r->t;
    /* Gradients of a 16-bit run are kept and sent in its type, or in fp32 when asked. */
    r->grad_t = DT_F32;
    if (t->precision != DT_F32) {
        if (t->grad_comm_set && t->sync.grad_comm != DT_F32 && t->sync.grad_comm != t->precision) {
            const char *p = train_type_name(t->precision);
            cli_error("--grad-comm %s does not go with --precision %s: the gradients of a %s run are kept and sent "
                      "in %s (the default) or in fp32 (--grad-comm fp32)",
                      train_type_name(t->sync.grad_comm), p, p, p);
            return EXIT_USAGE;
        }
        r->grad_t = t->grad_comm_set && t->sync.grad_comm == DT_F32 ? DT_F32 : t->precision;
        t->sync.grad_comm = DT_F32; /* the wire type of fp32 gradients; 16-bit ones travel as they are */
    }
    /* Loss scaling: dynamic by default for fp16 only (bf16 has fp32's range). */
    const int use_scaler = t->loss_scale < 0 ? t->precision == DT_F16 : t->loss_scale > 0;
    if (t->loss_scale == 2) {
        t->scaler.dynamic = 0;
        if (t->scaler.max_scale < t->scaler.init_scale) t->scaler.max_scale = t->scaler.init_scale;
        if (t->scaler.min_scale > t->scaler.init_scale) t->scaler.min_scale = t->scaler.init_scale;
    }
    if (use_scaler && dt_scaler_create(&t->scaler, &r->sc)) {
        cli_error("%s", dt_last_error());
        return EXIT_USAGE;
    }
    int rc = fault_parse(&r->flt);
    if (rc) return rc;
    if (t->resume && !t->ckpt_dir) {
        cli_error("--resume auto needs --checkpoint-dir DIR (where to look for checkpoints)");
        return EXIT_USAGE;
    }
    if (t->ckpt_every && !t->ckpt_dir) {
        cli_error("--checkpoint-every needs --checkpoint-dir DIR");
        return EXIT_USAGE;
    }
    if (t->keep_ckpts && !t->ckpt_dir) {
        cli_error("--keep-checkpoints needs --checkpoint-dir DIR (the directory it keeps to its newest checkpoints)");
        return EXIT_USAGE;
    }
    /* Before dt_init (MPI_Init, the singleton's daemon): a stop asked for from the program's start on
     * is kept (cli_signals_block) and acts from here. */
    train_stop_install(t->ckpt_dir);
    /* Asked for the GPU: its rule before anything starts. */
    return cfg->device == DT_DEVICE_CUDA ? train_gpu_grads(r, "--device cuda", "") : EXIT_OK;
}

/* The finished run: the final parameters compared over the ranks, the last lines, --dump-params,
 * the final checkpoint, --metrics closed. Collective. */
static int train_finish(train_run *r)
{
    const train_opts *t = &r->t;
    const size_t n = dt_model_num_params(r->m);
    /* The final parameters on the host (a copy from a GPU model), for the check and the dump. */
    float *host = dt_model_on_gpu(r->m) ? malloc(n * sizeof *host) : NULL;
    const float *final_params = host ? host : dt_model_params(r->m);
    if (dt_model_on_gpu(r->m) && !host) {
        cli_error("out of host memory for a copy of the %zu parameters (%.1f MiB) to check and dump them: free host "
                  "memory or run fewer ranks per node",
                  n, (double)n * sizeof *host / 1048576.0);
        return EXIT_FAIL;
    }
    dt_status s;
    if (host && (s = dt_model_get_params(r->m, host))) {
        free(host);
        return train_status_error(s);
    }
    /* Every rank must end with the same parameters, bit for bit: each applies the same reduced
     * gradients and skips the same overflowing steps. */
    int differ = 0, first_differ = -1;
    s = dt_check_replicas(r->ctx, final_params, n * sizeof *final_params, &differ, &first_differ);
    if (s == DT_ERR_NUMERIC) {
        g_failure_shared = status_shared(s); /* every rank has the verdict: each ends on its own */
        if (r->rank == 0)
            cli_error("the ranks ended with different parameters (%d of %d differ from rank 0, the first is rank %d): "
                      "a bug in dtrain (or a rank's memory is faulty); please report it with this command line",
                      differ, r->world, first_differ);
        free(host);
        return EXIT_FAIL;
    }
    const int agree = s == DT_OK;
    /* --bad-samples skip: how many undecodable samples the ranks replaced (each counts its own). */
    float bad = (float)dt_dataset_bad_samples(r->data.train);
    if (t->skip_bad && r->world > 1 && (s = dt_allreduce(r->ctx, &bad, 1, DT_F32, DT_SUM))) {
        free(host);
        return train_status_error(s);
    }
    if (r->rank == 0) train_report_end(r, agree, (double)bad);
    /* The finished run's checkpoint first (collective): a requeued job that already finished does
     * no step again, and a --dump-params that fails (a full disk) loses no training. */
    if (t->ckpt_dir && r->first_step < t->steps && r->saved_at != t->steps && (s = train_ckpt_save(r, t->steps))) {
        free(host);
        const int rc = train_status_error(s);
        train_ckpt_report_unsaved(r, t->steps);
        return rc;
    }
    const int dumped = r->rank == 0 && t->dump ? params_dump(t->dump, final_params, n) : EXIT_OK;
    free(host);
    if (dumped != EXIT_OK) return dumped;
    if (r->metrics) {
        const int closed = fclose(r->metrics);
        r->metrics = NULL;
        /* Every record was flushed when written: a failure here (NFS reports some at close) may
         * have lost the last one. The training is saved: a warning, as for a write (train_report.c). */
        if (closed != 0) {
            snprintf(r->metrics_why, sizeof r->metrics_why, "%s, at close", strerror(errno));
            r->metrics_lost = t->steps;
        }
    }
    return EXIT_OK;
}

int cmd_train(int argc, char **argv)
{
    dt_config cfg;
    train_run r;
    memset(&r, 0, sizeof r);
    int rc = train_flags_parse(argc, argv, &cfg, &r.t);
    if (rc) return rc;
    cli_job job;
    if ((rc = train_prepare(&r, &cfg)) || (rc = cli_begin(&cfg, &job))) {
        /* Nothing started (or dt_init failed, and the job is being aborted): only the scaler is held. */
        dt_scaler_free(r.sc);
        return rc;
    }
    cli_warn_alone(&job);
    r.ctx = job.ctx, r.rank = job.rank, r.world = job.world;
    if (!(rc = train_setup(&r, &job.pl))) {
        const train_end end = train_loop(&r, &rc);
        if (end == TRAIN_END_STOPPED || end == TRAIN_END_NUMERIC) {
            /* Every rank ended at the same step: a clean exit, not an abort, and the trace of the
             * steps done (a preempted run's is the one worth reading); its failure is reported
             * but does not change the exit code. */
            train_report_metrics_lost(&r);
            train_trace_end(&r);
            train_release(&r);
            dt_finalize(r.ctx);
            if (end == TRAIN_END_NUMERIC) return EXIT_FAIL;
            return train_stop_exit_code(&r);
        }
        if (end == TRAIN_END_DONE && !(rc = train_finish(&r)) && !(rc = train_trace_end(&r))) {
            train_report_metrics_lost(&r);
            train_release(&r);
            return cli_finish(r.ctx, r.final_eval_failed ? EXIT_FAIL : EXIT_OK);
        }
    }
    train_report_metrics_lost(&r);
    train_release(&r);
    if (r.oom_at[0]) train_oom_report(&r);
    /* A failure every rank got (a checkpoint that could not be written, a model no rank could make)
     * ends with each rank finalizing; a rank that may have failed alone takes the job down. */
    return cli_end_failed(r.ctx, rc, g_failure_shared);
}
