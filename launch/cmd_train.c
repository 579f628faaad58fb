/*
 * cmd_train.c - `dtrain train`: data-parallel training of a layer-list model on a dataset file
 * (--data) or the synthetic data, written against include/dtrain.h alone.
 *
 * Each step: make this rank's share of the global batch, forward + backward (gradient of the
 * mean loss over this rank's batch), average the gradients over the ranks, optimizer step. Every
 * --log-every steps the loss, accuracy and communication wait are averaged over the ranks and
 * rank 0 prints a line (and a JSON object with --metrics); every --eval-every steps and at the
 * end the model is evaluated on the held-out set, sharded over the ranks.
 */
#include "launch/cli.h"
#include "launch/fault_inject.h"
#include "launch/metrics.h"
#include "launch/lr_schedule.h"
#include "launch/params_io.h"
#include "launch/train_data.h"
#include "launch/train_flags.h"

#include <errno.h>
#include <signal.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


/* SIGUSR1 (SLURM's --signal, scancel --signal) and SIGTERM (preemption, scancel) ask for a clean
 * stop: the ranks agree on it at the end of a step, write a checkpoint and exit with
 * EXIT_PREEMPTED, so a requeued job resumes with --resume auto. */
enum { EXIT_PREEMPTED = 75 }; /* EX_TEMPFAIL: try again later */
static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig) { stop_signal = sig; }

