/*
 * host_budget.c - the host memory one rank may plan to use (host_budget.h). Read at each call: the
 * cgroup's use and the rlimit change while the process runs.
 */
#include "base/host_budget.h"

#include "base/mem_limit.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The memory controller's mount (v1: .../memory, v2: the unified root) and this process's cgroup
 * under it, from proc/self/cgroup; 1 = v1, 2 = v2, 0 = none found. */
static int find_cgroup(const char *root, char *mount, size_t mn, char *rel, size_t rn)
{
    char path[4096], line[4096];
    snprintf(path, sizeof path, "%s/proc/self/cgroup", root);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int version = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c2 = '\0';
        const char *ctrls = c1 + 1, *cg = c2 + 1;
        int v1 = 0;
        for (const char *p = ctrls; *p;) { /* "memory" among "a,b,memory" */
            const size_t len = strcspn(p, ",");
            if (len == 6 && !strncmp(p, "memory", 6)) v1 = 1;
            p += len + (p[len] == ',');
        }
        if (v1) { /* a v1 memory controller wins over the unified line of a hybrid setup */
            snprintf(mount, mn, "%s/sys/fs/cgroup/memory", root);
            snprintf(rel, rn, "%s", cg);
            version = 1;
            break;
        }
        if (c1 == line + 1 && line[0] == '0' && !*ctrls) {
            snprintf(mount, mn, "%s/sys/fs/cgroup", root);
            snprintf(rel, rn, "%s", cg);
            version = 2;
        }
    }
    fclose(f);
    return version;
}

/* The tightest memory cgroup among this process's and its ancestors: its limit, room, directory
 * and file names. 0 when no limit is set anywhere. */
typedef struct cg_tight {
    size_t limit, left;
    char dir[4096];
    const char *max_name;
} cg_tight;

static int cgroup_tightest(const char *root, cg_tight *t)
{
    char mount[4096], rel[4096], dir[8192];
    const int v = find_cgroup(root, mount, sizeof mount, rel, sizeof rel);
    if (!v) return 0;
    /* Without a cgroup namespace a container sees its host's path for a cgroup mounted as its root:
     * drop leading parts until the directory exists (the mount itself at the least). */
    const char *r = rel;
    for (;;) {
        snprintf(dir, sizeof dir, "%s%s", mount, r);
        if (is_dir(dir) || !*r) break;
        const char *next = strchr(r + 1, '/');
        r = next ? next : "";
    }
    const char *max_name = v == 1 ? "memory.limit_in_bytes" : "memory.max";
    const char *cur_name = v == 1 ? "memory.usage_in_bytes" : "memory.current";
    const char *inactive = v == 1 ? "total_inactive_file" : "inactive_file";
    int found = 0;
    const size_t mlen = strlen(mount);
    for (;;) {
        unsigned long long lim, cur;
        if (read_value(dir, max_name, &lim) == 1 && lim < CG_UNLIMITED && read_value(dir, cur_name, &cur) == 1) {
            /* The kernel reclaims inactive file cache before it kills: it is room, not use. */
            const unsigned long long cache = stat_value(dir, inactive);
            const unsigned long long used = cache < cur ? cur - cache : cur;
            const size_t left = lim > used ? (size_t)(lim - used) : 0;
            if (!found || left < t->left) {
                t->limit = (size_t)lim, t->left = left, t->max_name = max_name;
                snprintf(t->dir, sizeof t->dir, "%.4000s", dir);
                found = 1;
            }
        }
        char *slash = strrchr(dir, '/');
        if (strlen(dir) <= mlen || !slash || (size_t)(slash - dir) < mlen) break;
        *slash = '\0';
    }
    return found;
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
    cg_tight cg;
    if (cgroup_tightest(root, &cg)) {
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
