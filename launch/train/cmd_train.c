/*
 * cmd_train.c - `dtrain train`: data-parallel training of a layer-list model on a dataset file
 * (--data) or the synthetic data, written against include/dtrain.h alone.
 *
 * The command in order: the flags and their checks before anything starts, dt_init, the setup
 * (data, model, optimizer, schedule, a resumed run's checkpoint, the loader), the steps
 * (train_loop.c), and the end: the ranks' parameters compared, --dump-params, the final
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
    if (!cli_peer_failure(s)) cli_error("%s (%s)", dt_last_error(), dt_strerror(s));
    return s == DT_ERR_INVALID_ARG ? EXIT_USAGE : EXIT_FAIL;
}

int train_shared_error(const train_run *r, const char *fmt, ...)
{
    g_failure_shared = 1;
    if (r->rank != 0) return EXIT_FAIL;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cli_error_job("%s", msg); /* every rank has it, and rank 0 says it for all */
    return EXIT_FAIL;
}

void train_failure_shared(void) { g_failure_shared = 1; }

/* A failure of the model's set-up: train_status_error, and when it ran out of memory, what did, for
 * the summary (train_oom_report) once the run is freed. A failure every rank returned (shared: a
 * model the grammar refuses, met by every rank) goes through one exchange more, so that the ranks
 * that met it alike say it once, not each with its rank; a rank that has it from a peer says
 * nothing, as before. */
static int setup_error(train_run *r, dt_status s, const char *what)
{
    /* The summary is for the rank that ran out: a peer's, reported here, is said by that rank. */
    if (s == DT_ERR_NOMEM && !status_from_peer()) snprintf(r->oom_at, sizeof r->oom_at, "%s", what);
    if (r->world <= 1 || !status_shared(s)) return train_status_error(s);
    int shared = 0;
    const int rc = cli_say_shared_failure(r->ctx, s, NULL, &shared);
    g_failure_shared = shared;
    return rc;
}

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
static int gpu_grads(train_run *r, const char *who, const char *alt)
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
    return cfg->device == DT_DEVICE_CUDA ? gpu_grads(r, "--device cuda", "") : EXIT_OK;
}

/* Rank 0 alone writes some files: it tries their path before training and hands its verdict
 * (`why`, empty when the path is good) to every rank, so that all refuse together or none does.
 * Collective. */
static int rank0_verdict(train_run *r, char *why, size_t len)
{
    int refused;
    const dt_status s = cli_rank0_verdict(r->ctx, why, len, &refused);
    if (s) return train_status_error(s);
    /* Every rank has the verdict and ends on it by itself: an abort could kill rank 0 before its
     * message, the one that says what to fix, left the process. */
    if (refused) g_failure_shared = 1;
    return refused ? EXIT_USAGE : EXIT_OK;
}

/* --metrics, --trace and --dump-params: rank 0 (which writes them) tries the paths now, so an
 * unwritable one (a directory, say) stops the run before it trains rather than after; then every
 * rank starts recording. Collective. */
static int train_outputs_begin(train_run *r)
{
    const train_opts *t = &r->t;
    if (!t->metrics && !t->trace && !t->dump) return EXIT_OK;
    char why[1024] = "";
    if (r->rank == 0 && ((t->metrics && ckpt_write_file_try(t->metrics, "--metrics")) ||
                         (t->trace && ckpt_write_file_try(t->trace, "--trace")) ||
                         (t->dump && ckpt_write_file_try(t->dump, "--dump-params"))))
        snprintf(why, sizeof why, "%s", dt_last_error());
    else if (r->rank == 0 && t->metrics)
        (void)metrics_try(t->metrics, t->resume, why, sizeof why);
    int rc = rank0_verdict(r, why, sizeof why);
    if (rc || !t->trace) return rc;
    dt_status s;
    if ((s = dt_trace_start(r->ctx, 0)) ||
        (t->trace_first && (s = dt_trace_set_steps(r->ctx, t->trace_first, t->trace_last))))
        return train_status_error(s);
    return EXIT_OK;
}

/* A run without --resume whose --checkpoint-dir holds an earlier run's checkpoints: its own go
 * beside them (one of the same step replaced, --keep-checkpoints pruning across both), and a later
 * --resume auto goes on from the newest of either run, perhaps the earlier one's. Said once, as a
 * warning: starting over on purpose is allowed. */
