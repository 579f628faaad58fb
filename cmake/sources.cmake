# The library's and the command's sources, one list per layer, paths relative to the source root.
# The top-level build and the fuzz build (tests/fuzz) both read this file, so a new source is listed
# once and built and fuzzed alike. Layers, bottom to top: base, kernels, collectives, runtime, launch;
# each may include its own headers and those of the layers below (cmake/layers.cmake enforces it).

set(DTRAIN_BASE_SOURCES
  base/status.c base/log.c base/parse.c base/thread_stack.c base/dtype.c base/median.c base/path.c base/io_error.c base/json.c base/printable.c
  base/trace.c base/trace_json.c base/gpu_span.c base/abort_guard.c base/mem_limit.c
  base/host_budget.c base/cgroup.c)

set(DTRAIN_KERNELS_SOURCES
  kernels/backend.c kernels/pass_common.c kernels/optim_args.c
  kernels/cpu/backend_cpu.c kernels/cpu/blas_reserve.c kernels/cpu/amp.c kernels/cpu/amp_layers.c
  kernels/cpu/cast.c kernels/cpu/conv.c kernels/cpu/ops.c kernels/cpu/optim.c kernels/cpu/synth.c)
# Which backends a build has is decided here alone, not by an #ifdef: the CUDA one (kernels/cuda/,
# with the CUDA implementation of kernels/device_info.h) in CUDA builds, and in every other build
# no_cuda.c, which defines backend_cuda() to say there is none, and device_info_none.c.
set(DTRAIN_KERNELS_CUDA_SOURCES
  kernels/cuda/device_info.c
  kernels/cuda/backend_cuda.cu kernels/cuda/gemm.cu kernels/cuda/conv.cu kernels/cuda/elementwise.cu
  kernels/cuda/pool.cu kernels/cuda/loss.cu kernels/cuda/optim.cu kernels/cuda/reduce.cu kernels/cuda/layers.cu
  kernels/cuda/trace_gpu.cu kernels/cuda/graph.cu kernels/cuda/gemm_lt.cu
  kernels/cuda/synth.cu kernels/cuda/memory.cu)
set(DTRAIN_KERNELS_NO_CUDA_SOURCES kernels/cpu/no_cuda.c kernels/cpu/device_info_none.c)

set(DTRAIN_COLLECTIVES_SOURCES
  collectives/coll.c collectives/coll_mpi.c collectives/coll_mpi_roll.c collectives/bucket.c collectives/engine.c collectives/engine_expire.c collectives/comm_dup.c collectives/engine_req.c collectives/engine_chain.c collectives/engine_policy.c
  collectives/reducer.c collectives/reducer_plan_check.c collectives/reducer_step.c collectives/reducer_zero.c collectives/rank_names.c collectives/rank_verdict.c
  collectives/roll_peers.c collectives/buffers.c collectives/replicas.c)
# Exactly one of the next two joins the collectives: the NCCL backend, or its refusal.
set(DTRAIN_COLLECTIVES_NCCL_SOURCES collectives/coll_nccl.c)
set(DTRAIN_COLLECTIVES_NO_NCCL_SOURCES collectives/coll_nccl_none.c)

