#!/usr/bin/env bash
# device_check.sh - the one script to run when a GPU machine is lent: builds with CUDA, runs the
# GPU tests, then the GPU benchmarks, and leaves every output under OUT (default ./gpu-out) for the
# issue note. Usage, from the repository root:  bash tests/gpu/device_check.sh [OUT]
# Needs the CUDA toolkit and the Debian packages of `make deps`. Times: about 3-5 minutes.
set -u
out=${1:-${OUT:-gpu-out}}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
log() { echo "== $*" | tee -a "$out/summary.txt"; }

log "machine: $(hostname), $(nproc) cores, $(date -u)"
nvidia-smi >"$out/nvidia-smi.txt" 2>&1 && log "nvidia-smi: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)" || log "nvidia-smi failed"
if ! command -v mpirun >/dev/null || ! pkg-config --exists cmocka hwloc openblas 2>/dev/null; then
    log "installing build dependencies (make deps)"
    timeout 300 make deps >"$out/deps.txt" 2>&1 || log "make deps failed: see deps.txt"
fi
log "configure and build with CUDA (build-gpu/)"
cmake -S . -B build-gpu -DDTRAIN_CUDA=ON -DCMAKE_BUILD_TYPE=Release >"$out/configure.txt" 2>&1 &&
    cmake --build build-gpu -j"$(nproc)" >"$out/build.txt" 2>&1 || { log "build failed: see configure.txt/build.txt"; exit 1; }
grep -E "✓|✗" "$out/configure.txt" | tee -a "$out/summary.txt"

log "dtrain env"
timeout 60 build-gpu/dtrain env >"$out/env.txt" 2>&1
cat "$out/env.txt" | tee -a "$out/summary.txt"

log "ctest -L gpu"
ctest --test-dir build-gpu -L gpu --output-on-failure >"$out/ctest-gpu.txt" 2>&1
tail -5 "$out/ctest-gpu.txt" | tee -a "$out/summary.txt"

log "dtrain bench gemm (default sizes 4096, 8192, 10000; all types)"
timeout 400 build-gpu/dtrain bench gemm --max-seconds ${GEMM_SECONDS:-2} ${GEMM_ARGS:-} >"$out/bench-gemm.txt" 2>&1
cat "$out/bench-gemm.txt" | tee -a "$out/summary.txt"

log "training steps, CPU (16 threads) against GPU, fp32, 1 rank"
for spec in "mlp 784 256" "cnn 1x28x28 256" "fc:8192,relu,fc:8192,relu,fc:10 1024 512"; do
    set -- $spec
    for dev in cpu cuda; do
        timeout 120 build-gpu/dtrain train --device $dev --model "$1" --input "$2" --batch "$3" --steps 60 --log-every 20 \
            >"$out/train-$dev.txt" 2>&1
        echo "$dev $1 batch $3: $(grep '^done' "$out/train-$dev.txt" || tail -1 "$out/train-$dev.txt")" | tee -a "$out/summary.txt"
    done
done

log "GPU training steps by precision (1 rank): fp32 vs bf16 vs fp16"
for spec in "fc:8192,relu,fc:8192,relu,fc:8192,relu,fc:10 1024 1024" "cnn 1x28x28 1024"; do
    set -- $spec
    for p in fp32 bf16 fp16; do
        timeout 120 build-gpu/dtrain train --device cuda --model "$1" --input "$2" --batch "$3" --steps 100 \
            --log-every 20 --precision $p >"$out/amp-$p.txt" 2>&1
        echo "$p $1 batch $3: $(grep '^memory' "$out/amp-$p.txt" | sed 's/memory per rank //')" | tee -a "$out/summary.txt"
        echo "$p $1 batch $3: $(grep '^done' "$out/amp-$p.txt" || tail -2 "$out/amp-$p.txt")" | tee -a "$out/summary.txt"
        grep '^step' "$out/amp-$p.txt" | tail -1 | tee -a "$out/summary.txt"
    done
done

log "dtrain bench allreduce on one rank (host buffers)"
timeout 60 mpirun -np 1 build-gpu/dtrain bench allreduce -b 1M -e 64M -f 4 >"$out/bench-allreduce.txt" 2>&1
tail -3 "$out/bench-allreduce.txt" | tee -a "$out/summary.txt"
log "done"
