/*
 * cuda_checks.c - doctor's CUDA verdicts: pure functions of the facts (doctor_cuda.h), so the unit
 * test fakes any driver, device node or variable. Each row's fix names the value and what to do.
 *
 * A rank on the CPU is not failed for its GPU set-up: its rows warn at most (a GPU job on this
 * node would fail), and a job where no rank asked for a GPU and no driver is loaded gets one SKIP
 * row instead of a table of failures. Per-rank texts name nothing that differs between healthy
 * ranks (the GPU each rank takes is in the job row cuda.gpu_shared), so equal rows merge.
 */
#include "launch/doctor/doctor.h"
#include "runtime/placement/affinity.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int on_gpu(const doctor_facts *f) { return f->pl.device == DT_DEVICE_CUDA; }

/* A failure of a rank that runs on the CPU is a warning: nothing of this job needs the GPU. */
static doc_level sev(const doctor_facts *f, doc_level lv) { return lv == DOC_FAIL && !on_gpu(f) ? DOC_WARN : lv; }

static void check_driver(const doctor_facts *f, doc_list *out)
{
    const doctor_cuda_facts *c = &f->cuda;
    char v[16];
    cuda_version_text(c->driver_cuda, v, sizeof v);
    if (!c->libcuda) {
        doc_add(out, "cuda.driver", sev(f, DOC_FAIL),
                "install the NVIDIA driver on the node (nvidia-smi must work there); in a container start it "
                "with --gpus all (docker), --nv (apptainer) or the NVIDIA container runtime",
                "no NVIDIA driver: %s%s%s", c->libcuda_err[0] ? c->libcuda_err : "libcuda.so.1 not found",
                c->kmod[0] ? "; kernel module " : "", c->kmod);
        return;
    }
    if (c->libcuda_err[0]) {
        doc_add(out, "cuda.driver", sev(f, DOC_FAIL),
                "check `nvidia-smi` on the node: a driver/library version mismatch needs a reboot or a reload "
                "of the nvidia module; no device means the GPUs are hidden (CUDA_VISIBLE_DEVICES) or absent",
                "the driver (CUDA %s) is installed but %s", v, c->libcuda_err);
        return;
    }
    doc_add(out, "cuda.driver", DOC_PASS, NULL, "driver %s supports CUDA up to %s%s%s",
            c->kmod[0] ? c->kmod : "(module version unread)", v, c->driver_faked ? " (DTRAIN_TEST_CUDA_DRIVER)" : "",
            c->gpus > 0 ? "" : "; no GPU visible");
}

static void check_runtime(const doctor_facts *f, doc_list *out)
{
    const doctor_cuda_facts *c = &f->cuda;
    char need[16], have[16], fix[DOC_TEXT];
    if (!c->built_cuda) {
        doc_add(out, "cuda.runtime", on_gpu(f) ? DOC_FAIL : DOC_SKIP,
                on_gpu(f) ? "build dtrain with CUDA (cmake -DDTRAIN_CUDA=ON)" : NULL,
                "this build has no CUDA (cpu only)");
        return;
    }
    if (!c->libcuda || !c->driver_cuda) {
        doc_add(out, "cuda.runtime", DOC_SKIP, NULL, "no driver to run this build's CUDA on (see cuda.driver)");
        return;
    }
    cuda_version_text(c->built_cuda, need, sizeof need);
    cuda_version_text(c->driver_cuda, have, sizeof have);
    char drv[48]; /* "driver 535.104.05", or "the driver" when the module's version was not read */
    snprintf(drv, sizeof drv, "%s%s", c->kmod[0] ? "driver " : "the driver", c->kmod);
    if (c->driver_cuda >= c->built_cuda) {
        doc_add(out, "cuda.runtime", DOC_PASS, NULL, "this build needs CUDA %s; the driver supports up to %s", need,
                have);
        return;
    }
    /* The driver to ask for: its branch from NVIDIA's table, or for a CUDA newer than the table
     * knows, the version it must support (there is no branch to name). */
    const int branch = cuda_min_driver_branch(c->built_cuda);
    char update[160];
    if (branch > 0)
        snprintf(update, sizeof update, "update the driver to branch %d or later", branch);
    else
        snprintf(update, sizeof update,
                 "update the driver to one that supports CUDA %s (nvidia-smi shows the CUDA version a driver "
                 "supports)",
                 need);
    if (c->driver_cuda / 1000 == c->built_cuda / 1000) {
        /* CUDA's minor version compatibility: a 12.x runtime runs on any 12.0+ driver, except for
         * PTX it must JIT and APIs newer than the driver. */
        snprintf(fix, sizeof fix, "%s; until then kernels without SASS for this GPU cannot be JIT-compiled", update);
        doc_add(out, "cuda.runtime", DOC_WARN, fix,
                "%s supports CUDA up to %s; this build needs %s: runs by minor version compatibility", drv, have, need);
        return;
    }
    snprintf(fix, sizeof fix, "%s, or use a CUDA %d build of dtrain", update, c->driver_cuda / 1000);
    doc_add(out, "cuda.runtime", sev(f, DOC_FAIL), fix, "%s supports CUDA up to %s; this build needs %s", drv, have,
            need);
}

