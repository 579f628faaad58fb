/*
 * cuda_job.c - doctor's CUDA checks over the whole job (doctor_cuda.h): what no rank sees alone,
 * two ranks of a node on one GPU and how the ranks of a node match its GPUs. Pure functions of
 * the gathered facts.
 */
#include "launch/doctor/doctor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int doctor_cuda_job_uses_gpu(const doctor_facts *all, int world)
{
    for (int r = 0; r < world; r++)
        if (all[r].pl.device == DT_DEVICE_CUDA || all[r].cuda.libcuda) return 1;
    return 0;
}

/* The GPU a rank holds, as one comparable text: its PCI bus id, else its visible entry, else the
 * ordinal. "" for a rank on the CPU. */
static void gpu_key(const doctor_facts *f, char *out, size_t n)
{
    if (f->pl.device != DT_DEVICE_CUDA)
        snprintf(out, n, "%s", "");
    else if (f->cuda.bus_id[0])
        snprintf(out, n, "%s", f->cuda.bus_id);
    else if (f->pl.gpu[0] && f->pl.gpu[0] != '-')
        snprintf(out, n, "GPU %s", f->pl.gpu);
    else
        snprintf(out, n, "ordinal %d", f->pl.cuda_device);
}

static void check_shared(const doctor_facts *all, int world, doc_list *job)
{
    char seen[DOC_TEXT], a[72], b[72];
    int n_gpu = 0;
    seen[0] = '\0';
    for (int r = 0; r < world; r++) {
        gpu_key(&all[r], a, sizeof a);
        if (!a[0]) continue;
        n_gpu++;
        for (int s = 0; s < r; s++) {
            gpu_key(&all[s], b, sizeof b);
            if (all[s].pl.node != all[r].pl.node || strcmp(a, b)) continue;
            const int ranks[2] = {s, r};
            /* --gpu-comm mpi lets ranks share a GPU on purpose (dt_init refuses it otherwise). */
            const int allowed = all[r].host.gpu_comm == DT_GPU_COMM_MPI;
            doc_add_ranks(job, ranks, 2, "cuda.gpu_shared", allowed ? DOC_WARN : DOC_FAIL,
                          "give each rank of a node its own GPU: srun --gpus-per-task=1, mpirun -np <GPUs per node> "
                          "per node, or distinct CUDA_VISIBLE_DEVICES",
                          "ranks %d and %d on node %d share one GPU (%s)%s", s, r, all[r].pl.node, a,
                          allowed ? ": --gpu-comm mpi allows it, at half the speed each" : "");
            return;
        }
        doc_append(seen, sizeof seen, "%s%d:%s", seen[0] ? " " : "", r, a);
    }
    if (n_gpu) doc_add_ranks(job, NULL, 0, "cuda.gpu_shared", DOC_PASS, NULL, "each rank its own GPU: %s", seen);
}

static void check_per_node(const doctor_facts *all, int world, doc_list *job)
{
    const int nodes = all[0].pl.num_nodes > 0 ? all[0].pl.num_nodes : 1;
    for (int node = 0; node < nodes; node++) {
        int ranks = 0, gpus = -1, same = 1, first = -1;
        for (int r = 0; r < world; r++) {
            const doctor_facts *f = &all[r];
            if (f->pl.node != node || f->pl.device != DT_DEVICE_CUDA) continue;
            if (first < 0) first = r, gpus = f->cuda.gpus;
            ranks++;
            /* Only ranks that see the same GPUs count the node's GPUs alike (per-task binding gives
             * each rank its own list, and then each sees one). */
            same &= f->cuda.gpus == gpus && !strcmp(f->cuda.visible, all[first].cuda.visible);
        }
        if (first < 0 || gpus <= 0 || !same) continue;
        const char *host = all[first].pl.hostname;
        if (ranks < gpus)
            doc_add_ranks(job, NULL, 0, "cuda.gpus_per_node", DOC_WARN,
                          "run one rank per GPU: mpirun --map-by ppr:<GPUs>:node, or srun --ntasks-per-node=<GPUs> "
                          "--gpus-per-task=1",
                          "node %s: %d rank%s on the GPU, %d GPUs visible: %d idle", host, ranks, ranks == 1 ? "" : "s",
                          gpus, gpus - ranks);
        else
            doc_add_ranks(job, NULL, 0, "cuda.gpus_per_node", ranks == gpus ? DOC_PASS : DOC_WARN,
                          ranks == gpus ? NULL : "run as many ranks per node as it has GPUs",
                          "node %s: %d ranks, %d GPUs", host, ranks, gpus);
    }
}

void doctor_cuda_check_job(const doctor_facts *all, int world, doc_list *job)
{
    if (world <= 0 || !doctor_cuda_job_uses_gpu(all, world)) return;
    check_shared(all, world, job);
    check_per_node(all, world, job);
}
