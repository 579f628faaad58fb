/*
 * oom_report.c - the out-of-memory summary (oom_report.h). Everything in it comes from the
 * library's memory plan (dt_model_plan_memory, dt_model_max_batch), queried after the run freed
 * its model: the plan's device_free is then what this rank can have, so the batch it suggests is
 * the largest whose plan peaks within it. The peak, not the total, is what must fit: a model is
 * made in fp32 before dt_model_set_precision replaces its pool (docs/memory.md).
 */
#include "launch/oom_report.h"
#include "base/host_budget.h"
#include "base/mem_limit.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

/* An appending buffer: every write is cut to what is left, the length stays the written one. */
typedef struct text {
    char *buf;
    size_t n, len;
} text;

static void put(text *t, const char *fmt, ...)
{
    if (t->len + 1 >= t->n) return;
    va_list ap;
    va_start(ap, fmt);
    const int w = vsnprintf(t->buf + t->len, t->n - t->len, fmt, ap);
    va_end(ap);
    if (w > 0) t->len = t->len + (size_t)w < t->n ? t->len + (size_t)w : t->n - 1;
}

/* "1.25 GiB" or "12.3 MiB", into out. */
static const char *size_text(size_t b, char *out, size_t n)
{
    const double g = 1024.0 * 1024.0 * 1024.0, m = 1024.0 * 1024.0;
    if ((double)b >= g)
        snprintf(out, n, "%.2f GiB", (double)b / g);
    else
        snprintf(out, n, "%.1f MiB", (double)b / m);
    return out;
}

/* One row of the kinds: the name, the size and its exact bytes. */
static void kind_row(text *t, const char *name, size_t b)
{
    char s[32];
    put(t, "    %-26s %12s (%zu bytes)\n", name, size_text(b, s, sizeof s), b);
}

/* The largest batch of every plan in c within budget: the smallest of them into *batch (0 when a
 * plan does not fit even at batch 1), each into each[]. DT_OK or the planner's error. */
static dt_status fitting_batch(dt_ctx *ctx, const oom_case *c, size_t budget, int *batch, int *each)
{
    *batch = -1;
    for (int i = 0; i < c->n_plans; i++) {
        dt_memory_plan p;
        const dt_status s = dt_model_max_batch(ctx, &c->plans[i], budget, &each[i], &p);
        if (s) return s;
        if (*batch < 0 || each[i] < *batch) *batch = each[i];
    }
    if (*batch < 0) *batch = 0;
    return DT_OK;
}

/* The advice when even batch 1 does not fit: what batch 1 needs, then the ways out that are true
 * here (a 16-bit precision only when its own plan fits). */
static void advise_nothing_fits(dt_ctx *ctx, const oom_case *c, size_t budget, const dt_memory_plan *one,
                                const char *bigger, text *t)
{
    char need[32], have[32];
    put(t, "  fix: even batch 1 needs %s at its peak, more than the %s free:", size_text(one->peak, need, sizeof need),
        size_text(budget, have, sizeof have));
    /* The other precision, as dtrain train keeps its gradients on this device: bf16 ones on the CPU,
     * fp32 on a GPU. For bench step only when that precision is not in its list already. */
    const dt_memory_plan_config *f = &c->plans[c->failed];
    dt_placement pl;
    const int gpu = dt_get_placement(ctx, &pl) == DT_OK && pl.device == DT_DEVICE_CUDA;
    dt_memory_plan_config b = *f;
    b.compute = f->compute == DT_F32 ? DT_BF16 : DT_F32;
    b.grads = b.compute == DT_F32 || gpu ? DT_F32 : DT_BF16;
    int listed = 0;
    for (int i = 0; i < c->n_plans; i++) listed |= c->plans[i].compute == b.compute;
    int nb = 0;
    dt_memory_plan p;
    if (!listed && dt_model_max_batch(ctx, &b, budget, &nb, &p) == DT_OK) {
        const char *name = dt_dtype_name(b.compute);
        if (nb > 0)
            put(t, " use --precision %s --batch %d (it fits);", name, nb);
        else if (b.compute != DT_F32)
            put(t, " --precision %s does not help (batch 1 peaks at %s: the model is made in fp32 first);", name,
                size_text(p.peak, need, sizeof need));
    }
    put(t, " use a smaller model (fewer or narrower layers, a smaller --input) or %s.", bigger);
    put(t, " More ranks won't help: data parallel keeps the whole model, its gradients and optimizer state on"
           " every rank.\n");
}