static const char *errno_name(int e)
{
    return e == ENOENT                 ? "missing"
           : e == EACCES || e == EPERM ? "permission denied"
           : e == ENXIO                ? "no driver behind it"
                                       : strerror(e);
}

static void check_devices(const doctor_facts *f, doc_list *out)
{
    const doctor_cuda_facts *c = &f->cuda;
    char seen[DOC_TEXT];
    int gpus = 0, enoent = 0, eacces = 0, enxio = 0, other = 0;
    seen[0] = '\0';
    for (int i = 0; i < c->ndev; i++) {
        const doctor_devnode *d = &c->dev[i];
        gpus += strcmp(d->name, "nvidiactl") && strcmp(d->name, "nvidia-uvm");
        enoent += d->err == ENOENT, eacces += d->err == EACCES || d->err == EPERM, enxio += d->err == ENXIO;
        other += d->err && d->err != ENOENT && d->err != EACCES && d->err != EPERM && d->err != ENXIO;
        /* Every node counts toward the verdict; only the text stops, with "...", where the row is full. */
        doc_append(seen, sizeof seen, "%s%s/%s %s", seen[0] ? ", " : "", c->dev_dir, d->name,
                   d->err ? errno_name(d->err) : "ok");
    }
    if (gpus == 0) {
        doc_append(seen, sizeof seen, "; no %s/nvidiaN", c->dev_dir);
        enoent++;
    }
    const char *fix = NULL;
    if (eacces)
        fix = "do not chmod the nodes: add the user to the group that owns them (`ls -l /dev/nvidia*`; usually video "
              "or render: usermod -aG video USER, then log in again); in a container or a cgroup, allow the "
              "devices (docker --gpus all, apptainer --nv, or a device rule for char 195:*)";
    else if (enxio)
        fix = "the nodes exist but no driver answers: load it (modprobe nvidia; nvidia-modprobe -u for nvidia-uvm), "
              "or in a container pass the GPUs with --gpus all / --nv instead of creating nodes";
    else if (enoent)
        fix = "load the driver (modprobe nvidia; nvidia-modprobe -u -c=0 creates nvidia-uvm); in a container start "
              "it with --gpus all (docker) or --nv (apptainer)";
    else if (other)
        fix = "check the node's driver installation (dmesg | grep -i nvrm)";
    if (!fix)
        doc_add(out, "cuda.devices", DOC_PASS, NULL, "%s", seen);
    else
        doc_add(out, "cuda.devices", sev(f, DOC_FAIL), fix, "%s", seen);
}

