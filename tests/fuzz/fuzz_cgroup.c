/*
 * fuzz_cgroup.c - the cgroup files dtrain reads: /proc/self/cgroup and the walk up the controller's
 * tree (cgroup_walk, base/cgroup.c), the memory controller's memory.max / memory.current /
 * memory.stat (v2) and memory.limit_in_bytes / memory.usage_in_bytes (v1) behind the host memory
 * budget (host_budget_get, base/host_budget.c), and the CPU quota doctor reads (cpu.max, v1
 * cpu.cfs_quota_us / cpu.cfs_period_us: doctor_cpu_quota_read, launch/doctor/node_facts.c).
 *
 * Input: a byte for the ranks sharing the node (0..8, below 1 counts as 1), a byte choosing the
 * node's MemAvailable (0: unknown), then a file tree as records "@REL/PATH\n" followed by the file's
 * text up to the next line that starts with '@' (written under a fresh directory of this process's
 * own, in /dev/shm: "@proc/self/cgroup\n0::/job\n@sys/fs/cgroup/job/memory.max\n1073741824\n"). A path keeps only
 * [A-Za-z0-9._,-] names and drops ".", ".." and empty ones, so nothing is written outside the tree.
 * Beyond ASan/UBSan/leaks: the walk visits existing directories only, innermost first, each the
 * parent of the one before, all under the controller's mount, and says the version it walked; the
 * budget's kind, bytes and enforcement agree (a cgroup budget is the room split among the ranks,
 * MemAvailable's is the figure split, no larger than the cgroup's share), the room is no more than
 * any limit a directory it visited holds in plain decimal, and the source is a terminated string;
 * the CPU quota is 0 with no file, or finite and positive with the file that set it.
 */
#include "fuzz_common.h"

#include "base/cgroup.h"
#include "base/host_budget.h"
#include "launch/doctor/doctor.h"

#include <math.h>
#include <stdint.h>
#include <sys/stat.h>

static char base[64], root[128];

/* rel (len bytes) cleaned into out (n bytes) as name/name/...: 0, or -1 when nothing is left. */
static int clean_path(const char *rel, size_t len, char *out, size_t n)
{
    size_t w = 0;
    for (size_t i = 0; i < len;) {
        size_t j = i;
        while (j < len && rel[j] != '/') j++;
        size_t k = 0;
        char name[64];
        for (size_t c = i; c < j && k < sizeof name - 1; c++) {
            const char ch = rel[c];
            if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
                ch == '_' || ch == ',' || ch == '-')
                name[k++] = ch;
        }
        name[k] = '\0';
        i = j + 1;
        if (!k || !strcmp(name, ".") || !strcmp(name, "..")) continue;
        if (w + k + 2 > n) return -1;
        if (w) out[w++] = '/';
        memcpy(out + w, name, k);
        w += k;
    }
    out[w] = '\0';
    return w ? 0 : -1;
}

/* root/rel with its parent directories made; the text written into it (a directory already there
 * of that name stays a directory). */
static void put(const char *rel, const char *text, size_t len)
{
    char path[512];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", root, rel) >= sizeof path) return;
    for (char *p = path + strlen(root) + 1; (p = strchr(p, '/')); p++) {
        *p = '\0';
        mkdir(path, 0700);
        *p = '/';
    }
    FILE *f = fopen(path, "wb");
    if (!f) return;
    if (len) fwrite(text, 1, len, f);
    fclose(f);
}

/* The input's records written under root. */
static void write_tree(const char *s, size_t n)
{
    size_t at = 0;
    while (at < n && s[at] != '@') { /* text before the first record is ignored */
        const char *nl = memchr(s + at, '\n', n - at);
        at = nl ? (size_t)(nl - s) + 1 : n;
    }
    for (int files = 0; at < n && files < 64; files++) {
        const char *nl = memchr(s + at, '\n', n - at);
        const size_t name_end = nl ? (size_t)(nl - s) : n;
        char rel[256];
        const int ok = clean_path(s + at + 1, name_end - at - 1, rel, sizeof rel) == 0;
        size_t body = nl ? name_end + 1 : n, end = body;
        while (end < n && s[end] != '@') {
            const char *e = memchr(s + end, '\n', n - end);
            end = e ? (size_t)(e - s) + 1 : n;
        }
        if (ok) put(rel, s + body, end - body);
        at = end;
    }
}

typedef struct walk_seen {
    char mount[256];
    char last[8192];
    int visits;
    size_t min_limit; /* the least plain-decimal limit below 2^62 of a visited directory */
} walk_seen;