static void earlier_checkpoints_warn(const char *dir)
{
    ckpt_entry *e = NULL;
    size_t n = 0;
    if (ckpt_list(dir, &e, &n) || n == 0) return;
    char steps[64];
    if (n == 1)
        snprintf(steps, sizeof steps, "step %ld", e[0].step);
    else
        snprintf(steps, sizeof steps, "steps %ld to %ld", e[n - 1].step, e[0].step);
    fprintf(stderr,
            "dtrain: warning: --checkpoint-dir %s already holds %zu checkpoint%s of an earlier run (%s) and this run "
            "does not resume: its checkpoints go beside them (one of the same step replaced), --keep-checkpoints "
            "prunes across both, and a later --resume auto goes on from the newest of either run; give --resume "
            "auto to go on from step %ld, or an empty --checkpoint-dir to start over\n",
            dir, n, n == 1 ? "" : "s", steps, e[0].step);
    ckpt_list_free(e, n);
}

/* --checkpoint-dir: rank 0 (which writes the checkpoints) makes and tries the directory now, so a
 * bad one stops the run before it trains rather than at its first save (on a stop request, with
 * exit 1 instead of the requeue's 75), and one that another run holds is refused; interrupted
 * saves' temporary files go. Collective. */
static int train_ckpt_dir_begin(train_run *r)
{
    if (!r->t.ckpt_dir) return EXIT_OK;
    char why[1024] = "";
    /* The directory's lock lasts as long as this process: its end, however it comes, drops it. */
    int lock_fd;
    if (r->rank == 0 && ckpt_dir_prepare(r->t.ckpt_dir, &lock_fd))
        snprintf(why, sizeof why, "%s", dt_last_error());
    else if (r->rank == 0 && !r->t.resume)
        earlier_checkpoints_warn(r->t.ckpt_dir);
    return rank0_verdict(r, why, sizeof why);
}

/* The refusals that need dt_init's answers: --device auto took a GPU (gpu_grads' rule), and the
 * synthetic data smaller than one global batch. */