static void check_visible(const doctor_facts *f, doc_list *out)
{
    const doctor_cuda_facts *c = &f->cuda;
    if (c->visible_set && !strcmp(c->visible, "NoDevFiles")) {
        doc_add(out, "cuda.visible", sev(f, DOC_FAIL),
                "SLURM sets NoDevFiles when its gres.conf gives the GPUs no File=: add File=/dev/nvidia[0-N] "
                "there, or request GPUs with srun --gpus-per-task=1",
                "CUDA_VISIBLE_DEVICES=NoDevFiles: CUDA sees no GPU");
        return;
    }
    if (c->visible_set && (c->visible_n == 0 || c->visible_why[0])) {
        /* device_visible_parse's text ends in "Fix: ..." when it has a fix of its own. */
        const char *own = strstr(c->visible_why, "Fix: ");
        const int cut = own ? (int)(own - c->visible_why) : (int)strlen(c->visible_why);
        doc_add(out, "cuda.visible", c->visible_n == 0 ? sev(f, DOC_FAIL) : DOC_WARN,
                own ? own + 5
                    : "set CUDA_VISIBLE_DEVICES to indices or UUIDs from `nvidia-smi -L` (comma-separated, no "
                      "blanks or repeats), or unset it",
                "%.*s", c->visible_why[0] ? cut : 64,
                c->visible_why[0] ? c->visible_why : "CUDA_VISIBLE_DEVICES is empty: CUDA sees no GPU");
        return;
    }
    if (f->pl.gpu[0] == '-') {
        doc_add(out, "cuda.visible", sev(f, DOC_FAIL),
                "give each rank of a node its own GPU: srun --gpus-per-task=1, or list as many GPUs in "
                "CUDA_VISIBLE_DEVICES as ranks per node",
                "the GPU list does not map to this node's ranks: %s", f->pl.gpu + 1);
        return;
    }
    if (!c->visible_set)
        doc_add(out, "cuda.visible", DOC_PASS, NULL, "CUDA_VISIBLE_DEVICES unset: every GPU visible%s%s",
                c->step_gpus[0] ? "; SLURM_STEP_GPUS=" : "", c->step_gpus);
    else
        doc_add(out, "cuda.visible", DOC_PASS, NULL, "CUDA_VISIBLE_DEVICES='%.100s': %d GPU%s visible", c->visible,
                c->visible_n, c->visible_n == 1 ? "" : "s");
}

/* Whether root is a prefix directory of the len bytes at path ("/usr/local/cuda" of
 * "/usr/local/cuda/bin/nvcc"). */
static int under_n(const char *path, size_t len, const char *root)
{
    size_t n = strlen(root);
    while (n > 1 && root[n - 1] == '/') n--;
    return len >= n && !strncmp(path, root, n) && (len == n || path[n] == '/');
}

static int under(const char *path, const char *root) { return under_n(path, strlen(path), root); }

/* The first entry of the ':'-separated list that is not under root, its length in *len; NULL when
 * all are (a second toolkit after the right one mixes libraries as much as a first). */
static const char *stray_entry(const char *list, const char *root, size_t *len)
{
    for (const char *p = list; *p;) {
        const size_t k = strcspn(p, ":");
        if (k && !under_n(p, k, root)) {
            *len = k;
            return p;
        }
        p += k + (p[k] == ':');
    }
    return NULL;
}

static void check_toolkit(const doctor_facts *f, doc_list *out)
{
    const doctor_cuda_facts *c = &f->cuda;
    const char *home = c->cuda_home[0] ? c->cuda_home : c->cuda_path;
    const char *name = c->cuda_home[0] ? "CUDA_HOME" : "CUDA_PATH";
    char tk[16], built[16];
    size_t stray_len = 0;
    const char *stray = home[0] ? stray_entry(c->ld_cuda, home, &stray_len) : NULL;
    cuda_version_text(c->toolkit_cuda, tk, sizeof tk);
    cuda_version_text(c->built_cuda, built, sizeof built);
    if (!home[0] && !c->nvcc[0] && !c->ld_cuda[0]) {
        doc_add(out, "cuda.toolkit", DOC_PASS, NULL, "no CUDA toolkit in the environment (not needed to run)");
        return;
    }
    if (c->cuda_home[0] && c->cuda_path[0] && strcmp(c->cuda_home, c->cuda_path))
        doc_add(out, "cuda.toolkit", DOC_WARN, "point CUDA_HOME and CUDA_PATH at one toolkit (or unset one)",
                "CUDA_HOME=%.120s but CUDA_PATH=%.120s", c->cuda_home, c->cuda_path);
    else if (home[0] && c->nvcc[0] && !under(c->nvcc, home))
        doc_add(out, "cuda.toolkit", DOC_WARN, "put $CUDA_HOME/bin first on PATH, or set CUDA_HOME to nvcc's toolkit",
                "%s=%.120s but nvcc on PATH is %.120s", name, home, c->nvcc);
    else if (stray)
        doc_add(out, "cuda.toolkit", DOC_WARN,
                "make LD_LIBRARY_PATH's CUDA entries those of $CUDA_HOME (lib64), or drop them: a mixed toolkit "
                "loads libraries of another version",
                "%s=%.120s but LD_LIBRARY_PATH has %.*s", name, home, (int)(stray_len < 120 ? stray_len : 120), stray);
    else if (c->toolkit_cuda && c->built_cuda && c->toolkit_cuda / 1000 != c->built_cuda / 1000)
        doc_add(out, "cuda.toolkit", DOC_WARN, "use the toolkit of this build's CUDA major, or rebuild dtrain with it",
                "the toolkit here is CUDA %s; this build was compiled with %s", tk, built);
    else
        doc_add(out, "cuda.toolkit", DOC_PASS, NULL, "%s%s%.120s, nvcc %.120s, toolkit CUDA %s", home[0] ? name : "",
                home[0] ? "=" : "", home, c->nvcc[0] ? c->nvcc : "not on PATH", tk);
}

