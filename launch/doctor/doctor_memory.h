/*
 * doctor_memory.h - doctor's memory checks: host memory free per node, and with --model the
 * largest batch that fits on this rank's device from the model's memory plan. What one rank
 * collects (memory_facts.c) and the checks over it (memory_check.c).
 */
#ifndef DT_LAUNCH_DOCTOR_MEMORY_H
#define DT_LAUNCH_DOCTOR_MEMORY_H

#include "dtrain.h"

#include <stddef.h>

struct doc_list;
struct doctor_facts;

/* What --model/--input/--precision ask doctor to plan for; model NULL: no model check. */
typedef struct doctor_model_query {
    const char *model, *input;
    dt_dtype precision;
    int batch; /* the batch the user means to run (0: not given) */
} doctor_model_query;

/* Where a rank's budget for the model comes from. */
typedef enum doc_mem_budget {
    DOC_BUDGET_NONE = 0,   /* unknown: a GPU that reported no memory */
    DOC_BUDGET_DEVICE,     /* the GPU's free memory now */
    DOC_BUDGET_TEST_LIMIT, /* the CPU backend's DTRAIN_TEST_MEM_LIMIT: the limit less what it holds */
    DOC_BUDGET_HOST_SHARE, /* the CPU: MemAvailable split evenly among the ranks of this node */
    DOC_BUDGET_HOST_LIMIT  /* the CPU under a tighter limit the kernel enforces: the memory cgroup's
                              room split among the node's ranks, or ulimit -v / -d (budget_source) */
} doc_mem_budget;

/* How many of the plan's biggest buffers memory.plan names. */
#define DOC_MEM_TOP 3

/* One rank's memory facts: plain fixed-size data (gathered as bytes). */
typedef struct doctor_mem_facts {
    int collected;                 /* 1 once doctor_memory_collect ran */
    char host_error[192];          /* why the host's memory is unknown, "" when it was read */
    size_t host_total, host_avail; /* bytes: MemTotal, MemAvailable */
    /* The model query (planned 0: no --model). */
    int planned;
    char model[128], input[32]; /* the query, cut to fit (for the rows' texts) */
    char precision[8];          /* dt_dtype_name of --precision */
    char plan_error[320];       /* the plan's error (bad spec, input, precision), "" when it planned */
    int batch;                  /* --batch, 0 when not given */
    int on_gpu;                 /* the plan is the CUDA backend's */
    doc_mem_budget budget_kind;
    size_t budget;           /* bytes the model may use on this rank */
    char budget_source[320]; /* on the CPU: where budget comes from in words (base/host_budget.h) */
    size_t device_total;     /* the device's (or the test limit's) total, 0 on the plain CPU */
    int local_size;          /* ranks on this node (sharing its host memory) */
    size_t peak, total;      /* the plan at --batch (at the largest batch that fits when none given) */
    int plan_batch;          /* the batch peak/total/top are for */
    int n_top;
    struct {
        char what[64];
        size_t bytes;
    } top[DOC_MEM_TOP];
    int max_batch;      /* the largest batch whose peak fits in budget (0: not even batch 1; -1: not
                           searched, for want of a budget or after a plan error) */
    size_t min_peak;    /* batch 1's peak: what the model needs at the least */
    int bf16_max_batch; /* the same with --precision bf16 (-1: not planned, the query is 16-bit) */
} doctor_mem_facts;

/* Parses the text of /proc/meminfo (len bytes, NUL not needed, any byte allowed) for MemTotal and
 * MemAvailable, lines "Name:  <decimal> kB", into *total and *avail in bytes. The first line of
 * each name counts. Returns 0; or -1 with *total and *avail untouched and why in err (n bytes,
 * naming the line): a name missing, a value that is not a decimal of kB, one past SIZE_MAX bytes,
 * MemTotal 0, MemAvailable above MemTotal. */
int doctor_meminfo_parse(const char *text, size_t len, size_t *total, size_t *avail, char *err, size_t n);

/* MemTotal and MemAvailable of DTRAIN_TEST_MEMINFO's file or /proc/meminfo in bytes: 0, or -1 with
 * why in err (n bytes, naming the file). */
int doctor_meminfo_read(size_t *total, size_t *avail, char *err, size_t n);

/* Fills *f for this rank of ctx (q may be NULL: no model). Reads DTRAIN_TEST_MEMINFO (a file to
 * read instead of /proc/meminfo, runtime/test_hooks.h) when set. Never fails: what cannot be read
 * or planned is recorded, and the checks say so. Not collective. */
void doctor_memory_collect(doctor_mem_facts *f, dt_ctx *ctx, const doctor_model_query *q);

/* The per-rank memory checks over one rank's facts, into out (a scratch list): memory.plan. */
void doctor_memory_check_rank(const struct doctor_facts *f, struct doc_list *out);
/* The per-job memory checks over every rank's facts (world entries), into job: memory.host (one
 * row per node that is short of memory, one for the rest) and memory.model (the rank with the
 * smallest budget decides the batch that fits). */
void doctor_memory_check_job(const struct doctor_facts *all, int world, struct doc_list *job);

/* memory.host warns when a node's MemAvailable is below this fraction of MemTotal or below
 * DOC_HOST_AVAIL_MIN bytes. */
#define DOC_HOST_AVAIL_FRACTION 0.10
#define DOC_HOST_AVAIL_MIN ((size_t)2 << 30)

#endif
