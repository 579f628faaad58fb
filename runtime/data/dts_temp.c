/*
 * dts_temp.c - the temporary files dts_write writes a shard under: their name (DIR/.NAME.tmp.PID,
 * beside the target, so the rename that places the shard stays in one filesystem), and the
 * removal of those that a killed convert left behind.
 */
#include "runtime/data/dts.h"
#include "base/log.h"
#include "base/path.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The temporary files of earlier writes of path that were killed (SIGKILL, a node crash: no
 * handler ran): .BASE.tmp.<pid> in path's directory whose process is gone from this host and that
 * nobody has written for DTS_STALE_TEMP_S (a convert on another node sharing the directory has a
 * pid that is not alive here, but it keeps its file fresh). They are removed, and said. */
#define DTS_STALE_TEMP_S 600

/* Whether process pid runs on this host: a zombie (killed, not yet reaped) does not. */
static int process_alive(long pid)
{
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) return 0;
    char p[64], line[256];
    snprintf(p, sizeof p, "/proc/%ld/stat", pid);
    FILE *f = fopen(p, "r");
    if (!f) return 1; /* no /proc: kill's word */
    const int got = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    const char *state = got ? strrchr(line, ')') : NULL; /* "pid (comm) S ..." */
    return !(state && state[1] == ' ' && state[2] == 'Z');
}

void dts_remove_stale_temps(const char *dir, const char *base)
{
    DIR *dh = opendir(dir);
    if (!dh) return;
    char prefix[4200], p[8500];
    const int plen = snprintf(prefix, sizeof prefix, ".%s.tmp.", base);
    const time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(dh)) != NULL) {
        if (plen <= 0 || (size_t)plen >= sizeof prefix || strncmp(e->d_name, prefix, (size_t)plen)) continue;
        char *end;
        const long pid = strtol(e->d_name + plen, &end, 10);
        struct stat sb;
        if (*end || pid <= 0 || pid == (long)getpid() || process_alive(pid) ||
            (size_t)snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= sizeof p || lstat(p, &sb) != 0 ||
            !S_ISREG(sb.st_mode) || now - sb.st_mtime < DTS_STALE_TEMP_S)
            continue;
        if (unlink(p) == 0)
            log_msg(LOG_LEVEL_WARN, "removed %s (%.1f MiB): the temporary file of a convert that was killed", p,
                    (double)sb.st_size / 1048576.0);
    }
    closedir(dh);
}

void dts_temp_path(const char *path, char *out, size_t n)
{
    char dir[4200];
    const char *base = path_parent_dir(path, dir, sizeof dir);
    snprintf(out, n, "%s/.%s.tmp.%d", dir, base, (int)getpid());
}
