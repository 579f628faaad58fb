/*
 * memory_facts.c - what one rank reports about memory for `dtrain doctor`: the host's MemTotal and
 * MemAvailable, and with --model the model's memory plan against this rank's budget.
 *
 * The plan is the one `dtrain train` would allocate from with its defaults (SGD with momentum, fp32
 * gradients, no accumulation), so "the largest batch that fits" is train's. The budget is the GPU's
 * free memory; on the CPU it is MemAvailable split evenly among the node's ranks, since they all
 * allocate from one host, or less where a memory cgroup or ulimit -v / -d leaves less
 * (base/host_budget.h; unless the test limit makes the CPU backend act as a device).
 */
#include "launch/doctor/doctor_memory.h"

#include "base/host_budget.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A line cut to fit an error, non-printable bytes shown as '?'. */
static void show_line(const char *s, size_t len, char *out, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < len && k + 1 < n && i < 48; i++) {
        const unsigned char c = (unsigned char)s[i];
        out[k++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    out[k] = '\0';
}

/* "  <decimal> kB  " (blanks around, nothing else) into bytes. -1: not that form or too big. */
static int kb_value(const char *s, size_t len, size_t *out)
{
    size_t i = 0;
    while (i < len && (s[i] == ' ' || s[i] == '\t')) i++;
    if (i == len || s[i] < '0' || s[i] > '9') return -1;
    size_t kb = 0;
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
        const size_t d = (size_t)(s[i] - '0');
        if (kb > (SIZE_MAX / 1024 - d) / 10) return -1;
        kb = kb * 10 + d;
    }
    while (i < len && (s[i] == ' ' || s[i] == '\t')) i++;
    if (len - i < 2 || s[i] != 'k' || s[i + 1] != 'B') return -1;
    for (i += 2; i < len; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return -1;
    *out = kb * 1024;
    return 0;
}

int doctor_meminfo_parse(const char *text, size_t len, size_t *total, size_t *avail, char *err, size_t n)
{
    static const char *const names[2] = {"MemTotal", "MemAvailable"};
    size_t val[2] = {0, 0};
    int seen[2] = {0, 0};
    char shown[64];
    for (size_t at = 0; at < len;) {
        const char *line = text + at;
        const char *nl = memchr(line, '\n', len - at);
        const size_t ll = nl ? (size_t)(nl - line) : len - at;
        at += ll + (nl != NULL);
        const char *colon = memchr(line, ':', ll);
        if (!colon) continue;
        const size_t nlen = (size_t)(colon - line);
        for (int k = 0; k < 2; k++) {
            if (seen[k] || nlen != strlen(names[k]) || memcmp(line, names[k], nlen)) continue;
            if (kb_value(colon + 1, ll - nlen - 1, &val[k])) {
                show_line(line, ll, shown, sizeof shown);
                snprintf(err, n, "the %s line '%s' is not '%s: <decimal> kB' (or is past %zu kB)", names[k], shown,
                         names[k], SIZE_MAX / 1024);
                return -1;
            }
            seen[k] = 1;
        }
    }
    for (int k = 0; k < 2; k++)
        if (!seen[k]) {
            snprintf(err, n, "it has no %s line%s", names[k], k ? " (Linux has it since 3.14)" : "");
            return -1;
        }
    if (val[0] == 0) {
        snprintf(err, n, "its MemTotal is 0 kB");
        return -1;
    }
    if (val[1] > val[0]) {
        snprintf(err, n, "its MemAvailable %zu kB is above its MemTotal %zu kB", val[1] / 1024, val[0] / 1024);
        return -1;
    }
    *total = val[0];
    *avail = val[1];
    return 0;
}

int doctor_meminfo_read(size_t *total, size_t *avail, char *err, size_t n)
{
    const char *test = getenv("DTRAIN_TEST_MEMINFO");
    const char *path = test && *test ? test : "/proc/meminfo";
    FILE *in = fopen(path, "rb");
    if (!in) {
        snprintf(err, n, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    /* /proc/meminfo is about 1.5 KiB; what is past 64 KiB is no meminfo. */
    enum { CAP = 64 * 1024 };
    char *buf = malloc(CAP);
    if (!buf) {
        fclose(in);
        snprintf(err, n, "out of memory reading %s", path);
        return -1;
    }
    const size_t got = fread(buf, 1, CAP, in);
    const int failed = ferror(in), e = errno; /* before fclose can change errno */
    fclose(in);
    char why[160];
    int rc = 0;
    if (failed) {
        snprintf(err, n, "cannot read %s: %s", path, strerror(e));
        rc = -1;
    } else if (doctor_meminfo_parse(buf, got, total, avail, why, sizeof why)) {
        snprintf(err, n, "%s: %s", path, why);
        rc = -1;
    }
    free(buf);
    return rc;
}

/* The rank's budget for the model, from the plan's device numbers or the host's share. */
static void budget(doctor_mem_facts *f, const dt_memory_plan *p)
{
    if (p->kinds.device_total) {
        f->budget_kind = f->on_gpu ? DOC_BUDGET_DEVICE : DOC_BUDGET_TEST_LIMIT;
        f->budget = p->kinds.device_free;
        f->device_total = p->kinds.device_total;
    } else if (!f->on_gpu) {
        /* The least of MemAvailable, the memory cgroup's room and the rlimit: the kernel kills or
         * refuses past the last two whatever MemAvailable says. */
        host_budget hb;
        host_budget_get(&hb, f->host_error[0] ? 0 : f->host_avail, f->local_size, NULL);
        if (hb.kind == HOST_BUDGET_NONE) return;
        f->budget_kind = hb.kind == HOST_BUDGET_MEMAVAILABLE ? DOC_BUDGET_HOST_SHARE : DOC_BUDGET_HOST_LIMIT;
        f->budget = hb.bytes;
        snprintf(f->budget_source, sizeof f->budget_source, "%s", hb.source);
    }
}

static void keep_plan(doctor_mem_facts *f, const dt_memory_plan *p, int batch)
{
    f->peak = p->peak;
    f->total = p->total;
    f->plan_batch = batch;
    f->n_top = p->n_top < DOC_MEM_TOP ? p->n_top : DOC_MEM_TOP;
    for (int i = 0; i < f->n_top; i++) {
        snprintf(f->top[i].what, sizeof f->top[i].what, "%s", p->top[i].what);
        f->top[i].bytes = p->top[i].bytes;
    }
}

static void plan_error(doctor_mem_facts *f) { snprintf(f->plan_error, sizeof f->plan_error, "%s", dt_last_error()); }

static void plan_query(doctor_mem_facts *f, dt_ctx *ctx, const doctor_model_query *q)
{
    f->planned = 1;
    snprintf(f->model, sizeof f->model, "%s", q->model);
    snprintf(f->input, sizeof f->input, "%s", q->input ? q->input : "");
    snprintf(f->precision, sizeof f->precision, "%s", dt_dtype_name(q->precision));
    f->batch = q->batch;
    f->max_batch = f->bf16_max_batch = -1;
    dt_optim_config oc;
    dt_optim_defaults(&oc); /* train's default optimizer: SGD with momentum, one fp32 moment */
    dt_memory_plan_config c;
    dt_memory_plan_defaults(&c);
    c.spec = q->model;
    c.input = q->input;
    c.compute = q->precision;
    c.optim = &oc;
    c.batch = 1;
    dt_memory_plan p;
    if (dt_model_plan_memory(ctx, &c, &p)) {
        plan_error(f);
        return;
    }
    f->min_peak = p.peak;
    budget(f, &p);
    if (q->batch > 1) {
        c.batch = q->batch;
        if (dt_model_plan_memory(ctx, &c, &p)) {
            plan_error(f);
            return;
        }
    }
    keep_plan(f, &p, c.batch);
    if (f->budget_kind == DOC_BUDGET_NONE) return;
    dt_memory_plan at_max;
    if (dt_model_max_batch(ctx, &c, f->budget, &f->max_batch, &at_max)) {
        plan_error(f);
        return;
    }
    if (!q->batch) keep_plan(f, &at_max, f->max_batch ? f->max_batch : 1);
    /* bf16 is the fix to offer only where it fits a larger batch: its peak still counts the fp32
     * pool dt_model_create makes first. */
    if (q->precision == DT_F32) {
        c.compute = DT_BF16;
        if (dt_model_max_batch(ctx, &c, f->budget, &f->bf16_max_batch, &at_max)) f->bf16_max_batch = -1;
    }
}

void doctor_memory_collect(doctor_mem_facts *f, dt_ctx *ctx, const doctor_model_query *q)
{
    memset(f, 0, sizeof *f);
    if (doctor_meminfo_read(&f->host_total, &f->host_avail, f->host_error, sizeof f->host_error))
        f->host_total = f->host_avail = 0;
    dt_placement pl;
    f->local_size = 1;
    if (ctx && dt_get_placement(ctx, &pl) == DT_OK) {
        f->local_size = pl.local_size > 0 ? pl.local_size : 1;
        f->on_gpu = pl.device == DT_DEVICE_CUDA;
    }
    if (q && q->model) plan_query(f, ctx, q);
    f->collected = 1;
}
