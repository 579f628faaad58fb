/*
 * test_doctor.c - launch/doctor: rows merged across ranks and their ranks text, JSON escaping,
 * and each host check's PASS and WARN/FAIL path over faked facts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "launch/doctor/doctor.h"
#include "tmp_dir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const doc_row *find(const doc_list *l, const char *name, doc_level lv)
{
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->rows[i].name, name) && l->rows[i].level == lv) return &l->rows[i];
    return NULL;
}

/* A row of that name and level whose seen holds text. */
static const doc_row *find_seen(const doc_list *l, const char *name, doc_level lv, const char *text)
{
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->rows[i].name, name) && l->rows[i].level == lv && strstr(l->rows[i].seen, text))
            return &l->rows[i];
    return NULL;
}

/* A healthy rank of a 2-rank mpirun job on one 2-core node. */
static void healthy(doctor_facts *f, int rank)
{
    memset(f, 0, sizeof *f);
    f->pl.rank = rank, f->pl.world_size = 2, f->pl.local_rank = rank, f->pl.local_size = 2;
    f->pl.num_nodes = 1, f->pl.launcher = DT_LAUNCHER_OPENMPI, f->pl.device = DT_DEVICE_CPU;
    snprintf(f->pl.hostname, sizeof f->pl.hostname, "n1");
    snprintf(f->pl.cores, sizeof f->pl.cores, "%d", rank);
    f->pl.num_cores = 1, f->pl.pinned_by = DT_PINNED_BY_LAUNCHER, f->pl.blas_threads = 1;
    doctor_host_facts *h = &f->host;
    h->collected = 1, h->launcher = DT_LAUNCHER_OPENMPI, h->has_pmix = 1;
    h->slurm_procid = h->slurm_ntasks = h->torch_rank = h->torch_world = -1;
    snprintf(h->families, sizeof h->families, "OMPI_COMM_WORLD_* PMIX_*");
    snprintf(h->mpi_version, sizeof h->mpi_version, "Open MPI v4.1.4");
    h->thread_level = 3, h->online_cpus = 2, h->allowed_n = 1;
    snprintf(h->allowed, sizeof h->allowed, "%d", rank);
    snprintf(h->blas_core, sizeof h->blas_core, "SkylakeX");
    h->node.shm_ok = 1, h->node.shm_total = h->node.shm_free = 64ULL << 20;
}

static void run_all(doctor_facts *all, int world, doc_list *job)
{
    doc_list_init(job, world);
    for (int r = 0; r < world; r++) {
        doc_list one;
        doc_list_init(&one, 0);
        doctor_host_check_rank(&all[r], &one);
        doctor_node_check_rank(&all[r], &one);
        doc_merge_rank(job, &one, r);
        doc_list_free(&one);
    }
    doctor_host_check_job(all, world, job);
    doctor_node_check_job(all, world, job);
    doctor_comm_check_job(all, world, job);
}

static void test_merge_and_ranks(void **state)
{
    (void)state;
    doc_list job;
    doc_list_init(&job, 8);
    for (int r = 0; r < 8; r++) {
        doc_list one;
        doc_list_init(&one, 0);
        doc_add(&one, "a.same", DOC_PASS, NULL, "same");
        doc_add(&one, "a.odd", r == 6 ? DOC_WARN : DOC_PASS, NULL, "v");
        doc_merge_rank(&job, &one, r);
        doc_list_free(&one);
    }
    assert_int_equal(job.n, 3);
    char t[64];
    doc_ranks_text(&job, find(&job, "a.same", DOC_PASS), t, sizeof t);
    assert_string_equal(t, "all");
    doc_ranks_text(&job, find(&job, "a.odd", DOC_PASS), t, sizeof t);
    assert_string_equal(t, "0-5,7");
    doc_ranks_text(&job, find(&job, "a.odd", DOC_WARN), t, sizeof t);
    assert_string_equal(t, "6");
    assert_int_equal(doc_worst(&job), DOC_WARN);
    doc_list_free(&job);
}

static void test_json_escapes(void **state)
{
    (void)state;
    doc_list job;
    doc_list_init(&job, 1);
    doc_add(&job, "x.q", DOC_FAIL, "type \"this\"", "a\\b\nc");
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    doc_header h = {"0", 1, 1, "cpu"};
    doc_print_json(f, &h, &job);
    fclose(f);
    assert_non_null(strstr(buf, "\"seen\":\"a\\\\b\\nc\""));
    assert_non_null(strstr(buf, "\"fix\":\"type \\\"this\\\"\""));
    assert_non_null(strstr(buf, "\"status\":\"fail\"}"));
    free(buf);
    doc_list_free(&job);
}

