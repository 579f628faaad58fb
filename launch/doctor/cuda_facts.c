/*
 * cuda_facts.c - what one rank reports about its driver, GPU, device nodes, libraries and CUDA
 * variables for `dtrain doctor` (doctor_cuda.h).
 *
 * The NVIDIA libraries are opened with dlopen, never linked: a CPU build must start on a machine
 * without a driver, and the point of the row is to say that the driver is missing, not to fail to
 * load. Nothing here creates a CUDA context: free memory comes from the context dtrain already
 * made current (a rank on the GPU) or from NVML.
 */
#include "collectives/coll.h"
#include "launch/doctor/doctor.h"
#include "runtime/placement/device.h"

#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(DTRAIN_HAVE_CUDA)
#include <cublas_api.h>
#include <cuda_runtime_api.h>
#endif
#if defined(DTRAIN_HAVE_NCCL)
#include <nccl.h>
#endif

static void copy_env(char *dst, size_t n, const char *name)
{
    const char *v = getenv(name);
    snprintf(dst, n, "%s", v ? v : "");
}

/* The whole of a small file into buf (n bytes, terminated); 0 on success. */
static int read_small(const char *path, char *buf, size_t n)
{
    FILE *fp = fopen(path, "r");
    if (!fp) return -1;
    size_t got = fread(buf, 1, n - 1, fp);
    fclose(fp);
    buf[got] = '\0';
    return 0;
}

/* ---------------------------------------------------------------- the driver (libcuda) */

typedef int (*cu_int_fn)(int *);
typedef int (*cu_init_fn)(unsigned);
typedef int (*cu_dev_get_fn)(int *, int);
typedef int (*cu_str_fn)(char *, int, int);
typedef int (*cu_total_fn)(size_t *, int);
typedef int (*cu_ctx_fn)(void **);
typedef int (*cu_meminfo_fn)(size_t *, size_t *);
typedef int (*cu_errstr_fn)(int, const char **);

static void collect_gpu(doctor_cuda_facts *f, void *h, int ordinal)
{
    cu_dev_get_fn get = (cu_dev_get_fn)dlsym(h, "cuDeviceGet");
    cu_str_fn name = (cu_str_fn)dlsym(h, "cuDeviceGetName");
    cu_str_fn bus = (cu_str_fn)dlsym(h, "cuDeviceGetPCIBusId");
    cu_total_fn total = (cu_total_fn)dlsym(h, "cuDeviceTotalMem_v2");
    cu_ctx_fn ctx = (cu_ctx_fn)dlsym(h, "cuCtxGetCurrent");
    cu_meminfo_fn meminfo = (cu_meminfo_fn)dlsym(h, "cuMemGetInfo_v2");
    int dev = 0;
    if (!get || get(&dev, ordinal) != 0) return;
    if (name) name(f->gpu_name, (int)sizeof f->gpu_name, dev);
    if (bus && bus(f->bus_id, (int)sizeof f->bus_id, dev) == 0)
        for (char *p = f->bus_id; *p; p++) *p = (char)tolower((unsigned char)*p);
    size_t t = 0, fr = 0;
    if (total && total(&t, dev) == 0) f->mem_total = (long long)t;
    void *cur = NULL; /* the context dtrain made current, if any: asking it costs nothing */
    if (ctx && meminfo && ctx(&cur) == 0 && cur && meminfo(&fr, &t) == 0) f->mem_free = (long long)fr;
}

