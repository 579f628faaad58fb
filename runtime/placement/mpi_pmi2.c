/*
 * mpi_pmi2.c - see mpi_pmi2.h. Open MPI 4 talks PMI-1/PMI-2 through its pmix framework's s1 and s2
 * components, built only with --with-pmi; they are files mca_pmix_s1.so / mca_pmix_s2.so in the
 * component directory beside libmpi (lib/openmpi, Debian's lib/openmpi3). Found through the
 * library's own path (dladdr), so the Open MPI this process loaded is the one asked.
 */
#include "runtime/placement/mpi_pmi2.h"
#include "base/path.h"

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Looks in dir for mca_pmix_*.so, and below it in folders named openmpi* or lib (upstream's
 * lib/openmpi, Debian's lib/x86_64-linux-gnu/openmpi/lib/openmpi3) down to depth more: sets *any
 * when one is there, *pmi2 when s1 or s2 is, and lists their kinds in list (n bytes). */
static void scan_components(const char *dir, int depth, int *any, int *pmi2, char *list, size_t n)
{
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        const char *name = e->d_name;
        const size_t len = strlen(name);
        if (depth > 0 && (!strncmp(name, "openmpi", 7) || !strcmp(name, "lib"))) {
            char sub[PATH_MAX];
            if (snprintf(sub, sizeof sub, "%s/%s", dir, name) < (int)sizeof sub)
                scan_components(sub, depth - 1, any, pmi2, list, n);
            continue;
        }
        if (strncmp(name, "mca_pmix_", 9) != 0 || len < 13 || strcmp(name + len - 3, ".so") != 0) continue;
        *any = 1;
        const int kind_len = (int)(len - 12);
        if (kind_len == 2 && (!strncmp(name + 9, "s1", 2) || !strncmp(name + 9, "s2", 2))) *pmi2 = 1;
        const size_t at = strlen(list);
        snprintf(list + at, n - at, "%s%.*s", at ? ", " : "", kind_len, name + 9);
    }
    closedir(d);
}

int mpi_lacks_pmi2(char *why, size_t n)
{
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0, major = 0;
    MPI_Get_library_version(version, &len); /* allowed before MPI_Init */
    if (sscanf(version, "Open MPI v%d", &major) != 1) return 0;
    if (major >= 5) {
        snprintf(why, n, "Open MPI %d starts under srun only through PMIx", major);
        return 1;
    }
    Dl_info info;
    if (!dladdr((void *)MPI_Get_library_version, &info) || !info.dli_fname) return 0;
    /* The file itself: the loader's name may be a link in the system's library directory. */
    char lib[PATH_MAX], lib_dir[PATH_MAX], list[256] = "";
    if (!realpath(info.dli_fname, lib)) return 0;
    path_parent_dir(lib, lib_dir, sizeof lib_dir);
    int any = 0, pmi2 = 0;
    scan_components(lib_dir, 3, &any, &pmi2, list, sizeof list);
    if (!any || pmi2) return 0; /* components built in, or PMI-2 there */
    snprintf(why, n, "this MPI (%.*s) was built without PMI-2: its pmix components under %s are %s, with no s1 or s2",
             (int)strcspn(version, ","), version, lib_dir, list);
    return 1;
}
