/*
 * doctor_cuda.h - doctor's CUDA checks: what one rank collects (cuda_facts.c), the pure parsers of
 * what it reads (cuda_parse.c) and the checks over it (cuda_checks.c). Declared apart from doctor.h
 * so the CUDA facts have one owner.
 *
 * Test hooks (the environment; listed in runtime/test_hooks.h):
 *   DTRAIN_TEST_CUDA_DRIVER=12020  the driver's CUDA version as cuDriverGetVersion gives it, as if a
 *                                  driver were loaded (the compatibility rows run without a GPU);
 *   DTRAIN_TEST_DEV_DIR=DIR        the nvidia device nodes are looked for in DIR instead of /dev.
 */
#ifndef DT_LAUNCH_DOCTOR_CUDA_H
#define DT_LAUNCH_DOCTOR_CUDA_H

#include "dtrain.h"

#include <stddef.h>

struct doc_list;
struct doctor_facts;

#define DOC_CUDA_DEVNODES 8 /* nvidiactl, nvidia-uvm and the first GPU nodes */

/* One device node: its name and what open(O_RDWR) said (0 opened, else the errno). */
typedef struct doctor_devnode {
    char name[24];
    int err;
} doctor_devnode;

/* One rank's CUDA facts: plain fixed-size data (gathered as bytes). Versions are CUDA's encoding,
 * major * 1000 + minor * 10 (12020 = 12.2); 0 = not known. */
typedef struct doctor_cuda_facts {
    int collected; /* 1 once doctor_cuda_collect ran */
    /* The driver. */
    int libcuda;           /* dlopen("libcuda.so.1") worked (or the test hook faked a driver) */
    char libcuda_err[160]; /* dlerror() or cuInit's error when not usable, "" otherwise */
    int driver_cuda;       /* cuDriverGetVersion: the newest CUDA the driver runs */
    int driver_faked;      /* driver_cuda came from DTRAIN_TEST_CUDA_DRIVER */
    char kmod[32];         /* the kernel module's version, "535.104.05"; "" when not loaded */
    int gpus;              /* cuDeviceGetCount, -1 unknown */
    /* This build. */
    int built_cuda;                        /* CUDART_VERSION this build was compiled with, 0 in a CPU build */
    int runtime_cuda;                      /* cudaRuntimeGetVersion: the libcudart loaded, 0 in a CPU build */
    char cublas_built[24], cublas_run[24]; /* "12.2.5"; "" none */
    char nccl_built[24], nccl_run[24];
    char cudnn_run[24]; /* cudnnGetVersion of a libcudnn found, "" none (dtrain does not need it) */
    /* This rank's GPU (pl.cuda_device), when there is one. */
    char gpu_name[96];
    char bus_id[24];               /* "0000:3b:00.0", lower case as sysfs names it; "" unknown */
    long long mem_total, mem_free; /* bytes, -1 unknown */
    int numa_node;                 /* the GPU's NUMA node (sysfs), -1 none or unknown */
    char numa_cpus[256];           /* that node's cpulist, "" unknown */
    /* NVML (libnvidia-ml.so.1), optional. */
    int nvml;                     /* 1 when it answered for this GPU */
    int ecc_current, ecc_pending; /* 1 on, 0 off, -1 not supported */
    int persistence;              /* 1 on, 0 off, -1 not supported */
    /* Device nodes. */
    char dev_dir[128]; /* where they were looked for: "/dev" or DTRAIN_TEST_DEV_DIR */
    int ndev;
    doctor_devnode dev[DOC_CUDA_DEVNODES];
    /* The environment. */
    int visible_set;       /* CUDA_VISIBLE_DEVICES is set (maybe empty) */
    char visible[128];     /* its value, cut */
    int visible_n;         /* entries CUDA reads (device_visible_parse), -1 unset */
    char visible_why[320]; /* what is wrong with it, "" nothing */
    char step_gpus[64];    /* SLURM_STEP_GPUS, "" unset */
    /* GPUs given to this rank (device_gpus_assigned: CUDA_VISIBLE_DEVICES showing one, else
     * SLURM_STEP_GPUS / SLURM_JOB_GPUS) as "NAME=value", "" none; and, for a rank on the CPU, why
     * CUDA was not usable (device_count's reason, as --device auto found it). */
    char assigned[128];
    char cpu_why[256];
    int device_req;           /* the dt_device_kind asked for (--device, DTRAIN_DEVICE) */
    char device_refusal[320]; /* dt_init's error for --device cuda, which doctor then ran as auto; "" none */
    char cuda_home[128], cuda_path[128];
    char nvcc[160];    /* nvcc found on PATH, "" none */
    char ld_cuda[256]; /* LD_LIBRARY_PATH entries that name cuda, ':'-separated */
    int toolkit_cuda;  /* CUDA_HOME's (else CUDA_PATH's, else nvcc's) version.json or cuda_runtime_api.h, 0 none */
} doctor_cuda_facts;

