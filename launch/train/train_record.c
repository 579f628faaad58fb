/*
 * train_record.c - the run record of `dtrain train`'s checkpoints and its check at a resume
 * (train_record.h).
 */
#include "launch/train/train_record.h"

#include "base/log.h"
#include "base/status.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(train_record) == 64, "the run record's layout is the file's: 64 bytes, no padding");

void train_record_make(const train_opts *t, int world, const dt_dataset *train, int blas_threads, train_record *out)
{
    memset(out, 0, sizeof *out);
    out->version = TRAIN_RECORD_VERSION;
    out->shuffle = t->shuffle ? 1u : 0u;
    out->seed = (uint64_t)t->seed;
    out->samples = (uint64_t)dt_dataset_size(train);
    out->synthetic = t->data == NULL;
    out->precision = (uint32_t)t->precision;
    out->world = (uint32_t)world;
    out->batch = (uint32_t)t->batch;
    out->accum = (uint32_t)t->accum_steps;
    out->drop_last = t->drop_last ? 1u : 0u;
    out->blas_threads = blas_threads > 0 ? (uint32_t)blas_threads : 0u;
}

static const char *precision_name(uint32_t p)
{
    return p == DT_F32 ? "fp32" : p == DT_F16 ? "fp16" : p == DT_BF16 ? "bf16" : "an unknown precision";
}

static const char *shuffle_name(uint32_t s) { return s ? "epoch" : "none"; }

/* The refusal: the data order changed where the saved position counts in the old one. */
static dt_status refuse_order(long step, long epoch, long offset, const char *flag, const char *was, const char *now,
                              const char *why)
{
    char at[96];
    if (offset > 0)
        snprintf(at, sizeof at, "%ld samples into epoch %ld", offset, epoch);
    else
        snprintf(at, sizeof at, "at the start of epoch %ld", epoch);
    return status_set_error(DT_ERR_INVALID_ARG,
                            "--resume: the checkpoint of step %ld was written with %s %s and this run has %s %s; "
                            "it stopped %s, and %s. Resume with %s %s (and the same data), or start a new run in "
                            "another --checkpoint-dir (--init-params FILE takes the weights of a --dump-params file)",
                            step, flag, was, flag, now, at, why, flag, was);
}

/* The data order: refused where the saved position counts in another order (mid-epoch, or any
 * seed of synthetic data), said where the epochs from here simply follow the new one. */
static dt_status check_data_order(const train_record *saved, const train_record *now, long step, long epoch,
                                  long offset)
{
    char a[32], b[32];
    const int mid_epoch = offset > 0;
    static const char *const repeats =
        "the rest of that epoch would come from another order: some of its samples again, others never";
    if (saved->synthetic && now->synthetic && saved->seed != now->seed) {
        snprintf(a, sizeof a, "%llu", (unsigned long long)saved->seed);
        snprintf(b, sizeof b, "%llu", (unsigned long long)now->seed);
        return refuse_order(step, epoch, offset, "--seed", a, b,
                            "the synthetic data's samples are made from the seed: training would go on with "
                            "other data");
    }
    if (saved->samples != now->samples) {
        if (mid_epoch) {
            snprintf(a, sizeof a, "%llu samples", (unsigned long long)saved->samples);
            snprintf(b, sizeof b, "%llu samples", (unsigned long long)now->samples);
            return refuse_order(step, epoch, offset, "a training set of", a, b, repeats);
        }
        log_msg0(LOG_LEVEL_WARN,
                 "--resume: the training set has %llu samples, the checkpoint's run had %llu: the epochs "
                 "from here are of this set",
                 (unsigned long long)now->samples, (unsigned long long)saved->samples);
    }
    if (saved->shuffle != now->shuffle && mid_epoch)
        return refuse_order(step, epoch, offset, "--shuffle", shuffle_name(saved->shuffle), shuffle_name(now->shuffle),
                            repeats);
    if (saved->seed != now->seed) {
        snprintf(a, sizeof a, "%llu", (unsigned long long)saved->seed);
        snprintf(b, sizeof b, "%llu", (unsigned long long)now->seed);
        if (mid_epoch && saved->shuffle && now->shuffle)
            return refuse_order(step, epoch, offset, "--seed", a, b, repeats);
        log_msg0(LOG_LEVEL_WARN,
                 "--resume: --seed %s, the checkpoint's run had --seed %s: the epochs' orders and the "
                 "augmentation from here follow the new seed",
                 b, a);
    }
    return DT_OK;
}

/* A load that restarted this run's loss scaler has said so, and why (ckpt_apply.c): nothing to add. */
static void warn_precision_change(const train_record *saved, const train_record *now, int scaler_fresh)
{
    if (saved->precision != now->precision && !scaler_fresh)
        log_msg0(LOG_LEVEL_WARN,
                 "--resume: the checkpoint's run trained in %s, this one in %s: the fp32 master weights go on%s",
                 precision_name(saved->precision), precision_name(now->precision),
                 saved->precision == DT_F16 ? "; the fp16 loss scaler's state is not used" : "");
}