static int major_of(const char *v) { return v[0] ? (int)strtol(v, NULL, 10) : -1; }

static void check_libraries(const doctor_facts *f, doc_list *out)
{
    const doctor_cuda_facts *c = &f->cuda;
    if (c->cublas_built[0] && c->cublas_run[0] && major_of(c->cublas_built) != major_of(c->cublas_run))
        doc_add(out, "cuda.libraries", sev(f, DOC_FAIL),
                "point LD_LIBRARY_PATH at the toolkit dtrain was built with (`ldd $(which dtrain) | grep cublas`)",
                "cuBLAS %s loaded, built with %s", c->cublas_run, c->cublas_built);
    else if (c->nccl_built[0] && c->nccl_run[0] && strcmp(c->nccl_built, c->nccl_run))
        doc_add(out, "cuda.libraries", DOC_WARN,
                "load the NCCL dtrain was built with (`ldd $(which dtrain) | grep nccl` shows which is loaded), or "
                "rebuild against this one",
                "NCCL %s loaded, built with %s", c->nccl_run, c->nccl_built);
    else if (!c->built_cuda)
        doc_add(out, "cuda.libraries", DOC_SKIP, NULL, "cpu-only build: cuBLAS %s, cuDNN %s found, not used",
                c->cublas_run[0] ? c->cublas_run : "not", c->cudnn_run[0] ? c->cudnn_run : "not");
    else
        doc_add(out, "cuda.libraries", DOC_PASS, NULL, "cuBLAS %s (built %s), NCCL %s (built %s), cuDNN %s",
                c->cublas_run[0] ? c->cublas_run : "not found", c->cublas_built, c->nccl_run[0] ? c->nccl_run : "-",
                c->nccl_built[0] ? c->nccl_built : "-", c->cudnn_run[0] ? c->cudnn_run : "not found (not needed)");
}

static void check_memory(const doctor_facts *f, doc_list *out)
{
    const doctor_cuda_facts *c = &f->cuda;
    const double gib = 1024.0 * 1024 * 1024;
    if (c->mem_total <= 0) {
        doc_add(out, "cuda.memory", DOC_SKIP, NULL, "this rank has no GPU memory to read");
        return;
    }
    if (c->mem_free < 0) {
        doc_add(out, "cuda.memory", DOC_PASS, NULL, "%.1f GiB total (free unknown without NVML)", c->mem_total / gib);
        return;
    }
    /* Below a quarter free before training starts: another process holds the GPU. */
    const int low = c->mem_free * 4 < c->mem_total;
    doc_add(out, "cuda.memory", low ? DOC_WARN : DOC_PASS,
            low ? "find what holds the GPU (nvidia-smi lists its processes) and stop it, or give this rank another GPU"
                : NULL,
            "%.1f of %.1f GiB free%s", c->mem_free / gib, c->mem_total / gib,
            low ? ": another process holds the rest" : "");
}

