/*
 * mem_limit.c - the process's own memory limits (mem_limit.h). Read at each call: they are asked
 * for only when something already failed, and a program may change its soft limit meanwhile.
 */
#include "base/mem_limit.h"

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

/* The "VmSize:" or "VmData:" line of /proc/self/status in bytes, or 0. */
static size_t status_kib(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kib = 0;
    const size_t k = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, k) == 0) {
            if (sscanf(line + k, "%llu", &kib) != 1) kib = 0;
            break;
        }
    fclose(f);
    return (size_t)kib * 1024;
}

int mem_limit_get(mem_limit *out)
{
    memset(out, 0, sizeof *out);
    const struct {
        int res;
        char flag;
        const char *name, *key;
    } lim[] = {{RLIMIT_AS, 'v', "RLIMIT_AS", "VmSize:"}, {RLIMIT_DATA, 'd', "RLIMIT_DATA", "VmData:"}};
    int found = 0;
    for (size_t i = 0; i < sizeof lim / sizeof *lim; i++) {
        struct rlimit r;
        if (getrlimit(lim[i].res, &r) != 0 || r.rlim_cur == RLIM_INFINITY) continue;
        const mem_limit m = {lim[i].flag, lim[i].name, (size_t)r.rlim_cur, status_kib(lim[i].key)};
        const size_t room = m.bytes > m.used ? m.bytes - m.used : 0;
        const size_t best = out->bytes > out->used ? out->bytes - out->used : 0;
        if (!found || room < best) *out = m;
        found = 1;
    }
    return found;
}

const char *mem_limit_text(char *buf, size_t n)
{
    mem_limit m;
    if (n) buf[0] = '\0';
    if (!n || !mem_limit_get(&m)) return buf;
    const char *what = m.flag == 'v' ? "the address space" : "the data mappings";
    if (m.used)
        snprintf(buf, n, " under ulimit -%c %zu KiB (%s, %s; %zu KiB of it in use)", m.flag, m.bytes / 1024, m.name,
                 what, m.used / 1024);
    else
        snprintf(buf, n, " under ulimit -%c %zu KiB (%s, %s)", m.flag, m.bytes / 1024, m.name, what);
    return buf;
}
