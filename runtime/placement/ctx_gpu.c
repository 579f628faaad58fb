/*
 * ctx_gpu.c - dt_init's choice of this rank's GPU (ctx.c, ctx_impl.h): selected and activated
 * before MPI_Init where the launcher's local rank allows it, then checked over MPI against the
 * node's other ranks (one GPU per local rank), and the GPU of the plan.
 */
#include "runtime/placement/device.h"
#include "base/log.h"
#include "base/status.h"
#include "runtime/placement/topo.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/placement/ctx_impl.h"

/* Selects and activates the GPU, the rank being the index-th of the size ranks of its node that see
 * the same GPUs; on the CPU just records it (why: the reason --device auto found no GPU, or "").
 * *chosen says whether it was decided: early (before MPI_Init, by the launcher's node-wide local
 * rank), more ranks than visible GPUs is left to after MPI_Init, when the ranks that share this
 * rank's list are known (srun --gpus-per-task=2 gives three tasks three lists of two). */
dt_status ctx_select_device(dt_ctx *c, int index, int size, int early, char *bus_id, size_t n, char *why, size_t wn,
                            int *chosen)
{
    dt_device_kind kind;
    int ordinal = -1;
    const int share = c->cfg.gpu_comm == DT_GPU_COMM_MPI;
    *chosen = 0;
    dt_status s = device_resolve(c->cfg.device, index, size, share, &kind, &ordinal, why, wn);
    if (s) {
        char none[256];
        if (!early || s != DT_ERR_DEVICE || device_count(none, sizeof none) <= 1) return s;
        status_clear_error();
        return DT_OK;
    }
    *chosen = 1;
    c->pl.device = kind;
    c->pl.cuda_device = ordinal;
    bus_id[0] = '\0';
    if (log_enabled(LOG_LEVEL_DEBUG)) {
        char gpu[32] = "";
        if (kind == DT_DEVICE_CUDA) snprintf(gpu, sizeof gpu, ", visible GPU %d", ordinal);
        log_msg(LOG_LEVEL_DEBUG, "placement: device %s%s (--device %s, %d of the %d local ranks that see these GPUs)",
                dt_device_kind_name(kind), gpu,
                c->cfg.device == DT_DEVICE_CUDA  ? "cuda"
                : c->cfg.device == DT_DEVICE_CPU ? "cpu"
                                                 : "auto",
                index, size);
    }
    if (kind == DT_DEVICE_CUDA) return device_activate(ordinal, bus_id, n);
    return DT_OK;
}

/* After MPI_Init: the ranks of this node that see the same GPU list (CUDA_VISIBLE_DEVICES, else
 * SLURM_STEP_GPUS) split it; *index and *size are this rank's place among them (device_group). */
static dt_status ctx_gpu_group(dt_ctx *c, const char *list, int *index, int *size)
{
    const int n = c->pl.local_size, me = c->pl.local_rank;
    unsigned long long key = device_list_key(list);
    unsigned long long *keys = calloc((size_t)n, sizeof *keys);
    if (!keys) return status_set_error(DT_ERR_NOMEM, "out of memory for the GPU lists of %d local ranks", n);
    const int rc = MPI_Allgather(&key, 1, MPI_UNSIGNED_LONG_LONG, keys, 1, MPI_UNSIGNED_LONG_LONG, c->local);
    if (rc == MPI_SUCCESS) device_group(keys, n, me, index, size);
    free(keys);
    return rc == MPI_SUCCESS ? DT_OK
                             : status_set_error(DT_ERR_MPI, "MPI_Allgather of the local ranks' GPU lists failed");
}

/* Step 4 of dt_init, after MPI: this rank's GPU. The ranks of a node that see the same GPU list
 * split it; a rank with a list of its own takes its first GPU. device_chosen: chosen before
 * MPI_Init already (by the node-wide local rank, checked here against the rank's place in its
 * group). Two ranks of a node on one GPU are refused unless --gpu-comm mpi; GPUs assigned but none
 * usable are warned of under --device auto; c->pl.gpu is the GPU of the plan. bus_id (bus_len
 * bytes) receives the GPU's PCI bus id, for the cores near it; cpu_why (CTX_WHY_LEN) why the CPU. */
