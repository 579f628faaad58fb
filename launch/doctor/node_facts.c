/*
 * node_facts.c - what one rank reads about its node's resources for `dtrain doctor`: free space
 * of /dev/shm (where Open MPI's vader BTL and NCCL put their segments), the tightest cgroup CPU
 * quota over the process's cgroups and their ancestors, the resource limits that bite (open
 * files, locked memory, stack) and whether RDMA devices are present. The verdicts are in
 * node_checks.c.
 */
#include "launch/doctor/doctor.h"

#include "base/cgroup.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statvfs.h>

/* Reads the first line of path into buf; 0 on success. */
static int read_line(const char *path, char *buf, size_t n)
{
    FILE *fp = fopen(path, "r");
    if (!fp) return -1;
    const int ok = fgets(buf, (int)n, fp) != NULL;
    fclose(fp);
    return ok ? 0 : -1;
}

/* The quota of one cgroup directory, in CPUs; 0 for none (or unreadable). file gets the file. */
static double dir_quota(const char *dir, int v2, char *file, size_t n)
{
    char path[512], line[128];
    if (v2) {
        snprintf(path, sizeof path, "%.480s/cpu.max", dir);
        if (read_line(path, line, sizeof line)) return 0;
        char q[32] = "";
        unsigned long long period = 0;
        if (sscanf(line, "%31s %llu", q, &period) != 2 || !strcmp(q, "max") || !period) return 0;
        const double quota = strtod(q, NULL);
        snprintf(file, n, "%.120s = %.30s", path, strtok(line, "\n"));
        return quota > 0 ? quota / (double)period : 0;
    }
    char ppath[512], pline[64];
    snprintf(path, sizeof path, "%.480s/cpu.cfs_quota_us", dir);
    snprintf(ppath, sizeof ppath, "%.480s/cpu.cfs_period_us", dir);
    if (read_line(path, line, sizeof line) || read_line(ppath, pline, sizeof pline)) return 0;
    const long long quota = strtoll(line, NULL, 10), period = strtoll(pline, NULL, 10);
    if (quota <= 0 || period <= 0) return 0; /* -1: no quota */
    snprintf(file, n, "%.100s = %lld (period %lld)", path, quota, period);
    return (double)quota / (double)period;
}

/* Keeps the tightest quota of the walk's directories. */
static int visit_cpu(const char *dir, int version, void *arg)
{
    doctor_node_facts *f = arg;
    char file[sizeof f->quota_file];
    const double q = dir_quota(dir, version == 2, file, sizeof file);
    if (q > 0 && (f->quota_cpus <= 0 || q < f->quota_cpus)) {
        f->quota_cpus = q;
        snprintf(f->quota_file, sizeof f->quota_file, "%s", file);
    }
    return 0;
}

void doctor_cpu_quota_read(const char *proc_cgroup, const char *root, doctor_node_facts *f)
{
    f->quota_cpus = 0;
    f->quota_file[0] = '\0';
    cgroup_walk(proc_cgroup, root, "cpu", visit_cpu, f);
}

static unsigned long long limit_of(int resource)
{
    struct rlimit rl;
    if (getrlimit(resource, &rl)) return 0;
    return rl.rlim_cur == RLIM_INFINITY ? DOC_UNLIMITED : (unsigned long long)rl.rlim_cur;
}

void doctor_node_collect(doctor_node_facts *f)
{
    memset(f, 0, sizeof *f);
    struct statvfs vfs;
    if (statvfs("/dev/shm", &vfs) == 0) {
        f->shm_ok = 1;
        f->shm_total = (unsigned long long)vfs.f_blocks * vfs.f_frsize;
        f->shm_free = (unsigned long long)vfs.f_bavail * vfs.f_frsize;
    }
    doctor_cpu_quota_read("/proc/self/cgroup", "/sys/fs/cgroup", f);
    f->nofile = limit_of(RLIMIT_NOFILE);
    f->memlock = limit_of(RLIMIT_MEMLOCK);
    f->stack = limit_of(RLIMIT_STACK);
    DIR *d = opendir("/sys/class/infiniband");
    if (d) {
        for (struct dirent *e; (e = readdir(d));) f->rdma_devices += e->d_name[0] != '.';
        closedir(d);
    }
}