static void install_stop_handlers(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* On the GPU, 16-bit models keep fp32 gradients (as torch.cuda.amp): *grad_t becomes fp32, or a
 * 16-bit --grad-comm given with them is a usage error naming `who` chose the GPU and `alt`. */
static int gpu_grads(const train_opts *t, dt_dtype *grad_t, const char *who, const char *alt)
{
    if (t->precision == DT_F32 || *grad_t == DT_F32) return EXIT_OK;
    if (t->grad_comm_set) {
        cli_error("%s keeps the gradients of a 16-bit model in fp32 in this version: drop --grad-comm%s", who, alt);
        return EXIT_USAGE;
    }
    *grad_t = DT_F32;
    return EXIT_OK;
}

/* Frees what a run holds (any of it may be NULL). */
static void release(dt_scaler *sc, dt_model *m, dt_optimizer *opt, train_data *data, dt_loader *ld, FILE *metrics)
{
    dt_scaler_free(sc);
    if (metrics) fclose(metrics);
    dt_loader_free(ld);
    train_data_free(data);
    dt_optimizer_free(opt);
    dt_model_free(m);
}

/* The held-out figures after `step` steps, and the line that says them (len bytes). Collective. */
static dt_status run_eval(dt_ctx *ctx, dt_model *m, const train_data *d, const train_opts *t, int threads, long step,
                          double *loss, double *acc, char *line, size_t len)
{
    dt_eval_result r = {0};
    dt_status s = dt_evaluate(ctx, m, d->eval, t->batch, threads, &r);
    if (s) return s;
    *loss = r.count ? r.loss_sum / (double)r.count : 0;
    *acc = r.count ? (double)r.correct / (double)r.count : 0;
    snprintf(line, len, "eval %6ld/%ld  held-out loss %.4f  acc %.4f  (%ld of %ld correct)\n", step,
             t->steps, *loss, *acc, r.correct, r.count);
    return DT_OK;
}

/* Loss scaling gave up at `step`: every rank is here (the verdict is shared). Rank 0 prints the
 * scaler's message and which ranks' own gradients were non-finite before the allreduce, and in
 * which layer, so the user knows where the overflow starts. Collective. */
static void report_numeric_stop(dt_ctx *ctx, const dt_model *m, long step)
{
    char why[1024];
    snprintf(why, sizeof why, "%s", dt_last_error());
    const int rank = dt_rank(ctx), world = dt_world_size(ctx);
    float *bad = calloc((size_t)world, sizeof *bad);
    if (bad) {
        bad[rank] = (float)(dt_model_nonfinite_layer(m) + 1);
        if (world > 1 && dt_allreduce(ctx, bad, (size_t)world, DT_F32, DT_SUM)) {
            free(bad);
            bad = NULL;
        }
    }
    if (rank == 0) {
        char where[1024] = "", name[64];
        size_t used = 0;
        for (int r = 0; bad && r < world && used < sizeof where - 100; r++) {
            if (bad[r] < 1) continue;
            dt_model_layer_name(m, (int)bad[r] - 1, name, sizeof name);
            used += (size_t)snprintf(where + used, sizeof where - used, "%s rank %d %s", used ? ";" : "", r, name);
        }
        cli_error("training stopped at step %ld: %s. First non-finite gradients before the allreduce, in backward "
                  "order:%s", step, why, used ? where
                  : " none on any rank (the sum overflowed in the allreduce: use --grad-comm fp32 or bf16)");
    }
    free(bad);
}

int cmd_train(int argc, char **argv)
{
    train_opts t;
    dt_config cfg;
    int rc = train_flags_parse(argc, argv, &cfg, &t);
    if (rc) return rc;
    static const char *tname[] = {"fp32", "fp16", "bf16"};
    /* Gradients of a 16-bit run are kept and sent in its type, or in fp32 when asked. */
    dt_dtype grad_t = DT_F32;
    if (t.precision != DT_F32) {
        if (t.grad_comm_set && t.sync.grad_comm != DT_F32 && t.sync.grad_comm != t.precision) {
            cli_error("--grad-comm %s does not go with --precision %s: the gradients of a %s run are kept and sent "
                      "in %s (the default) or in fp32 (--grad-comm fp32)", tname[t.sync.grad_comm],
                      tname[t.precision], tname[t.precision], tname[t.precision]);
            return EXIT_USAGE;
        }
        grad_t = t.grad_comm_set && t.sync.grad_comm == DT_F32 ? DT_F32 : t.precision;
        t.sync.grad_comm = DT_F32; /* the wire type of fp32 gradients; 16-bit ones travel as they are */
    }
    /* Loss scaling: dynamic by default for fp16 only (bf16 has fp32's range). */
    const int use_scaler = t.loss_scale < 0 ? t.precision == DT_F16 : t.loss_scale > 0;
    if (t.loss_scale == 2) {
        t.scaler.dynamic = 0;
        if (t.scaler.max_scale < t.scaler.init_scale) t.scaler.max_scale = t.scaler.init_scale;
        if (t.scaler.min_scale > t.scaler.init_scale) t.scaler.min_scale = t.scaler.init_scale;
    }
    /* What the run holds, released by release() on every way out (each may still be NULL). */
    dt_scaler *sc = NULL;
    dt_model *m = NULL;
    dt_optimizer *opt = NULL;
    train_data data = {0};
    dt_loader *ld = NULL;
    FILE *metrics = NULL;
    dt_ctx *ctx = NULL;
    dt_status s = DT_OK;
    if (use_scaler && dt_scaler_create(&t.scaler, &sc)) {
        cli_error("%s", dt_last_error());
        return EXIT_USAGE;
    }
    fault flt;
    if ((rc = fault_parse(&flt))) goto refuse;
    if (t.resume && !t.ckpt_dir) {
        cli_error("--resume auto needs --checkpoint-dir DIR (where to look for checkpoints)");
        rc = EXIT_USAGE;
        goto refuse;
    }
    if (t.ckpt_every && !t.ckpt_dir) {
        cli_error("--checkpoint-every needs --checkpoint-dir DIR");
        rc = EXIT_USAGE;
        goto refuse;
    }
    install_stop_handlers();
    /* Asked for the GPU: its rule before anything starts. */
    if (cfg.device == DT_DEVICE_CUDA && (rc = gpu_grads(&t, &grad_t, "--device cuda", ""))) goto refuse;

    cli_job job;
    if ((rc = cli_begin(&cfg, &job))) goto refuse;
    ctx = job.ctx;
    const int rank = job.rank, world = job.world;
    /* --device auto took a GPU: the same rule. */
    if (job.pl.device == DT_DEVICE_CUDA &&
        (rc = gpu_grads(&t, &grad_t, "--device auto chose the GPU, which", ", or train on the CPU with --device cpu")))
        goto abort_rc;
    if (!t.data && (size_t)t.dataset_size < (size_t)world * (size_t)t.batch) {
        cli_error("--dataset-size %ld is smaller than one global batch of %d rank%s x %d", t.dataset_size, world,
                  cli_s(world), t.batch);
        rc = EXIT_USAGE; /* every rank has the same flags: none goes on */
        goto abort_rc;
    }
    if ((rc = fault_check(&flt, world, t.steps))) goto abort_rc;
    fault_maybe(&flt, rank, 0, NULL);
    const int loader_threads = cli_loader_auto(ctx, t.loader_threads);
    /* The statistics pass and evaluation read with the loader's threads, at least one. */
    const int read_threads = loader_threads > 0 ? loader_threads : 1;

    if ((rc = train_data_open(&t, read_threads, &data))) goto abort_rc;
    if ((s = dt_model_create(ctx, t.model, data.input[0] ? data.input : NULL, (uint64_t)t.seed, t.batch, &m)) ||
        (s = dt_optimizer_create(&t.optim, dt_model_num_params(m), &opt)))
        goto fail;
    if ((rc = train_data_check_and_eval(&t, m, read_threads, &data))) goto abort_rc;
    /* Optimizer steps per epoch: each takes --accum-steps batches. */
    const long steps_per_epoch = dt_dataset_steps_per_epoch(data.train, world, t.batch) / t.accum_steps;
    if (t.epochs) {
        if (t.steps_set) {
            cli_error("give --epochs or --steps, not both (--epochs %ld is %ld steps here)", t.epochs,
                      t.epochs * steps_per_epoch);
            rc = EXIT_USAGE;
            goto abort_rc;
        }
        if (steps_per_epoch < 1) {
            cli_error("an epoch of %zu samples has no whole optimizer step of %d rank%s x %d x --accum-steps %d: use "
                      "a smaller --batch or --accum-steps", dt_dataset_size(data.train), world, cli_s(world), t.batch,
                      t.accum_steps);
            rc = EXIT_USAGE;
            goto abort_rc;
        }
        t.steps = t.epochs * steps_per_epoch;
    }
    lr_schedule sched;
    char why[512];
    if (lr_schedule_parse(t.lr_schedule ? t.lr_schedule : "constant", steps_per_epoch, &sched, why, sizeof why) ||
        lr_schedule_check(&sched, t.optim.lr, t.min_lr, t.warmup_steps, t.steps, why, sizeof why)) {
        cli_error("--lr-schedule %s: %s", t.lr_schedule ? t.lr_schedule : "constant", why);
        rc = EXIT_USAGE;
        goto abort_rc;
    }
    if ((t.accum_steps > 1 && (s = dt_model_set_accum_steps(m, t.accum_steps))) ||
        (t.clip_grad_norm > 0 && (s = dt_model_set_clip_grad_norm(m, t.clip_grad_norm))))
        goto fail;
    if (t.init_params && (rc = params_load(ctx, m, t.init_params))) goto abort_rc;
    /* Gradients are already divided by the global batch (see scale below): sum them. */
    t.sync.op = DT_SUM;
    if ((s = dt_model_set_precision(m, t.precision, grad_t)) || (s = dt_model_set_sync(m, &t.sync))) goto fail;
    if (sc) dt_model_set_nonfinite_check(m, 1);
    if (rank == 0) {
        char desc[4096];
        dt_model_describe(m, desc, sizeof desc);
        const int nbuckets = dt_model_num_buckets(m);
        train_data_describe(&t, &data, world, stdout);
        char accum_txt[48] = "";
        if (t.accum_steps > 1) snprintf(accum_txt, sizeof accum_txt, " x %d accumulated", t.accum_steps);
        if (t.lr_schedule || t.warmup_steps)
            printf("lr schedule: %s from %g%s, %ld warmup step%s\n", lr_schedule_name(&sched), (double)t.optim.lr,
                   sched.kind == LR_CONSTANT ? "" : t.min_lr > 0 ? " to --min-lr" : " to 0", t.warmup_steps,
                   cli_s(t.warmup_steps));
        if (t.clip_grad_norm > 0) printf("gradient clipping: global L2 norm at most %g\n", t.clip_grad_norm);
        printf("dtrain train: model %s, %d rank%s x batch %d%s = %d per step, %ld step%s, %s lr %g momentum %g "
               "weight decay %g, seed %ld\ngradients: %d bucket%s (cap %g MiB, first %g MiB), %s, %s on the wire\n%s",
               t.model, world, cli_s(world), t.batch, accum_txt, world * t.batch * t.accum_steps, t.steps, cli_s(t.steps),
               t.optim.kind == DT_OPTIM_SGD ? "sgd" : "adamw", (double)t.optim.lr, (double)t.optim.momentum,
               (double)t.optim.weight_decay, t.seed, nbuckets, cli_s(nbuckets), t.sync.bucket_mb, t.sync.first_bucket_mb,
               world == 1 ? "no communication (1 rank)"
               : t.sync.overlap ? "allreduced during backward" : "allreduced after backward (--no-overlap)",
               tname[grad_t != DT_F32 ? grad_t : t.sync.grad_comm], desc);
        dt_memory_summary mem;
        dt_model_memory(m, opt, &mem);
        const double MiB = 1048576.0;
        /* The engine's reduce-scatter + allgather (or MPI's allreduce at 2 ranks) sends 2 (W-1)/W of
         * the gradient bytes from each rank. */
        const dt_dtype wire = grad_t != DT_F32 ? grad_t : t.sync.grad_comm;
        const double sent = (double)dt_model_num_params(m) * (wire == DT_F32 ? 4.0 : 2.0) * 2.0 * (world - 1) / world;
        printf("precision %s (gradients %s), loss scaling %s; gradient bytes sent per rank per step: %.0f (%.2f MiB)\n",
               tname[t.precision], tname[grad_t], !sc ? "off" : t.scaler.dynamic ? "dynamic" : "static", sent,
               sent / 1048576.0);
        if (loader_threads)
            printf("data: %d loader thread%s make%s batches ahead (%d at most)%s\n", loader_threads,
                   cli_s(loader_threads), loader_threads == 1 ? "s" : "", CLI_LOADER_DEPTH - 1, dt_model_on_gpu(m) ? " in pinned host memory, copied to the GPU asynchronously" : "");
        else
            printf("data: made by the training thread%s\n",
                   t.loader_threads < 0 ? " (the default on the CPU; --loader-threads N makes batches ahead)" : "");
        printf("memory per rank (batch %d): parameters %.2f MiB, gradients %.2f MiB, optimizer %.2f MiB, "
               "activations %.2f MiB, workspace %.2f MiB, total %.2f MiB\n", t.batch, mem.params / MiB,
               mem.grads / MiB, mem.optimizer / MiB,
               mem.activations / MiB, mem.workspace / MiB,
               (double)(mem.params + mem.grads + mem.optimizer + mem.activations + mem.workspace) / MiB);
        if (mem.device_total)
            printf("GPU memory: activations and workspace in one pool of %.2f MiB, reused by every step; the device "
                   "has %.0f MiB free of %.0f MiB\n", mem.pool / MiB, mem.device_free / MiB, mem.device_total / MiB);
        fflush(stdout);
    }

    /* The gradient of the mean loss over the global batch, so summing over ranks is the average:
     * one pass over the gradients fewer than averaging after the sum. */
    long first_step = 0;
    if (t.resume) {
        if ((s = train_data_resume(ctx, t.ckpt_dir, m, opt, sc, &data, t.accum_steps, &first_step))) goto fail;
        if (rank == 0) {
            if (first_step) printf("resumed from %s/ckpt-%010ld.dtc at step %ld\n", t.ckpt_dir, first_step, first_step);
            else printf("no checkpoint in %s: starting at step 0\n", t.ckpt_dir);
            fflush(stdout);
        }
    }
    /* After the resume: its step says which records of an earlier run stay. */
    if (rank == 0 && t.metrics && !(metrics = metrics_open(t.metrics, t.resume, first_step))) goto fail_quiet;
    if (rank == 0) fflush(stdout);
    if ((s = dt_loader_create(ctx, data.train, rank, world, t.batch, first_step * t.accum_steps, loader_threads,
                              CLI_LOADER_DEPTH, &ld)))
        goto fail;
    /* The mean over the K x W x B samples of an optimizer step. */
    const float scale = 1.0f / ((float)t.accum_steps * (float)t.batch * (float)world);
    double lr_now = t.optim.lr, grad_norm = NAN;
    double loss_acc = 0, comm_acc = 0, t_interval = now_s(), t_start = t_interval, wait_mark = 0;
    long correct_acc = 0, logged_steps = 0, skipped_acc = 0;
    double total_samples_s = 0;
    int intervals = 0;
    long step = first_step;
    int stopped = 0;
    for (; step < t.steps; step++) {
        fault_maybe(&flt, rank, step + 1, m);
        dt_step_result r;
        const float *x;
        const int32_t *labels;
        long data_step;
        lr_now = lr_at(&sched, t.optim.lr, t.min_lr, step, t.steps, t.warmup_steps);
        if ((s = dt_optimizer_set_lr(opt, (float)lr_now))) goto fail;
        /* K micro-batches (data steps step * K ..): only the last one communicates and steps. */
        double loss = 0;
        long correct = 0;
        for (int j = 0; j < t.accum_steps; j++) {
            if ((s = dt_loader_next(ld, &data_step, &x, &labels))) goto fail;
            s = dt_model_train_step(m, opt, sc, x, labels, t.batch, scale, &r);
            if (s == DT_ERR_NUMERIC) {
                report_numeric_stop(ctx, m, step + 1);
                release(sc, m, opt, &data, ld, metrics);
                dt_finalize(ctx);
                return EXIT_FAIL;
            }
            if (s) goto fail;
            loss += r.loss_sum;
            correct += r.correct;
            comm_acc += r.comm_wait_s;
        }
        skipped_acc += r.skipped;
        grad_norm = r.grad_norm;
        /* Stop requests are agreed by all ranks at the same step (a signal reaches ranks at
         * different times, or only some of them). */
        float stop = (float)stop_signal;
        if (world > 1 && (s = dt_allreduce(ctx, &stop, 1, DT_F32, DT_SUM))) goto fail;
        if (stop > 0) {
            long done_steps = step + 1;
            if (t.ckpt_dir && (s = train_data_save(ctx, t.ckpt_dir, m, opt, sc, &data, world, t.batch, t.accum_steps, done_steps))) goto fail;
            if (rank == 0) {
                printf("stopping after step %ld on a signal (%s); %s%s%s\n", done_steps,
                       stop_signal == SIGTERM ? "SIGTERM" : stop_signal == SIGUSR1 ? "SIGUSR1" : "on another rank",
                       t.ckpt_dir ? "checkpoint in " : "no --checkpoint-dir: nothing saved",
                       t.ckpt_dir ? t.ckpt_dir : "", t.ckpt_dir ? "; continue with --resume auto" : "");
                fflush(stdout);
            }
            stopped = 1;
            break;
        }
        if (t.ckpt_every && (step + 1) % t.ckpt_every == 0 && step + 1 < t.steps &&
            (s = train_data_save(ctx, t.ckpt_dir, m, opt, sc, &data, world, t.batch, t.accum_steps, step + 1)))
            goto fail;
        loss_acc += loss;
        correct_acc += correct;
        logged_steps++;

        /* An evaluation step is a log step too, so its record carries the held-out figures. */
        const int eval_step = data.eval && ((t.eval_every && (step + 1) % t.eval_every == 0) || step + 1 == t.steps);
        if ((step + 1) % t.log_every == 0 || step + 1 == t.steps || eval_step) {
            /* Averages over ranks: summed loss, correct count, communication wait. */
            float red[3] = {(float)loss_acc, (float)correct_acc, (float)comm_acc};
            if ((s = dt_allreduce(ctx, red, 3, DT_F32, DT_SUM))) goto fail;
            double now = now_s(), dt_int = now - t_interval;
            double samples = (double)logged_steps * world * t.batch * t.accum_steps;
            double mean_loss = red[0] / samples, acc = red[1] / samples;
            double sps = samples / dt_int, step_s = dt_int / (double)logged_steps;
            double comm_s = red[2] / world / (double)logged_steps;
            /* This rank's wait for the loader in the interval: input is the bottleneck when it grows. */
            const double wait_now = dt_loader_wait_s(ld), data_s = (wait_now - wait_mark) / (double)logged_steps;
            wait_mark = wait_now;
            long ep = 0, off = 0;
            dt_dataset_position(data.train, (step + 1) * t.accum_steps, world, t.batch, &ep, &off);
            const double epoch_f = (double)ep + (double)off / (double)dt_dataset_size(data.train);
            double eval_loss = 0, eval_acc = 0;
            char eval_line[256] = "";
            const int do_eval = eval_step;
            if (do_eval && (s = run_eval(ctx, m, &data, &t, read_threads, step + 1, &eval_loss, &eval_acc, eval_line,
                                         sizeof eval_line)))
                goto fail;
            if (!isfinite(mean_loss)) {
                cli_error("the loss became %g at step %ld: lower --lr (now %g)", mean_loss, step + 1,
                          (double)t.optim.lr);
                goto fail_quiet;
            }
            total_samples_s += sps;
            intervals++;
            if (rank == 0) {
                char amp[96] = "";
                if (sc)
                    snprintf(amp, sizeof amp, "  scale %g  skipped %ld/%ld", (double)dt_scaler_scale(sc),
                             skipped_acc, logged_steps);
                char clip[48] = "";
                if (t.clip_grad_norm > 0) snprintf(clip, sizeof clip, "  grad norm %.3g", grad_norm);
                printf("step %6ld/%ld  epoch %.2f  loss %.4f  acc %.3f  lr %.3g  %9.1f samples/s  step %7.2f ms  "
                       "comm %6.2f ms  data %6.2f ms%s%s\n", step + 1, t.steps, epoch_f, mean_loss, acc, lr_now, sps,
                       1e3 * step_s, 1e3 * comm_s, 1e3 * data_s, clip, amp);
                fputs(eval_line, stdout);
                fflush(stdout);
                const metrics_record rec = {
                    .step = step + 1, .epoch = epoch_f, .data_wait_s = data_s, .has_eval = do_eval,
                    .eval_loss = eval_loss, .eval_accuracy = eval_acc, .lr = lr_now,
                    .has_grad_norm = t.clip_grad_norm > 0, .grad_norm = grad_norm, .loss = mean_loss, .accuracy = acc, .samples_per_s = sps, .step_time_s = step_s,
                    .comm_wait_s = comm_s, .precision = tname[t.precision],
                    .loss_scale = sc ? (double)dt_scaler_scale(sc) : 1.0, .skipped_steps = skipped_acc,
                    .skipped_total = sc ? dt_scaler_skipped(sc) : 0L};
                if (metrics && metrics_write(metrics, &rec) != 0) {
                    cli_error("writing --metrics %s failed: %s", t.metrics, strerror(errno));
                    goto fail_quiet;
                }
            }
            loss_acc = comm_acc = 0;
            correct_acc = logged_steps = skipped_acc = 0;
            t_interval = now_s();
        }
    }
    if (stopped) {
        release(sc, m, opt, &data, ld, metrics);
        dt_finalize(ctx);
        return EXIT_PREEMPTED;
    }
    const double t_end = now_s();
    /* The final parameters on the host (a copy from a GPU model), for the check and the dump. */
    float *host_params = dt_model_on_gpu(m) ? malloc(dt_model_num_params(m) * sizeof *host_params) : NULL;
    const float *final_params = host_params ? host_params : dt_model_params(m);
    if (dt_model_on_gpu(m) && !host_params) {
        cli_error("out of host memory for a copy of the %zu parameters (%.1f MiB) to check and dump them: free host "
                  "memory or run fewer ranks per node", dt_model_num_params(m),
                  (double)dt_model_num_params(m) * sizeof *host_params / 1048576.0);
        goto fail_quiet;
    }
    if (host_params && (s = dt_model_get_params(m, host_params))) {
        free(host_params);
        goto fail;
    }
    /* Every rank must end with the same parameters, bit for bit: each applies the same reduced
     * gradients and skips the same overflowing steps. */
    int differ = 0, first_differ = -1;
    s = dt_check_replicas(ctx, final_params, dt_model_num_params(m) * sizeof *final_params, &differ, &first_differ);
    if (s == DT_ERR_NUMERIC) {
        if (rank == 0)
            cli_error("the ranks ended with different parameters (%d of %d differ from rank 0, the first is rank %d): "
                      "a bug in dtrain (or a rank's memory is faulty); please report it with this command line",
                      differ, world, first_differ);
        free(host_params);
        goto fail_quiet;
    }
    const int agree = s == DT_OK;
    /* --bad-samples skip: how many undecodable samples the ranks replaced (each counts its own). */
    float bad = (float)dt_dataset_bad_samples(data.train);
    if (t.skip_bad && world > 1 && (s = dt_allreduce(ctx, &bad, 1, DT_F32, DT_SUM))) {
        free(host_params);
        goto fail;
    }
    if (rank == 0) {
        char ranks[64];
        if (world == 1) snprintf(ranks, sizeof ranks, "one rank, nothing to compare");
        else snprintf(ranks, sizeof ranks, "parameters %s on all %d ranks", agree > 0 ? "identical" : "not compared", world);
        printf("done: %ld step%s in %.2f s, mean %.1f samples/s over %d log interval%s; %s\n", t.steps, cli_s(t.steps),
               t_end - t_start, total_samples_s / (intervals ? intervals : 1), intervals, cli_s(intervals), ranks);
        if (t.skip_bad)
            printf("--bad-samples skip: %.0f undecodable sample%s replaced by the next one%s\n", (double)bad,
                   bad == 1 ? "" : "s", bad > 0 ? " (dtrain data verify PATH lists them)" : "");
        if (sc)
            printf("loss scale %g at the end, %ld of %ld step%s skipped (gradients overflowed)\n",
                   (double)dt_scaler_scale(sc), dt_scaler_skipped(sc), dt_scaler_updates(sc),
                   cli_s(dt_scaler_updates(sc)));
        fflush(stdout);
    }
    if (rank == 0 && t.dump && params_dump(t.dump, final_params, dt_model_num_params(m)) != EXIT_OK) {
        free(host_params);
        goto fail_quiet;
    }
    free(host_params);
    /* The finished run's checkpoint: a requeued job that already finished does no step again. */
    if (t.ckpt_dir && first_step < t.steps && (s = train_data_save(ctx, t.ckpt_dir, m, opt, sc, &data, world, t.batch, t.accum_steps, t.steps))) goto fail;
    if (metrics && fclose(metrics) != 0) {
        metrics = NULL;
        cli_error("writing --metrics %s failed: %s", t.metrics, strerror(errno));
        goto fail_quiet;
    }
    release(sc, m, opt, &data, ld, NULL);
    if ((s = dt_finalize(ctx))) {
        cli_error("%s", dt_last_error());
        return EXIT_FAIL;
    }
    return EXIT_OK;

fail:
    cli_error("%s (%s)", dt_last_error(), dt_strerror(s));
fail_quiet:
    rc = s == DT_ERR_INVALID_ARG ? EXIT_USAGE : EXIT_FAIL;
abort_rc: /* after dt_init, the error printed, rc the exit code */
    release(sc, m, opt, &data, ld, metrics);
    /* Every rank hits the same configuration errors; a rank that fails alone takes the job down. */
    dt_abort_job(ctx, rc);
    return rc;

refuse: /* a refusal before dt_init (or dt_init failed, already aborting): nothing but the scaler is held */
    dt_scaler_free(sc);
    return rc;
}