/* What this rank needs at the failed batch, by kind, and its biggest buffers. */
static void put_needs(text *t, const dt_memory_plan_config *f, const dt_memory_plan *pp)
{
    const dt_memory_summary *k = &pp->kinds;
    put(t, "  what this rank needs at batch %d, by kind:\n", f->batch);
    kind_row(t, "parameters", k->params);
    kind_row(t, "gradients", k->grads);
    kind_row(t, "optimizer state", k->optimizer);
    kind_row(t, "activations", k->activations);
    kind_row(t, "workspace", k->workspace);
    kind_row(t, "other", pp->other);
    kind_row(t, "total while training", pp->total);
    kind_row(t, "peak while setting up", pp->peak);
    put(t, "  the biggest buffers:\n");
    for (int i = 0; i < pp->n_top; i++) {
        char s[32];
        put(t, "    %12s  %s\n", size_text(pp->top[i].bytes, s, sizeof s), pp->top[i].what);
    }
}

/* The memory a fitting batch is measured against into *budget, said in a line: the device's free
 * memory, or host memory under a limit the kernel enforces; *bigger: where more of it comes from.
 * 0 when there is no such measure (host memory without a limit), the advice then said; else 1. */
static int put_budget(text *t, dt_ctx *ctx, const dt_memory_summary *k, size_t *budget_out, const char **bigger)
{
    char fr[32], tot[32];
    size_t budget = k->device_free;
    *bigger = "a device with more memory";
    host_budget hb = {0};
    if (!k->device_total) {
        /* Host memory under a limit the kernel enforces (the memory cgroup, split among the node's
         * ranks, or ulimit -v / -d): what is left of it, with the model freed, is the budget, as a
         * device's free memory is. MemAvailable is not asked: the plain host's free memory is no
         * budget a failed allocation was measured against. */
        dt_placement pl;
        const int ranks = ctx && dt_get_placement(ctx, &pl) == DT_OK ? pl.local_size : 1;
        host_budget_get(&hb, 0, ranks, NULL);
    }
    if (hb.kind == HOST_BUDGET_RLIMIT) {
        /* ulimit counts address space, not bytes used, so the batch it gives is an estimate. */
        mem_limit lim;
        mem_limit_get(&lim);
        budget = hb.bytes;
        *bigger = lim.flag == 'v' ? "a larger ulimit -v" : "a larger ulimit -d";
        put(t,
            "  device: host memory under ulimit -%c %zu KiB (%s): about %s of it free (%zu bytes), with this rank's "
            "model freed\n",
            lim.flag, lim.bytes / 1024, lim.name, size_text(budget, fr, sizeof fr), budget);
    } else if (hb.kind == HOST_BUDGET_CGROUP) {
        budget = hb.bytes;
        *bigger = "more memory for the job (sbatch --mem, the cgroup's memory.max) or fewer ranks per node";
        put(t, "  device: host memory under %s: about %s of it this rank's (%zu bytes), with this rank's model freed\n",
            hb.source, size_text(budget, fr, sizeof fr), budget);
    } else if (!k->device_total) {
        /* The CPU backend without a test limit, a cgroup limit or an rlimit: host memory, whose free
         * memory is no measure of what failed. */
        put(t, "  device: host memory, whose free memory dtrain does not know\n"
               "  fix: free memory on this node, run fewer ranks on it, or use a smaller --batch\n");
        return 0;
    } else {
        put(t, "  device: %s free of %s (%zu of %zu bytes), with this rank's model freed\n",
            size_text(k->device_free, fr, sizeof fr), size_text(k->device_total, tot, sizeof tot), k->device_free,
            k->device_total);
    }
    *budget_out = budget;
    return 1;
}

