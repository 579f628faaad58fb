/*
 * affinity.h - CPU core placement of this process.
 *
 * Start from what the launcher or cgroup allowed (sched_getaffinity). When the launcher already
 * bound the local ranks to different sets, keep its binding. Otherwise the local ranks that share a
 * candidate set (the allowed cores, narrowed to the GPU's NUMA node when there is a GPU) split it
 * in contiguous blocks of whole cores, in hwloc's order. BLAS threads follow the result. A topology
 * hwloc takes for another machine's (HWLOC_XMLFILE, HWLOC_SYNTHETIC without HWLOC_THISSYSTEM=1)
 * is not pinned, with a warning, and the CPUs reported are always the kernel's after binding.
 */
#ifndef DT_RUNTIME_PLACEMENT_AFFINITY_H
#define DT_RUNTIME_PLACEMENT_AFFINITY_H

#include "dtrain.h"

#include <mpi.h>
#include <sched.h>

typedef struct affinity_result {
    cpu_set_t cpus; /* the CPUs (hardware threads) this process now runs on */
    int num_cores;  /* whole cores among them */
    dt_pinned_by pinned_by;
    int shared;       /* 1 when there were fewer cores than local ranks to place */
    int blas_threads; /* what OpenBLAS was set to */
    char list[256];   /* cpus as "0-3,8" */
} affinity_result;

/* Block b of `size` near-equal contiguous blocks of n items: [*first, *first + *count).
 * The first n % size blocks get one more. When size > n, every block gets no items. */
void affinity_block(int n, int b, int size, int *first, int *count);

/* Formats a set as a compact list "0-3,8,10-11" (Linux cpulist syntax). */
void affinity_format(const cpu_set_t *set, char *out, size_t n);

/* Parses a Linux cpulist ("0-3,8") as found in /sys/.../local_cpulist. DT_ERR_INVALID_ARG on junk. */
dt_status affinity_parse(const char *s, cpu_set_t *out);

/* Places this process: see the file comment. gpu_bus_id is the GPU's PCI bus id or NULL/"" on the
 * CPU. blas_threads 0 means one BLAS thread per core placed on. Collective over `local`. */
dt_status affinity_apply(dt_pin_mode mode, MPI_Comm local, const char *gpu_bus_id, int blas_threads,
                         affinity_result *out);

#endif