static void collect_driver(doctor_cuda_facts *f, const dt_placement *pl)
{
    char text[1024];
    int branch = 0;
    const char *fake = getenv("DTRAIN_TEST_CUDA_DRIVER");
    if (fake && *fake) {
        f->libcuda = 1, f->driver_faked = 1;
        f->driver_cuda = cuda_parse_version(fake);
        return;
    }
    if (read_small("/proc/driver/nvidia/version", text, sizeof text) == 0)
        cuda_parse_kmod(text, f->kmod, sizeof f->kmod, &branch);
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL); /* kept open: cudart shares it */
    if (!h) {
        const char *e = dlerror();
        snprintf(f->libcuda_err, sizeof f->libcuda_err, "%s", e ? e : "libcuda.so.1 not found");
        return;
    }
    cu_init_fn init = (cu_init_fn)dlsym(h, "cuInit");
    cu_int_fn version = (cu_int_fn)dlsym(h, "cuDriverGetVersion");
    cu_int_fn count = (cu_int_fn)dlsym(h, "cuDeviceGetCount");
    cu_errstr_fn errstr = (cu_errstr_fn)dlsym(h, "cuGetErrorString");
    if (!init || !version || !count) {
        snprintf(f->libcuda_err, sizeof f->libcuda_err,
                 "libcuda.so.1 lacks %s (not NVIDIA's driver library, or a stub: reinstall the driver)",
                 !init      ? "cuInit"
                 : !version ? "cuDriverGetVersion"
                            : "cuDeviceGetCount");
        dlclose(h); /* kept open only for a driver cudart can use */
        return;
    }
    f->libcuda = 1;
    if (version(&f->driver_cuda) != 0) f->driver_cuda = 0; /* "unknown" in the rows, not a stale value */
    const int rc = init(0);
    if (rc != 0) {
        const char *s = NULL;
        if (errstr) errstr(rc, &s);
        snprintf(f->libcuda_err, sizeof f->libcuda_err, "cuInit failed: error %d (%s)", rc, s ? s : "?");
        f->gpus = 0;
        return;
    }
    if (count(&f->gpus) != 0) f->gpus = -1;
    if (pl->device == DT_DEVICE_CUDA && pl->cuda_device >= 0) collect_gpu(f, h, pl->cuda_device);
}

/* ---------------------------------------------------------------- NVML, sysfs */

typedef struct nvml_memory {
    unsigned long long total, free, used;
} nvml_memory;

static void collect_nvml(doctor_cuda_facts *f)
{
    if (!f->bus_id[0]) return;
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    int (*init)(void) = (int (*)(void))dlsym(h, "nvmlInit_v2");
    int (*shutdown)(void) = (int (*)(void))dlsym(h, "nvmlShutdown");
    int (*by_bus)(const char *, void **) = (int (*)(const char *, void **))dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2");
    int (*mem)(void *, nvml_memory *) = (int (*)(void *, nvml_memory *))dlsym(h, "nvmlDeviceGetMemoryInfo");
    int (*ecc)(void *, int *, int *) = (int (*)(void *, int *, int *))dlsym(h, "nvmlDeviceGetEccMode");
    int (*pers)(void *, int *) = (int (*)(void *, int *))dlsym(h, "nvmlDeviceGetPersistenceMode");
    void *dev = NULL;
    if (init && shutdown && by_bus && init() == 0) {
        if (by_bus(f->bus_id, &dev) == 0) {
            f->nvml = 1;
            nvml_memory m;
            if (mem && mem(dev, &m) == 0) {
                f->mem_total = (long long)m.total;
                if (f->mem_free < 0) f->mem_free = (long long)m.free;
            }
            if (!ecc || ecc(dev, &f->ecc_current, &f->ecc_pending) != 0) f->ecc_current = f->ecc_pending = -1;
            if (!pers || pers(dev, &f->persistence) != 0) f->persistence = -1;
        }
        shutdown();
    }
    dlclose(h);
}

static void collect_numa(doctor_cuda_facts *f)
{
    char path[160], text[256];
    if (!f->bus_id[0]) return;
    snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/numa_node", f->bus_id);
    if (read_small(path, text, sizeof text) != 0) return;
    f->numa_node = atoi(text);
    if (f->numa_node < 0) return;
    snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", f->numa_node);
    if (read_small(path, f->numa_cpus, sizeof f->numa_cpus) == 0) f->numa_cpus[strcspn(f->numa_cpus, "\n")] = '\0';
}

