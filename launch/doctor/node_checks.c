/*
 * node_checks.c - doctor's verdicts on the node's resources (node_facts.c): /dev/shm against the
 * segments of the local ranks, a cgroup CPU quota against the ranks' threads, and the resource
 * limits that make a job fail. Pure functions of the facts, for the unit test.
 */
#include "launch/doctor/doctor.h"

#include <stdlib.h>
#include <string.h>

#define MIB (1024.0 * 1024.0)

/* A limit for people: "unlimited", "64 KiB", "8 MiB". */
static const char *limit_text(unsigned long long v, char *buf, size_t n)
{
    if (v == DOC_UNLIMITED)
        snprintf(buf, n, "unlimited");
    else if (v >= 1ULL << 20)
        snprintf(buf, n, "%llu MiB", v >> 20);
    else
        snprintf(buf, n, "%llu KiB", v >> 10);
    return buf;
}

/* Open files a rank needs: ~20 measured (a 2-rank train with 4 loader threads: 17) and a margin
 * for image files, checkpoints and logs, plus up to 2 TCP sockets per peer where ranks talk over
 * TCP (Open MPI's tcp BTL, NCCL's bootstrap). */
static unsigned long long nofile_need(int world) { return 256ULL + 2ULL * (unsigned long long)world; }

/* The stack below which a thread is short: glibc gives every thread the soft RLIMIT_STACK as its
 * stack (the loader's, the communication thread's, OpenBLAS's), 8 MiB by default. */
#define DOC_STACK_MIN (1ULL << 20)
/* RDMA registers (pins) the buffers it sends from: the 64 MiB allreduce buffers and the gradient
 * buckets; the common default of 64 KiB or 8 MiB makes registration fail. */
#define DOC_MEMLOCK_MIN (1ULL << 30)

void doctor_node_check_rank(const doctor_facts *f, doc_list *out)
{
    const doctor_node_facts *n = &f->host.node;
    /* Three limits' texts can outgrow the row: doc_append ends a cut one with "...". */
    char a[32], b[32], seen[DOC_TEXT] = "", fix[DOC_TEXT] = "";
    int bad = 0;
    const unsigned long long need = nofile_need(f->pl.world_size);
    if (n->nofile && n->nofile < need) {
        bad = 1;
        doc_append(seen, sizeof seen,
                   "open files (ulimit -n) %llu, below the %llu a rank of %d may open (MPI connections, loader, "
                   "images)",
                   n->nofile, need, f->pl.world_size);
        doc_append(fix, sizeof fix, "ulimit -n %llu", need < 4096 ? 4096ULL : need);
    } else if (n->nofile == DOC_UNLIMITED)
        doc_append(seen, sizeof seen, "open files unlimited");
    else
        doc_append(seen, sizeof seen, "open files %llu", n->nofile);
    if (n->stack && n->stack < DOC_STACK_MIN) {
        bad = 1;
        doc_append(seen, sizeof seen, "; stack (ulimit -s) %s, below 1 MiB: every thread gets a stack this size",
                   limit_text(n->stack, a, sizeof a));
        doc_append(fix, sizeof fix, "%sulimit -s 8192", fix[0] ? "; " : "");
    } else
        doc_append(seen, sizeof seen, "; stack %s", limit_text(n->stack, a, sizeof a));
    const int rdma = n->rdma_devices > 0, gpu = f->pl.device == DT_DEVICE_CUDA;
    if (!rdma && !gpu) {
        doc_append(seen, sizeof seen, "; locked memory not checked (no InfiniBand/RDMA device, no GPU)");
    } else if (n->memlock < DOC_MEMLOCK_MIN) {
        bad = 1;
        doc_append(seen, sizeof seen, "; locked memory (ulimit -l) %s on a node with %s: %s cannot pin its buffers",
                   limit_text(n->memlock, b, sizeof b), rdma ? "InfiniBand/RDMA devices" : "a GPU",
                   rdma ? "RDMA" : "NCCL");
        doc_append(fix, sizeof fix, "%sulimit -l unlimited", fix[0] ? "; " : "");
    } else
        doc_append(seen, sizeof seen, "; locked memory %s", limit_text(n->memlock, b, sizeof b));
    if (bad)
        doc_append(fix, sizeof fix,
                   " in the job script before mpirun/srun (a hard limit below it: the site's "
                   "/etc/security/limits.conf, or docker --ulimit)");
    doc_add(out, "node.limits", bad ? DOC_WARN : DOC_PASS, bad ? fix : NULL, "%s", seen);
}

/* ---------------------------------------------------------------- per node */

