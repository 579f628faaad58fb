/*
 * memory_check.c - doctor's memory verdicts: pure functions of the facts (doctor_memory.h), so the
 * unit test can fake any machine.
 *
 * Host memory and the model's fit are job rows: free memory differs a little from rank to rank
 * (each read it at its own moment), so per-rank rows would not merge, and what decides the batch
 * that fits is the rank with the least, which only the job sees. memory.plan is per rank: the plan
 * is the same on every rank of one device kind, and those rows merge.
 */
#include "launch/doctor/doctor.h"

#include "base/host_budget.h"

#include <stdlib.h>
#include <string.h>

/* The largest batch dt_model_max_batch tries (include/dtrain/training.h). */
#define MAX_BATCH_SEARCHED 1048576

/* bytes as "1.2 GiB", "12.0 MiB", "3.0 KiB", "512 B" into out (n bytes); returns out. */
static const char *fmt_bytes(size_t b, char *out, size_t n) { return host_budget_bytes(b, out, n); }

/* ---------------------------------------------------------------- per rank */

void doctor_memory_check_rank(const doctor_facts *f, doc_list *out)
{
    const doctor_mem_facts *m = &f->mem;
    if (!m->collected) {
        doc_add(out, "memory.plan", DOC_FAIL, "rerun; report a bug if it stays", "this rank collected no memory facts");
        return;
    }
    if (!m->planned || m->plan_error[0]) return; /* memory.model says why */
    char peak[24], total[24], items[DOC_TEXT] = "";
    for (int i = 0; i < m->n_top; i++) {
        char b[24];
        doc_append(items, sizeof items, "%s%s %s", i ? ", " : "", m->top[i].what,
                   fmt_bytes(m->top[i].bytes, b, sizeof b));
    }
    doc_add(out, "memory.plan", DOC_PASS, NULL,
            "%s at batch %d on the %s: peak %s, held while training %s; biggest: %s", m->precision, m->plan_batch,
            m->on_gpu ? "GPU" : "CPU", fmt_bytes(m->peak, peak, sizeof peak), fmt_bytes(m->total, total, sizeof total),
            items);
}

/* ---------------------------------------------------------------- host memory per node */

static int host_low(const doctor_mem_facts *m)
{
    return (double)m->host_avail < DOC_HOST_AVAIL_FRACTION * (double)m->host_total ||
           m->host_avail < DOC_HOST_AVAIL_MIN;
}

static int percent(const doctor_mem_facts *m) { return (int)(100.0 * (double)m->host_avail / (double)m->host_total); }

static void check_host(const doctor_facts *all, int world, int *idx, doc_list *job)
{
    int healthy = 0, least = -1, nodes = 0;
    for (int nd = 0; nd < all[0].pl.num_nodes; nd++) {
        int n = 0, first = -1;
        for (int r = 0; r < world; r++)
            if (all[r].pl.node == nd) {
                idx[n++] = r;
                if (first < 0 && all[r].mem.collected) first = r;
            }
        if (first < 0) continue;
        nodes++;
        const doctor_mem_facts *m = &all[first].mem;
        const char *host = all[first].pl.hostname;
        char av[24], tot[24];
        if (m->host_error[0])
            doc_add_ranks(job, idx, n, "memory.host", DOC_WARN,
                          "mount /proc in the container (doctor and dtrain read /proc/meminfo), or unset "
                          "DTRAIN_TEST_MEMINFO",
                          "%s: host memory unknown: %s", host, m->host_error);
        else if (host_low(m))
            doc_add_ranks(job, idx, n, "memory.host", DOC_WARN,
                          "free host memory on this node (see what holds it: free -g; ps aux --sort=-rss | head) "
                          "or start fewer ranks on it",
                          "%s has %s available of %s (%d%%): below %.0f%% or %zu GiB, training may swap or be killed",
                          host, fmt_bytes(m->host_avail, av, sizeof av), fmt_bytes(m->host_total, tot, sizeof tot),
                          percent(m), 100 * DOC_HOST_AVAIL_FRACTION, DOC_HOST_AVAIL_MIN >> 30);
        else {
            healthy++;
            if (least < 0 || m->host_avail < all[least].mem.host_avail) least = first;
        }
    }
    if (!healthy) return;
    const doctor_mem_facts *m = &all[least].mem;
    char av[24], tot[24];
    fmt_bytes(m->host_avail, av, sizeof av);
    fmt_bytes(m->host_total, tot, sizeof tot);
    if (nodes == 1)
        doc_add(job, "memory.host", DOC_PASS, NULL, "%s: %s available of %s (%d%%)", all[least].pl.hostname, av, tot,
                percent(m));
    else
        doc_add(job, "memory.host", DOC_PASS, NULL,
                "%d of %d nodes have enough; the least: %s with %s available of %s (%d%%)", healthy, nodes,
                all[least].pl.hostname, av, tot, percent(m));
}

