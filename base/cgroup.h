/*
 * cgroup.h - this process's cgroup for one controller, walked from it up to the controller's mount:
 * the one reader of /proc/self/cgroup that the host memory budget (the memory controller,
 * host_budget.c) and doctor's cpu.quota row (the cpu controller) share.
 */
#ifndef DT_BASE_CGROUP_H
#define DT_BASE_CGROUP_H

/* Called for each cgroup directory of the walk; version is 1 (v1) or 2 (v2, the unified tree).
 * Returning nonzero ends the walk. */
typedef int (*cgroup_visit_fn)(const char *dir, int version, void *arg);

/* Finds this process's cgroup for controller ctrl (a v1 name: "memory", "cpu") in proc_cgroup (the
 * real one: /proc/self/cgroup) and calls visit for each directory from it up to the controller's
 * mount under fs_root (the real one: /sys/fs/cgroup), innermost first, the mount included.
 * A v1 line that names ctrl among its controllers ("4:cpu,cpuacct:/job") wins over the unified
 * "0::/path" line of a hybrid machine; its mount is fs_root/ctrl, or fs_root/<the line's controller
 * list> where that link is missing. Directories that do not exist are skipped: a container sees
 * its host's path for the cgroup mounted as its own root, and a step's cgroup may be gone while its
 * job's is there. Returns the version walked (1 or 2), or 0 when proc_cgroup cannot be read or
 * names neither; never fails otherwise. */
int cgroup_walk(const char *proc_cgroup, const char *fs_root, const char *ctrl, cgroup_visit_fn visit, void *arg);

#endif