static void test_healthy_passes(void **state)
{
    (void)state;
    doctor_facts all[2];
    healthy(&all[0], 0), healthy(&all[1], 1);
    all[0].host.comm.skipped[0] = 'x';
    doc_list job;
    run_all(all, 2, &job);
    assert_true(doc_worst(&job) <= DOC_SKIP);
    assert_non_null(find(&job, "launch.pmix", DOC_PASS));
    assert_non_null(find(&job, "cpu.overlap", DOC_PASS));
    assert_non_null(find(&job, "mpi.busy_poll", DOC_PASS));
    assert_non_null(find(&job, "comm.allreduce", DOC_SKIP));
    doc_list_free(&job);
    /* srun --mpi=pmi2: no PMIx, but a PMI dt_init accepts, so not the singleton trap. */
    all[0].host.launcher = all[1].host.launcher = DT_LAUNCHER_SLURM;
    all[0].host.has_pmix = all[1].host.has_pmix = 0;
    all[0].host.has_pmi2 = all[1].host.has_pmi2 = 1;
    run_all(all, 2, &job);
    assert_non_null(strstr(find(&job, "launch.pmix", DOC_PASS)->seen, "PMI-2 present"));
    doc_list_free(&job);
}

/* doctor run directly in a batch script of a 4-task job: a world of 1, launcher none. */
static void test_batch_script_alone(void **state)
{
    (void)state;
    doctor_facts f;
    healthy(&f, 0);
    f.pl.world_size = 1, f.pl.local_size = 1, f.pl.launcher = DT_LAUNCHER_NONE;
    f.host.launcher = DT_LAUNCHER_NONE, f.host.has_pmix = 0;
    snprintf(f.host.families, sizeof f.host.families, "SLURM_*");
    doc_list job;
    run_all(&f, 1, &job);
    assert_non_null(find(&job, "launch.launcher", DOC_PASS));
    doc_list_free(&job);
    f.host.job_tasks = 4;
    snprintf(f.host.job_tasks_var, sizeof f.host.job_tasks_var, "SLURM_NTASKS");
    run_all(&f, 1, &job);
    const doc_row *r = find(&job, "launch.launcher", DOC_WARN);
    assert_non_null(r);
    assert_non_null(strstr(r->seen, "this job has 4 tasks (SLURM_NTASKS=4) but dtrain runs alone"));
    assert_non_null(strstr(r->fix, "srun --mpi=pmix"));
    doc_list_free(&job);
}

static void test_failures(void **state)
{
    (void)state;
    doctor_facts all[2];
    healthy(&all[0], 0), healthy(&all[1], 1);
    /* srun without PMIx, refused by topo. */
    all[0].host.launcher = DT_LAUNCHER_SLURM, all[0].host.has_pmix = 0, all[0].host.slurm_ntasks = 4;
    snprintf(all[0].host.refusal, sizeof all[0].host.refusal, "srun started 4 tasks. Fix: run srun --mpi=pmix");
    /* threads, BLAS, torchrun variables, CUDA-aware mismatch, both ranks bound to core 0. */
    snprintf(all[1].host.omp_threads, sizeof all[1].host.omp_threads, "64");
    snprintf(all[1].host.blas_better, sizeof all[1].host.blas_better, "SkylakeX");
    snprintf(all[1].host.blas_core, sizeof all[1].host.blas_core, "Prescott");
    all[1].host.corefix_off = 1;
    all[1].host.torch_rank = 3, all[1].host.torch_world = 8;
    all[1].host.cuda_aware_built = 1, all[1].host.cuda_aware_run = 0;
    snprintf(all[1].pl.cores, sizeof all[1].pl.cores, "0");
    snprintf(all[1].host.mpi_version, sizeof all[1].host.mpi_version, "Open MPI v5.0.0");
    doc_list job;
    run_all(all, 2, &job);
    const doc_row *r = find(&job, "launch.identity", DOC_FAIL);
    assert_non_null(r);
    assert_string_equal(r->fix, "run srun --mpi=pmix");
    assert_non_null(find(&job, "launch.pmix", DOC_FAIL));
    /* OMP_NUM_THREADS sets nothing in dtrain (pthread OpenBLAS, threads set by affinity.c). */
    assert_non_null(find_seen(&job, "cpu.threads", DOC_PASS, "OMP_NUM_THREADS set but without effect"));
    assert_non_null(strstr(find(&job, "cpu.blas", DOC_WARN)->fix, "DTRAIN_BLAS_COREFIX"));
    assert_non_null(find(&job, "launch.conflict", DOC_WARN));
    assert_non_null(find(&job, "mpi.cuda_aware", DOC_WARN));
    assert_non_null(strstr(find(&job, "cpu.overlap", DOC_FAIL)->seen, "ranks 0 and 1"));
    assert_non_null(find(&job, "mpi.version", DOC_FAIL));
    doc_list_free(&job);
}