/* ---------------------------------------------------------------- the model's fit */

/* Where rank r's budget comes from, after "of <bytes> free ". */
static void budget_text(const doctor_facts *f, char *out, size_t n)
{
    const doctor_mem_facts *m = &f->mem;
    char b[24];
    switch (m->budget_kind) {
        case DOC_BUDGET_DEVICE:
            snprintf(out, n, "(the GPU of rank %d on %s, of %s)", f->pl.rank, f->pl.hostname,
                     fmt_bytes(m->device_total, b, sizeof b));
            break;
        case DOC_BUDGET_TEST_LIMIT:
            snprintf(out, n, "(rank %d under DTRAIN_TEST_MEM_LIMIT %s)", f->pl.rank,
                     fmt_bytes(m->device_total, b, sizeof b));
            break;
        case DOC_BUDGET_HOST_SHARE:
            snprintf(out, n, "(MemAvailable %s of %s shared by its %d rank%s on the CPU)",
                     fmt_bytes(m->host_avail, b, sizeof b), f->pl.hostname, m->local_size,
                     m->local_size == 1 ? "" : "s");
            break;
        case DOC_BUDGET_HOST_LIMIT:
            snprintf(out, n, "(rank %d on %s under %.200s)", f->pl.rank, f->pl.hostname, m->budget_source);
            break;
        default: snprintf(out, n, "(unknown)"); break;
    }
}

/* The fix for a batch that does not fit: the batch that does, bf16 where it fits more. */
static void fit_fix(const doctor_mem_facts *m, int fits, char *out, size_t n)
{
    size_t len = 0;
    if (fits > 0) len = (size_t)snprintf(out, n, "use --batch %d", fits);
    if (m->bf16_max_batch > fits && len < n)
        len += (size_t)snprintf(out + len, n - len, "%s--precision bf16 (fits batch %d)", len ? ", or " : "use ",
                                m->bf16_max_batch);
    if (len < n)
        len += (size_t)snprintf(out + len, n - len, "%sa smaller model (fewer or narrower layers)",
                                len ? ", or " : "use ");
    /* The limit is the job's: where to raise it. */
    if (m->budget_kind == DOC_BUDGET_HOST_LIMIT && len < n)
        snprintf(out + len, n - len, "; or raise the limit (%s)",
                 !strncmp(m->budget_source, "cgroup", 6) ? "the job's memory: sbatch --mem, or the cgroup's memory.max"
                                                         : "ulimit -v / -d in the job script");
}

/* The ranks whose facts satisfy pick(m, arg) into idx; their count. */
static int ranks_where(const doctor_facts *all, int world, int *idx, int (*pick)(const doctor_mem_facts *, int),
                       int arg)
{
    int n = 0;
    for (int r = 0; r < world; r++)
        if (pick(&all[r].mem, arg)) idx[n++] = r;
    return n;
}
static int has_error(const doctor_mem_facts *m, int arg)
{
    (void)arg;
    return m->planned && m->plan_error[0];
}
static int no_budget(const doctor_mem_facts *m, int arg)
{
    (void)arg;
    return m->planned && !m->plan_error[0] && m->budget_kind == DOC_BUDGET_NONE;
}
static int fits_below(const doctor_mem_facts *m, int batch)
{
    return m->planned && !m->plan_error[0] && m->budget_kind != DOC_BUDGET_NONE && m->max_batch < batch;
}

