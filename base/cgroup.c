/*
 * cgroup.c - this process's cgroup for one controller and its ancestors (cgroup.h).
 */
#include "base/cgroup.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* 1 when ctrl is one of the comma-separated names in list ("cpu" in "cpu,cpuacct"). */
static int names_controller(const char *list, const char *ctrl)
{
    const size_t want = strlen(ctrl);
    for (const char *p = list; *p;) {
        const size_t len = strcspn(p, ",");
        if (len == want && !strncmp(p, ctrl, len)) return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

int cgroup_walk(const char *proc_cgroup, const char *fs_root, const char *ctrl, cgroup_visit_fn visit, void *arg)
{
    FILE *f = fopen(proc_cgroup, "r");
    if (!f) return 0;
    char line[4096], mount[4096] = "", rel[4096] = "";
    int version = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c1 = *c2 = '\0';
        const char *ctrls = c1 + 1, *path = c2 + 1;
        if (names_controller(ctrls, ctrl)) { /* v1 wins over the unified line of a hybrid setup */
            snprintf(mount, sizeof mount, "%.2000s/%s", fs_root, ctrl);
            if (!is_dir(mount)) snprintf(mount, sizeof mount, "%.2000s/%.2000s", fs_root, ctrls);
            snprintf(rel, sizeof rel, "%s", path);
            version = 1;
            break;
        }
        if (!strcmp(line, "0") && !*ctrls) {
            snprintf(mount, sizeof mount, "%.4000s", fs_root);
            snprintf(rel, sizeof rel, "%s", path);
            version = 2;
        }
    }
    fclose(f);
    if (!version) return 0;
    char dir[8192];
    snprintf(dir, sizeof dir, "%s%s", mount, strcmp(rel, "/") ? rel : "");
    const size_t mlen = strlen(mount);
    for (;;) {
        if (is_dir(dir) && visit(dir, version, arg)) break;
        char *slash = strrchr(dir, '/');
        if (strlen(dir) <= mlen || !slash || (size_t)(slash - dir) < mlen) break;
        *slash = '\0';
    }
    return version;
}
