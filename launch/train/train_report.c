/*
 * train_report.c - what `dtrain train` tells the user: rank 0's lines before the first step, at
 * each log interval (with the --metrics record, metrics.c's file) and at the end, and the report
 * of a run that loss scaling stopped (train_run.h).
 */
#include "launch/train/train_run.h"

#include "launch/cli.h"
#include "collectives/ctx_comm.h"
#include "base/log.h"
#include "base/status.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void train_report_data(const train_run *r)
{
    const train_opts *t = &r->t;
    if (dt_loader_on_device(r->ld))
        printf("data: each batch made on the GPU by one kernel from its sample indices, on the model's stream (no "
               "loader threads, no copy; --synthetic-on host makes them on the host)\n");
    else if (r->loader_threads)
        printf("data: %d loader thread%s make%s batches ahead (%d at most)%s\n", r->loader_threads,
               cli_s(r->loader_threads), r->loader_threads == 1 ? "s" : "", CLI_LOADER_DEPTH - 1,
               dt_model_on_gpu(r->m) ? " in pinned host memory, copied to the GPU asynchronously" : "");
    else
        printf("data: made by the training thread%s\n",
               t->loader_threads < 0 ? " (the default on the CPU; --loader-threads N makes batches ahead)" : "");
    fflush(stdout);
}

/* The lr schedule and gradient clipping lines, printed only when the run sets them. */
static void report_lr_and_clipping(const train_run *r)
{
    const train_opts *t = &r->t;
    if (t->lr_schedule || t->warmup_steps)
        printf("lr schedule: %s from %g%s, %ld warmup step%s\n", lr_schedule_name(&r->sched), (double)t->optim.lr,
               r->sched.kind == LR_CONSTANT ? ""
               : r->sched.kind == LR_STEP   ? (t->min_lr > 0 ? ", floored at --min-lr" : "")
               : t->min_lr > 0              ? " to --min-lr"
                                            : " to 0",
               t->warmup_steps, cli_s(t->warmup_steps));
    if (isinf(t->clip_grad_norm))
        printf("gradient norm: reported as grad_norm, not clipped (--clip-grad-norm inf)\n");
    else if (t->clip_grad_norm > 0)
        printf("gradient clipping: global L2 norm at most %g\n", t->clip_grad_norm);
}

/* Each optimizer's own settings (torch.optim's names): momentum is SGD's, betas and eps AdamW's. */
static void format_optim(const train_opts *t, char *buf, size_t n)
{
    if (t->optim.kind == DT_OPTIM_SGD)
        snprintf(buf, n, "sgd lr %g momentum %g", (double)t->optim.lr, (double)t->optim.momentum);
    else
        snprintf(buf, n, "adamw lr %g betas (%g, %g) eps %g", (double)t->optim.lr, (double)t->optim.beta1,
                 (double)t->optim.beta2, (double)t->optim.eps);
}

/* How and when the gradients cross between ranks. staged: GPU buffers through MPI. */
static const char *gradient_path(const train_opts *t, int world, int staged)
{
    return world == 1 ? "no communication (1 rank)"
           : staged && t->sync.zero
               ? "allreduced after backward through host memory, parameters allgathered (--zero 1 shards the "
                 "optimizer state; through MPI the gradients' bytes are not cut)"
           : staged                          ? "allreduced after backward through host memory (MPI)"
           : t->sync.zero && t->sync.overlap ? "reduce-scattered during backward, parameters allgathered (--zero 1)"
           : t->sync.zero                    ? "reduce-scattered after backward, parameters allgathered (--zero 1)"
           : t->sync.overlap                 ? "allreduced during backward"
                                             : "allreduced after backward (--no-overlap)";
}

