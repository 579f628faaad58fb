/*
 * test_hooks.h - the hooks that tests and `dtrain train`'s fault injection (launch/train/fault_inject.c)
 * use to make failures happen on purpose. Internal: not part of include/dtrain.h, not exported by
 * libdtrain.so; programs link them from libdtrain.a like the unit tests do.
 *
 * The environment's test hooks are documented where they act: DTRAIN_TEST_HANG (coll.h: a rank that
 * stops inside a collective), DTRAIN_TEST_DTS_SLOW_MS, DTRAIN_TEST_DTS_FREE and
 * DTRAIN_TEST_DTS_ENOSPC (data/dts.h, data/dts_write.c: a slow convert, a filesystem with that
 * much free space, the Nth shard's write meeting a full disk), DTRAIN_TEST_SAMPLE_LOG (data/loader.h: which samples each rank read),
 * DTRAIN_TEST_MEM_LIMIT=BYTES (kernels/backend.h, backend_cpu_set_limit: the CPU backend acts as a
 * device of BYTES memory, so out-of-memory paths run on the CPU), DTRAIN_TEST_CPU_PARAMS16=1
 * (kernels/backend.h, backend_cpu_set_keep_params16: the CPU backend keeps and reads a 16-bit
 * parameter copy as a GPU does, so the copy's validity rules are tested on the CPU),
 * DTRAIN_TEST_MEMINFO=FILE
 * (launch/doctor/doctor_memory.h: `dtrain doctor` reads FILE instead of /proc/meminfo, to fake a
 * node short of host memory), DTRAIN_TEST_CGROUP_ROOT=DIR (base/host_budget.h: the host budget of
 * doctor, train and the out-of-memory report reads DIR/proc/self/cgroup and DIR/sys/fs/cgroup
 * instead of the real ones, to fake a job's memory cgroup), DTRAIN_TEST_CUDA_DRIVER=12020 and DTRAIN_TEST_DEV_DIR=DIR
 * (launch/doctor/doctor_cuda.h: `dtrain doctor` acts as if a driver of that CUDA version were
 * loaded, and looks for the nvidia device nodes in DIR instead of /dev), DTRAIN_TEST_BLAS_ADVICE=CORE
 * (launch/prologue.c: `dtrain` re-executes itself with OPENBLAS_CORETYPE=CORE as if OpenBLAS had
 * guessed below the CPU, so the re-exec is tested on any machine), DTRAIN_TEST_SYNTH_DEVICE=1
 * (loader_test_device_on_cpu below, for a whole `dtrain train`), DTRAIN_TEST_LOCK_WAIT_S=S
 * (runtime/checkpoint/ckpt_lock.c: a checkpoint directory's lock held on another node is waited
 * for S seconds instead of 120), DTRAIN_TEST_INIT_STALL=RANK (runtime/placement/ctx.c: that rank
 * never reaches dt_init's first collective, as one whose node could not start it), and DTRAIN_FAULT
 * (launch/train/fault_inject.h). DTRAIN_COMM_WORLD1, which makes device buckets reduce even in a world
 * of one, is a setting now: dt_config::comm_world1.
 */
#ifndef DT_RUNTIME_TEST_HOOKS_H
#define DT_RUNTIME_TEST_HOOKS_H

#include "dtrain.h"

/* The next backward of m puts +inf into the first gradient of the first layer it finishes (before
 * the allreduce): the overflow a loss scaler must catch, on one rank or all. */
void model_test_inject_inf(dt_model *m);

/* dt_model_plan_memory on table ops (the CUDA table's sizes are host arithmetic: planned without a
 * device), for a model training alone (one_rank 1) or in a larger world (0). */
struct backend_ops;
dt_status model_test_plan_memory(const struct backend_ops *ops, int one_rank, const dt_memory_plan_config *c,
                                 dt_memory_plan *out);

/* m computes on be from now on (a struct backend of kernels/backend.h), which must take m's
 * buffers as they are: a copy of the CPU table with an entry swapped, for checking what the model
 * asks of a backend (the GPU span marks, without a GPU). */
struct backend;
void model_test_set_backend(dt_model *m, struct backend *be);

/* on 1: dt_model_train_step of m takes the loss scaler's verdict on the host before it queues the
 * optimizer step (the order before the verdict was queued), for comparing the two; 0: the default. */
void model_test_verdict_sync(dt_model *m, int on);

/* How many passes of m were recorded as step graphs (dt_model_set_graphs) so far. */
long model_test_graph_records(const dt_model *m);

/* The next checkpoint file this process writes (ckpt_write_atomic: rank 0's, in dt_ckpt_commit)
 * fails as on a full disk (ENOSPC, its usual message), and the ones after it are written again:
 * the failure every rank then gets from the commit's verdict (DTRAIN_FAULT=ckpt). */
void ckpt_test_fail_next_write(void);

/* on 1: training loaders made from now on take their device path with the CPU backend standing in
 * for the device (synthetic data without augmentation, dt_dataset_set_synthetic_on not HOST), so
 * that path's planning, indices and reuse of its slot are tested without a GPU; 0: off. Also set
 * by DTRAIN_TEST_SYNTH_DEVICE=1 in the environment, read at the first loader made. */
void loader_test_device_on_cpu(int on);

#endif