/* The global batch is what the step, the gradient's mean and the learning rate are of: a new
 * split of the same batch over ranks, --batch and --accum-steps trains as before. */
static void warn_global_batch_change(const train_record *saved, const train_record *now)
{
    const unsigned long long was = (unsigned long long)saved->world * saved->batch * saved->accum,
                             is = (unsigned long long)now->world * now->batch * now->accum,
                             per = (unsigned long long)now->world * now->accum;
    if (was == is) return;
    char keep[96] = "";
    if (was % per == 0) snprintf(keep, sizeof keep, "; --batch %llu keeps the global batch of %llu", was / per, was);
    log_msg0(LOG_LEVEL_WARN,
             "--resume: the checkpoint's run had a global batch of %llu samples a step (%u rank%s x --batch %u x "
             "--accum-steps %u), this one %llu (%u x %u x %u): the data position goes on, and the "
             "learning-rate schedule by optimizer steps%s",
             was, saved->world, saved->world == 1 ? "" : "s", saved->batch, saved->accum, is, now->world, now->batch,
             now->accum, keep);
}

/* OpenBLAS sums a GEMM in another order at another thread count (0.3.21 on Haswell: above about 64
 * x 64 x 64 on), so a resume that is otherwise the same run no longer gives the uninterrupted
 * run's bits. The default count follows the rank's cores, which a requeue onto another
 * allocation, another launcher binding or --pin changes unseen: said, with the flag that keeps
 * it. Another rank count or batch changes the sums anyway, and says so before this. */
static void warn_blas_threads_change(const train_record *saved, const train_record *now)
{
    if (saved->blas_threads && now->blas_threads && saved->blas_threads != now->blas_threads &&
        saved->world == now->world && saved->batch == now->batch && saved->accum == now->accum)
        log_msg0(LOG_LEVEL_WARN,
                 "--resume: the checkpoint's run gave OpenBLAS %u thread%s a rank, this one %u: its matrix products "
                 "sum in another order, so the results from here can differ in their last bits from a run that kept "
                 "%u (--blas-threads %u keeps them)",
                 saved->blas_threads, saved->blas_threads == 1 ? "" : "s", now->blas_threads, saved->blas_threads,
                 saved->blas_threads);
}

dt_status train_record_check(const train_record *saved, const train_record *now, long step, long epoch, long offset,
                             int scaler_fresh)
{
    if (saved->version != TRAIN_RECORD_VERSION) {
        log_msg0(LOG_LEVEL_WARN,
                 "--resume: the checkpoint of step %ld holds a run record of version %u, which this dtrain "
                 "(version %u) does not read: the data order, precision and batch are not compared",
                 step, saved->version, TRAIN_RECORD_VERSION);
        return DT_OK;
    }
    const dt_status s = check_data_order(saved, now, step, epoch, offset);
    if (s) return s;
    warn_precision_change(saved, now, scaler_fresh);
    warn_global_batch_change(saved, now);
    warn_blas_threads_change(saved, now);
    return DT_OK;
}

void train_record_holdout_for(size_t kept, size_t n, char *buf, size_t len)
{
    /* The flag is read as a float (cli_float), so the candidate is rounded as the flag would be. */
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(buf, len, "%.*g", digits, (double)kept / (double)n);
        const double f = (float)strtod(buf, NULL);
        if (f > 0 && f < 1 && (size_t)llround(f * (double)n) == kept) return;
    }
}

dt_status train_record_check_holdout(const train_record *saved, const char *arg, size_t n, size_t aside)
{
    const unsigned long long trained = (unsigned long long)saved->samples;
    if (trained == (unsigned long long)(n - aside)) return DT_OK;
    char head[256];
    snprintf(head, sizeof head,
             "--holdout %s sets %zu of the train split's %zu samples aside and leaves %zu, but the checkpoint's run "
             "trained on %llu",
             arg, aside, n, n - aside, trained);
    if (trained == (unsigned long long)n)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "%s: it had no --holdout, so every sample evaluated here was trained on. Evaluate "
                                "without --holdout: the test split (the default), or --data with samples training "
                                "never read",
                                head);
    if (trained == 0 || trained > (unsigned long long)n)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "%s, which no part of this train split holds: it read other data, so which of these "
                                "samples it kept aside cannot be told. Give the --data training read, or evaluate "
                                "without --holdout",
                                head);
    const size_t kept = n - (size_t)trained;
    char f[32], why[160];
    train_record_holdout_for(kept, n, f, sizeof f);
    if (aside > kept)
        snprintf(why, sizeof why, "%zu of the %zu samples evaluated here were trained on", aside - kept, aside);
    else
        snprintf(why, sizeof why, "%zu more held-out samples would go unevaluated", kept - aside);
    return status_set_error(DT_ERR_INVALID_ARG,
                            "%s: training kept %zu of %zu samples aside (--holdout %s), and %s. Evaluate with "
                            "--holdout %s, the fraction training used",
                            head, kept, n, f, why, f);
}
