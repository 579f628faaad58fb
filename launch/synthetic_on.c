/*
 * synthetic_on.c - --synthetic-on device against this rank's placement, before any loader is made.
 * dt_loader_create refuses the device on a rank placed on the CPU, but dtrain train makes its
 * loader only after the resume and dtrain bench step one per row: on a CPU job every rank met the
 * refusal alike, printed it with its rank and ended the job through MPI_Abort, whose banner could
 * cut off the message. Checked here, the refusal joins an exchange the command makes anyway
 * (cli_agree_failure) and is said once for the ranks that met it.
 */
#include "launch/cli.h"

#include <stdlib.h>
#include <string.h>

int cli_synthetic_on_check(const dt_placement *pl, dt_synthetic_on on)
{
    if (on != DT_SYNTHETIC_DEVICE || pl->device == DT_DEVICE_CUDA) return EXIT_OK;
    /* The loader's stand-in for a device (runtime/test_hooks.h): the CPU then takes its device path. */
    const char *stand_in = getenv("DTRAIN_TEST_SYNTH_DEVICE");
    if (stand_in && !strcmp(stand_in, "1")) return EXIT_OK;
    /* The loader's words (runtime/data/loader.c), so that a refusal reads the same wherever it comes. */
    cli_error("synthetic batches cannot be made on the device: the run is placed on the CPU (make them on the host: "
              "--synthetic-on host or auto)");
    return EXIT_USAGE;
}
