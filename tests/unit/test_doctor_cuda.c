/*
 * test_doctor_cuda.c - launch/doctor's CUDA checks over faked facts (every check's PASS and its
 * WARN/FAIL path, the CPU-job SKIP, the job rows). The parsers are test_cuda_parse.c's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "launch/doctor/doctor.h"
#include "runtime/placement/device.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const doc_row *find(const doc_list *l, const char *name)
{
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->rows[i].name, name)) return &l->rows[i];
    return NULL;
}

/* The level of row `name` (asserting it is there), and its seen/fix texts through *row. */
static doc_level level_of(const doc_list *l, const char *name, const doc_row **row)
{
    const doc_row *r = find(l, name);
    if (!r) fail_msg("no row %s", name);
    if (row) *row = r;
    return r->level;
}

/* A healthy rank on GPU `rank` of a 2-GPU node: CUDA 12.2 build on a 535 driver, every node there. */
static void healthy(doctor_facts *f, int rank)
{
    memset(f, 0, sizeof *f);
    f->pl.rank = rank, f->pl.world_size = 2, f->pl.local_rank = rank, f->pl.local_size = 2;
    f->pl.num_nodes = 1, f->pl.device = DT_DEVICE_CUDA, f->pl.cuda_device = rank;
    snprintf(f->pl.gpu, sizeof f->pl.gpu, "%d", rank);
    snprintf(f->pl.hostname, sizeof f->pl.hostname, "n1");
    snprintf(f->pl.cores, sizeof f->pl.cores, "%d", rank);
    f->host.gpu_comm = DT_GPU_COMM_NCCL;
    doctor_cuda_facts *c = &f->cuda;
    c->collected = 1, c->libcuda = 1, c->driver_cuda = 12020, c->gpus = 2;
    snprintf(c->kmod, sizeof c->kmod, "535.104.05");
    c->built_cuda = c->runtime_cuda = 12020;
    snprintf(c->cublas_built, sizeof c->cublas_built, "12.2.5");
    snprintf(c->cublas_run, sizeof c->cublas_run, "12.2.5");
    snprintf(c->nccl_built, sizeof c->nccl_built, "2.18.3");
    snprintf(c->nccl_run, sizeof c->nccl_run, "2.18.3");
    snprintf(c->gpu_name, sizeof c->gpu_name, "NVIDIA H100");
    snprintf(c->bus_id, sizeof c->bus_id, "0000:%02x:00.0", 0x3b + rank);
    c->mem_total = 80LL << 30, c->mem_free = 79LL << 30;
    c->numa_node = 0;
    snprintf(c->numa_cpus, sizeof c->numa_cpus, "0-7");
    c->nvml = 1, c->ecc_current = c->ecc_pending = 1, c->persistence = 1;
    snprintf(c->dev_dir, sizeof c->dev_dir, "/dev");
    const char *nodes[] = {"nvidiactl", "nvidia-uvm", "nvidia0", "nvidia1"};
    c->ndev = 4;
    for (int i = 0; i < 4; i++) snprintf(c->dev[i].name, sizeof c->dev[i].name, "%s", nodes[i]);
    c->visible_n = -1;
    snprintf(c->cuda_home, sizeof c->cuda_home, "/usr/local/cuda");
    snprintf(c->nvcc, sizeof c->nvcc, "/usr/local/cuda/bin/nvcc");
    snprintf(c->ld_cuda, sizeof c->ld_cuda, "/usr/local/cuda/lib64");
    c->toolkit_cuda = 12020;
}

static void rank_rows(const doctor_facts *f, doc_list *l)
{
    doc_list_init(l, 0);
    doctor_cuda_check_rank(f, l);
}

static void test_healthy_passes(void **state)
{
    (void)state;
    doctor_facts f;
    healthy(&f, 0);
    doc_list l;
    rank_rows(&f, &l);
    const char *names[] = {"cuda.driver",    "cuda.runtime", "cuda.devices", "cuda.visible", "cuda.toolkit",
                           "cuda.libraries", "cuda.memory",  "cuda.numa",    "cuda.nvml"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) assert_int_equal(level_of(&l, names[i], NULL), DOC_PASS);
    const doc_row *r;
    level_of(&l, "cuda.driver", &r);
    assert_non_null(strstr(r->seen, "driver 535.104.05 supports CUDA up to 12.2"));
    assert_int_equal(doc_worst(&l), DOC_PASS);
    doc_list_free(&l);
}

