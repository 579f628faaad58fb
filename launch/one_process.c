/*
 * one_process.c - the refusal of the commands that run in one process (plot, model-perf, data,
 * bench data) when a launcher started several: each copy would do the whole job again on the
 * others' cores, print its own output and, for data convert, race the others for the same file
 * (one wrote it, the next failed with "exists", or with --force replaced it). Such a line in a
 * batch script under srun is a common slip, so the error names the launcher's variable.
 */
#include "launch/cli.h"
#include "runtime/placement/topo.h"

int cli_one_process(const char *command, const char *what_each_would_do)
{
    topo_env env;
    if (topo_read_env(NULL, NULL, &env) != DT_OK) return EXIT_OK; /* dt_init's checks would say why */
    const int size = env.size;
    /* Every rank says so: the launcher may kill the others once the first exits. */
    if (size > 1)
        cli_error("dtrain %s runs in one process, and %s says %d were started: each would %s; run it without mpirun "
                  "or srun (or with -n 1)",
                  command, env.size_var ? env.size_var : "the launcher", size, what_each_would_do);
    topo_env_free(&env);
    return size > 1 ? EXIT_USAGE : EXIT_OK;
}
