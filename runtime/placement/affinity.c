/*
 * affinity.c - CPU placement with hwloc and sched_getaffinity, see affinity.h.
 *
 * The binding is applied to the whole process (every thread: MPI's progress thread and OpenBLAS's
 * pool exist before we run), through hwloc_set_cpubind(HWLOC_CPUBIND_PROCESS).
 */
#include "runtime/placement/affinity.h"
#include "kernels/backend.h"
#include "base/log.h"
#include "base/status.h"

#include <errno.h>
#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void affinity_block(int n, int b, int size, int *first, int *count)
{
    if (size <= 0 || n <= 0 || size > n || b < 0 || b >= size) {
        *first = 0;
        *count = 0;
        return;
    }
    int base = n / size, rem = n % size;
    *first = b * base + (b < rem ? b : rem);
    *count = base + (b < rem ? 1 : 0);
}

void affinity_format(const cpu_set_t *set, char *out, size_t n)
{
    size_t used = 0;
    out[0] = '\0';
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, set)) continue;
        int e = c;
        while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, set)) e++;
        int w = (e == c) ? snprintf(out + used, n - used, "%s%d", used ? "," : "", c)
                         : snprintf(out + used, n - used, "%s%d-%d", used ? "," : "", c, e);
        if (w < 0 || (size_t)w >= n - used) {
            /* Too long for the buffer: end with an ellipsis rather than a cut number. */
            if (n >= 4) strcpy(out + n - 4, "...");
            return;
        }
        used += (size_t)w;
        c = e;
    }
}

dt_status affinity_parse(const char *s, cpu_set_t *out)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    const char *p = s;
    if (!s) return status_set_error(DT_ERR_INVALID_ARG, "cpu list is missing");
    while (*p && *p != '\n') {
        char *end;
        errno = 0;
        long a = strtol(p, &end, 10);
        if (end == p || errno || a < 0 || a >= CPU_SETSIZE) goto bad;
        long b = a;
        p = end;
        if (*p == '-') {
            p++;
            b = strtol(p, &end, 10);
            if (end == p || errno || b < a || b >= CPU_SETSIZE) goto bad;
            p = end;
        }
        for (long c = a; c <= b; c++) CPU_SET((int)c, &set);
        if (*p == ',')
            p++;
        else if (*p && *p != '\n')
            goto bad;
    }
    *out = set;
    return DT_OK;
bad:
    return status_set_error(DT_ERR_INVALID_ARG, "cpu list '%s' is malformed at '%s'", s, p);
}

/* Reads the NUMA-local CPUs of a PCI device; leaves *out untouched and returns 0 when unknown. */
static int affinity_gpu_cpus(const char *bus_id, cpu_set_t *out)
{
    if (!bus_id || !bus_id[0]) return 0;
    char path[256], buf[1024];
    snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/local_cpulist", bus_id);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t r = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[r] = '\0';
    cpu_set_t set;
    if (affinity_parse(buf, &set) != DT_OK) {
        log_msg(LOG_LEVEL_WARN, "ignoring %s: %s", path, dt_last_error());
        return 0;
    }
    *out = set;
    return 1;
}

/* Writes why hwloc's topology is not this machine's (hwloc_topology_is_thissystem is 0): the
 * variable that points hwloc elsewhere, and the fix. On such a topology hwloc_set_cpubind returns
 * success and binds nothing, so dtrain must not claim a binding. */