/* The fix: the largest batch that fits budget, by precision, or what to change when none does. */
static void put_advice(text *t, dt_ctx *ctx, const oom_case *c, size_t budget, const char *bigger)
{
    const dt_memory_plan_config *f = &c->plans[c->failed];
    int best = 0, each[8] = {0};
    if (c->n_plans > (int)(sizeof each / sizeof each[0])) {
        /* dt_last_error would be some earlier error, not why: say it. */
        put(t, "  fix: use a smaller --batch (no batch advice: %d precisions, the summary plans at most %d)\n",
            c->n_plans, (int)(sizeof each / sizeof each[0]));
        return;
    }
    if (fitting_batch(ctx, c, budget, &best, each) != DT_OK) {
        put(t, "  fix: use a smaller --batch (no batch advice: %s)\n", dt_last_error());
        return;
    }
    if (c->n_plans > 1) {
        put(t, "  the largest batch that fits, by precision:");
        for (int i = 0; i < c->n_plans; i++) put(t, " %s %d", dt_dtype_name(c->plans[i].compute), each[i]);
        put(t, "\n");
    }
    dt_memory_plan_config fb = *f;
    fb.batch = best > 0 ? best : 1;
    dt_memory_plan at_best;
    if (best > 0 && dt_model_plan_memory(ctx, &fb, &at_best) == DT_OK) {
        char pk[32];
        put(t, "  fix: batch %d fits (it peaks at %s): use --batch %d\n", best, size_text(at_best.peak, pk, sizeof pk),
            best);
        /* The samples of a step kept with accumulation, whose buffer costs one gradient more. */
        if (c->samples > best) {
            dt_memory_plan_config a = *f;
            a.accum_steps = 2;
            int na = 0;
            dt_memory_plan pa;
            if (dt_model_max_batch(ctx, &a, budget, &na, &pa) == DT_OK && na > 0) {
                const int steps = (c->samples + na - 1) / na;
                if (steps <= (1 << 16))
                    put(t, "       or --batch %d --accum-steps %d for %ld samples per rank per step (%d asked)\n", na,
                        steps, (long)na * steps, c->samples);
            }
        }
    } else if (best > 0) {
        put(t, "  fix: use --batch %d\n", best); /* its plan fitted a moment ago: cannot fail here */
    } else if (c->n_plans == 1 || each[c->failed] == 0) {
        if (dt_model_plan_memory(ctx, &fb, &at_best) == DT_OK) advise_nothing_fits(ctx, c, budget, &at_best, bigger, t);
    } else {
        put(t, "  fix: even batch 1 of");
        for (int i = 0; i < c->n_plans; i++)
            if (!each[i]) put(t, " --precision %s", dt_dtype_name(c->plans[i].compute));
        put(t, " does not fit: leave it out of --precision (the others fit at the batches above)\n");
    }
}

size_t oom_report_format(dt_ctx *ctx, const oom_case *c, char *buf, size_t n)
{
    text t = {buf, n, 0};
    if (n) buf[0] = '\0';
    const dt_memory_plan_config *f = &c->plans[c->failed];
    char host[64] = "?";
    gethostname(host, sizeof host - 1);
    put(&t, "dtrain: out of memory on rank %d of %d (%s)%s%s: dtrain %s --model %.200s%s%s --batch %d --precision %s\n",
        dt_rank(ctx), dt_world_size(ctx), host, c->stage ? " " : "", c->stage ? c->stage : "", c->command, f->spec,
        f->input ? " --input " : "", f->input ? f->input : "", f->batch, dt_dtype_name(f->compute));
    dt_memory_plan p;
    if (dt_model_plan_memory(ctx, f, &p) != DT_OK) {
        put(&t, "  (no memory plan: %s)\n", dt_last_error());
        return t.len;
    }
    put_needs(&t, f, &p);
    const char *bigger;
    size_t budget;
    if (put_budget(&t, ctx, &p.kinds, &budget, &bigger)) put_advice(&t, ctx, c, budget, bigger);
    return t.len;
}

void oom_report(dt_ctx *ctx, const oom_case *c)
{
    char buf[8192];
    const size_t len = oom_report_format(ctx, c, buf, sizeof buf);
    /* One write, so that the block stays together beside the other ranks' output. */
    fflush(stderr);
    fwrite(buf, 1, len, stderr);
    fflush(stderr);
}
