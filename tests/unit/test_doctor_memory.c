/*
 * test_doctor_memory.c - launch/doctor's memory checks: the /proc/meminfo parser, each row's
 * PASS / WARN / FAIL / SKIP path over faked facts, and the collector against dt_model_max_batch
 * under the CPU backend's test limit and a faked meminfo file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/backend.h"
#include "launch/doctor/doctor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GiB ((size_t)1 << 30)
#define MiB ((size_t)1 << 20)

static const doc_row *find(const doc_list *l, const char *name, doc_level lv)
{
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->rows[i].name, name) && l->rows[i].level == lv) return &l->rows[i];
    return NULL;
}

static int count(const doc_list *l, const char *name)
{
    int n = 0;
    for (int i = 0; i < l->n; i++) n += !strcmp(l->rows[i].name, name);
    return n;
}

/* ---------------------------------------------------------------- the parser */

static int parse(const char *text, size_t *total, size_t *avail, char *err)
{
    *total = *avail = 7;
    return doctor_meminfo_parse(text, strlen(text), total, avail, err, 160);
}

static void test_meminfo_parse(void **state)
{
    (void)state;
    size_t t, a;
    char err[160];
    assert_int_equal(parse("MemTotal:       24683652 kB\nMemFree:        24042124 kB\n"
                           "MemAvailable:   24347568 kB\nHugePages_Total:       0\n",
                           &t, &a, err),
                     0);
    assert_true(t == (size_t)24683652 * 1024 && a == (size_t)24347568 * 1024);
    /* No final newline, CRLF, tabs; the first line of a name counts; a longer name is another one. */
    assert_int_equal(parse("MemTotalX: 1 kB\nMemTotal:\t100 kB\r\nMemAvailable: 40 kB\nMemTotal: 5 kB", &t, &a, err),
                     0);
    assert_true(t == 102400 && a == 40960);

    static const struct {
        const char *text, *why;
    } bad[] = {
        {"MemTotal: 100 kB\n", "no MemAvailable line"},
        {"MemAvailable: 100 kB\n", "no MemTotal line"},
        {"", "no MemTotal line"},
        {"MemTotal: 100 MB\nMemAvailable: 1 kB\n", "the MemTotal line 'MemTotal: 100 MB'"},
        {"MemTotal: 100\nMemAvailable: 1 kB\n", "is not 'MemTotal: <decimal> kB'"},
        {"MemTotal: -5 kB\nMemAvailable: 1 kB\n", "the MemTotal line"},
        {"MemTotal: 100 kB x\nMemAvailable: 1 kB\n", "the MemTotal line"},
        {"MemTotal: 99999999999999999999999 kB\nMemAvailable: 1 kB\n", "is past"},
        {"MemTotal: 0 kB\nMemAvailable: 0 kB\n", "MemTotal is 0 kB"},
        {"MemTotal: 10 kB\nMemAvailable: 11 kB\n", "MemAvailable 11 kB is above its MemTotal 10 kB"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = '\0';
        assert_int_equal(parse(bad[i].text, &t, &a, err), -1);
        assert_true(t == 7 && a == 7); /* untouched on failure */
        if (!strstr(err, bad[i].why)) fail_msg("'%s': error '%s' lacks '%s'", bad[i].text, err, bad[i].why);
    }
    /* A NUL inside the text is a byte like any other, and len bounds the scan. */
    static const char nul[] = "MemTotal: 8 kB\nX\0Y: 1\nMemAvailable: 4 kB\n";
    assert_int_equal(doctor_meminfo_parse(nul, sizeof nul - 1, &t, &a, err, sizeof err), 0);
    assert_true(t == 8192 && a == 4096);
    assert_int_equal(doctor_meminfo_parse(nul, 15, &t, &a, err, sizeof err), -1);
    /* The shown line has no control bytes (it goes into the report). */
    assert_int_equal(parse("MemTotal: 1\x01 kB\nMemAvailable: 1 kB\n", &t, &a, err), -1);
    assert_non_null(strstr(err, "'MemTotal: 1? kB'"));
}

/* ---------------------------------------------------------------- faked facts */

/* Rank r of a job with per_node ranks on each node (nodes n0, n1, ...), 64 GiB hosts, 40 free. */
static void healthy(doctor_facts *f, int r, int world, int per_node)
{
    memset(f, 0, sizeof *f);
    f->pl.rank = r, f->pl.world_size = world, f->pl.local_size = per_node, f->pl.local_rank = r % per_node;
    f->pl.node = r / per_node, f->pl.num_nodes = (world + per_node - 1) / per_node, f->pl.device = DT_DEVICE_CPU;
    snprintf(f->pl.hostname, sizeof f->pl.hostname, "n%d", f->pl.node);
    f->mem.collected = 1;
    f->mem.host_total = 64 * GiB, f->mem.host_avail = 40 * GiB;
    f->mem.local_size = per_node;
}

/* The facts of a planned query on a GPU with free bytes whose largest batch is max. */
static void planned(doctor_facts *f, int batch, int max, size_t free_bytes)
{
    doctor_mem_facts *m = &f->mem;
    m->plan_error[0] = '\0';
    m->planned = 1, m->batch = batch, m->max_batch = max, m->bf16_max_batch = max;
    snprintf(m->model, sizeof m->model, "cnn");
    snprintf(m->input, sizeof m->input, "3x32x32");
    snprintf(m->precision, sizeof m->precision, "fp32");
    m->on_gpu = 1, m->budget_kind = DOC_BUDGET_DEVICE, m->budget = free_bytes, m->device_total = 80 * GiB;
    m->plan_batch = batch ? batch : max;
    m->peak = m->total = (size_t)(batch ? batch : max) * MiB;
    m->min_peak = MiB;
    m->n_top = 2;
    snprintf(m->top[0].what, sizeof m->top[0].what, "layer 0 (conv:32:3:1:1) output");
    m->top[0].bytes = 300 * MiB;
    snprintf(m->top[1].what, sizeof m->top[1].what, "parameters (fp32)");
    m->top[1].bytes = 20 * MiB;
}

static void run_memory(doctor_facts *all, int world, doc_list *job)
{
    doc_list_init(job, world);
    for (int r = 0; r < world; r++) {
        doc_list one;
        doc_list_init(&one, 0);
        doctor_memory_check_rank(&all[r], &one);
        doc_merge_rank(job, &one, r);
        doc_list_free(&one);
    }
    doctor_memory_check_job(all, world, job);
}

static void test_host_rows(void **state)
{
    (void)state;
    doctor_facts all[4];
    doc_list job;
    for (int r = 0; r < 4; r++) healthy(&all[r], r, 4, 2);
    run_memory(all, 4, &job);
    const doc_row *row = find(&job, "memory.host", DOC_PASS);
    assert_non_null(row);
    assert_non_null(strstr(row->seen, "2 of 2 nodes have enough; the least: n0 with 40.0 GiB available of 64.0 GiB"));
    assert_int_equal(count(&job, "memory.host"), 1);
    assert_non_null(find(&job, "memory.model", DOC_SKIP)); /* no --model */
    assert_non_null(strstr(find(&job, "memory.model", DOC_SKIP)->seen, "give --model"));
    assert_int_equal(count(&job, "memory.plan"), 0);
    doc_list_free(&job);

    /* Node 1 below 10%: a WARN about its ranks only, the other node passes. */
    all[2].mem.host_avail = all[3].mem.host_avail = 6 * GiB;
    run_memory(all, 4, &job);
    row = find(&job, "memory.host", DOC_WARN);
    assert_non_null(row);
    assert_non_null(strstr(row->seen, "n1 has 6.0 GiB available of 64.0 GiB (9%)"));
    assert_non_null(strstr(row->fix, "free host memory"));
    char t[32];
    doc_ranks_text(&job, row, t, sizeof t);
    assert_string_equal(t, "2-3");
    assert_non_null(strstr(find(&job, "memory.host", DOC_PASS)->seen, "1 of 2 nodes have enough; the least: n0"));
    assert_int_equal(doc_worst(&job), DOC_WARN);
    doc_list_free(&job);

    /* Below the absolute floor although above 10% of a small host; and an unreadable meminfo. */
    for (int r = 0; r < 4; r++) healthy(&all[r], r, 4, 2);
    all[0].mem.host_total = all[1].mem.host_total = 4 * GiB;
    all[0].mem.host_avail = all[1].mem.host_avail = GiB;
    snprintf(all[2].mem.host_error, sizeof all[2].mem.host_error, "cannot open /proc/meminfo: No such file");
    snprintf(all[3].mem.host_error, sizeof all[3].mem.host_error, "cannot open /proc/meminfo: No such file");
    run_memory(all, 4, &job);
    assert_int_equal(count(&job, "memory.host"), 2);
    assert_null(find(&job, "memory.host", DOC_PASS));
    assert_non_null(strstr(job.rows[0].seen, "n0 has 1.0 GiB available of 4.0 GiB (25%): below 10% or 2 GiB"));
    assert_non_null(strstr(job.rows[1].seen, "n1: host memory unknown: cannot open /proc/meminfo"));
    assert_non_null(strstr(job.rows[1].fix, "mount /proc"));
    doc_list_free(&job);
}

static void test_model_rows(void **state)
{
    (void)state;
    doctor_facts all[2];
    doc_list job;
    /* Fits on both: one PASS job row from the rank with the least, a merged memory.plan row. */
    for (int r = 0; r < 2; r++) healthy(&all[r], r, 2, 2), planned(&all[r], 64, r ? 3000 : 3712, (20 - r) * GiB);
    all[0].mem.peak = all[1].mem.peak = (size_t)(1.2 * (double)GiB);
    run_memory(all, 2, &job);
    const doc_row *row = find(&job, "memory.model", DOC_PASS);
    assert_non_null(row);
    assert_non_null(strstr(row->seen, "batch 64 needs 1.2 GiB peak of 19.0 GiB free (the GPU of rank 1 on n0, of "
                                      "80.0 GiB); the largest batch that fits is 3000"));
    row = find(&job, "memory.plan", DOC_PASS);
    assert_non_null(row);
    assert_string_equal(row->seen, "fp32 at batch 64 on the GPU: peak 1.2 GiB, held while training 64.0 MiB; biggest: "
                                   "layer 0 (conv:32:3:1:1) output 300.0 MiB, parameters (fp32) 20.0 MiB");
    assert_int_equal(count(&job, "memory.plan"), 1);
    assert_int_equal(doc_worst(&job), DOC_PASS);
    doc_list_free(&job);

    /* --batch 3500 fits rank 0 (exactly its largest) but not rank 1 (3000): a FAIL about rank 1 alone,
     * with the batch that fits. */
    for (int r = 0; r < 2; r++) all[r].mem.batch = 3500;
    all[0].mem.max_batch = 3500;
    run_memory(all, 2, &job);
    row = find(&job, "memory.model", DOC_FAIL);
    assert_non_null(row);
    assert_non_null(strstr(row->seen, "batch 3500 needs"));
    assert_non_null(strstr(row->seen, "the largest batch that fits is 3000"));
    assert_string_equal(row->fix, "use --batch 3000, or a smaller model (fewer or narrower layers)");
    char t[32];
    doc_ranks_text(&job, row, t, sizeof t);
    assert_string_equal(t, "1");
    doc_list_free(&job);

    /* bf16 is offered only where it fits more; peak and free that print alike show their bytes. */
    all[1].mem.bf16_max_batch = 5000;
    all[1].mem.peak = 19 * GiB + 5;
    run_memory(all, 2, &job);
    row = find(&job, "memory.model", DOC_FAIL);
    assert_string_equal(
        row->fix,
        "use --batch 3000, or --precision bf16 (fits batch 5000), or a smaller model (fewer or narrower layers)");
    assert_non_null(
        strstr(row->seen, "needs 19.0 GiB (20401094661 B) peak, more than the 19.0 GiB (20401094656 B) free"));
    doc_list_free(&job);

    /* Nothing fits; no --batch on the host share. */
    for (int r = 0; r < 2; r++) {
        planned(&all[r], 0, 0, 512 * 1024);
        all[r].mem.min_peak = 7 * MiB;
        all[r].mem.bf16_max_batch = 0;
    }
    run_memory(all, 2, &job);
    row = find(&job, "memory.model", DOC_FAIL);
    assert_non_null(row);
    assert_non_null(strstr(row->seen, "--model cnn does not fit even at batch 1: it needs 7.0 MiB peak, more than the "
                                      "512.0 KiB free"));
    assert_string_equal(row->fix, "use a smaller model (fewer or narrower layers)");
    doc_list_free(&job);
    for (int r = 0; r < 2; r++) {
        planned(&all[r], 0, 44520, 11 * GiB);
        all[r].mem.on_gpu = 0, all[r].mem.budget_kind = DOC_BUDGET_HOST_SHARE;
        all[r].mem.host_avail = 22 * GiB;
    }
    run_memory(all, 2, &job);
    row = find(&job, "memory.model", DOC_PASS);
    assert_non_null(row);
    assert_non_null(strstr(row->seen, "the largest batch that fits is 44520: batch 1 needs 1.0 MiB peak of 11.0 GiB "
                                      "free (MemAvailable 22.0 GiB of n0 shared by its 2 ranks on the CPU)"));
    doc_list_free(&job);

    /* At the search's limit the row says more may fit. */
    for (int r = 0; r < 2; r++) all[r].mem.max_batch = 1048576;
    run_memory(all, 2, &job);
    assert_non_null(strstr(find(&job, "memory.model", DOC_PASS)->seen,
                           "the largest batch that fits is 1048576 (the most --batch takes; more may fit): batch 1"));
    doc_list_free(&job);

    /* A spec that does not plan: FAIL naming it; a GPU without numbers: SKIP. */
    for (int r = 0; r < 2; r++) {
        planned(&all[r], 8, 0, 0);
        snprintf(all[r].mem.plan_error, sizeof all[r].mem.plan_error, "model 'cnnx': layer 1 'cnnx' is not a layer");
    }
    run_memory(all, 2, &job);
    row = find(&job, "memory.model", DOC_FAIL);
    assert_non_null(row);
    assert_non_null(strstr(row->seen, "--model cnn --input 3x32x32 cannot be planned: model 'cnnx'"));
    assert_non_null(strstr(row->fix, "dtrain help train"));
    assert_int_equal(count(&job, "memory.plan"), 0);
    assert_int_equal(count(&job, "memory.model"), 1);
    doc_list_free(&job);
    for (int r = 0; r < 2; r++) planned(&all[r], 8, -1, 0), all[r].mem.budget_kind = DOC_BUDGET_NONE;
    run_memory(all, 2, &job);
    assert_non_null(find(&job, "memory.model", DOC_SKIP));
    assert_int_equal(count(&job, "memory.model"), 1);
    doc_list_free(&job);

    /* A rank that collected nothing. */
    all[1].mem.collected = 0;
    run_memory(all, 2, &job);
    assert_non_null(find(&job, "memory.plan", DOC_FAIL));
    doc_list_free(&job);
}

/* ---------------------------------------------------------------- the collector */

static void test_collect(void **state)
{
    (void)state;
    char path[64];
    snprintf(path, sizeof path, "/tmp/test_doctor_memory-%d", (int)getpid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("MemTotal: 8388608 kB\nMemAvailable: 4194304 kB\n", f);
    fclose(f);
    setenv("DTRAIN_TEST_MEMINFO", path, 1);

    /* No model: host memory from the faked file. */
    doctor_mem_facts m;
    doctor_memory_collect(&m, NULL, NULL);
    assert_int_equal(m.collected, 1);
    assert_int_equal(m.planned, 0);
    assert_string_equal(m.host_error, "");
    assert_true(m.host_total == 8 * GiB && m.host_avail == 4 * GiB);

    /* The host share (no test limit, ctx NULL: one rank): the budget is MemAvailable. */
    backend_cpu_set_limit(0);
    const doctor_model_query q = {"cnn", "3x32x32", DT_F32, 64};
    doctor_memory_collect(&m, NULL, &q);
    assert_string_equal(m.plan_error, "");
    assert_int_equal(m.budget_kind, DOC_BUDGET_HOST_SHARE);
    assert_true(m.budget == 4 * GiB);

    /* Under a 64 MiB test limit the largest batch is dt_model_max_batch's with the same config. */
    backend_cpu_set_limit(64 * MiB);
    doctor_memory_collect(&m, NULL, &q);
    assert_string_equal(m.plan_error, "");
    assert_int_equal(m.budget_kind, DOC_BUDGET_TEST_LIMIT);
    assert_true(m.device_total == 64 * MiB && m.budget == 64 * MiB);
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    dt_memory_plan_config c;
    dt_memory_plan_defaults(&c);
    c.spec = "cnn", c.input = "3x32x32", c.optim = &oc;
    int want = 0;
    dt_memory_plan p;
    assert_int_equal(dt_model_max_batch(NULL, &c, 64 * MiB, &want, &p), DT_OK);
    assert_true(want > 64);
    assert_int_equal(m.max_batch, want);
    c.batch = 64;
    assert_int_equal(dt_model_plan_memory(NULL, &c, &p), DT_OK);
    assert_true(m.plan_batch == 64 && m.peak == p.peak && m.total == p.total);
    assert_int_equal(m.n_top, DOC_MEM_TOP);
    assert_string_equal(m.top[0].what, p.top[0].what);
    assert_true(m.bf16_max_batch >= 0);

    /* Without --batch the plan shown is the largest batch's. */
    const doctor_model_query q0 = {"cnn", "3x32x32", DT_F32, 0};
    doctor_memory_collect(&m, NULL, &q0);
    assert_int_equal(m.plan_batch, want);

    /* A bad spec is recorded, not fatal. */
    const doctor_model_query bad = {"fc:10,bogus", "784", DT_F32, 8};
    doctor_memory_collect(&m, NULL, &bad);
    assert_int_equal(m.planned, 1);
    assert_non_null(strstr(m.plan_error, "bogus"));
    backend_cpu_set_limit(0);

    /* An unreadable or malformed meminfo says which file and why. */
    f = fopen(path, "w");
    fputs("MemTotal: 10 kB\n", f);
    fclose(f);
    doctor_memory_collect(&m, NULL, NULL);
    assert_non_null(strstr(m.host_error, path));
    assert_non_null(strstr(m.host_error, "no MemAvailable line"));
    unlink(path);
    doctor_memory_collect(&m, NULL, &q);
    assert_non_null(strstr(m.host_error, "cannot open"));
    assert_int_equal(m.budget_kind, DOC_BUDGET_NONE); /* no host numbers, no share */
    unsetenv("DTRAIN_TEST_MEMINFO");
}

int main(void)
{
    /* No memory cgroup: the budgets below are the faked meminfo's wherever the test runs. */
    setenv("DTRAIN_TEST_CGROUP_ROOT", "/nonexistent", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_meminfo_parse),
        cmocka_unit_test(test_host_rows),
        cmocka_unit_test(test_model_rows),
        cmocka_unit_test(test_collect),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