static void check_numa(const doctor_facts *f, doc_list *out)
{
    const doctor_cuda_facts *c = &f->cuda;
    cpu_set_t near, mine, both;
    if (c->numa_node < 0 || !c->numa_cpus[0] || affinity_parse(c->numa_cpus, &near) != DT_OK ||
        affinity_parse(f->pl.cores, &mine) != DT_OK) {
        doc_add(out, "cuda.numa", DOC_SKIP, NULL, "the GPU's NUMA node is not known (one node, or no GPU)");
        return;
    }
    CPU_AND(&both, &near, &mine);
    if (CPU_EQUAL(&both, &mine))
        doc_add(out, "cuda.numa", DOC_PASS, NULL, "the rank's cores are on its GPU's NUMA node %d", c->numa_node);
    else
        doc_add(out, "cuda.numa", DOC_WARN,
                "bind each rank near its GPU: --pin auto (dtrain binds to the GPU's cores), srun --gpu-bind=closest, "
                "or mpirun --map-by numa",
                "cores %.60s are not all on the GPU's NUMA node %d (cores %.60s): host copies cross sockets",
                f->pl.cores, c->numa_node, c->numa_cpus);
}

static void check_nvml(const doctor_facts *f, doc_list *out)
{
    const doctor_cuda_facts *c = &f->cuda;
    if (!c->nvml) {
        doc_add(out, "cuda.nvml", DOC_SKIP, NULL, "NVML (libnvidia-ml.so.1) not loaded: ECC and persistence unread");
        return;
    }
    if (c->ecc_current >= 0 && c->ecc_pending >= 0 && c->ecc_current != c->ecc_pending)
        doc_add(out, "cuda.nvml", DOC_WARN, "reboot the node (or reset the GPU) to apply the pending ECC mode",
                "ECC is %s, %s pending a reset", c->ecc_current ? "on" : "off", c->ecc_pending ? "on" : "off");
    else if (c->persistence == 0)
        doc_add(out, "cuda.nvml", DOC_WARN,
                "enable persistence (root: nvidia-smi -pm 1, or run nvidia-persistenced) so each job does not "
                "pay the driver's start-up",
                "persistence mode off; ECC %s",
                c->ecc_current < 0 ? "not supported"
                : c->ecc_current   ? "on"
                                   : "off");
    else
        doc_add(out, "cuda.nvml", DOC_PASS, NULL, "ECC %s, persistence %s",
                c->ecc_current < 0 ? "not supported"
                : c->ecc_current   ? "on"
                                   : "off",
                c->persistence < 0 ? "not supported" : "on");
}

void doctor_cuda_check_rank(const doctor_facts *f, doc_list *out)
{
    if (!f->cuda.collected) return;
    /* --device cuda that dt_init would refuse: train's error, as its row. */
    if (f->cuda.device_refusal[0])
        doc_add(out, "cuda.gpu", DOC_FAIL, "the fix the error names; or run on the CPU with --device cpu", "%s",
                f->cuda.device_refusal);
    if (!doctor_cuda_job_uses_gpu(f, 1)) {
        if (f->cuda.device_refusal[0]) return;
        /* GPUs were given to this rank but it trains on the CPU: a container started without
         * --gpus/--nv, no driver, a driver older than this build. Said as dt_init says it. */
        if (f->cuda.assigned[0] && f->cuda.device_req != DT_DEVICE_CPU)
            doc_add(out, "cuda.gpu", DOC_WARN,
                    "make the GPUs usable (load the NVIDIA driver; start a container with --gpus all or --nv; a "
                    "driver as new as this build's CUDA); --device cuda makes this an error; --device cpu "
                    "silences it",
                    "GPUs are assigned (%.100s) but no GPU is usable, so the rank trains on the CPU: %.200s",
                    f->cuda.assigned, f->cuda.cpu_why[0] ? f->cuda.cpu_why : "CUDA found no device");
        else
            doc_add(out, "cuda.gpu", DOC_SKIP, NULL, "no GPU in this job (every rank on the CPU, no NVIDIA driver)");
        return;
    }
    check_driver(f, out);
    check_runtime(f, out);
    check_devices(f, out);
    check_visible(f, out);
    check_toolkit(f, out);
    check_libraries(f, out);
    check_memory(f, out);
    check_numa(f, out);
    check_nvml(f, out);
}