static int setup_refusals(train_run *r, const dt_placement *pl)
{
    const train_opts *t = &r->t;
    int rc;
    /* --device auto took a GPU: the same rule. */
    if (pl->device == DT_DEVICE_CUDA &&
        (rc = gpu_grads(r, "--device auto chose the GPU, which", ", or train on the CPU with --device cpu")))
        return rc;
    if (!t->data && (size_t)t->dataset_size < (size_t)r->world * (size_t)t->batch) {
        /* Every rank has the same flags and world, so the same verdict: all end, none aborts the
         * others, and rank 0 says it once for all (no exchange needed). */
        g_failure_shared = 1;
        if (r->rank == 0)
            cli_error_job("--dataset-size %ld is smaller than one global batch of %d rank%s x %d", t->dataset_size,
                          r->world, cli_s(r->world), t->batch);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

/* The training data (and held-out data). Every rank opens --data on its own: a wrong path fails on
 * all of them alike, said once (with how many ranks met it) and ended by every rank, not once per
 * rank and an abort. The synthetic data reads no file, and its flag errors (--eval-every without
 * --data) are every rank's alike: rank 0 says them, every rank ends on its own, and a run adds no
 * exchange (the collectives keep their numbers: DTRAIN_TEST_HANG). Collective with --data. */
static int setup_data(train_run *r)
{
    const train_opts *t = &r->t;
    /* --resume auto: the figures the checkpoint brings, before the open, which then makes no
     * statistics pass the load would throw away. */
    train_figures fig;
    dt_status s;
    if ((s = train_ckpt_peek(r, &fig))) return train_status_error(s);
    char why[2048] = "";
    cli_error_capture(why, sizeof why);
    int rc = train_data_open(t, r->read_threads, &fig, &r->data);
    free(fig.figures);
    cli_error_capture(NULL, 0);
    int shared = 0;
    if (t->data) {
        rc = cli_agree_failure(r->ctx, rc, why, &shared);
        if (!rc) rc = train_data_normalize(r->ctx, t, &r->data, &shared);
    } else if (rc) {
        shared = 1;
        if (r->rank == 0) cli_error_job("%s", why);
    }
    if (rc) g_failure_shared = shared;
    return rc;
}

/* The model and its optimizer state, once the memory they need is known to fit, checked against
 * the data; and the run's record of the data. */
static int setup_model(train_run *r, const dt_placement *pl)
{
    const train_opts *t = &r->t;
    int rc;
    dt_status s;
    if ((rc = train_memory_check(r, pl))) return rc;
    if ((s = dt_model_create(r->ctx, t->model, r->data.input[0] ? r->data.input : NULL, (uint64_t)t->seed, t->batch,
                             &r->m)))
        return setup_error(r, s, "while making the model");
    if ((s = dt_optimizer_create(&t->optim, dt_model_num_params(r->m), &r->opt)))
        return setup_error(r, s, "while making the optimizer state");
    /* The data against the model and the held-out set's open: each rank's own, alike on all of
     * them (a shape that does not fit, a missing --eval-data), so said once as --data's open (the
     * synthetic data's, made here, needs no exchange: the collectives keep their numbers). */
    char why[2048] = "";
    if (t->data) cli_error_capture(why, sizeof why);
    rc = train_data_check_and_eval(t, r->m, r->read_threads, &r->data);
    if (t->data) {
        cli_error_capture(NULL, 0);
        int shared = 0;
        if ((rc = cli_agree_failure(r->ctx, rc, why, &shared))) g_failure_shared = shared;
    }
    if (rc) return rc;
    /* The BLAS threads on the CPU alone: a GPU run's GEMMs are cuBLAS's. */
    train_record_make(t, r->world, r->data.train, pl->device == DT_DEVICE_CUDA ? 0 : pl->blas_threads, &r->data.rec);
    return EXIT_OK;
}

/* The steps and the learning rate schedule, placed from step 0 now, so the start line says the
 * run's steps; again after a resume. Their refusals (--epochs with --steps, an --lr-schedule that
 * does not fit the steps) come from the flags and the data's size, alike on every rank: said once
 * and ended by every rank, as --data's; a rank whose data differs says its own and all still end
 * together. Collective. */
static int setup_schedule(train_run *r)
{
    char sched_why[1024] = "";
    cli_error_capture(sched_why, sizeof sched_why);
    int rc = train_steps_and_schedule(r);
    if (!rc) rc = train_epochs_place(r);
    cli_error_capture(NULL, 0);
    int sched_shared = 0;
    rc = cli_agree_failure(r->ctx, rc, sched_why, &sched_shared);
    if (rc) g_failure_shared = sched_shared;
    return rc;
}

/* How the model trains: the flags' settings, the parameters of --init-params, the precision, the
 * gradients' reduction and the optimizer state's sharding. */
static int setup_training(train_run *r)
{
    train_opts *t = &r->t;
    int rc;
    dt_status s;
    if (t->accum_steps > 1 && (s = dt_model_set_accum_steps(r->m, t->accum_steps)))
        return setup_error(r, s, "while making the gradient accumulation buffer");
    dt_model_set_step_overlap(r->m, t->step_overlap);
    dt_model_set_graphs(r->m, t->graphs);
    dt_model_set_fused_relu(r->m, t->fused_relu);
    /* train_loop.c settles each step's verdict once the next batch is made. */
    dt_model_set_deferred_verdict(r->m, 1);
    if (t->clip_grad_norm > 0 && (s = dt_model_set_clip_grad_norm(r->m, t->clip_grad_norm)))
        return train_status_error(s);
    if (t->init_params && (rc = params_load(r->ctx, r->m, t->init_params))) {
        /* EXIT_USAGE: every rank learned rank 0's verdict on the file, and ends on its own. */
        if (rc == EXIT_USAGE) g_failure_shared = 1;
        return rc;
    }
    /* Gradients are already divided by the global batch (train_loop.c's scale): sum them. */
    t->sync.op = DT_SUM;
    if ((s = dt_model_set_precision(r->m, t->precision, r->grad_t)))
        return setup_error(r, s, "while setting the precision");
    if ((s = dt_model_set_sync(r->m, &t->sync))) return setup_error(r, s, "while setting up the gradient reduction");
    if ((s = dt_model_shard_optimizer(r->m, r->opt))) return setup_error(r, s, "while sharding the optimizer state");
    if (r->sc) dt_model_set_nonfinite_check(r->m, DT_NONFINITE_CHECK_AT_RISK);
    return EXIT_OK;
}

/* --resume auto: the newest checkpoint loaded (rank 0 says which), the steps placed after it, and a
 * checkpoint past --steps refused. */
static int setup_resume(train_run *r)
{
    const train_opts *t = &r->t;
    int rc;
    dt_status s;
    if (t->resume) {
        if ((s = train_ckpt_resume(r))) return train_status_error(s);
        if (r->rank == 0 && !t->quiet) {
            if (r->first_step)
                printf("resumed from %s/ckpt-%010ld.dtc at step %ld\n", t->ckpt_dir, r->first_step, r->first_step);
            else
                printf("no checkpoint in %s: starting at step 0\n", t->ckpt_dir);
            fflush(stdout);
        }
    }
    /* The refusals below come from the flags, the data's size and the checkpoint's step, which
     * rank 0 read for all: alike on every rank, said once, and every rank ends on its own. */
    if (r->first_step) {
        char why[1024] = "";
        cli_error_capture(why, sizeof why);
        rc = train_epochs_place(r);
        cli_error_capture(NULL, 0);
        int shared = 0;
        if ((rc = cli_agree_failure(r->ctx, rc, why, &shared))) {
            g_failure_shared = shared;
            return rc;
        }
    }
    /* --epochs ends no earlier than the checkpoint; --steps may (a rerun with a smaller count). */
    if (r->first_step > t->steps) {
        g_failure_shared = 1;
        if (r->rank == 0)
            cli_error_job("--steps %ld: the checkpoint in %s is of step %ld, past it, so there is nothing to train; "
                          "give --steps above %ld to go on training, or another --checkpoint-dir to start afresh",
                          t->steps, t->ckpt_dir, r->first_step, r->first_step);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

/* From the first step on: --metrics opened, the trace's name, the loader. */
static int setup_first_step(train_run *r)
{
    const train_opts *t = &r->t;
    int rc;
    dt_status s;
    /* After the resume: its step says which records of an earlier run stay. */
    if (r->rank == 0 && t->metrics && !(r->metrics = metrics_open(t->metrics, t->resume, r->first_step, t->quiet)))
        return EXIT_FAIL;
    /* After the metrics file is made: the trace's name beside an earlier one is none of it. */
    if ((rc = train_trace_resumed(r))) return rc;
    if (r->rank == 0) fflush(stdout);
    if ((s = dt_loader_create(r->ctx, r->data.train, r->rank, r->world, t->batch, r->first_step * t->accum_steps,
                              r->loader_threads, CLI_LOADER_DEPTH, &r->ld)))
        return train_status_error(s);
    if (r->rank == 0 && !t->quiet) train_report_data(r);
    return EXIT_OK;
}

/* After dt_init, up to the first step. EXIT_OK, or the exit code after printing why. Collective. */
static int train_setup(train_run *r, const dt_placement *pl)
{
    const train_opts *t = &r->t;
    int rc;
    if ((rc = setup_refusals(r, pl))) return rc;
    /* With --epochs the steps are not known before the data: the fault's step is not checked. */
    if ((rc = fault_check(&r->flt, r->world, t->epochs ? LONG_MAX : t->steps, t->ckpt_dir)) ||
        (rc = train_outputs_begin(r)) || (rc = train_ckpt_dir_begin(r)))
        return rc;
    fault_maybe(&r->flt, r->rank, 0, NULL);
    r->loader_threads = cli_loader_auto(r->ctx, t->loader_threads);
    /* The statistics pass and evaluation read with the loader's threads, at least one. */
    r->read_threads = r->loader_threads > 0 ? r->loader_threads : 1;
    if ((rc = setup_data(r)) || (rc = setup_model(r, pl)) || (rc = setup_schedule(r)) || (rc = setup_training(r)))
        return rc;
    if (r->rank == 0 && !t->quiet) train_report_start(r);
    train_report_wire(r);
    if ((rc = setup_resume(r))) return rc;
    return setup_first_step(r);
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
