/*
 * test_host_budget.c - base/host_budget.c: the host memory a rank may plan to use, over faked
 * /proc/self/cgroup and /sys/fs/cgroup trees (v2, v1, nested, "max", v1's "unlimited", a container
 * that sees its host's path, the inactive file cache), a real ulimit -v, and where the process may
 * write cgroups (root), a real memory cgroup it moves into.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/host_budget.h"
#include "tmp_dir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define GiB ((size_t)1 << 30)
#define MiB ((size_t)1 << 20)

static char root[256];

/* root/rel made (with its parents) and text written into it. */
static void put(const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    for (char *p = path + strlen(root) + 1; (p = strchr(p, '/')); p++) {
        *p = '\0';
        mkdir(path, 0755);
        *p = '/';
    }
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void fresh(void)
{
    assert_int_equal(tmp_dir_remove(root), 0);
    assert_int_equal(tmp_dir_make(root, sizeof root, "test_host_budget"), 0);
}

/* A v2 job cgroup of 1 GiB (300 MiB used, 100 MiB of it inactive file cache) with a step under it of
 * no limit ("max"); two ranks share it. MemAvailable much larger: the cgroup decides. */
static void test_v2_nested(void **st)
{
    (void)st;
    fresh();
    put("proc/self/cgroup", "0::/job/step\n");
    put("sys/fs/cgroup/job/memory.max", "1073741824\n");
    put("sys/fs/cgroup/job/memory.current", "314572800\n");
    put("sys/fs/cgroup/job/memory.stat", "anon 209715200\nfile 104857600\ninactive_file 104857600\n");
    put("sys/fs/cgroup/job/step/memory.max", "max\n");
    put("sys/fs/cgroup/job/step/memory.current", "314572800\n");
    host_budget b;
    host_budget_get(&b, 64 * GiB, 2, root);
    assert_int_equal(b.kind, HOST_BUDGET_CGROUP);
    assert_true(b.enforced);
    assert_int_equal(b.cgroup_left, GiB - 200 * MiB);
    assert_int_equal(b.bytes, (GiB - 200 * MiB) / 2);
    assert_non_null(strstr(b.source, "cgroup memory.max 1.0 GiB ("));
    assert_non_null(strstr(b.source, "/sys/fs/cgroup/job): 824.0 MiB left, shared by 2 ranks"));
    /* A tighter step below it decides instead; a MemAvailable smaller still decides over both. */
    put("sys/fs/cgroup/job/step/memory.max", "524288000\n");
    host_budget_get(&b, 64 * GiB, 1, root);
    assert_int_equal(b.bytes, 500 * MiB - 300 * MiB);
    assert_non_null(strstr(b.source, "/sys/fs/cgroup/job/step): 200.0 MiB left"));
    host_budget_get(&b, 100 * MiB, 1, root);
    assert_int_equal(b.kind, HOST_BUDGET_MEMAVAILABLE);
    assert_false(b.enforced);
    assert_int_equal(b.bytes, 100 * MiB);
    assert_string_equal(b.source, "MemAvailable 100.0 MiB");
    /* Over its limit (usage above max): no room, not a wrap-around. */
    put("sys/fs/cgroup/job/step/memory.current", "600000000\n");
    host_budget_get(&b, 64 * GiB, 1, root);
    assert_int_equal(b.bytes, 0);
}

/* v1 (a hybrid machine: the memory controller's line wins over the unified one), its "unlimited",
 * and a container that sees its host's path for the cgroup mounted as its root. */
static void test_v1(void **st)
{
    (void)st;
    fresh();
    put("proc/self/cgroup", "5:cpu,cpuacct:/slurm\n4:memory:/slurm/uid_0/job_7\n0::/slurm\n");
    put("sys/fs/cgroup/memory/slurm/uid_0/job_7/memory.limit_in_bytes", "2147483648\n");
    put("sys/fs/cgroup/memory/slurm/uid_0/job_7/memory.usage_in_bytes", "1073741824\n");
    put("sys/fs/cgroup/memory/slurm/uid_0/job_7/memory.stat", "cache 5\ntotal_inactive_file 536870912\n");
    put("sys/fs/cgroup/memory/slurm/memory.limit_in_bytes", "9223372036854771712\n");
    put("sys/fs/cgroup/memory/slurm/memory.usage_in_bytes", "1073741824\n");
    put("sys/fs/cgroup/memory.max", "1\n"); /* the unified tree: not the memory controller here */
    host_budget b;
    host_budget_get(&b, 64 * GiB, 1, root);
    assert_int_equal(b.kind, HOST_BUDGET_CGROUP);
    assert_int_equal(b.bytes, GiB + 512 * MiB);
    assert_non_null(strstr(b.source, "cgroup memory.limit_in_bytes 2.0 GiB ("));
    assert_non_null(strstr(b.source, "/sys/fs/cgroup/memory/slurm/uid_0/job_7): 1.5 GiB left"));
    /* Unlimited everywhere: MemAvailable decides, the cgroup has no room figure. */
    put("sys/fs/cgroup/memory/slurm/uid_0/job_7/memory.limit_in_bytes", "9223372036854771712\n");
    host_budget_get(&b, 8 * GiB, 4, root);
    assert_int_equal(b.kind, HOST_BUDGET_MEMAVAILABLE);
    assert_int_equal(b.bytes, 2 * GiB);
    assert_int_equal(b.cgroup_left, SIZE_MAX);
    assert_string_equal(b.source, "MemAvailable 8.0 GiB, shared by 4 ranks");
    /* The container's view: /proc says the host's path, the mount is the container's cgroup. */
    fresh();
    put("proc/self/cgroup", "4:memory:/docker/abc\n");
    put("sys/fs/cgroup/memory/memory.limit_in_bytes", "1073741824\n");
    put("sys/fs/cgroup/memory/memory.usage_in_bytes", "0\n");
    host_budget_get(&b, 64 * GiB, 1, root);
    assert_int_equal(b.kind, HOST_BUDGET_CGROUP);
    assert_int_equal(b.bytes, GiB);
    /* Nothing readable: MemAvailable alone; nothing at all: no budget. */
    fresh();
    host_budget_get(&b, 3 * GiB, 1, root);
    assert_int_equal(b.kind, HOST_BUDGET_MEMAVAILABLE);
    host_budget_get(&b, 0, 1, root);
    assert_int_equal(b.kind, HOST_BUDGET_NONE);
    assert_int_equal(b.bytes, 0);
}

/* ulimit -v: per process (not shared by the ranks), named with its flag and size. */
static void test_rlimit(void **st)
{
    (void)st;
    fresh();
    struct rlimit old, r;
    assert_int_equal(getrlimit(RLIMIT_AS, &old), 0);
    /* What this process maps now plus 256 MiB: tighter than any cgroup or MemAvailable below. */
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long vm = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %llu", &vm) == 1) break;
    if (f) fclose(f);
    assert_true(vm > 0);
    r = old;
    r.rlim_cur = (rlim_t)(vm * 1024 + 256 * MiB);
    if (old.rlim_max != RLIM_INFINITY && r.rlim_cur > old.rlim_max) skip();
    assert_int_equal(setrlimit(RLIMIT_AS, &r), 0);
    host_budget b;
    host_budget_get(&b, 64 * GiB, 2, root);
    assert_int_equal(setrlimit(RLIMIT_AS, &old), 0);
    assert_int_equal(b.kind, HOST_BUDGET_RLIMIT);
    assert_true(b.enforced);
    assert_true(b.bytes > 200 * MiB && b.bytes <= 256 * MiB);
    char want[96];
    snprintf(want, sizeof want,
             "ulimit -v %llu KiB (RLIMIT_AS, the address space): ", (unsigned long long)r.rlim_cur / 1024);
    assert_non_null(strstr(b.source, want));
}

/* A real memory cgroup (v1 or v2) of 1 GiB this process moves into: needs root and a writable
 * cgroup tree, skipped elsewhere. The process moves back to its cgroup before the next test. */
static void test_real_cgroup(void **st)
{
    (void)st;
    char line[512], dir[640] = "", back[600] = "", max_name[32] = "";
    FILE *f = fopen("/proc/self/cgroup", "r");
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (strstr(line, ":memory:")) {
            snprintf(back, sizeof back, "/sys/fs/cgroup/memory%s", strstr(line, ":memory:") + 8);
            snprintf(max_name, sizeof max_name, "memory.limit_in_bytes");
            break;
        }
        if (!strncmp(line, "0::", 3)) {
            snprintf(back, sizeof back, "/sys/fs/cgroup%s", line + 3);
            snprintf(max_name, sizeof max_name, "memory.max");
        }
    }
    if (f) fclose(f);
    if (geteuid() != 0 || !back[0]) skip();
    if (back[strlen(back) - 1] == '/') back[strlen(back) - 1] = '\0'; /* the root cgroup: "/" */
    snprintf(dir, sizeof dir, "%.560s/dtrain_test_%d", back, (int)getpid());
    if (mkdir(dir, 0755)) skip();
    char path[720];
    snprintf(path, sizeof path, "%s/%s", dir, max_name);
    FILE *w = fopen(path, "w");
    int ok = w && fprintf(w, "1073741824\n") > 0;
    if (w) ok = fclose(w) == 0 && ok;
    snprintf(path, sizeof path, "%s/cgroup.procs", dir);
    if (ok && (w = fopen(path, "w"))) {
        ok = fprintf(w, "%d\n", (int)getpid()) > 0;
        ok = fclose(w) == 0 && ok;
    } else
        ok = 0;
    host_budget b;
    if (ok) host_budget_get(&b, 64 * GiB, 1, NULL);
    snprintf(path, sizeof path, "%s/cgroup.procs", back);
    if ((w = fopen(path, "w"))) {
        fprintf(w, "%d\n", (int)getpid());
        fclose(w);
    }
    rmdir(dir);
    if (!ok) skip(); /* v2 without the memory controller delegated there, a read-only tree */
    assert_int_equal(b.kind, HOST_BUDGET_CGROUP);
    assert_true(b.bytes > 0 && b.bytes <= GiB);
    assert_non_null(strstr(b.source, dir));
}

static int cleanup(void **st)
{
    (void)st;
    return tmp_dir_remove(root);
}

int main(void)
{
    unsetenv("DTRAIN_TEST_CGROUP_ROOT");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v2_nested),
        cmocka_unit_test(test_v1),
        cmocka_unit_test(test_rlimit),
        cmocka_unit_test(test_real_cgroup),
    };
    return cmocka_run_group_tests(tests, NULL, cleanup);
}