/* ---------------------------------------------------------------- libraries */

static void *open_first(const char *const *names)
{
    for (; *names; names++) {
        void *h = dlopen(*names, RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
    }
    return NULL;
}

static void collect_libraries(doctor_cuda_facts *f)
{
    static const char *const cublas[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so", NULL};
    static const char *const cudnn[] = {"libcudnn.so.9", "libcudnn.so.8", "libcudnn.so", NULL};
    void *h = open_first(cublas);
    int (*prop)(int, int *) = h ? (int (*)(int, int *))dlsym(h, "cublasGetProperty") : NULL;
    int v[3] = {0, 0, 0}; /* libraryPropertyType: MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL */
    if (prop && prop(0, &v[0]) == 0 && prop(1, &v[1]) == 0 && prop(2, &v[2]) == 0)
        snprintf(f->cublas_run, sizeof f->cublas_run, "%d.%d.%d", v[0], v[1], v[2]);
    if (h) dlclose(h);
    if ((h = open_first(cudnn))) {
        size_t (*get)(void) = (size_t(*)(void))dlsym(h, "cudnnGetVersion");
        const size_t c = get ? get() : 0;
        /* cuDNN 9 encodes major*10000 + minor*100 + patch, cuDNN 8 major*1000 + minor*100 + patch. */
        const size_t base = c >= 90000 ? 10000 : 1000;
        if (c) snprintf(f->cudnn_run, sizeof f->cudnn_run, "%zu.%zu.%zu", c / base, (c % base) / 100, c % 100);
        dlclose(h);
    }
    char nccl[48];
    coll_nccl_version(nccl, sizeof nccl);
    if (!strncmp(nccl, "NCCL ", 5)) snprintf(f->nccl_run, sizeof f->nccl_run, "%.23s", nccl + 5);
#if defined(DTRAIN_HAVE_CUDA)
    f->built_cuda = CUDART_VERSION;
    cudaRuntimeGetVersion(&f->runtime_cuda);
    cudaGetLastError();
    snprintf(f->cublas_built, sizeof f->cublas_built, "%d.%d.%d", CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR, CUBLAS_VER_PATCH);
#endif
#if defined(DTRAIN_HAVE_NCCL)
    snprintf(f->nccl_built, sizeof f->nccl_built, "%d.%d.%d", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
#endif
}

/* ---------------------------------------------------------------- device nodes, variables */

static void add_node(doctor_cuda_facts *f, const char *name)
{
    if (f->ndev >= DOC_CUDA_DEVNODES) return;
    doctor_devnode *d = &f->dev[f->ndev++];
    char path[192];
    snprintf(d->name, sizeof d->name, "%s", name);
    snprintf(path, sizeof path, "%s/%s", f->dev_dir, name);
    /* O_RDWR as the driver opens them; O_NONBLOCK so a node that is not a device cannot block. */
    const int fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK);
    d->err = fd >= 0 ? 0 : errno;
    if (fd >= 0) close(fd);
}

static int gpu_node_name(const char *s)
{
    if (strncmp(s, "nvidia", 6) || !s[6]) return 0;
    for (const char *p = s + 6; *p; p++)
        if (!isdigit((unsigned char)*p)) return 0;
    return 1;
}

static void collect_devnodes(doctor_cuda_facts *f)
{
    const char *dir = getenv("DTRAIN_TEST_DEV_DIR");
    snprintf(f->dev_dir, sizeof f->dev_dir, "%s", dir && *dir ? dir : "/dev");
    add_node(f, "nvidiactl");
    add_node(f, "nvidia-uvm");
    DIR *d = opendir(f->dev_dir);
    if (!d) return;
    /* The GPU nodes in index order, whatever order readdir gives. */
    for (int want = 0; want < 64 && f->ndev < DOC_CUDA_DEVNODES; want++) {
        char name[24];
        snprintf(name, sizeof name, "nvidia%d", want);
        rewinddir(d);
        for (struct dirent *e; (e = readdir(d));)
            if (gpu_node_name(e->d_name) && !strcmp(e->d_name, name)) {
                add_node(f, name);
                break;
            }
    }
    closedir(d);
}

static void find_nvcc(char *out, size_t n)
{
    const char *path = getenv("PATH");
    out[0] = '\0';
    for (const char *p = path; p && *p;) {
        size_t len = strcspn(p, ":");
        char cand[512];
        if (len && len < sizeof cand - 8) {
            snprintf(cand, sizeof cand, "%.*s/nvcc", (int)len, p);
            if (strlen(cand) < n && access(cand, X_OK) == 0) {
                memcpy(out, cand, strlen(cand) + 1);
                return;
            }
        }
        p += len + (p[len] == ':');
    }
}

static void collect_env(doctor_cuda_facts *f)
{
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    f->visible_set = v != NULL;
    snprintf(f->visible, sizeof f->visible, "%s", v ? v : "");
    f->visible_n = v ? device_visible_parse(v, f->visible_why, sizeof f->visible_why) : -1;
    copy_env(f->step_gpus, sizeof f->step_gpus, "SLURM_STEP_GPUS");
    device_gpus_assigned(v, getenv("SLURM_STEP_GPUS"), getenv("SLURM_JOB_GPUS"), f->assigned, sizeof f->assigned);
    copy_env(f->cuda_home, sizeof f->cuda_home, "CUDA_HOME");
    copy_env(f->cuda_path, sizeof f->cuda_path, "CUDA_PATH");
    find_nvcc(f->nvcc, sizeof f->nvcc);
    const char *ld = getenv("LD_LIBRARY_PATH");
    size_t len = 0;
    for (const char *p = ld; p && *p;) {
        size_t k = strcspn(p, ":");
        if (k && memmem(p, k, "cuda", 4) && len + k + 2 < sizeof f->ld_cuda)
            len += (size_t)snprintf(f->ld_cuda + len, sizeof f->ld_cuda - len, "%s%.*s", len ? ":" : "", (int)k, p);
        p += k + (p[k] == ':');
    }
    /* The toolkit a build would use: CUDA_HOME, else CUDA_PATH, else the one nvcc belongs to. */
    char root[192] = "", path[224], text[16384];
    if (f->cuda_home[0])
        snprintf(root, sizeof root, "%s", f->cuda_home);
    else if (f->cuda_path[0])
        snprintf(root, sizeof root, "%s", f->cuda_path);
    else if (f->nvcc[0]) {
        snprintf(root, sizeof root, "%s", f->nvcc);
        for (int up = 0; up < 2; up++) {
            char *slash = strrchr(root, '/');
            if (slash) *slash = '\0';
        }
    }
    if (!root[0]) return;
    snprintf(path, sizeof path, "%s/version.json", root);
    if (read_small(path, text, sizeof text) == 0) f->toolkit_cuda = cuda_parse_version_json(text);
    /* Toolkits from pip or conda have no version.json; the header's define is near its top. */
    snprintf(path, sizeof path, "%s/include/cuda_runtime_api.h", root);
    if (!f->toolkit_cuda && read_small(path, text, sizeof text) == 0) f->toolkit_cuda = cuda_parse_runtime_header(text);
}

void doctor_cuda_collect(doctor_cuda_facts *f, const dt_placement *pl)
{
    memset(f, 0, sizeof *f);
    f->gpus = -1, f->mem_total = f->mem_free = -1, f->numa_node = -1;
    f->ecc_current = f->ecc_pending = f->persistence = -1;
    collect_driver(f, pl);
    collect_nvml(f);
    collect_numa(f);
    collect_libraries(f);
    collect_devnodes(f);
    collect_env(f);
    /* What dt_init's --device auto was told when it chose the CPU. */
    if (pl->device == DT_DEVICE_CPU) device_count(f->cpu_why, sizeof f->cpu_why);
    f->collected = 1;
}