set(DTRAIN_RUNTIME_SOURCES
  runtime/placement/config.c runtime/placement/topo.c runtime/placement/mpi_pmi2.c runtime/placement/hostlist.c runtime/placement/hostlist_fail.c runtime/placement/tasks_per_node.c
  runtime/placement/device.c runtime/placement/affinity.c runtime/placement/blas.c
  runtime/placement/ctx.c runtime/placement/ctx_gpu.c runtime/placement/ctx_mpi.c
  runtime/placement/ctx_ops.c
  runtime/trace/trace_write.c
  runtime/model/model_spec.c runtime/model/model.c runtime/model/model_plan.c runtime/model/model_pass.c
  runtime/model/kernels_api.c runtime/model/model_sync.c runtime/model/model_precision.c
  runtime/model/model_profile.c runtime/model/model_eval.c runtime/model/model_step.c runtime/model/model_overlap.c
  runtime/model/model_clip.c runtime/model/model_zero.c runtime/model/model_graph.c runtime/model/model_input.c runtime/model/optimizer.c
  runtime/model/scaler.c
  runtime/checkpoint/ckpt_format.c runtime/checkpoint/ckpt_read.c runtime/checkpoint/ckpt_write.c
  runtime/checkpoint/ckpt_load.c runtime/checkpoint/ckpt_file.c runtime/checkpoint/ckpt_coll.c
  runtime/checkpoint/ckpt_extra.c runtime/checkpoint/ckpt_prune.c runtime/checkpoint/ckpt_lock.c
  runtime/checkpoint/ckpt_writer.c runtime/checkpoint/ckpt_write_file.c runtime/checkpoint/ckpt_write_target.c
  runtime/checkpoint/ckpt_temps.c
  runtime/checkpoint/ckpt_reader.c runtime/checkpoint/ckpt_apply.c runtime/checkpoint/ckpt_read4.c
  runtime/data/dataset.c runtime/data/sampler.c runtime/data/transform.c runtime/data/synthetic.c
  runtime/data/loader.c runtime/data/evaluate.c runtime/data/stats.c runtime/data/stats_pass.c runtime/data/dataset_norm.c runtime/data/reader.c
  runtime/data/file_io.c runtime/data/idx.c runtime/data/cifar.c runtime/data/imagefolder.c runtime/data/imagefolder_scan.c
  runtime/data/image_decode.c runtime/data/dts_read.c runtime/data/dts_write.c runtime/data/dts_payload.c
  runtime/data/dts_temp.c)

# The command (launch/main.c holds main()).
set(DTRAIN_LAUNCH_SOURCES
  launch/main.c launch/close_stdout.c launch/cli.c launch/cli_values.c launch/cli_paths.c launch/cli_error.c launch/normalize_flag.c launch/synthetic_on.c launch/one_process.c launch/agree_failure.c launch/flags_text.c launch/flags_agree.c launch/prologue.c launch/help.c launch/crash.c launch/train/fault_inject.c launch/train/metrics.c
  launch/train/progress.c launch/train/train_flags.c launch/train/train_flags_check.c launch/train/train_data.c launch/train/lr_schedule.c launch/train/params_io.c launch/train/train_loop.c launch/train/train_stop.c
  launch/train/train_report.c launch/train/train_record.c launch/train/train_ckpt.c launch/train/train_trace.c launch/train/train_bucket_auto.c launch/train/train_epochs.c launch/train/straggler.c launch/train/cmd_train.c launch/train/train_setup.c launch/train/train_flags_agree.c launch/train/train_memory.c launch/train/cmd_eval.c launch/train/eval_figures.c launch/data/cmd_data.c launch/data/cmd_data_info.c
  launch/data/cmd_data_convert.c launch/data/cmd_data_verify.c launch/cmd_env.c launch/cmd_version.c
  launch/bench/cmd_bench.c launch/bench/bench_args.c launch/bench/bench_values.c launch/bench/cmd_bench_gemm.c launch/bench/bench_gemm_check.c launch/bench/cmd_bench_step.c launch/bench/bench_step_run.c launch/bench/cmd_bench_data.c launch/oom_report.c
  launch/bench/cmd_bench_reducer.c launch/plot/plot_data.c launch/plot/cmd_plot.c launch/plot/gnuplot.c
  launch/perfmodel/perfmodel.c launch/perfmodel/perfmodel_step.c launch/perfmodel/perfmodel_input.c
  launch/perfmodel/host_model.c launch/perfmodel/engine_curve.c launch/perfmodel/engine_curve_plot.c
  launch/perfmodel/model_source.c launch/perfmodel/perfmodel_plot.c launch/perfmodel/cmd_model_perf.c
  launch/doctor/doctor_rows.c launch/doctor/cuda_parse.c launch/doctor/cuda_facts.c launch/doctor/cuda_checks.c
  launch/doctor/cuda_job.c launch/doctor/memory_check.c launch/doctor/memory_facts.c
  launch/doctor/cmd_doctor.c launch/doctor/host_facts.c launch/doctor/host_checks.c launch/doctor/comm_check.c
  launch/doctor/net_env.c launch/doctor/path_checks.c launch/doctor/node_facts.c launch/doctor/node_checks.c)
set(DTRAIN_LAUNCH_CUDA_SOURCES launch/bench/bench_gemm_cuda.c)

# The sbatch templates installed to share/dtrain/slurm.
set(DTRAIN_SBATCH_TEMPLATES
  slurm/env.sbatch slurm/mpirun-in-allocation.sbatch slurm/train-multi-node.sbatch
  slurm/train-single-node.sbatch)