static void affinity_foreign_why(char *out, size_t n)
{
    static const char *const vars[] = {"HWLOC_XMLFILE", "HWLOC_SYNTHETIC", "HWLOC_FSROOT"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        if (!v || !*v) continue;
        /* A synthetic topology never describes this machine; a file or root may be this machine's. */
        if (i == 1)
            snprintf(out, n, "%s='%.64s%s' is set: hwloc describes a made-up machine. Fix: unset %s", vars[i], v,
                     strlen(v) > 64 ? "..." : "", vars[i]);
        else
            snprintf(out, n,
                     "%s='%.96s%s' is set without HWLOC_THISSYSTEM=1: hwloc takes it for another machine's topology. "
                     "Fix: export HWLOC_THISSYSTEM=1 if it describes this machine, or unset %s",
                     vars[i], v, strlen(v) > 96 ? "..." : "", vars[i]);
        return;
    }
    snprintf(out, n,
             "hwloc does not describe this machine (HWLOC_THISSYSTEM=%s). Fix: export HWLOC_THISSYSTEM=1 or unset the "
             "HWLOC_* variable that loads another topology",
             getenv("HWLOC_THISSYSTEM") ? getenv("HWLOC_THISSYSTEM") : "unset");
}

/* The whole cores of `allowed` in hwloc order, each as its set of CPUs within `allowed`. */
static int affinity_cores(hwloc_topology_t topo, const cpu_set_t *allowed, cpu_set_t *cores, int max)
{
    int n = 0;
    int depth = hwloc_get_type_depth(topo, HWLOC_OBJ_CORE);
    int total = depth < 0 ? 0 : hwloc_get_nbobjs_by_depth(topo, depth);
    for (int i = 0; i < total && n < max; i++) {
        hwloc_obj_t core = hwloc_get_obj_by_depth(topo, depth, i);
        cpu_set_t set;
        CPU_ZERO(&set);
        int pu;
        hwloc_bitmap_foreach_begin(pu, core->cpuset)
        {
            if (pu < CPU_SETSIZE && CPU_ISSET(pu, allowed)) CPU_SET(pu, &set);
        }
        hwloc_bitmap_foreach_end();
        if (CPU_COUNT(&set) > 0) cores[n++] = set;
    }
    if (n == 0) {
        /* hwloc sees no cores (unusual VMs): treat each allowed CPU as a core. */
        for (int c = 0; c < CPU_SETSIZE && n < max; c++)
            if (CPU_ISSET(c, allowed)) {
                CPU_ZERO(&cores[n]);
                CPU_SET(c, &cores[n]);
                n++;
            }
    }
    return n;
}

/* Whether the launcher bound this rank: the local ranks were given different CPU sets, or a lone
 * rank may use fewer CPUs than its cgroup allows. Ranks that were all given the same subset
 * (taskset around mpirun) are still split among themselves. */
static int bound_by_launcher(hwloc_topology_t topo, int foreign, const cpu_set_t *allowed, const cpu_set_t *all_allowed,
                             int lsize)
{
    for (int i = 0; i < lsize; i++)
        if (!CPU_EQUAL(&all_allowed[i], allowed)) return 1;
    if (lsize > 1) return 0;
    if (foreign) {
        /* A foreign topology's CPUs are not this machine's: count the kernel's instead. */
        const long online = sysconf(_SC_NPROCESSORS_ONLN);
        return online > 0 && CPU_COUNT(allowed) < online;
    }
    int fewer = 0, pu;
    hwloc_const_cpuset_t machine = hwloc_topology_get_allowed_cpuset(topo);
    hwloc_bitmap_foreach_begin(pu, machine)
    {
        if (pu < CPU_SETSIZE && !CPU_ISSET(pu, allowed)) fewer = 1;
    }
    hwloc_bitmap_foreach_end();
    return fewer;
}

/* dtrain's own pinning: this rank's block of the whole cores of its candidates, among the local
 * ranks with the same candidates (the same GPU NUMA node), in local-rank order; or no pinning when
 * there are fewer cores than those ranks. Sets *final (what the kernel reports), out->pinned_by,
 * out->shared and why (n bytes). DT_ERR_INTERNAL when the binding fails. */