static void check_model(const doctor_facts *all, int world, int *idx, doc_list *job)
{
    int q = -1; /* a rank that planned: the query is every rank's */
    for (int r = 0; r < world && q < 0; r++)
        if (all[r].mem.planned) q = r;
    if (q < 0) {
        doc_add(job, "memory.model", DOC_SKIP, NULL,
                "give --model to plan memory: dtrain doctor --model cnn --input 3x32x32 --batch 256 says whether "
                "the batch fits and the largest that does");
        return;
    }
    int n = ranks_where(all, world, idx, has_error, 0);
    if (n) {
        const doctor_mem_facts *m = &all[idx[0]].mem;
        doc_add_ranks(job, idx, n, "memory.model", DOC_FAIL,
                      "give --model mlp, cnn or LAYERS (fc:OUT,conv:OUT:K:STRIDE:PAD,pool:K,relu,flatten; the last "
                      "is fc:CLASSES) and --input N|CxHxW: dtrain help train",
                      "--model %s --input %s cannot be planned: %s", m->model, m->input, m->plan_error);
    }
    if ((n = ranks_where(all, world, idx, no_budget, 0)))
        doc_add_ranks(job, idx, n, "memory.model", DOC_SKIP, NULL, "%s, so the batch that fits is unknown",
                      all[idx[0]].mem.on_gpu ? "the GPU reports no free memory"
                                             : "the host's memory is unknown (see memory.host)");
    /* The rank with the smallest largest batch decides (ties: the smaller budget). */
    int lim = -1;
    for (int r = 0; r < world; r++) {
        const doctor_mem_facts *m = &all[r].mem;
        if (!m->planned || m->plan_error[0] || m->budget_kind == DOC_BUDGET_NONE) continue;
        if (lim < 0 || m->max_batch < all[lim].mem.max_batch ||
            (m->max_batch == all[lim].mem.max_batch && m->budget < all[lim].mem.budget))
            lim = r;
    }
    if (lim < 0) return;
    const doctor_mem_facts *m = &all[lim].mem;
    const int fits = m->max_batch;
    /* dt_model_max_batch looks no further than --batch's limit: more may fit. */
    const char *capped = fits >= MAX_BATCH_SEARCHED ? " (the most --batch takes; more may fit)" : "";
    char need[48], free_[48], from[512], fix[DOC_TEXT];
    fmt_bytes(m->budget, free_, sizeof free_);
    budget_text(&all[lim], from, sizeof from);
    if (fits == 0) {
        n = ranks_where(all, world, idx, fits_below, 1);
        fit_fix(m, 0, fix, sizeof fix);
        doc_add_ranks(job, idx, n, "memory.model", DOC_FAIL, fix,
                      "--model %s does not fit even at batch 1: it needs %s peak, more than the %s free %s", m->model,
                      fmt_bytes(m->min_peak, need, sizeof need), free_, from);
    } else if (m->batch > fits) {
        n = ranks_where(all, world, idx, fits_below, m->batch);
        fit_fix(m, fits, fix, sizeof fix);
        fmt_bytes(m->peak, need, sizeof need);
        if (!strcmp(need, free_)) { /* rounded alike: the bytes say which is more */
            snprintf(need + strlen(need), sizeof need - strlen(need), " (%zu B)", m->peak);
            snprintf(free_ + strlen(free_), sizeof free_ - strlen(free_), " (%zu B)", m->budget);
        }
        doc_add_ranks(job, idx, n, "memory.model", DOC_FAIL, fix,
                      "batch %d needs %s peak, more than the %s free %s; the largest batch that fits is %d", m->batch,
                      need, free_, from, fits);
    } else if (m->batch)
        doc_add(job, "memory.model", DOC_PASS, NULL,
                "batch %d needs %s peak of %s free %s; the largest batch that fits is %d%s", m->batch,
                fmt_bytes(m->peak, need, sizeof need), free_, from, fits, capped);
    else
        doc_add(job, "memory.model", DOC_PASS, NULL,
                "the largest batch that fits is %d%s: batch 1 needs %s peak of %s free %s", fits, capped,
                fmt_bytes(m->min_peak, need, sizeof need), free_, from);
}

void doctor_memory_check_job(const doctor_facts *all, int world, doc_list *job)
{
    int *idx = calloc((size_t)world, sizeof *idx);
    if (!idx) {
        job->nomem = 1;
        return;
    }
    check_host(all, world, idx, job);
    check_model(all, world, idx, job);
    free(idx);
}