static void test_busy_poll_and_comm(void **state)
{
    (void)state;
    doctor_facts all[4];
    for (int r = 0; r < 4; r++) {
        healthy(&all[r], r);
        all[r].pl.world_size = 4, all[r].pl.local_size = 2, all[r].pl.local_rank = r % 2;
        all[r].pl.node = r / 2, all[r].pl.num_nodes = 2;
        snprintf(all[r].pl.hostname, sizeof all[r].pl.hostname, "n%d", r / 2);
        snprintf(all[r].host.allowed, sizeof all[r].host.allowed, "0");
        snprintf(all[r].pl.cores, sizeof all[r].pl.cores, "%d", r % 2);
        all[r].host.comm.ran = 1;
        all[r].host.comm.node_busbw = r < 2 ? 4e9 : 1e9; /* node 1 at a quarter */
    }
    all[0].host.comm.small_s = 5e-3;
    all[0].host.comm.t1m_s = 1e-3, all[0].host.comm.t64m_s = 0.1;
    doc_list job;
    run_all(all, 4, &job);
    const doc_row *b = find(&job, "mpi.busy_poll", DOC_WARN);
    assert_non_null(b);
    assert_non_null(strstr(b->fix, "OMPI_MCA_mpi_yield_when_idle=1"));
    assert_non_null(find(&job, "comm.latency", DOC_WARN));
    assert_non_null(find(&job, "comm.allreduce_64m", DOC_PASS));
    const doc_row *s = find(&job, "comm.nodes", DOC_WARN);
    assert_non_null(s);
    assert_non_null(strstr(s->seen, "node 1 (n1)"));
    doc_list_free(&job);
    /* With yield set and equal nodes, both pass. */
    for (int r = 0; r < 4; r++) {
        snprintf(all[r].host.yield, sizeof all[r].host.yield, "1");
        all[r].host.comm.node_busbw = 4e9;
    }
    all[0].host.comm.small_s = 2e-5;
    run_all(all, 4, &job);
    assert_non_null(find(&job, "mpi.busy_poll", DOC_PASS));
    assert_non_null(find(&job, "comm.nodes", DOC_PASS));
    assert_non_null(find(&job, "comm.latency", DOC_PASS));
    doc_list_free(&job);
}

/* The BLAS threads dtrain set against the rank's cores; variables without effect; a bad value. */
static void test_threads(void **state)
{
    (void)state;
    doctor_facts all[2];
    healthy(&all[0], 0), healthy(&all[1], 1);
    doc_list job;
    for (int r = 0; r < 2; r++) all[r].pl.blas_threads = 2; /* --blas-threads 2 on 1 core each */
    run_all(all, 2, &job);
    const doc_row *w = find(&job, "cpu.threads", DOC_WARN);
    assert_non_null(w);
    assert_non_null(strstr(w->seen, "2 BLAS threads per rank on 1 core"));
    assert_non_null(strstr(w->fix, "--blas-threads 1"));
    doc_list_free(&job);
    for (int r = 0; r < 2; r++) {
        all[r].pl.blas_threads = 1;
        snprintf(all[r].host.openblas_threads, sizeof all[r].host.openblas_threads, "abc");
    }
    run_all(all, 2, &job);
    assert_non_null(strstr(find(&job, "cpu.threads", DOC_WARN)->seen, "OPENBLAS_NUM_THREADS='abc'"));
    doc_list_free(&job);
    for (int r = 0; r < 2; r++) snprintf(all[r].host.openblas_threads, sizeof all[r].host.openblas_threads, "8");
    run_all(all, 2, &job);
    assert_non_null(find(&job, "cpu.threads", DOC_PASS));
    doc_list_free(&job);
}

