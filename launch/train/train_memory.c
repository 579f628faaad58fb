/*
 * train_memory.c - the memory of `dtrain train`'s model as the run sets it up: its plan against
 * this rank's host budget before the model is made (train_memory_check), and the out-of-memory
 * summary naming the batch that fits (train_oom_report).
 */
#include "launch/train/train_run.h"

#include "launch/cli.h"
#include "launch/oom_report.h"
#include "launch/doctor/doctor_memory.h"
#include "base/host_budget.h"

#include <stdio.h>

/* The memory plan of the model as this run sets it up, into *pc. */
static void train_plan_config(const train_run *r, dt_memory_plan_config *pc)
{
    const train_opts *t = &r->t;
    dt_memory_plan_defaults(pc);
    pc->spec = t->model;
    pc->input = r->data.input[0] ? r->data.input : NULL;
    pc->batch = t->batch;
    pc->compute = t->precision;
    pc->grads = r->grad_t;
    pc->optim = &t->optim;
    pc->accum_steps = t->accum_steps;
    if (t->sync.zero) { /* this rank's shard of the optimizer state, as the run would hold it */
        pc->zero_world = dt_world_size(r->ctx);
        pc->zero_rank = dt_rank(r->ctx);
        pc->bucket_mb = t->sync.bucket_mb;
        pc->first_bucket_mb = t->sync.first_bucket_mb;
    }
}

/* The out-of-memory summary of the plan of r (the model ran out, r->oom_at, after train_release; or
 * its plan is over a limit before it was made): the batch that fits in what the device has now. */
void train_oom_report(const train_run *r)
{
    dt_memory_plan_config pc;
    train_plan_config(r, &pc);
    const long samples = (long)r->t.batch * r->t.accum_steps;
    const oom_case c = {.command = "train",
                        .stage = r->oom_at,
                        .plans = &pc,
                        .n_plans = 1,
                        .failed = 0,
                        .samples = samples < (1L << 30) ? (int)samples : 0};
    oom_report(r->ctx, &c);
}

/* Before the model is made on the CPU: its plan's peak against this rank's host budget
 * (base/host_budget.h). Over a limit the kernel enforces (a memory cgroup, which kills without a
 * word, or ulimit -v / -d) it is an error on every rank, with the summary naming the limit and the
 * batch that fits: the plan counts the model's buffers alone (not MPI, OpenBLAS or the loader), so
 * a run it puts over the limit cannot fit. Over MemAvailable alone it is a warning: swap and
 * reclaimed cache may stretch it. Collective. */
int train_memory_check(train_run *r, const dt_placement *pl)
{
    float over = 0;
    int mine = 0; /* this rank's plan is over: its summary to print */
    dt_memory_plan_config pc;
    train_plan_config(r, &pc);
    dt_memory_plan p;
    /* A plan error is dt_model_create's to report; the test limit's device refuses by itself. */
    if (pl->device != DT_DEVICE_CUDA && dt_model_plan_memory(r->ctx, &pc, &p) == DT_OK && !p.kinds.device_total) {
        size_t total = 0, avail = 0;
        char why[192];
        if (doctor_meminfo_read(&total, &avail, why, sizeof why)) avail = 0;
        host_budget hb;
        host_budget_get(&hb, avail, pl->local_size, NULL);
        char need[24], have[24];
        if (hb.kind != HOST_BUDGET_NONE && p.peak > hb.bytes) {
            host_budget_bytes(p.peak, need, sizeof need);
            host_budget_bytes(hb.bytes, have, sizeof have);
            if (hb.enforced) {
                over = 1, mine = 1;
                cli_error("rank %d: --model %s --batch %d plans %s peak, more than this rank's %s of host memory "
                          "under %s: the kernel would %s it mid-run; the batch that fits follows",
                          r->rank, r->t.model, r->t.batch, need, have, hb.source,
                          hb.kind == HOST_BUDGET_CGROUP ? "kill" : "refuse");
            } else {
                fprintf(stderr,
                        "dtrain: warning: rank %d: --model %s --batch %d plans %s peak, more than this rank's %s "
                        "of %s: training may swap or be killed; dtrain doctor --model says the batch that fits\n",
                        r->rank, r->t.model, r->t.batch, need, have, hb.source);
                fflush(stderr);
            }
        }
    }
    dt_status s;
    if (r->world > 1 && (s = dt_allreduce(r->ctx, &over, 1, DT_F32, DT_SUM))) return train_status_error(s);
    if (over == 0) return EXIT_OK;
    if (mine) snprintf(r->oom_at, sizeof r->oom_at, "before the first step (planned)");
    train_failure_shared(); /* every rank refuses together */
    return EXIT_FAIL;
}