/* Fills *f for this rank, whose placement is pl. Never fails: what cannot be read is recorded as
 * absent, and the checks say so. Loads the NVIDIA libraries with dlopen only: no link-time
 * dependency on the driver, so a CPU build runs where none is installed. */
void doctor_cuda_collect(doctor_cuda_facts *f, const dt_placement *pl);

/* The per-rank CUDA checks over one rank's facts, into out (a scratch list). */
void doctor_cuda_check_rank(const struct doctor_facts *f, struct doc_list *out);
/* The per-job CUDA checks over every rank's facts (world entries), into job. */
void doctor_cuda_check_job(const struct doctor_facts *all, int world, struct doc_list *job);

/* 1 when some rank of all (world entries) runs on a GPU or has a driver loaded; 0: the job does not
 * use CUDA, and the CUDA checks say so in one row: SKIP, or WARN where GPUs were assigned to a rank
 * that --device auto put on the CPU (with CUDA's reason, and that --device cpu silences it). */
int doctor_cuda_job_uses_gpu(const struct doctor_facts *all, int world);

/* ---------------------------------------------------------------- pure parsers (cuda_parse.c) */

/* A CUDA version (12020) as "12.2" into out (n bytes); "unknown" for <= 0. */
void cuda_version_text(int v, char *out, size_t n);

/* The newest CUDA a driver branch runs (535 -> 12020), from NVIDIA's table "CUDA Toolkit and
 * Corresponding Driver Versions"; 0 for a branch older than the table's first (450). A branch
 * newer than the table's last answers the last one's. */
int cuda_driver_max_cuda(int branch);
/* The oldest driver branch that runs CUDA version v (12020 -> 535); 0 when the table has none. */
int cuda_min_driver_branch(int v);

/* The version in /proc/driver/nvidia/version's text ("NVRM version: NVIDIA UNIX x86_64 Kernel Module
 * 535.104.05 Sat Aug 19 ..."; the open modules say "Open Kernel Module") into out (n bytes) and
 * its branch (535) into *branch. Returns 0 on success, -1 when no version is there (out "" and
 * *branch 0). */
int cuda_parse_kmod(const char *text, char *out, size_t n, int *branch);

/* The "cuda" component's version in a toolkit's version.json ({"cuda" : {"name" : "CUDA SDK",
 * "version" : "12.2.20230823"}, ...}) as 12020; 0 when absent or malformed. */
int cuda_parse_version_json(const char *text);

/* CUDART_VERSION's value in the text of a toolkit's include/cuda_runtime_api.h ("#define
 * CUDART_VERSION  13000"), for toolkits that ship no version.json; 0 when absent. */
int cuda_parse_runtime_header(const char *text);

/* A "major.minor[.patch]" or "12020" text as CUDA's encoding; 0 when neither. */
int cuda_parse_version(const char *s);

#endif
