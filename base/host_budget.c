/*
 * host_budget.c - the host memory one rank may plan to use (host_budget.h). Read at each call: the
 * cgroup's use and the rlimit change while the process runs.
 */
#include "base/host_budget.h"

#include "base/cgroup.h"
#include "base/mem_limit.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Limits at or above this are v1's "unlimited" (PAGE_COUNTER_MAX pages, about 2^63 bytes). */
#define CG_UNLIMITED ((unsigned long long)1 << 62)

const char *host_budget_bytes(size_t b, char *out, size_t n)
{
    const double v = (double)b;
    if (b >= (size_t)1 << 30)
        snprintf(out, n, "%.1f GiB", v / (1 << 30));
    else if (b >= (size_t)1 << 20)
        snprintf(out, n, "%.1f MiB", v / (1 << 20));
    else if (b >= 1024)
        snprintf(out, n, "%.1f KiB", v / 1024);
    else
        snprintf(out, n, "%zu B", b);
    return out;
}

/* The first line of dir/name into buf; 0, or -1 when it cannot be read. */
static int read_line(const char *dir, const char *name, char *buf, size_t n)
{
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path) return -1;
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    const int ok = fgets(buf, (int)n, f) != NULL;
    fclose(f);
    if (!ok) return -1;
    buf[strcspn(buf, "\r\n")] = '\0';
    return 0;
}

/* dir/name as a decimal (1) or "max" (0: no limit); -1 when absent or neither. */
static int read_value(const char *dir, const char *name, unsigned long long *v)
{
    char buf[64], *end;
    if (read_line(dir, name, buf, sizeof buf)) return -1;
    if (!strcmp(buf, "max")) return 0;
    if (buf[0] < '0' || buf[0] > '9') return -1;
    *v = strtoull(buf, &end, 10);
    return *end ? -1 : 1;
}

/* The value of "key N" in dir/memory.stat, or 0. */
static unsigned long long stat_value(const char *dir, const char *key)
{
    char path[4096], line[256];
    if ((size_t)snprintf(path, sizeof path, "%s/memory.stat", dir) >= sizeof path) return 0;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    unsigned long long v = 0;
    const size_t k = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, k) && line[k] == ' ') {
            v = strtoull(line + k + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

/* The tightest memory cgroup among this process's and its ancestors: its limit, room, directory
 * and file names; found = 0 while no limit is set anywhere. */
typedef struct cg_tight {
    int found;
    size_t limit, left;
    char dir[4096];
    const char *max_name;
} cg_tight;

static int visit_memory(const char *dir, int version, void *arg)
{
    cg_tight *t = arg;
    const char *max_name = version == 1 ? "memory.limit_in_bytes" : "memory.max";
    const char *cur_name = version == 1 ? "memory.usage_in_bytes" : "memory.current";
    unsigned long long lim, cur;
    if (read_value(dir, max_name, &lim) == 1 && lim < CG_UNLIMITED && read_value(dir, cur_name, &cur) == 1) {
        /* The kernel reclaims inactive file cache before it kills: it is room, not use. */
        const unsigned long long cache = stat_value(dir, version == 1 ? "total_inactive_file" : "inactive_file");
        const unsigned long long used = cache < cur ? cur - cache : cur;
        const size_t left = lim > used ? (size_t)(lim - used) : 0;
        if (!t->found || left < t->left) {
            t->limit = (size_t)lim, t->left = left, t->max_name = max_name;
            snprintf(t->dir, sizeof t->dir, "%.4000s", dir);
            t->found = 1;
        }
    }
    return 0;
}

void host_budget_get(host_budget *out, size_t avail, int ranks, const char *root)
{
    memset(out, 0, sizeof *out);
    out->cgroup_left = SIZE_MAX;
    if (ranks < 1) ranks = 1;
    if (!root) root = getenv("DTRAIN_TEST_CGROUP_ROOT");
    if (!root) root = "";
    char a[24], b[24], shared[48] = "";
    if (ranks > 1) snprintf(shared, sizeof shared, ", shared by %d ranks", ranks);
    if (avail) {
        out->kind = HOST_BUDGET_MEMAVAILABLE;
        out->bytes = avail / (size_t)ranks;
        snprintf(out->source, sizeof out->source, "MemAvailable %s%s", host_budget_bytes(avail, a, sizeof a), shared);
    }
    char proc_cgroup[4096], fs_root[4096];
    snprintf(proc_cgroup, sizeof proc_cgroup, "%.4000s/proc/self/cgroup", root);
    snprintf(fs_root, sizeof fs_root, "%.4000s/sys/fs/cgroup", root);
    cg_tight cg = {0};
    cgroup_walk(proc_cgroup, fs_root, "memory", visit_memory, &cg);
    if (cg.found) {
        out->cgroup_left = cg.left;
        if (out->kind == HOST_BUDGET_NONE || cg.left / (size_t)ranks < out->bytes) {
            out->kind = HOST_BUDGET_CGROUP;
            out->bytes = cg.left / (size_t)ranks;
            out->enforced = 1;
            snprintf(out->source, sizeof out->source, "cgroup %s %s (%.200s): %s left%s", cg.max_name,
                     host_budget_bytes(cg.limit, a, sizeof a), cg.dir, host_budget_bytes(cg.left, b, sizeof b), shared);
        }
    }
    mem_limit lim;
    if (mem_limit_get(&lim)) { /* per process: not shared */
        const size_t left = lim.bytes > lim.used ? lim.bytes - lim.used : 0;
        if (out->kind == HOST_BUDGET_NONE || left < out->bytes) {
            out->kind = HOST_BUDGET_RLIMIT;
            out->bytes = left;
            out->enforced = 1;
            snprintf(out->source, sizeof out->source, "ulimit -%c %zu KiB (%s, %s): %s left", lim.flag,
                     lim.bytes / 1024, lim.name, lim.flag == 'v' ? "the address space" : "the data mappings",
                     host_budget_bytes(left, a, sizeof a));
        }
    }
}
