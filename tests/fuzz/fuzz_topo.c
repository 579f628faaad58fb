/*
 * fuzz_topo.c - the launcher resolver (runtime/topo.c) fed a fuzzed environment: which launcher
 * started the process and its rank, size, local rank/size, node and SLURM host list, from SLURM_*,
 * OMPI_COMM_WORLD_*, PMI_*, PMIX_RANK, MPI_LOCALRANKID, RANK/WORLD_SIZE/LOCAL_RANK..., and what
 * is refused before MPI_Init (topo_check_before_mpi); then the GPU a local rank would take from
 * CUDA_VISIBLE_DEVICES (device_plan, runtime/device.c). No MPI_Init: all of it runs before MPI.
 *
 * Input: lines NAME=VALUE, the whole environment of the run (see fuzz_env_set).
 * Beyond ASan/UBSan/leaks and run.sh's memory limits (a SLURM_JOB_NODELIST that expands to
 * gigabytes is a report), the resolver must:
 *  - read the environment only through its getenv callback: the process environment and a
 *    callback over the same variables give the same answer;
 *  - on success keep the relations topo.c checks: rank < size, local rank < local size <= size,
 *    a host list of num_hosts names (and none without SLURM); values >= -1.
 */
#include "fuzz_common.h"
#include "runtime/placement/device.h"
#include "runtime/placement/topo.h"

static const char *env_lookup(const char *name, void *arg) { return fuzz_env_get(arg, name); }

static int same_env(const topo_env *a, const topo_env *b)
{
    if (a->launcher != b->launcher || a->rank != b->rank || a->size != b->size || a->local_rank != b->local_rank ||
        a->local_size != b->local_size || a->node != b->node || a->num_nodes != b->num_nodes ||
        a->pmix_rank != b->pmix_rank || a->has_pmi != b->has_pmi || a->num_hosts != b->num_hosts)
        return 0;
    for (int i = 0; i < a->num_hosts; i++)
        if (strcmp(a->hosts[i], b->hosts[i])) return 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_env env;
    fuzz_env_set(&env, data, size, NULL);

    topo_env e, viacb;
    const dt_status s = topo_read_env(NULL, NULL, &e);
    /* The same variables through the callback, with the process environment empty. */
    char *none[] = {NULL};
    environ = none;
    const dt_status s2 = topo_read_env(env_lookup, &env, &viacb);
    environ = env.vars;
    FUZZ_CHECK(s == s2, "process environment: status %d, callback: %d", (int)s, (int)s2);

    if (s == DT_OK) {
        FUZZ_CHECK(same_env(&e, &viacb), "the process environment and the callback disagree");
        FUZZ_CHECK(e.rank >= -1 && e.size >= -1 && e.local_rank >= -1 && e.local_size >= -1 && e.node >= -1 &&
                       e.num_nodes >= -1 && e.pmix_rank >= -1,
                   "a value below -1");
        if (e.rank >= 0 && e.size >= 0) FUZZ_CHECK(e.rank < e.size, "rank %d of %d", e.rank, e.size);
        if (e.local_rank >= 0 && e.local_size >= 0)
            FUZZ_CHECK(e.local_rank < e.local_size, "local rank %d of %d", e.local_rank, e.local_size);
        if (e.local_size >= 0 && e.size >= 0)
            FUZZ_CHECK(e.local_size <= e.size, "local size %d of %d", e.local_size, e.size);
        FUZZ_CHECK((e.hosts != NULL) == (e.num_hosts > 0), "hosts %p, num_hosts %d", (void *)e.hosts, e.num_hosts);
        if (e.launcher != DT_LAUNCHER_SLURM) FUZZ_CHECK(e.num_hosts == 0, "%d hosts without SLURM", e.num_hosts);
        for (int i = 0; i < e.num_hosts; i++) FUZZ_CHECK(e.hosts[i] && e.hosts[i][0], "host %d is empty", i);

        (void)topo_check_before_mpi(&e);

        /* The GPU this local rank would take, as `dtrain env` prints it. */
        const int local = e.launcher == DT_LAUNCHER_NONE ? 0 : e.local_rank;
        const char *list = getenv("CUDA_VISIBLE_DEVICES");
        if (local >= 0 && list) {
            char out[64];
            memset(out, 'x', sizeof out);
            device_plan(list, local, e.local_size, 0, out, sizeof out);
            FUZZ_CHECK(memchr(out, '\0', sizeof out), "device_plan left its output unterminated");
            device_plan(list, local, e.local_size, 1, out, sizeof out);
            FUZZ_CHECK(memchr(out, '\0', sizeof out), "device_plan left its output unterminated");
        }
        topo_env_free(&e);
        topo_env_free(&viacb);
    }
    fuzz_env_restore(&env);
    return 0;
}