static void check_shm(const doctor_facts *all, const int *idx, int n, doc_list *job, int *bad, char *ok, size_t okn)
{
    const doctor_facts *lead = &all[idx[0]];
    const doctor_node_facts *s = &lead->host.node;
    if (n < 2 || !s->shm_ok) return; /* one rank: no shared-memory transport; unreadable: below */
    int gpu = 0;
    for (int i = 0; i < n; i++) gpu |= all[idx[i]].pl.device == DT_DEVICE_CUDA;
    const unsigned long long need = gpu ? DOC_SHM_GPU_NODE : (unsigned long long)n * DOC_SHM_PER_RANK;
    if (s->shm_free >= need) {
        doc_append(ok, okn, "%s%s %.0f MiB free", ok[0] ? ", " : "", lead->pl.hostname, (double)s->shm_free / MIB);
        return;
    }
    char fix[DOC_TEXT];
    snprintf(fix, sizeof fix,
             "give /dev/shm at least %.0f MiB: docker --shm-size=%s (or --ipc=host), `mount -o remount,size=%s "
             "/dev/shm` (root), or remove stale files there",
             need / MIB + 1, gpu ? "1g" : "256m", gpu ? "1G" : "256M");
    doc_add_ranks(job, idx, n, "node.shm", DOC_WARN, fix,
                  "node %s: /dev/shm has %.1f MiB free of %.1f MiB, below the %.0f MiB its %d ranks need (%s): "
                  "%s falls back to slower transports or fails",
                  lead->pl.hostname, (double)s->shm_free / MIB, (double)s->shm_total / MIB, need / MIB, n,
                  gpu ? "NCCL's advice for a GPU node: 1 GiB" : "Open MPI's 4 MiB segment per local rank",
                  gpu ? "NCCL" : "Open MPI");
    *bad = 1;
}

/* The ranks of a node in one cgroup with a quota share it: their BLAS threads against it. */
static void check_quota(const doctor_facts *all, const int *idx, int n, doc_list *job, int *bad)
{
    int *grp = calloc((size_t)n, sizeof *grp);
    if (!grp) {
        job->nomem = 1;
        return;
    }
    for (int i = 0; i < n; i++) {
        const doctor_node_facts *q = &all[idx[i]].host.node;
        if (q->quota_cpus <= 0) continue;
        int seen_before = 0;
        for (int j = 0; j < i && !seen_before; j++)
            seen_before = !strcmp(all[idx[j]].host.node.quota_file, q->quota_file);
        if (seen_before) continue;
        int g = 0, threads = 0;
        for (int j = i; j < n; j++)
            if (!strcmp(all[idx[j]].host.node.quota_file, q->quota_file)) {
                grp[g++] = idx[j];
                threads += all[idx[j]].pl.blas_threads > 0 ? all[idx[j]].pl.blas_threads : 1;
            }
        if (q->quota_cpus + 1e-6 >= threads) continue;
        char fix[DOC_TEXT];
        snprintf(fix, sizeof fix,
                 "raise the quota to %d CPUs or more (docker --cpus=%d, systemd CPUQuota=%d00%%, the site's "
                 "cgroup settings), or start fewer ranks / fewer --blas-threads on this node",
                 threads, threads, threads);
        doc_add_ranks(job, grp, g, "cpu.quota", DOC_WARN, fix,
                      "node %s: the cgroup CPU quota %s allows %.2f CPUs, but its %d rank%s run %d BLAS thread%s: "
                      "the kernel throttles them (a step takes several times longer)",
                      all[idx[0]].pl.hostname, q->quota_file, q->quota_cpus, g, g == 1 ? "" : "s", threads,
                      threads == 1 ? "" : "s");
        *bad = 1;
    }
    free(grp);
}

void doctor_node_check_job(const doctor_facts *all, int world, doc_list *job)
{
    int *idx = calloc((size_t)world, sizeof *idx);
    if (!idx) {
        job->nomem = 1;
        return;
    }
    int shm_bad = 0, quota_bad = 0, unread = 0, single = 1;
    char ok[DOC_TEXT] = "";
    for (int nd = 0; nd < all[0].pl.num_nodes; nd++) {
        int n = 0;
        for (int r = 0; r < world; r++)
            if (all[r].pl.node == nd) idx[n++] = r;
        if (!n) continue;
        single &= n < 2;
        unread |= n > 1 && !all[idx[0]].host.node.shm_ok;
        check_shm(all, idx, n, job, &shm_bad, ok, sizeof ok);
        check_quota(all, idx, n, job, &quota_bad);
    }
    free(idx);
    if (!shm_bad) {
        if (single)
            doc_add(job, "node.shm", DOC_SKIP, NULL, "no node runs 2 or more ranks: no shared-memory transport");
        else if (unread && !ok[0])
            doc_add(job, "node.shm", DOC_WARN, "mount a tmpfs at /dev/shm (docker: --shm-size=256m)",
                    "/dev/shm cannot be read: Open MPI and NCCL put their shared-memory segments there");
        else
            doc_add(job, "node.shm", DOC_PASS, NULL, "enough /dev/shm for the local ranks (%s)", ok);
    }
    if (!quota_bad) {
        double q = 0;
        for (int r = 0; r < world; r++)
            if (all[r].host.node.quota_cpus > 0 && (q <= 0 || all[r].host.node.quota_cpus < q))
                q = all[r].host.node.quota_cpus;
        if (q > 0)
            doc_add(job, "cpu.quota", DOC_PASS, NULL,
                    "the tightest cgroup CPU quota (%.2f CPUs) covers the BLAS threads of its ranks", q);
        else
            doc_add(job, "cpu.quota", DOC_PASS, NULL, "no cgroup CPU quota on the ranks (cpu.max, cpu.cfs_quota_us)");
    }
}