static dt_status pin_own_block(hwloc_topology_t topo, const cpu_set_t *allowed, const cpu_set_t *cand,
                               const cpu_set_t *all_cand, int lrank, int lsize, cpu_set_t *cores, cpu_set_t *final,
                               affinity_result *out, char *why, size_t n)
{
    int gidx = 0, gsize = 0;
    for (int i = 0; i < lsize; i++)
        if (CPU_EQUAL(&all_cand[i], cand)) {
            if (i < lrank) gidx++;
            gsize++;
        }
    const int ncores = affinity_cores(topo, cand, cores, CPU_SETSIZE);
    if (gsize > ncores) {
        /* Fewer cores than ranks: pinning would stack ranks on cores while others idle, so leave
         * the scheduler to spread them, and say so. */
        out->shared = 1;
        out->pinned_by = DT_PINNED_NONE;
        snprintf(why, n, "not pinned: %d local ranks share %d candidate cores, the scheduler spreads them", gsize,
                 ncores);
        return DT_OK;
    }
    int first, count;
    affinity_block(ncores, gidx, gsize, &first, &count);
    CPU_ZERO(final);
    for (int i = first; i < first + count; i++) CPU_OR(final, final, &cores[i]);
    hwloc_bitmap_t bm = hwloc_bitmap_alloc();
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, final)) hwloc_bitmap_set(bm, (unsigned)c);
    const int rc = hwloc_set_cpubind(topo, bm, HWLOC_CPUBIND_PROCESS);
    hwloc_bitmap_free(bm);
    if (rc != 0)
        return status_set_error(DT_ERR_INTERNAL, "binding to CPUs failed: %s. Fix: run with --pin none",
                                strerror(errno));
    out->pinned_by = DT_PINNED_BY_DTRAIN;
    snprintf(why, n,
             "pinned: cores %d..%d of the %d candidate cores, block %d of the %d local ranks with these candidates",
             first, first + count - 1, ncores, gidx, gsize);
    /* Report what the kernel did, not what was asked: a binding that did not take (hwloc misled
     * about the machine) must not be claimed. */
    cpu_set_t now;
    if (sched_getaffinity(0, sizeof now, &now) == 0 && !CPU_EQUAL(&now, final)) {
        char want[256], got[256];
        affinity_format(final, want, sizeof want);
        affinity_format(&now, got, sizeof got);
        log_msg(LOG_LEVEL_WARN,
                "binding to CPUs %s did not take: the kernel reports CPUs %s, which dtrain reports instead. "
                "Check the HWLOC_* variables, or run with --pin none",
                want, got);
        *final = now;
        if (CPU_EQUAL(&now, allowed)) out->pinned_by = DT_PINNED_NONE;
        snprintf(why, n, "the binding did not take: the kernel's CPUs are reported");
    }
    return DT_OK;
}

/* The BLAS threads of a rank placed on out->cpus: blas_threads when given, else one per core
 * divided among the local ranks whose CPUs overlap this rank's (*sharing of them, itself included:
 * dtrain's own blocks are disjoint, but a launcher's binding or no pinning may give several ranks
 * the same cores, which their BLAS threads then share), 1 where cores are shared. */
static int blas_thread_count(const affinity_result *out, const cpu_set_t *all_allowed, int lsize, int blas_threads,
                             int *sharing)
{
    *sharing = 1;
    if (out->pinned_by != DT_PINNED_BY_DTRAIN) {
        *sharing = 0;
        for (int i = 0; i < lsize; i++) {
            cpu_set_t both;
            CPU_AND(&both, &all_allowed[i], &out->cpus);
            if (CPU_COUNT(&both) > 0) ++*sharing;
        }
        if (*sharing < 1) *sharing = 1;
    }
    int threads = blas_threads > 0 ? blas_threads : out->num_cores / *sharing;
    if (out->shared && blas_threads <= 0) threads = 1;
    if (threads < 1) threads = 1;
    return threads;
}

/* The candidate CPUs into *cand: the allowed ones, narrowed to the GPU's NUMA node when that leaves
 * some; said at debug level. */