/* /dev/shm against the local ranks, the latency of one node through it, and the limits. */
static void test_shm_and_limits(void **state)
{
    (void)state;
    doctor_facts all[2];
    healthy(&all[0], 0), healthy(&all[1], 1);
    for (int r = 0; r < 2; r++) {
        doctor_node_facts *n = &all[r].host.node;
        n->shm_ok = 1, n->shm_total = n->shm_free = 64ULL << 20;
        n->nofile = 1024, n->stack = 8ULL << 20, n->memlock = 64ULL << 10;
        all[r].host.comm.ran = 1;
    }
    all[0].host.comm.small_s = 2e-6;
    doc_list job;
    run_all(all, 2, &job);
    assert_non_null(find(&job, "node.shm", DOC_PASS));
    assert_non_null(find(&job, "comm.latency", DOC_PASS));
    assert_non_null(strstr(find(&job, "node.limits", DOC_PASS)->seen, "locked memory not checked"));
    assert_true(doc_worst(&job) <= DOC_SKIP);
    doc_list_free(&job);
    /* 1 MiB of /dev/shm: Open MPI falls back to TCP, ~25 us. */
    all[0].host.node.shm_total = all[0].host.node.shm_free = 1ULL << 20;
    all[0].host.comm.small_s = 25e-6;
    for (int r = 0; r < 2; r++) all[r].host.node.nofile = 100, all[r].host.node.rdma_devices = 1;
    run_all(all, 2, &job);
    const doc_row *s = find(&job, "node.shm", DOC_WARN);
    assert_non_null(s);
    assert_non_null(strstr(s->seen, "1.0 MiB free"));
    assert_non_null(strstr(s->fix, "--shm-size"));
    assert_non_null(strstr(find(&job, "comm.latency", DOC_WARN)->seen, "25.0 us on one node"));
    const doc_row *l = find(&job, "node.limits", DOC_WARN);
    assert_non_null(l);
    assert_non_null(strstr(l->seen, "open files (ulimit -n) 100"));
    assert_non_null(strstr(l->seen, "locked memory (ulimit -l) 64 KiB"));
    assert_non_null(strstr(l->fix, "ulimit -l unlimited"));
    doc_list_free(&job);
    /* Two nodes: the same latency is the network's, not shared memory's. */
    all[1].pl.node = 1, all[0].pl.num_nodes = all[1].pl.num_nodes = 2;
    run_all(all, 2, &job);
    assert_non_null(find(&job, "comm.latency", DOC_PASS));
    doc_list_free(&job);
}

static void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

/* The quota from faked cgroup files (v1 and v2, an ancestor's), then cpu.quota over it. */
static void test_cpu_quota(void **state)
{
    (void)state;
    char root[64], path[256];
    assert_int_equal(tmp_dir_make(root, sizeof root, "dt_doc_cg"), 0);
    snprintf(path, sizeof path, "%s/cpu", root), mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/cpu/job", root), mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/cpu/job/cpu.cfs_quota_us", root), write_file(path, "25000\n");
    snprintf(path, sizeof path, "%s/cpu/job/cpu.cfs_period_us", root), write_file(path, "100000\n");
    snprintf(path, sizeof path, "%s/self", root), write_file(path, "2:cpuacct:/job\n1:cpu,cpuacct:/job/step\n");
    doctor_node_facts f;
    memset(&f, 0, sizeof f);
    doctor_cpu_quota_read(path, root, &f); /* job/step does not exist: its parent job sets the quota */
    assert_true(f.quota_cpus > 0.249 && f.quota_cpus < 0.251);
    assert_non_null(strstr(f.quota_file, "cpu/job/cpu.cfs_quota_us = 25000"));
    /* v2: the parent's 1.5 CPUs bind, the child has none ("max"). */
    snprintf(path, sizeof path, "%s/a", root), mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/a/b", root), mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/a/cpu.max", root), write_file(path, "150000 100000\n");
    snprintf(path, sizeof path, "%s/a/b/cpu.max", root), write_file(path, "max 100000\n");
    snprintf(path, sizeof path, "%s/self2", root), write_file(path, "0::/a/b\n");
    doctor_cpu_quota_read(path, root, &f);
    assert_true(f.quota_cpus > 1.49 && f.quota_cpus < 1.51);
    assert_non_null(strstr(f.quota_file, "/a/cpu.max = 150000 100000"));
    assert_int_equal(tmp_dir_remove(root), 0);

    doctor_facts all[2];
    healthy(&all[0], 0), healthy(&all[1], 1);
    for (int r = 0; r < 2; r++) all[r].host.node = f;
    doc_list job;
    run_all(all, 2, &job);
    const doc_row *q = find(&job, "cpu.quota", DOC_WARN); /* 2 ranks x 1 thread on 1.5 CPUs */
    assert_non_null(q);
    assert_non_null(strstr(q->seen, "allows 1.50 CPUs, but its 2 ranks run 2 BLAS threads"));
    assert_non_null(strstr(q->fix, "docker --cpus=2"));
    doc_list_free(&job);
    for (int r = 0; r < 2; r++) all[r].host.node.quota_cpus = 2;
    run_all(all, 2, &job);
    assert_non_null(find(&job, "cpu.quota", DOC_PASS));
    doc_list_free(&job);
}