static void test_driver_and_runtime(void **state)
{
    (void)state;
    doctor_facts f;
    doc_list l;
    const doc_row *r;
    /* No driver, rank on the GPU: FAIL with the container hint. */
    healthy(&f, 0);
    f.cuda.libcuda = 0;
    snprintf(f.cuda.libcuda_err, sizeof f.cuda.libcuda_err, "libcuda.so.1: cannot open shared object file");
    rank_rows(&f, &l);
    assert_int_equal(level_of(&l, "cuda.driver", &r), DOC_FAIL);
    assert_non_null(strstr(r->fix, "--gpus all"));
    assert_int_equal(level_of(&l, "cuda.runtime", NULL), DOC_SKIP);
    doc_list_free(&l);
    /* A 13.0 build on a 535 driver: FAIL naming both and the branch to update to. */
    healthy(&f, 0);
    f.cuda.built_cuda = 13000;
    rank_rows(&f, &l);
    assert_int_equal(level_of(&l, "cuda.runtime", &r), DOC_FAIL);
    assert_string_equal(r->seen, "driver 535.104.05 supports CUDA up to 12.2; this build needs 13.0");
    assert_string_equal(r->fix, "update the driver to branch 580 or later, or use a CUDA 12 build of dtrain");
    doc_list_free(&l);
    f.cuda.kmod[0] = '\0'; /* the module's version unread: the driver is not named by it */
    rank_rows(&f, &l);
    assert_int_equal(level_of(&l, "cuda.runtime", &r), DOC_FAIL);
    assert_string_equal(r->seen, "the driver supports CUDA up to 12.2; this build needs 13.0");
    doc_list_free(&l);
    /* Same major, older minor: minor version compatibility, WARN. */
    healthy(&f, 0);
    f.cuda.built_cuda = 12040;
    rank_rows(&f, &l);
    assert_int_equal(level_of(&l, "cuda.runtime", &r), DOC_WARN);
    assert_non_null(strstr(r->fix, "branch 550"));
    doc_list_free(&l);
    /* A build newer than the driver table's last row: no branch to name, so the fix names the
     * CUDA version the driver must support instead of "branch 0". */
    healthy(&f, 0);
    f.cuda.driver_cuda = 13000, f.cuda.built_cuda = 13010;
    rank_rows(&f, &l);
    assert_int_equal(level_of(&l, "cuda.runtime", &r), DOC_WARN);
    assert_null(strstr(r->fix, "branch 0"));
    assert_non_null(strstr(r->fix, "update the driver to one that supports CUDA 13.1"));
    doc_list_free(&l);
    f.cuda.driver_cuda = 12020, f.cuda.built_cuda = 14000;
    rank_rows(&f, &l);
    assert_int_equal(level_of(&l, "cuda.runtime", &r), DOC_FAIL);
    assert_string_equal(r->fix, "update the driver to one that supports CUDA 14.0 (nvidia-smi shows the CUDA version a "
                                "driver supports), or use a CUDA 12 build of dtrain");
    doc_list_free(&l);
    /* cuInit failed after the library loaded. */
    healthy(&f, 0);
    snprintf(f.cuda.libcuda_err, sizeof f.cuda.libcuda_err, "cuInit failed: error 100 (no CUDA-capable device)");
    rank_rows(&f, &l);
    assert_int_equal(level_of(&l, "cuda.driver", NULL), DOC_FAIL);
    doc_list_free(&l);
}

