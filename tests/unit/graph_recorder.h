/*
 * graph_recorder.h - step graphs without a GPU: the CPU table with graph entries that record (for
 * tests of dt_model_set_graphs, unit and MPI).
 *
 * Between graph_begin and graph_end the layer entries, layer_loss and the queued entries of a step
 * graph (to_device_async, found_inf_queue, the optimizers) only note their arguments, the pointers
 * and scalars as a CUDA capture keeps them, and graph_launch calls the CPU entries with them. The
 * entries that must not run while recording (waits, synchronous copies to and from the host,
 * reductions that return a host value, casts, accumulation) count a misuse when they do, as do an
 * optimizer step recorded without its live constants (optim_grads.live), a launch or a second
 * begin while recording: a test passes only with none.
 * Layer entries called from the host (not by a launch) are counted, so a test can tell a
 * replayed pass from one launched layer by layer. One recorder per process.
 */
#ifndef DT_TESTS_UNIT_GRAPH_RECORDER_H
#define DT_TESTS_UNIT_GRAPH_RECORDER_H

#include "dtrain.h"
#include "kernels/backend.h"

typedef struct graph_recorder {
    long live_layer_calls; /* layer entries (and layer_loss) run from the host, not by a launch */
    long live_optim_calls; /* optimizer entries run from the host, not by a launch */
    long begins, launches, frees;
    long misuses;  /* entries called while recording that must not be, and other misuse */
    int recording; /* between graph_begin and graph_end */
    int fail_end;  /* set by a test: graph_end fails (the recording is lost) */
    int fail_op;   /* set by a test: each recorded entry fails, as one that cannot be recorded */
} graph_recorder;

/* The recorder over the CPU table in use now (after any backend_cpu_set_keep_params16), its
 * counts and failure switches zeroed; for model_test_set_backend. */
backend *graph_recorder_init(void);
graph_recorder *graph_recorder_state(void);

#endif