/* net.env: what is wrong stays in the row however long the variables set before it are (a long
 * UCX_NET_DEVICES list once filled the row and cut the warning off, leaving a WARN that named
 * nothing), and a list longer than the copy it was read through is read whole (its cut last
 * entry, "mlx5" of "mlx5_0:1", was reported as a missing interface). */
static void test_net_env_long_values(void **state)
{
    (void)state;
    char list[400] = "nosuch9";
    while (strlen(list) < sizeof list - 8) strcat(list, ",mlx5_0:1");
    setenv("UCX_NET_DEVICES", list, 1);
    setenv("NCCL_DEBUG", "INFO", 1);
    doctor_net_facts f;
    doctor_net_collect(&f);
    assert_int_equal(f.level, DOC_WARN);
    assert_non_null(strstr(f.seen, "UCX_NET_DEVICES=nosuch9,mlx5_0:1"));
    assert_non_null(
        strstr(f.seen, "...: UCX_NET_DEVICES names nosuch9, not an interface of this node; NCCL_DEBUG=INFO"));
    assert_non_null(strstr(f.fix, "unset NCCL_DEBUG"));
    unsetenv("UCX_NET_DEVICES");
    unsetenv("NCCL_DEBUG");
}

/* A text built piece by piece that outgrows its buffer ends in "..." (no split UTF-8 character),
 * and stays so: a cut list once read as whole. The rows built that way show their cut. */
static void test_cut_texts(void **state)
{
    (void)state;
    char b[16] = "";
    doc_append(b, sizeof b, "%s", "0123456789");
    doc_append(b, sizeof b, "%s", "ab");
    assert_string_equal(b, "0123456789ab");
    doc_append(b, sizeof b, "%s", "cdefgh");
    assert_string_equal(b, "0123456789ab...");
    doc_append(b, sizeof b, "%s", "x");
    assert_string_equal(b, "0123456789ab...");
    char u[10] = "abcd";
    doc_append(u, sizeof u, "%s", "\xc3\xa9\xc3\xa9\xc3\xa9"); /* the cut falls inside the 2nd e-acute */
    assert_string_equal(u, "abcd\xc3\xa9...");
    doc_append(u, sizeof u, "%s", "z"); /* shorter than u after the cut, still not appended */
    assert_string_equal(u, "abcd\xc3\xa9...");
    /* net.env: one long variable and nothing wrong (the text was the variables alone, cut silently). */
    char v[400] = "NCCL_IB_HCA=";
    while (strlen(v) < sizeof v - 8) strcat(v, "mlx5_0,");
    setenv("NCCL_IB_HCA", v + strlen("NCCL_IB_HCA="), 1);
    doctor_net_facts nf;
    doctor_net_collect(&nf);
    unsetenv("NCCL_IB_HCA");
    assert_int_equal(nf.level, DOC_PASS);
    assert_non_null(strstr(nf.seen, "NCCL_IB_HCA=mlx5_0,"));
    assert_int_equal(strlen(nf.seen), sizeof nf.seen - 1);
    assert_string_equal(nf.seen + sizeof nf.seen - 4, "...");
    /* cpu.overlap's PASS row lists every rank's cores: 64 ranks on one node outgrow it. */
    enum { W = 64 };
    doctor_facts *all = calloc(W, sizeof *all);
    assert_non_null(all);
    for (int r = 0; r < W; r++) {
        healthy(&all[r], r);
        all[r].pl.world_size = all[r].pl.local_size = W;
        all[r].host.online_cpus = W;
    }
    doc_list job;
    doc_list_init(&job, W);
    doctor_host_check_job(all, W, &job);
    const doc_row *o = find(&job, "cpu.overlap", DOC_PASS);
    assert_non_null(o);
    assert_non_null(strstr(o->seen, "no two ranks of a node share a core (rank=cores: n1: 0=0 1=1"));
    assert_string_equal(o->seen + strlen(o->seen) - 3, "...");
    doc_list_free(&job);
    free(all);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge_and_ranks),
        cmocka_unit_test(test_json_escapes),
        cmocka_unit_test(test_healthy_passes),
        cmocka_unit_test(test_failures),
        cmocka_unit_test(test_batch_script_alone),
        cmocka_unit_test(test_busy_poll_and_comm),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_shm_and_limits),
        cmocka_unit_test(test_cpu_quota),
        cmocka_unit_test(test_net_env_long_values),
        cmocka_unit_test(test_cut_texts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