dt_status ctx_place_gpu(dt_ctx *c, const topo_mpi *m, int device_chosen, char *bus_id, size_t bus_len, char *cpu_why)
{
    dt_status s;
    const char *list = getenv("CUDA_VISIBLE_DEVICES");
    if (!list) list = getenv("SLURM_STEP_GPUS");
    const int share = c->cfg.gpu_comm == DT_GPU_COMM_MPI;
    int gidx = 0, gsize = 1;
    if ((s = ctx_gpu_group(c, list, &gidx, &gsize))) return s;
    if (!device_chosen) {
        if ((s = ctx_select_device(c, gidx, gsize, 0, bus_id, bus_len, cpu_why, CTX_WHY_LEN, &device_chosen))) return s;
    } else if (c->pl.device == DT_DEVICE_CUDA) {
        /* Chosen before MPI_Init by the node-wide local rank, which is the place in the group
         * unless the local ranks see different lists: then this rank takes its place in its own
         * list (the GPU chosen first is one of this rank's own, so no other rank's GPU holds a
         * context of it). */
        char none[256];
        int want = -1;
        if ((s = device_map(device_count(none, sizeof none), gidx, gsize, share, &want))) return s;
        if (want != c->pl.cuda_device) {
            c->pl.cuda_device = want;
            if ((s = device_activate(want, bus_id, bus_len))) return s;
        }
    }
    {
        char *ids = calloc((size_t)m->local_size, bus_len);
        unsigned char *mig = calloc((size_t)m->local_size, 1);
        if (!ids || !mig) {
            free(ids);
            free(mig);
            return status_set_error(DT_ERR_NOMEM, "out of memory for the GPU ids of %d local ranks", m->local_size);
        }
        /* A MIG device: the refusal of two ranks on one bus id then says why slices share it. */
        unsigned char mig_me = c->pl.device == DT_DEVICE_CUDA && list && strstr(list, "MIG-");
        int rc = MPI_Allgather(bus_id, (int)bus_len, MPI_CHAR, ids, (int)bus_len, MPI_CHAR, c->local);
        if (rc == MPI_SUCCESS) rc = MPI_Allgather(&mig_me, 1, MPI_BYTE, mig, 1, MPI_BYTE, c->local);
        /* Collectives through MPI (--gpu-comm mpi) let ranks share a GPU; NCCL does not. */
        s = rc != MPI_SUCCESS ? status_set_error(DT_ERR_MPI, "MPI_Allgather of GPU ids failed")
            : share           ? DT_OK
                              : device_check_unique(ids, mig, m->local_size, bus_len);
        free(ids);
        free(mig);
        if (s) return s;
    }
    /* GPUs assigned but none usable (a container started without --gpus/--nv, no driver, a driver
     * older than this build): --device auto trains on the CPU, and says so once per node. */
    char assigned[128];
    if (c->cfg.device == DT_DEVICE_AUTO && c->pl.device == DT_DEVICE_CPU && m->local_rank == 0 &&
        device_gpus_assigned(getenv("CUDA_VISIBLE_DEVICES"), getenv("SLURM_STEP_GPUS"), getenv("SLURM_JOB_GPUS"),
                             assigned, sizeof assigned))
        log_msg(LOG_LEVEL_WARN,
                "GPUs are assigned to this node's ranks (%s) but no GPU is usable, so they train on the CPU: %s. "
                "--device cuda makes this an error; --device cpu silences it",
                assigned, cpu_why[0] ? cpu_why : "CUDA found no device");
    /* The GPU this rank takes, or would take where none is usable (fake GPUs of a test cluster,
     * or a CPU run on a GPU allocation): its entry in the list the launcher gave. */
    {
        if (c->pl.device == DT_DEVICE_CUDA && (!list || !*list))
            snprintf(c->pl.gpu, sizeof c->pl.gpu, "%d", c->pl.cuda_device);
        else
            device_plan(list, gidx, gsize, share, c->pl.gpu, sizeof c->pl.gpu);
        /* Two ranks of a node on one GPU are refused when the GPU is used (above); when it is only
         * planned, say so in the plan. */
        char *all = calloc((size_t)m->local_size, sizeof c->pl.gpu);
        if (all &&
            MPI_Allgather(c->pl.gpu, sizeof c->pl.gpu, MPI_CHAR, all, sizeof c->pl.gpu, MPI_CHAR, c->local) ==
                MPI_SUCCESS &&
            c->pl.gpu[0] && c->pl.gpu[0] != '-' && c->cfg.gpu_comm != DT_GPU_COMM_MPI)
            for (int r = 0; r < m->local_size; r++)
                if (r != m->local_rank && strcmp(all + (size_t)r * sizeof c->pl.gpu, c->pl.gpu) == 0) {
                    char keep[64];
                    snprintf(keep, sizeof keep, "%s", c->pl.gpu);
                    snprintf(c->pl.gpu, sizeof c->pl.gpu, "- (%.24s also local rank %d)", keep, r);
                    break;
                }
        free(all);
    }
    return DT_OK;
}