/* The run's shape (model, ranks, batch, steps, optimizer), its gradient buckets and the layers. */
static void report_run_shape(const train_run *r, dt_dtype wire, int staged)
{
    const train_opts *t = &r->t;
    const int world = r->world;
    char desc[4096];
    dt_model_describe(r->m, desc, sizeof desc);
    const int nbuckets = dt_model_num_buckets(r->m);
    char accum_txt[48] = "";
    if (t->accum_steps > 1) snprintf(accum_txt, sizeof accum_txt, " x %d accumulated", t->accum_steps);
    /* This line comes before --resume reads the checkpoint: an --epochs run's steps are then those
     * from step 0, and the data position may move the end (the "epochs:" line says where). */
    char epochs_txt[96] = "";
    if (t->epochs && t->resume)
        snprintf(epochs_txt, sizeof epochs_txt,
                 " to epoch %ld from step 0 (a checkpoint's data position moves the end)", t->epochs);
    char optim_txt[160];
    format_optim(t, optim_txt, sizeof optim_txt);
    printf("dtrain train: model %s, %d rank%s x batch %d%s = %ld per step, %ld step%s%s, %s weight decay %g, seed %ld\n"
           "gradients: %d bucket%s (cap %g MiB%s, first %g MiB), %s, %s on the wire\n%s",
           t->model, world, cli_s(world), t->batch, accum_txt, (long)world * t->batch * t->accum_steps, t->steps,
           cli_s(t->steps), epochs_txt, optim_txt, (double)t->optim.weight_decay, t->seed, nbuckets, cli_s(nbuckets),
           t->sync.bucket_mb, t->bucket_auto && world > 1 ? " until --bucket-mb auto chooses" : "",
           t->sync.first_bucket_mb, gradient_path(t, world, staged), train_type_name(wire), desc);
}

/* The precision, loss scaling and the gradient bytes each rank sends per step. */
static void report_precision_and_traffic(const train_run *r, dt_dtype wire, int staged)
{
    const train_opts *t = &r->t;
    const int world = r->world;
    /* The engine's reduce-scatter + allgather (or MPI's allreduce at 2 ranks) sends 2 (W-1)/W of
     * the gradient bytes from each rank; --zero 1 sends (W-1)/W of the gradients in the wire type
     * and (W-1)/W of the fp32 parameters. */
    const double np = (double)dt_model_num_params(r->m), wb = wire == DT_F32 ? 4.0 : 2.0;
    const double sent =
        (t->sync.zero ? np * wb * (staged ? 2.0 : 1.0) + np * 4.0 : np * wb * 2.0) * (world - 1) / world;
    printf("precision %s (gradients %s), loss scaling %s; gradient bytes sent per rank per step: %.0f (%.2f MiB)\n",
           train_type_name(t->precision), train_type_name(r->grad_t),
           !r->sc              ? "off"
           : t->scaler.dynamic ? "dynamic"
                               : "static",
           sent, sent / 1048576.0);
}

static void report_memory(const train_run *r)
{
    const train_opts *t = &r->t;
    dt_memory_summary mem;
    dt_model_memory(r->m, r->opt, &mem);
    const double MiB = 1048576.0;
    printf("memory per rank (batch %d): parameters %.2f MiB, gradients %.2f MiB, optimizer %.2f MiB%s, "
           "activations %.2f MiB, workspace %.2f MiB, total %.2f MiB\n",
           t->batch, mem.params / MiB, mem.grads / MiB, mem.optimizer / MiB,
           t->sync.zero && r->world > 1 ? " (this rank's 1/W shard, --zero 1)" : "", mem.activations / MiB,
           mem.workspace / MiB,
           (double)(mem.params + mem.grads + mem.optimizer + mem.activations + mem.workspace) / MiB);
    if (mem.device_total)
        printf("GPU memory: activations and workspace in one pool of %.2f MiB, reused by every step; the device "
               "has %.0f MiB free of %.0f MiB\n",
               mem.pool / MiB, mem.device_free / MiB, mem.device_total / MiB);
}

void train_report_start(const train_run *r)
{
    const train_opts *t = &r->t;
    train_data_describe(t, &r->data, r->world, stdout);
    report_lr_and_clipping(r);
    /* 16-bit gradients travel as they are; fp32 ones in --grad-comm's type. */
    const dt_dtype wire = r->grad_t != DT_F32 ? r->grad_t : t->sync.grad_comm;
    /* GPU buffers through MPI (--gpu-comm mpi, or a build without NCCL): one whole-buffer allreduce
     * through host memory after backward, under --zero 1 too (collectives/reducer_zero.c). */
    const int staged = dt_model_on_gpu(r->m) && strcmp(dt_backend_name(r->ctx), "mpi") == 0;
    report_run_shape(r, wire, staged);
    report_precision_and_traffic(r, wire, staged);
    report_memory(r);
    fflush(stdout);
}

