/*
 * train_setup.c - `dtrain train` from dt_init to its first step (train_run.h): the refusals that
 * need the world, the output paths and the checkpoint directory tried, the data, the model and its
 * optimizer, the steps and schedule, the training settings, a resumed run's checkpoint, the loader.
 * Each refusal ends every rank together: one that every rank meets alike is said once (an exchange,
 * or rank 0 alone where the flags decide it), and the run's ending (cmd_train.c) lets each rank
 * finalize instead of aborting the job.
 */
#include "launch/train/train_run.h"

#include "launch/cli.h"
#include "base/status.h"
#include "launch/train/params_io.h"
#include "runtime/checkpoint/ckpt_format.h"
#include "runtime/checkpoint/ckpt_write_file.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    if (shared) train_failure_shared();
    return rc;
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
    if (refused) train_failure_shared();
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
        (rc = train_gpu_grads(r, "--device auto chose the GPU, which", ", or train on the CPU with --device cpu")))
        return rc;
    if (!t->data && (size_t)t->dataset_size < (size_t)r->world * (size_t)t->batch) {
        /* Every rank has the same flags and world, so the same verdict: all end, none aborts the
         * others, and rank 0 says it once for all (no exchange needed). */
        return train_shared_error(r, EXIT_USAGE,
                                  "--dataset-size %ld is smaller than one global batch of %d rank%s x %d",
                                  t->dataset_size, r->world, cli_s(r->world), t->batch);
    }
    return EXIT_OK;
}

/* --drop-last leaves out the samples that do not fill a whole step: data smaller than one global
 * batch would have no step at all. Refused before the model is made (and within the open's own
 * exchange, so said once), not by the first batch on every rank. */
static int data_fills_a_step(const train_run *r, char *why, size_t cap)
{
    const train_opts *t = &r->t;
    const size_t n = dt_dataset_size(r->data.train), global = (size_t)r->world * (size_t)t->batch;
    if (!t->drop_last || n >= global) return EXIT_OK;
    char held[64] = "";
    if (t->holdout > 0) snprintf(held, sizeof held, " (after --holdout %g)", t->holdout);
    snprintf(why, cap,
             "--data %s: %zu training samples%s are fewer than one global batch of %d rank%s x --batch %d, and "
             "--drop-last leaves out a step the data cannot fill: use a smaller --batch or fewer ranks, or drop "
             "--drop-last",
             t->data, n, held, r->world, cli_s(r->world), t->batch);
    return EXIT_USAGE;
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
    if (!t->data) return rc ? train_shared_error(r, rc, "%s", why) : EXIT_OK;
    if (!rc) rc = data_fills_a_step(r, why, sizeof why);
    int shared = 0;
    rc = cli_agree_failure(r->ctx, rc, why, &shared);
    if (!rc) rc = train_data_normalize(r->ctx, t, &r->data, &shared);
    if (rc && shared) train_failure_shared();
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
        if ((rc = cli_agree_failure(r->ctx, rc, why, &shared)) && shared) train_failure_shared();
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
 * together. --synthetic-on device on a rank placed on the CPU joins the same exchange: the loader
 * that would refuse it comes after the resume, and on a CPU job every rank meets it. Collective. */
static int setup_schedule(train_run *r, const dt_placement *pl)
{
    char sched_why[1024] = "";
    cli_error_capture(sched_why, sizeof sched_why);
    int rc = cli_synthetic_on_check(pl, r->t.synthetic_on);
    if (!rc) rc = train_steps_and_schedule(r);
    if (!rc) rc = train_epochs_place(r);
    cli_error_capture(NULL, 0);
    int sched_shared = 0;
    rc = cli_agree_failure(r->ctx, rc, sched_why, &sched_shared);
    if (rc && sched_shared) train_failure_shared();
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
    int agreed = 0;
    if (t->init_params && (rc = params_load(r->ctx, r->m, t->init_params, &agreed))) {
        /* Every rank learned rank 0's verdict on the file, and ends on its own. */
        if (agreed) train_failure_shared();
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
            if (shared) train_failure_shared();
            return rc;
        }
    }
    /* --epochs ends no earlier than the checkpoint; --steps may (a rerun with a smaller count). */
    if (r->first_step > t->steps) {
        return train_shared_error(r, EXIT_USAGE,
                                  "--steps %ld: the checkpoint in %s is of step %ld, past it, so there is nothing to "
                                  "train; give --steps above %ld to go on training, or another --checkpoint-dir to "
                                  "start afresh",
                                  t->steps, t->ckpt_dir, r->first_step, r->first_step);
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
int train_setup(train_run *r, const dt_placement *pl)
{
    const train_opts *t = &r->t;
    int rc;
    if ((rc = train_flags_agree(r)) || (rc = setup_refusals(r, pl))) return rc;
    /* With --epochs the steps are not known before the data: the fault's step is not checked. */
    if ((rc = fault_check(&r->flt, r->world, t->epochs ? LONG_MAX : t->steps, t->ckpt_dir)) ||
        (rc = train_outputs_begin(r)) || (rc = train_ckpt_dir_begin(r)))
        return rc;
    fault_maybe(&r->flt, r->rank, 0, NULL);
    r->loader_threads = cli_loader_auto(r->ctx, t->loader_threads);
    /* The statistics pass and evaluation read with the loader's threads, at least one. */
    r->read_threads = r->loader_threads > 0 ? r->loader_threads : 1;
    if ((rc = setup_data(r)) || (rc = setup_model(r, pl)) || (rc = setup_schedule(r, pl)) || (rc = setup_training(r)))
        return rc;
    if (r->rank == 0 && !t->quiet) train_report_start(r);
    train_report_wire(r);
    if ((rc = setup_resume(r))) return rc;
    return setup_first_step(r);
}
