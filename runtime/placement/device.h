/*
 * device.h - choosing this process's device: the CPU, or one CUDA GPU mapped from the local rank
 * through what CUDA_VISIBLE_DEVICES lets this process see.
 *
 * The device is selected before MPI_Init and before any other CUDA call, so that no stray CUDA
 * context lands on GPU 0. The GPU count goes through a replaceable function (the test seam) so the
 * mapping is unit-tested on machines without a GPU.
 */
#ifndef DT_RUNTIME_PLACEMENT_DEVICE_H
#define DT_RUNTIME_PLACEMENT_DEVICE_H

#include "dtrain.h"

#include <stddef.h>

/* Returns how many GPUs this process can see (0 when none), writing why there are none to `why`. */
typedef int (*device_count_fn)(char *why, size_t n);
/* Replaces the GPU counter (NULL restores the build's own, device_info_count). For tests. */
void device_set_count_fn(device_count_fn fn);
/* The current counter's answer. */
int device_count(char *why, size_t n);

/* Pure mapping of a local rank to a visible ordinal: a process that sees exactly one GPU takes it;
 * otherwise the local_rank-th one. local_size may be -1 (unknown). More local ranks than visible GPUs
 * (with more than one visible) fails with DT_ERR_DEVICE and advice, never two ranks on one GPU;
 * unless share is 1 (collectives through MPI, --gpu-comm mpi): then ranks take the GPUs round
 * robin. */
dt_status device_map(int visible, int local_rank, int local_size, int share, int *ordinal);

/* Decides the device kind and ordinal for a request (auto|cpu|cuda), the rank being the local_rank-th
 * of the local_size ranks of its node that see the same GPUs (device_group). Does not touch the
 * GPU. When auto falls back to the CPU because no GPU is usable, writes the reason (the counter's:
 * no driver, a driver too old for this build, no device, a build without CUDA) into why (n bytes;
 * NULL allowed), else "". */
dt_status device_resolve(dt_device_kind req, int local_rank, int local_size, int share, dt_device_kind *kind,
                         int *ordinal, char *why, size_t n);

/* Whether GPUs were assigned to this process: CUDA_VISIBLE_DEVICES (visible, NULL when unset) shows
 * CUDA at least one GPU, or, when it is unset, SLURM_STEP_GPUS or SLURM_JOB_GPUS (NULL when unset)
 * is not empty. An empty CUDA_VISIBLE_DEVICES, -1 or NoDevFiles hides the GPUs on purpose: 0. On 1
 * writes "NAME=value" of the variable that says so into what (n bytes; NULL allowed). Pure. */
int device_gpus_assigned(const char *visible, const char *step_gpus, const char *job_gpus, char *what, size_t n);

/* A key of a device list (the CUDA_VISIBLE_DEVICES text; NULL when unset) such that ranks with equal
 * lists have equal keys: 0 for NULL, a 64-bit hash otherwise. Pure. */
unsigned long long device_list_key(const char *list);

/* The group of rank `me` among n local ranks by their list keys: *index is its position among the
 * ranks with its key (in local rank order), *size how many have it. Ranks that each see their own
 * list (srun --gpus-per-task=2: 0,1 and 2,3) are each alone in their group and take the first GPU
 * of their own list; ranks that share one list split it. Pure. */
void device_group(const unsigned long long *keys, int n, int me, int *index, int *size);

/* cudaSetDevice(ordinal) and the GPU's PCI bus id, lower case as sysfs names it ("0000:3b:00.0"), into
 * bus_id (n bytes), through device_info_select. DT_ERR_UNSUPPORTED without CUDA in the build. */
dt_status device_activate(int ordinal, char *bus_id, size_t n);

/* Pure check that no two local ranks hold the same GPU: ids has n entries of `stride` bytes each
 * (PCI bus ids, "" for ranks on the CPU); mig (n flags, NULL for none) marks the ranks whose device
 * is a MIG device (a MIG- entry of CUDA_VISIBLE_DEVICES). On a duplicate fails naming both local
 * ranks; when either is a MIG device the message says that MIG slices of one GPU share its bus id,
 * which NCCL refuses, and that --gpu-comm mpi lets them train together. */
dt_status device_check_unique(const char *ids, const unsigned char *mig, int n, size_t stride);

/* Reads a CUDA_VISIBLE_DEVICES value the way CUDA does (CUDA Programming Guide, "CUDA Environment
 * Variables"): comma-separated device indices or UUIDs (GPU-<hex>, a unique prefix of it, or MIG-...),
 * enumerated up to the first invalid entry, the rest hidden; a negative entry is invalid (-1 hides
 * every GPU), and a GPU listed twice makes CUDA show none; CUDA shows a process at most one MIG
 * device, so the entries from a second MIG- one on are not counted. Returns how many entries CUDA
 * takes, -1 for a NULL list (no restriction). An empty (or blank) list writes "CUDA_VISIBLE_DEVICES
 * is empty (no GPU visible)" into why (n bytes; NULL allowed); when an entry is malformed (empty,
 * negative, not an index or UUID, a duplicate, text after an index, a second MIG device) a warning
 * naming the entry and what it does to the visible GPUs; else "". Pure. */
int device_visible_parse(const char *list, char *why, size_t n);

/* The entry of a comma-separated device list (CUDA_VISIBLE_DEVICES, SLURM_STEP_GPUS) that the local_rank-th of the
 * local_size ranks of a node that see this same list (device_group) takes under the rules of device_map (share as
 * there), into out (n bytes): "" when the list is empty, absent or shows CUDA no GPU (device_visible_parse), "-" and
 * the reason when the ranks outnumber the entries CUDA reads. Pure. */
void device_plan(const char *list, int local_rank, int local_size, int share, char *out, size_t n);

#endif