/* The first line of dir/name as a plain decimal below 2^62 (nothing else on the line), else -1. */
static long long plain_value(const char *dir, const char *name)
{
    char path[8400], buf[64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    const size_t r = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[r] = '\0';
    size_t i = 0;
    unsigned long long v = 0;
    for (; i < r && buf[i] >= '0' && buf[i] <= '9' && i < 18; i++) v = v * 10 + (unsigned)(buf[i] - '0');
    if (!i || (i < r && buf[i] != '\n' && buf[i] != '\r') || v >= (1ULL << 62)) return -1;
    return (long long)v;
}

static int visit_check(const char *dir, int version, void *arg)
{
    walk_seen *w = arg;
    struct stat st;
    FUZZ_CHECK(version == 1 || version == 2, "visited %s as version %d", dir, version);
    FUZZ_CHECK(stat(dir, &st) == 0 && S_ISDIR(st.st_mode), "visited %s, which is no directory", dir);
    FUZZ_CHECK(!strncmp(dir, root, strlen(root)), "visited %s, outside the tree %s", dir, root);
    if (w->visits) {
        const size_t len = strlen(dir);
        FUZZ_CHECK(len < strlen(w->last) && !strncmp(w->last, dir, len) && w->last[len] == '/',
                   "visited %s after %s: not an ancestor", dir, w->last);
    }
    snprintf(w->last, sizeof w->last, "%s", dir);
    w->visits++;
    const long long lim = plain_value(dir, version == 1 ? "memory.limit_in_bytes" : "memory.max");
    const long long cur = plain_value(dir, version == 1 ? "memory.usage_in_bytes" : "memory.current");
    if (lim >= 0 && cur >= 0 && (size_t)lim < w->min_limit) w->min_limit = (size_t)lim;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const size_t avails[] = {0, 1, 1000, (size_t)1 << 30, (size_t)64 << 30, SIZE_MAX, 4096, 12345678901};
    if (size < 2) return 0;
    if (!base[0]) {
        /* The tree is made and removed at every input: on tmpfs (/dev/shm) where there is one, since
         * removing directories of a disk file system costs milliseconds each. */
        log_set_level(LOG_LEVEL_ERROR);
        snprintf(base, sizeof base, "/dev/shm/fuzz-cgroup-%d", (int)getpid());
        if (mkdir(base, 0700) && access(base, W_OK)) {
            base[0] = '\0'; /* fuzz_scratch_dir makes only a directory not named yet */
            fuzz_scratch_dir(base, sizeof base, "cgroup");
        } else {
            fuzz_scratch_remove_at_exit(base);
        }
    }
    snprintf(root, sizeof root, "%s/r", base);
    fuzz_remove_tree(root);
    FUZZ_CHECK(mkdir(root, 0700) == 0, "cannot make %s", root);
    const int ranks = data[0] % 10 - 1;
    const size_t avail = avails[data[1] % (sizeof avails / sizeof *avails)];
    write_tree((const char *)data + 2, size - 2);

    char proc[256], fs[256];
    snprintf(proc, sizeof proc, "%s/proc/self/cgroup", root);
    snprintf(fs, sizeof fs, "%s/sys/fs/cgroup", root);
    walk_seen w = {.min_limit = SIZE_MAX};
    const int version = cgroup_walk(proc, fs, "memory", visit_check, &w);
    FUZZ_CHECK(version >= 0 && version <= 2, "cgroup_walk returned %d", version);
    FUZZ_CHECK(version || !w.visits, "cgroup_walk returned 0 after %d visits", w.visits);

    host_budget b;
    host_budget_get(&b, avail, ranks, root);
    const size_t r = ranks < 1 ? 1 : (size_t)ranks;
    FUZZ_CHECK(memchr(b.source, '\0', sizeof b.source), "the source is not terminated");
    FUZZ_CHECK(b.cgroup_left <= w.min_limit, "cgroup room %zu, yet a visited directory's limit is %zu", b.cgroup_left,
               w.min_limit);
    FUZZ_CHECK(b.cgroup_left == SIZE_MAX || version, "cgroup room %zu without a cgroup", b.cgroup_left);
    switch (b.kind) {
        case HOST_BUDGET_NONE:
            FUZZ_CHECK(!avail && b.cgroup_left == SIZE_MAX && !b.bytes && !b.enforced, "no budget, yet %zu B", b.bytes);
            break;
        case HOST_BUDGET_MEMAVAILABLE:
            FUZZ_CHECK(b.bytes == avail / r && !b.enforced, "MemAvailable %zu on %zu ranks gave %zu", avail, r,
                       b.bytes);
            FUZZ_CHECK(b.cgroup_left == SIZE_MAX || b.cgroup_left / r >= b.bytes,
                       "MemAvailable decided over less room");
            break;
        case HOST_BUDGET_CGROUP:
            FUZZ_CHECK(b.cgroup_left != SIZE_MAX && b.bytes == b.cgroup_left / r && b.enforced,
                       "cgroup budget %zu of room %zu on %zu ranks", b.bytes, b.cgroup_left, r);
            FUZZ_CHECK(!avail || b.bytes <= avail / r, "the cgroup decided over a smaller MemAvailable");
            break;
        case HOST_BUDGET_RLIMIT: FUZZ_CHECK(b.enforced, "an rlimit budget not enforced"); break;
        default: FUZZ_CHECK(0, "budget kind %d", (int)b.kind);
    }

    doctor_node_facts f;
    memset(&f, 0, sizeof f);
    doctor_cpu_quota_read(proc, fs, &f);
    FUZZ_CHECK(memchr(f.quota_file, '\0', sizeof f.quota_file), "the quota file is not terminated");
    FUZZ_CHECK(isfinite(f.quota_cpus) && f.quota_cpus >= 0, "CPU quota %g", f.quota_cpus);
    FUZZ_CHECK((f.quota_cpus > 0) == (f.quota_file[0] != '\0'), "CPU quota %g from '%s'", f.quota_cpus, f.quota_file);
    return 0;
}