static void candidates(const cpu_set_t *allowed, const char *gpu_bus_id, int lrank, int lsize, cpu_set_t *cand)
{
    cpu_set_t gpu;
    *cand = *allowed;
    const int gpu_known = affinity_gpu_cpus(gpu_bus_id, &gpu);
    if (gpu_known) {
        cpu_set_t both;
        CPU_AND(&both, allowed, &gpu);
        if (CPU_COUNT(&both) > 0) *cand = both;
    }
    if (log_enabled(LOG_LEVEL_DEBUG)) {
        char a[256], g[256] = "", k[256];
        affinity_format(allowed, a, sizeof a);
        if (gpu_known) affinity_format(&gpu, g, sizeof g);
        affinity_format(cand, k, sizeof k);
        log_msg(LOG_LEVEL_DEBUG, "placement: allowed CPUs %s (%d); GPU %s%s%s; candidates %s (%d), local rank %d of %d",
                a, CPU_COUNT(allowed), gpu_bus_id && gpu_bus_id[0] ? gpu_bus_id : "none",
                gpu_known ? " near CPUs " : "", gpu_known ? g : "", k, CPU_COUNT(cand), lrank, lsize);
    }
}

/* Who binds this rank and to which CPUs (*final; out->pinned_by, out->shared; why in words): no one
 * (--pin none, or a topology hwloc cannot bind on), the launcher (a binding it gave), or dtrain
 * (this rank's own block of cores, pin_own_block). */
static dt_status choose_binding(dt_pin_mode mode, hwloc_topology_t topo, int foreign, const cpu_set_t *allowed,
                                const cpu_set_t *cand, const cpu_set_t *all_allowed, const cpu_set_t *all_cand,
                                int lrank, int lsize, cpu_set_t *cores, cpu_set_t *final, affinity_result *out,
                                char *why, size_t n)
{
    const int launcher_bound = bound_by_launcher(topo, foreign, allowed, all_allowed, lsize);
    *final = *allowed;
    if (mode == DT_PIN_NONE) {
        out->pinned_by = DT_PINNED_NONE;
        snprintf(why, n, "--pin none: not pinned");
    } else if (launcher_bound) {
        out->pinned_by = DT_PINNED_BY_LAUNCHER;
        snprintf(why, n, "kept the launcher's binding (%s)",
                 lsize > 1 ? "the local ranks were given different CPU sets" : "fewer CPUs than the machine allows");
    } else if (foreign) {
        out->pinned_by = DT_PINNED_NONE;
        snprintf(why, n, "not pinned: hwloc's topology is not this machine's");
        if (lrank == 0) {
            char a[256], fix[320];
            affinity_format(allowed, a, sizeof a);
            affinity_foreign_why(fix, sizeof fix);
            log_msg(LOG_LEVEL_WARN,
                    "CPU pinning skipped on this node, as binding would silently do nothing: %s. The ranks stay "
                    "on the CPUs the launcher allowed (%s), and dtrain reports those",
                    fix, a);
        }
    } else {
        dt_status s = pin_own_block(topo, allowed, cand, all_cand, lrank, lsize, cores, final, out, why, n);
        if (s) return s;
    }
    if (lsize > 1 && !out->shared && mode != DT_PIN_NONE) {
        /* Launcher bindings and the no-pin mode may still stack more ranks than cores. */
        cpu_set_t uni;
        CPU_ZERO(&uni);
        for (int i = 0; i < lsize; i++) CPU_OR(&uni, &uni, &all_allowed[i]);
        if (affinity_cores(topo, &uni, cores, CPU_SETSIZE) < lsize) out->shared = 1;
    }
    if (mode == DT_PIN_NONE && lsize > affinity_cores(topo, allowed, cores, CPU_SETSIZE)) out->shared = 1;
    return DT_OK;
}