void train_report_interval(train_run *r, const metrics_record *rec, long logged, const char *eval_line)
{
    char amp[96] = "";
    if (r->sc) snprintf(amp, sizeof amp, "  scale %g  skipped %ld/%ld", rec->loss_scale, rec->skipped_steps, logged);
    char clip[48] = "";
    if (rec->has_grad_norm) snprintf(clip, sizeof clip, "  grad norm %.3g", rec->grad_norm);
    if (!r->t.quiet) {
        printf("step %6ld/%ld  epoch %.2f  loss %.4f  acc %.3f  lr %.3g  %9.1f samples/s  step %7.2f ms  "
               "comm %6.2f ms  data %6.2f ms%s%s\n",
               rec->step, r->t.steps, rec->epoch, rec->loss, rec->accuracy, rec->lr, rec->samples_per_s,
               1e3 * rec->step_time_s, 1e3 * rec->comm_wait_s, 1e3 * rec->data_wait_s, clip, amp);
        fputs(eval_line, stdout);
        fflush(stdout);
    }
    train_report_record(r, rec);
}

void train_report_record(train_run *r, const metrics_record *rec)
{
    if (r->metrics && metrics_write(r->metrics, rec) != 0) {
        /* The metrics are a record of the training, not the training: a full disk there costs
         * the records from here on, never the steps (nor, at several ranks, the job). */
        snprintf(r->metrics_why, sizeof r->metrics_why, "%s", strerror(errno));
        r->metrics_lost = rec->step;
        fclose(r->metrics); /* given up: metrics_write cut off what it wrote of this record */
        r->metrics = NULL;
        fprintf(stderr,
                "dtrain: warning: writing --metrics %s failed: %s; training goes on without it: the records from "
                "step %ld on are missing. Free space there, or give another --metrics path (with --resume auto "
                "the records up to the checkpoint's step stay)\n",
                r->t.metrics, r->metrics_why, r->metrics_lost);
        fflush(stderr);
    }
}

void train_report_metrics_lost(const train_run *r)
{
    if (r->rank != 0 || !r->metrics_lost) return;
    fflush(stdout);
    fprintf(stderr, "dtrain: warning: --metrics %s is incomplete: it has no records from step %ld on (%s)\n",
            r->t.metrics, r->metrics_lost, r->metrics_why);
    fflush(stderr);
}

void train_report_wire(const train_run *r)
{
    /* fp16 rounds what is below 3e-8 to 0 (and keeps fewer bits below 6e-5) and what is above
     * 65504 to inf: late-training gradients of fp32 runs fall below it. A scaler (--loss-scale, or fp16's own) lifts them before the wire and catches an
     * overflow after it; bf16 has fp32's range. One rank sends nothing. */
    if (r->world == 1 || r->grad_t != DT_F32 || r->t.sync.grad_comm != DT_F16 || r->sc) return;
    log_msg0(LOG_LEVEL_WARN,
             "--grad-comm fp16 sends fp32 gradients as fp16 with no loss scaler: those below 3e-8 become 0 on the "
             "wire (and above 65504 inf); use --grad-comm bf16 (fp32's range), or add --loss-scale dynamic, or "
             "--precision fp16 (scaled by default)");
}

void train_report_step_overlap(const train_run *r)
{
    if (r->t.step_overlap != DT_STEP_OVERLAP_ON || dt_model_step_overlapped(r->m) == DT_STEP_OVERLAP_ON) return;
    log_msg0(LOG_LEVEL_WARN,
             "--step-overlap 1: the optimizer step ran after backward, not overlapped: it overlaps only with no "
             "loss scaler (not fp16), no --clip-grad-norm, --zero 0, no --profile, and at several ranks buckets "
             "that start during backward (not --no-overlap); see docs/training.md");
}

void train_report_straggler(const train_run *r, const straggler_verdict *v)
{
    /* The node of the rank, from the map dt_init gathered for the watchdog (no collective here):
     * across nodes "rank 13" alone does not say which machine to look at. */
    const char *host = ctx_rank_node(r->ctx, v->slowest);
    char line[320];
    straggler_line(v, host, line, sizeof line);
    /* The line of each interval is a report, not a warning (--quiet drops it); a straggler that
     * persists is one, said below under --quiet too. */
    if (!r->t.quiet) {
        printf("%s\n", line);
        fflush(stdout);
    }
    if (v->persistent)
        log_msg(LOG_LEVEL_WARN,
                "rank %d%s%s%s is the straggler %d log intervals in a row (%s %.2f ms a step vs %.2f ms on the "
                "median rank): check that node's %s",
                v->slowest, host && *host ? " (" : "", host && *host ? host : "", host && *host ? ")" : "", v->run,
                straggler_phase_name(v->phase), 1e3 * v->phase_s, 1e3 * v->phase_median_s,
                v->phase == PHASE_DATA      ? "storage and loader threads (--loader-threads)"
                : v->phase == PHASE_COMPUTE ? "load, clocks and core pinning (dtrain env)"
                                            : "network");
}