static void test_devices(void **state)
{
    (void)state;
    doctor_facts f;
    doc_list l;
    const doc_row *r;
    static const struct {
        int err;
        const char *seen, *fix;
    } cases[] = {
        {EACCES, "/dev/nvidia0 permission denied", "usermod -aG video"},
        {ENXIO, "/dev/nvidia0 no driver behind it", "modprobe nvidia"},
        {ENOENT, "/dev/nvidia0 missing", "--nv (apptainer)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        healthy(&f, 0);
        f.cuda.dev[2].err = cases[i].err;
        rank_rows(&f, &l);
        assert_int_equal(level_of(&l, "cuda.devices", &r), DOC_FAIL);
        assert_non_null(strstr(r->seen, cases[i].seen));
        assert_non_null(strstr(r->fix, cases[i].fix));
        assert_null(strstr(r->fix, "chmod 7")); /* never advise opening the nodes to everyone */
        doc_list_free(&l);
    }
    /* No GPU node at all; and the same on a CPU rank is only a warning. */
    healthy(&f, 0);
    f.cuda.ndev = 2;
    rank_rows(&f, &l);
    assert_int_equal(level_of(&l, "cuda.devices", &r), DOC_FAIL);
    assert_non_null(strstr(r->seen, "no /dev/nvidiaN"));
    doc_list_free(&l);
    f.pl.device = DT_DEVICE_CPU;
    rank_rows(&f, &l);
    assert_int_equal(level_of(&l, "cuda.devices", NULL), DOC_WARN);
    doc_list_free(&l);
    /* A long DTRAIN_TEST_DEV_DIR fills the row's text after a few nodes: a node past that is still
     * judged (its permission denied is the verdict), only its text is cut, and the cut shows. */
    healthy(&f, 0);
    memset(f.cuda.dev_dir, 'd', sizeof f.cuda.dev_dir - 1);
    f.cuda.dev_dir[0] = '/', f.cuda.dev_dir[sizeof f.cuda.dev_dir - 1] = '\0';
    f.cuda.ndev = DOC_CUDA_DEVNODES;
    for (int i = 2; i < DOC_CUDA_DEVNODES; i++)
        snprintf(f.cuda.dev[i].name, sizeof f.cuda.dev[i].name, "nvidia%d", i - 2);
    f.cuda.dev[DOC_CUDA_DEVNODES - 1].err = EACCES;
    rank_rows(&f, &l);
    assert_int_equal(level_of(&l, "cuda.devices", &r), DOC_FAIL);
    assert_non_null(strstr(r->fix, "usermod -aG video"));
    assert_int_equal(strlen(r->seen), DOC_TEXT - 1);
    assert_string_equal(r->seen + DOC_TEXT - 4, "...");
    doc_list_free(&l);
}

static void test_visible(void **state)
{
    (void)state;
    doctor_facts f;
    doc_list l;
    const doc_row *r;
    healthy(&f, 0);
    f.cuda.visible_set = 1;
    snprintf(f.cuda.visible, sizeof f.cuda.visible, "0,1");
    f.cuda.visible_n = 2;
    rank_rows(&f, &l);
    assert_int_equal(level_of(&l, "cuda.visible", &r), DOC_PASS);
    assert_non_null(strstr(r->seen, "2 GPUs visible"));
    doc_list_free(&l);
    /* A duplicate hides every GPU: the parser's text, its own fix. */
    snprintf(f.cuda.visible, sizeof f.cuda.visible, "0,0");
    f.cuda.visible_n = device_visible_parse("0,0", f.cuda.visible_why, sizeof f.cuda.visible_why);
    rank_rows(&f, &l);
    assert_int_equal(level_of(&l, "cuda.visible", &r), DOC_FAIL);
    assert_non_null(strstr(r->seen, "name the same GPU"));
    assert_string_equal(r->fix, "list each GPU once");
    doc_list_free(&l);
    snprintf(f.cuda.visible, sizeof f.cuda.visible, "NoDevFiles");
    rank_rows(&f, &l);
    assert_int_equal(level_of(&l, "cuda.visible", &r), DOC_FAIL);
    assert_non_null(strstr(r->fix, "gres.conf"));
    doc_list_free(&l);
    /* The placement could not map the list to the node's ranks. */
    healthy(&f, 0);
    snprintf(f.pl.gpu, sizeof f.pl.gpu, "-2 ranks, 1 GPU listed");
    rank_rows(&f, &l);
    assert_int_equal(level_of(&l, "cuda.visible", NULL), DOC_FAIL);
    doc_list_free(&l);
}

static void test_toolkit(void **state)
{
    (void)state;
    doctor_facts f;
    doc_list l;
    const doc_row *r;
    healthy(&f, 0);
    snprintf(f.cuda.cuda_path, sizeof f.cuda.cuda_path, "/opt/cuda-11.8");
    rank_rows(&f, &l);
    assert_int_equal(level_of(&l, "cuda.toolkit", &r), DOC_WARN);
    assert_non_null(strstr(r->seen, "CUDA_PATH=/opt/cuda-11.8"));
    doc_list_free(&l);
    healthy(&f, 0);
    snprintf(f.cuda.nvcc, sizeof f.cuda.nvcc, "/usr/local/cuda-11.8/bin/nvcc");
    rank_rows(&f, &l);
    assert_int_equal(level_of(&l, "cuda.toolkit", &r), DOC_WARN);
    assert_non_null(strstr(r->fix, "PATH"));
    doc_list_free(&l);
    healthy(&f, 0);
    snprintf(f.cuda.ld_cuda, sizeof f.cuda.ld_cuda, "/usr/local/cuda-11.8/lib64");
    rank_rows(&f, &l);
    assert_int_equal(level_of(&l, "cuda.toolkit", &r), DOC_WARN);
    assert_non_null(strstr(r->seen, "LD_LIBRARY_PATH"));
    doc_list_free(&l);
    /* A second toolkit after the right one: every entry counts, not only the first. */
    healthy(&f, 0);
    snprintf(f.cuda.ld_cuda, sizeof f.cuda.ld_cuda, "/usr/local/cuda/lib64:/usr/local/cuda-11.8/lib64");
    rank_rows(&f, &l);
    assert_int_equal(level_of(&l, "cuda.toolkit", &r), DOC_WARN);
    assert_non_null(strstr(r->seen, "LD_LIBRARY_PATH has /usr/local/cuda-11.8/lib64"));
    doc_list_free(&l);
    snprintf(f.cuda.ld_cuda, sizeof f.cuda.ld_cuda, "/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64");
    rank_rows(&f, &l);
    assert_int_equal(level_of(&l, "cuda.toolkit", NULL), DOC_PASS);
    doc_list_free(&l);
    healthy(&f, 0);
    f.cuda.toolkit_cuda = 11080;
    rank_rows(&f, &l);
    assert_int_equal(level_of(&l, "cuda.toolkit", NULL), DOC_WARN);
    doc_list_free(&l);
}

static void test_libraries_memory_numa_nvml(void **state)
{
    (void)state;
    doctor_facts f;
    doc_list l;
    const doc_row *r;
    healthy(&f, 0);
    snprintf(f.cuda.cublas_run, sizeof f.cuda.cublas_run, "11.11.3");
    rank_rows(&f, &l);
    assert_int_equal(level_of(&l, "cuda.libraries", &r), DOC_FAIL);
    assert_non_null(strstr(r->seen, "cuBLAS 11.11.3 loaded, built with 12.2.5"));
    doc_list_free(&l);
    healthy(&f, 0);
    snprintf(f.cuda.nccl_run, sizeof f.cuda.nccl_run, "2.21.5");
    rank_rows(&f, &l);
    assert_int_equal(level_of(&l, "cuda.libraries", NULL), DOC_WARN);
    doc_list_free(&l);
    healthy(&f, 0);
    f.cuda.mem_free = 2LL << 30;
    rank_rows(&f, &l);
    assert_int_equal(level_of(&l, "cuda.memory", &r), DOC_WARN);
    assert_non_null(strstr(r->seen, "2.0 of 80.0 GiB free"));
    doc_list_free(&l);
    healthy(&f, 0);
    f.cuda.numa_node = 1;
    snprintf(f.cuda.numa_cpus, sizeof f.cuda.numa_cpus, "8-15");
    rank_rows(&f, &l);
    assert_int_equal(level_of(&l, "cuda.numa", &r), DOC_WARN);
    assert_non_null(strstr(r->seen, "NUMA node 1"));
    doc_list_free(&l);
    healthy(&f, 0);
    f.cuda.persistence = 0;
    rank_rows(&f, &l);
    assert_int_equal(level_of(&l, "cuda.nvml", &r), DOC_WARN);
    assert_non_null(strstr(r->fix, "nvidia-smi -pm 1"));
    doc_list_free(&l);
    healthy(&f, 0);
    f.cuda.ecc_pending = 0;
    rank_rows(&f, &l);
    assert_int_equal(level_of(&l, "cuda.nvml", NULL), DOC_WARN);
    doc_list_free(&l);
    healthy(&f, 0);
    f.cuda.nvml = 0;
    rank_rows(&f, &l);
    assert_int_equal(level_of(&l, "cuda.nvml", NULL), DOC_SKIP);
    doc_list_free(&l);
}

static void test_cpu_job_skips(void **state)
{
    (void)state;
    doctor_facts f;
    doc_list l;
    healthy(&f, 0);
    f.pl.device = DT_DEVICE_CPU, f.pl.cuda_device = -1;
    f.cuda.libcuda = 0;
    rank_rows(&f, &l);
    assert_int_equal(l.n, 1);
    assert_string_equal(l.rows[0].name, "cuda.gpu");
    assert_int_equal(l.rows[0].level, DOC_SKIP);
    doc_list_free(&l);
    /* GPUs assigned but none usable: a WARN with CUDA's reason, unless --device cpu asked for it. */
    snprintf(f.cuda.assigned, sizeof f.cuda.assigned, "CUDA_VISIBLE_DEVICES=0,1");
    snprintf(f.cuda.cpu_why, sizeof f.cuda.cpu_why, "cudaGetDeviceCount: CUDA driver version is insufficient");
    f.cuda.device_req = DT_DEVICE_AUTO;
    rank_rows(&f, &l);
    const doc_row *r;
    assert_int_equal(l.n, 1);
    assert_int_equal(level_of(&l, "cuda.gpu", &r), DOC_WARN);
    assert_non_null(strstr(r->seen, "CUDA_VISIBLE_DEVICES=0,1"));
    assert_non_null(strstr(r->seen, "driver version is insufficient"));
    assert_non_null(strstr(r->fix, "--device cpu silences it"));
    doc_list_free(&l);
    f.cuda.device_req = DT_DEVICE_CPU;
    rank_rows(&f, &l);
    assert_int_equal(level_of(&l, "cuda.gpu", NULL), DOC_SKIP);
    doc_list_free(&l);
}

static void test_job_rows(void **state)
{
    (void)state;
    doctor_facts all[2];
    healthy(&all[0], 0), healthy(&all[1], 1);
    doc_list job;
    const doc_row *r;
    doc_list_init(&job, 2);
    doctor_cuda_check_job(all, 2, &job);
    assert_int_equal(level_of(&job, "cuda.gpu_shared", &r), DOC_PASS);
    assert_non_null(strstr(r->seen, "0:0000:3b:00.0 1:0000:3c:00.0"));
    assert_int_equal(level_of(&job, "cuda.gpus_per_node", NULL), DOC_PASS);
    doc_list_free(&job);
    /* Both ranks on one GPU: FAIL naming them; WARN when --gpu-comm mpi asked for it. */
    snprintf(all[1].cuda.bus_id, sizeof all[1].cuda.bus_id, "%s", all[0].cuda.bus_id);
    doc_list_init(&job, 2);
    doctor_cuda_check_job(all, 2, &job);
    assert_int_equal(level_of(&job, "cuda.gpu_shared", &r), DOC_FAIL);
    assert_non_null(strstr(r->seen, "ranks 0 and 1 on node 0 share one GPU"));
    doc_list_free(&job);
    all[1].host.gpu_comm = DT_GPU_COMM_MPI;
    doc_list_init(&job, 2);
    doctor_cuda_check_job(all, 2, &job);
    assert_int_equal(level_of(&job, "cuda.gpu_shared", NULL), DOC_WARN);
    doc_list_free(&job);
    /* Two ranks on a node whose 4 GPUs all see: two idle. */
    healthy(&all[0], 0), healthy(&all[1], 1);
    all[0].cuda.gpus = all[1].cuda.gpus = 4;
    doc_list_init(&job, 2);
    doctor_cuda_check_job(all, 2, &job);
    assert_int_equal(level_of(&job, "cuda.gpus_per_node", &r), DOC_WARN);
    assert_non_null(strstr(r->seen, "2 idle"));
    doc_list_free(&job);
    /* A CPU job with no driver: no job rows. */
    all[0].pl.device = all[1].pl.device = DT_DEVICE_CPU;
    all[0].cuda.libcuda = all[1].cuda.libcuda = 0;
    doc_list_init(&job, 2);
    doctor_cuda_check_job(all, 2, &job);
    assert_int_equal(job.n, 0);
    doc_list_free(&job);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_healthy_passes), cmocka_unit_test(test_driver_and_runtime),
        cmocka_unit_test(test_devices),        cmocka_unit_test(test_visible),
        cmocka_unit_test(test_toolkit),        cmocka_unit_test(test_libraries_memory_numa_nvml),
        cmocka_unit_test(test_cpu_job_skips),  cmocka_unit_test(test_job_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