dt_status affinity_apply(dt_pin_mode mode, MPI_Comm local, const char *gpu_bus_id, int blas_threads,
                         affinity_result *out)
{
    dt_status s = DT_OK;
    hwloc_topology_t topo = NULL;
    cpu_set_t *all_allowed = NULL, *all_cand = NULL, *cores = NULL;
    int lrank = 0, lsize = 1;
    memset(out, 0, sizeof *out);

    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        return status_set_error(DT_ERR_INTERNAL, "sched_getaffinity failed: %s", strerror(errno));
    if (hwloc_topology_init(&topo) != 0 || hwloc_topology_load(topo) != 0) {
        s = status_set_error(DT_ERR_INTERNAL, "hwloc could not load the machine topology: %s", strerror(errno));
        topo = NULL;
        goto done;
    }
    MPI_Comm_rank(local, &lrank);
    MPI_Comm_size(local, &lsize);
    /* A topology read from a file or made up (HWLOC_XMLFILE, HWLOC_SYNTHETIC) is another machine's
     * to hwloc unless HWLOC_THISSYSTEM=1: it binds nothing then, though it returns success. */
    const int foreign = !hwloc_topology_is_thissystem(topo);
    cpu_set_t cand;
    candidates(&allowed, gpu_bus_id, lrank, lsize, &cand);

    all_allowed = malloc(sizeof(cpu_set_t) * (size_t)lsize);
    all_cand = malloc(sizeof(cpu_set_t) * (size_t)lsize);
    cores = malloc(sizeof(cpu_set_t) * CPU_SETSIZE);
    if (!all_allowed || !all_cand || !cores) {
        s = status_set_error(DT_ERR_NOMEM, "out of memory placing %d local ranks", lsize);
        goto done;
    }
    if (MPI_Allgather(&allowed, sizeof allowed, MPI_BYTE, all_allowed, sizeof allowed, MPI_BYTE, local) !=
            MPI_SUCCESS ||
        MPI_Allgather(&cand, sizeof cand, MPI_BYTE, all_cand, sizeof cand, MPI_BYTE, local) != MPI_SUCCESS) {
        s = status_set_error(DT_ERR_MPI, "MPI_Allgather of the local ranks' CPU sets failed");
        goto done;
    }

    cpu_set_t final;
    char why[256] = "";
    s = choose_binding(mode, topo, foreign, &allowed, &cand, all_allowed, all_cand, lrank, lsize, cores, &final, out,
                       why, sizeof why);
    if (s) goto done;
    out->cpus = final;
    out->num_cores = affinity_cores(topo, &final, cores, CPU_SETSIZE);
    affinity_format(&final, out->list, sizeof out->list);

    int sharing;
    int threads = blas_thread_count(out, all_allowed, lsize, blas_threads, &sharing);
    /* Each thread OpenBLAS adds maps its working buffer as it first runs and, where it cannot,
     * spins for ever (kernels/cpu/blas_reserve.c): the count is raised only where there is room
     * for them, and without it stays lower (a warning, not an error: this rank alone would fail a
     * collective set-up). */
    if (backend_cpu_blas_set_threads(threads, &threads) != DT_OK) {
        log_msg(LOG_LEVEL_WARN, "%s; keeping %d BLAS thread(s)", dt_last_error(), threads);
        status_clear_error();
    }
    out->blas_threads = threads;
    if (log_enabled(LOG_LEVEL_DEBUG))
        log_msg(LOG_LEVEL_DEBUG, "placement: CPUs %s (%d cores): %s; %d BLAS thread(s)%s", out->list, out->num_cores,
                why, threads,
                blas_threads > 0 ? " (--blas-threads)"
                : out->shared    ? " (cores shared)"
                : sharing > 1    ? " (the cores shared by local ranks whose CPUs overlap)"
                                 : ", one per core");
done:
    free(all_allowed);
    free(all_cand);
    free(cores);
    if (topo) hwloc_topology_destroy(topo);
    return s;
}