void train_report_end(const train_run *r, int agree, double bad)
{
    const train_opts *t = &r->t;
    char ranks[64];
    if (r->world == 1)
        snprintf(ranks, sizeof ranks, "one rank, nothing to compare");
    else
        snprintf(ranks, sizeof ranks, "parameters %s on all %d ranks", agree > 0 ? "identical" : "not compared",
                 r->world);
    /* A resume at the last step trains nothing: no rate to give, but how to train further. */
    if (r->first_step > 0 && r->first_step >= t->steps) {
        const char *flag = t->epochs ? "--epochs" : "--steps";
        const long n = t->epochs ? t->epochs : t->steps;
        printf("done: nothing to train: the run had already reached %s %ld (its checkpoint in %s is of step %ld); "
               "give %s %ld or more to train further; %s\n",
               flag, n, t->ckpt_dir, r->first_step, flag, n + 1, ranks);
    } else {
        /* A resumed run says how many of the steps it ran itself: the time is theirs. */
        char resumed[96] = "";
        if (r->first_step > 0)
            snprintf(resumed, sizeof resumed, " (%ld here, resumed after step %ld)", t->steps - r->first_step,
                     r->first_step);
        printf("done: %ld step%s%s in %.2f s, mean %.1f samples/s over %d log interval%s; %s\n", t->steps,
               cli_s(t->steps), resumed, r->t_end - r->t_start,
               r->interval_s_sum > 0 ? r->samples_sum / r->interval_s_sum : 0.0, r->intervals, cli_s(r->intervals),
               ranks);
    }
    if (t->skip_bad) /* Counted at each read: one bad file read in 3 epochs is 3 replacements, not 3 files. */
        printf("--bad-samples skip: %.0f replacement%s of an undecodable sample by the next one%s\n", bad,
               cli_s((long)bad),
               bad > 0 ? " (one each time such a sample was read; dtrain data verify PATH names every file)" : "");
    if (r->sc)
        printf("loss scale %g at the end, %ld of %ld step%s skipped (gradients overflowed)\n",
               (double)dt_scaler_scale(r->sc), dt_scaler_skipped(r->sc), dt_scaler_updates(r->sc),
               cli_s(dt_scaler_updates(r->sc)));
    fflush(stdout);
}

/* Every rank is here (the scaler's verdict is shared). Rank 0 prints the scaler's message and
 * which ranks' own gradients were non-finite before the allreduce, and in which layer, so the user
 * knows where the overflow starts. */
void train_report_numeric_stop(const train_run *r, long step)
{
    status_kept why;
    status_keep(&why);
    const int rank = r->rank, world = r->world;
    float *bad = calloc((size_t)world, sizeof *bad);
    if (bad) {
        bad[rank] = (float)(dt_model_nonfinite_layer(r->m) + 1);
        if (world > 1 && dt_allreduce(r->ctx, bad, (size_t)world, DT_F32, DT_SUM)) {
            free(bad);
            bad = NULL;
        }
    }
    if (rank == 0) {
        char where[1024] = "", name[64];
        size_t used = 0;
        for (int k = 0; bad && k < world && used < sizeof where - 100; k++) {
            if (bad[k] < 1) continue;
            dt_model_layer_name(r->m, (int)bad[k] - 1, name, sizeof name);
            used += (size_t)snprintf(where + used, sizeof where - used, "%s rank %d %s", used ? ";" : "", k, name);
        }
        cli_error("training stopped at step %ld: %s. First non-finite gradients before the allreduce, in backward "
                  "order:%s",
                  step, why.msg,
                  used ? where
                       : " none on any rank (the sum overflowed in the allreduce: use --grad-comm fp32 or bf16)");
    }
    free(bad);
}
