#!/usr/bin/env bash
# device_check.sh - the one script to run when a GPU machine is lent: builds with CUDA, runs the
# GPU tests, the compute-sanitizer checks and the GPU benchmarks, for the issue note and
# bench/GPU-NOTES.md. Usage, from the repository root:  [OLD=DIR] [LIMIT=S] PART=LIST bash tests/gpu/device_check.sh [RES]
# Needs the CUDA toolkit, CMake, Open MPI, hwloc and OpenBLAS (cmocka is optional: without it the
# unit tests are not built). TurboJPEG, libpng and zlib's headers, which the device's image may
# lack, come from Debian packages carried in build-deps/ when pkg-config does not find them: make
# it here with  mkdir -p build-deps && (cd build-deps && apt-get download libturbojpeg0-dev
# libturbojpeg0 libpng-dev libpng16-16 zlib1g-dev zlib1g)  and carry it (they are unpacked into a
# private prefix there, never into /).
#
# Parts (PART, a comma-separated list; default all), each after the build (build-gpu/, about a
# minute on 16 cores; kept between calls while the machine stays warm, so a second call rebuilds
# nothing):
#   targets   issue 20's judged runs (OLD too), verdict per target in targets.txt: ~2-3 min
#   tests     ctest -L gpu and the custom loop example: ~4-6 min
#   sanitize  compute-sanitizer memcheck over the op tests and short trains, racecheck and
#             synccheck over the ops with shared memory; stops starting runs past
#             SANITIZE_BUDGET seconds (default 300): ~3-5 min
#   bench     the benchmark rows, OLD side by side (QUICK=1 skips the CPU baselines): ~5-6 min
# The device tool allows 10 minutes a command and ~15 minutes a session, starts included, and
# gives the machine back after 30 s idle. LIMIT (seconds, default 580) is this call's own budget:
# every run (the build, each benchmark, ctest, each sanitizer run) gets at most what is left of it
# less 20 s, and a run with under 15 s left is not started but named in the summary, so a call
# ends with its summary and outputs rather than being killed (a part cut short says so). Plan:
# `PART=targets,tests` (timeout 600), then at once `PART=sanitize,bench QUICK=1 LIMIT=<seconds
# left - 30>` (the build is kept); if the first call's summary says ctest was cut, make the second
# `PART=tests,sanitize` instead. Without a GPU that dtrain sees, a call stops after the build.
#
# OLD=DIR builds an earlier version's source tree beside this one (build-old/) for the side-by-
# side rows. The device gets the working tree without .git, so make the tree here, in an ignored
# folder, and carry it:  git archive e4b1c7d | (mkdir -p build-old-src && tar -x -C build-old-src)
# then run with carry ["build-old-src", "build-deps"] and OLD=build-old-src.
#
# What comes back: the device tool returns at most 8 files from OUT. So the summary (RES/summary.txt,
# RES = the argument, else $OUT, else ./gpu-out) and targets.txt are written there as the run
# goes, and every other output goes to WORK (default /tmp/dtrain-gpu), packed into
# RES/gpu-<parts>.tgz at each stage's end (so a run cut by its limit still returns what it did).
set -u
res=${1:-${OUT:-gpu-out}}
tag=${PART:-all}
tag=${tag//,/-}
# This call's own folder, emptied: a second call on a warm machine packs only its own outputs.
out=${WORK:-/tmp/dtrain-gpu}/$tag
rm -rf "$out"
mkdir -p "$res" "$out"
sum="$res/summary.txt"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
# What the machine's image may export that changes what dtrain prints or does (the tests unset
# the same, tests/CMakeLists.txt): an OPENBLAS_CORETYPE below the CPU adds a warning line to every
# output and keeps the CPU baselines on slower kernels.
unset OPENBLAS_CORETYPE OPENBLAS_NUM_THREADS OMP_NUM_THREADS DTRAIN_BLAS_COREFIX DTRAIN_BLAS_THREADS DTRAIN_LOG \
    DTRAIN_TIMEOUT DTRAIN_PIN DTRAIN_DEVICE DTRAIN_GPU_COMM DTRAIN_COMM_THREAD DTRAIN_COMM_WORLD1 DTRAIN_ALLREDUCE \
    DTRAIN_FAULT
log() { echo "== $*" | tee -a "$sum"; }
t0=$(date +%s)
left() { echo $(( ${LIMIT:-580} - ($(date +%s) - t0) )); } # seconds of this call's budget
want() { [ "${PART:-all}" = all ] || [[ ",${PART}," == *",$1,"* ]]; }
# Seconds a run may take: at most $1, and what is left of LIMIT less 20 s (the summary and the
# packing after it); 0 when under 15 s would be left. The parts run one after another, each
# command with its own timeout, so without this a call of several parts (or one hung run after
# another) would pass the device tool's 600 s and lose the outputs not yet packed.
cap() {
    local c=$(( $(left) - 20 ))
    [ "$c" -gt "$1" ] && c=$1
    [ "$c" -lt 15 ] && c=0
    echo "$c"
}
# `bounded S cmd...`: timeout with cap's bound; with nothing left it starts nothing, names the
# command in the summary and returns 125 (a run cut by its timeout returns 124).
bounded() {
    local c
    c=$(cap "$1")
    shift
    if [ "$c" = 0 ]; then
        echo "   not run ($(left) s left of LIMIT=${LIMIT:-580}): $*" | cut -c1-200 >>"$sum"
        return 125
    fi
    timeout "$c" "$@"
}
pack() { tar -czf "$res/gpu-$tag.tgz" -C "$out" . 2>/dev/null; }
stamp() {
    echo "   ($(( $(date +%s) - t0 )) s)" | tee -a "$sum"
    pack
}

log "machine: $(hostname), $(nproc) cores, $(date -u)"
nvidia-smi >"$out/nvidia-smi.txt" 2>&1 && log "nvidia-smi: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)" || log "nvidia-smi failed"
# The image folders' libraries (and zlib's headers) from build-deps/ where the machine has none:
# unpacked into a prefix of their own and their pkg-config files pointed there. CMake gives the
# binaries it builds a run path to the libraries they link outside the system's folders, so no
# LD_LIBRARY_PATH: nothing else on the machine (python3, cmake, the CUDA tools) sees these copies.
if ! pkg-config --exists libturbojpeg libpng zlib 2>/dev/null; then
    if ls build-deps/*.deb >/dev/null 2>&1; then
        P=/tmp/dtrain-deps
        rm -rf "$P" && mkdir -p "$P"
        for d in build-deps/*.deb; do
            if command -v dpkg-deb >/dev/null; then
                dpkg-deb -x "$d" "$P"
            else # a .deb is an ar archive; its files are in data.tar.*
                m=$(ar t "$d" | grep '^data\.tar')
                ar p "$d" "$m" | tar -x -C "$P" -f - --auto-compress 2>/dev/null || ar p "$d" "$m" | tar -xJ -C "$P" -f -
            fi
        done
        find "$P" -name '*.pc' -exec sed -i "s|=/usr|=$P/usr|" {} +
        # Links to the system's copies (zlib's libz.so -> /lib/...) point into the prefix instead.
        find "$P" -type l | while read -r l; do
            t=$(readlink "$l")
            case $t in /*) [ -e "$P$t" ] && ln -sfn "$P$t" "$l" ;; esac
        done
        export PKG_CONFIG_PATH=$P/usr/lib/x86_64-linux-gnu/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
        export CMAKE_PREFIX_PATH=$P/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
        log "libturbojpeg, libpng or zlib not installed: the carried packages, unpacked in $P: $(ls build-deps | tr '\n' ' ')"
    else
        log "libturbojpeg, libpng or zlib's headers are missing and build-deps/ was not carried: the build will fail (see the header)"
    fi
fi
log "configure and build with CUDA (build-gpu/)"
# -lineinfo: compute-sanitizer's and a profiler's reports then name the kernel's file and line; it
# adds line tables only, the code nvcc generates is the same (so are the timings).
cmake -S . -B build-gpu -DDTRAIN_CUDA=ON -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS=-lineinfo >"$out/build.txt" 2>&1 &&
    bounded 3600 cmake --build build-gpu -j"$(nproc)" >>"$out/build.txt" 2>&1 || {
    log "build failed: see build.txt"
    grep -E "error|Could not|not found|No package" "$out/build.txt" | head -20 | tee -a "$sum"
    tail -30 "$out/build.txt"
    pack
    exit 1
}
grep -E "✓|✗" "$out/build.txt" | tee -a "$sum"
stamp
D=build-gpu/dtrain
# Every part needs a GPU that dtrain sees (a driver older than the toolkit or a container without
# the device would fail each run after a start of its own): asked once, and the call stops here
# with CUDA's reason when there is none.
gpu=$(bounded 60 $D bench gemm --n 256 --dtype fp32 --no-cpu --max-seconds 0.1 2>&1 | grep -m1 '^# GPU:')
case $gpu in
"# GPU: none"* | "")
    log "no GPU that dtrain can use: ${gpu:-bench gemm printed no GPU line}; nothing else is run"
    pack
    exit 1
    ;;
*) log "${gpu#\# }" ;;
esac

FC="fc:8192,relu,fc:8192,relu,fc:8192,relu,fc:10"
# OLD=DIR (a source tree of an earlier version, e.g. from git archive): build it too and run the
# same steps with both, side by side.
if { want bench || want targets; } && [ -n "${OLD:-}" ] && [ ! -d "$OLD" ]; then
    log "OLD=$OLD is not a directory here: the earlier version is skipped (see the header: carry the tree)"
elif { want bench || want targets; } && [ -n "${OLD:-}" ]; then
    log "configure and build the earlier version in $OLD (build-old/)"
    cmake -S "$OLD" -B build-old -DDTRAIN_CUDA=ON -DCMAKE_BUILD_TYPE=Release >"$out/build-old.txt" 2>&1 &&
        bounded 3600 cmake --build build-old -j"$(nproc)" --target dtrain_cmd >>"$out/build-old.txt" 2>&1 || log "the earlier version did not build"
    stamp
fi

if want targets; then
# Issue 20's targets: the bf16 GEMM peak, then each judged model in this version and (OLD) the
# earlier one, every output kept in targets/ and judged by issue20_targets.py.
log "issue 20's targets (fc:8192 x3 bf16 % of peak, mlp bf16, cnn bf16/fp32 and activation memory)"
tg="$out/targets"
rm -rf "$tg" # a rerun on a warm machine must not judge an earlier call's files
mkdir -p "$tg"
[ "$(cap 120)" = 0 ] || bounded 120 $D bench gemm --n 8192 --dtype bf16 --no-cpu --max-seconds 1 >"$tg/gemm.txt" 2>&1
for side in new old; do
    bin=$D p=""
    if [ $side = old ]; then
        [ -x build-old/dtrain ] || continue
        bin=build-old/dtrain p=old-
    fi
    # A run not started leaves no file (the judge skips the target); one cut short, a partial one
    # (the judge says it cannot read it).
    tgt() {
        local f=$1
        shift
        if [ "$(cap 150)" = 0 ]; then
            echo "   $p$f: not run ($(left) s left of LIMIT=${LIMIT:-580})" | tee -a "$sum"
            return
        fi
        bounded 150 $bin bench step --device cuda "$@" >"$tg/$p$f" 2>&1
    }
    tgt fc.txt --model $FC --input 1024 --batch 1024 --steps 40 --precision bf16
    tgt mlp.txt --model mlp --batch 256 --steps 300 --warmup 10 --precision bf16,fp32,fp16
    tgt cnn28.txt --model cnn --input 1x28x28 --batch 1024 --steps 60 --precision fp32,bf16,fp16
    tgt cnn32.txt --model cnn --input 3x32x32 --batch 512 --steps 60 --precision fp32,bf16,fp16
done
python3 tests/gpu/issue20_targets.py "$tg" 2>&1 | tee "$res/targets.txt" | tee -a "$sum"
stamp
fi # targets

if want tests; then
# Three at a time (the tests are small beside the GPU; the gpu.train parts and gpu.zero are the
# long ones), under what is left of LIMIT, each result in the summary as it comes (a call cut
# short keeps what ran). On a GPU machine a skipped GPU test is not a pass: they are counted and
# named.
budget=$(( $(left) - 60 ))
if [ "$budget" -lt 60 ]; then
    log "ctest -L gpu: not run: $(left) s left of LIMIT=${LIMIT:-580}"
else
    log "ctest -L gpu -j3 (at most $budget s)"
    timeout "$budget" ctest --test-dir build-gpu -L gpu -j3 --output-on-failure 2>&1 | tee "$out/ctest-gpu.txt" |
        grep --line-buffered -E 'Test +#|tests passed|did not run|\((Skipped|Timeout|Failed)\)|^(ok|FAIL|SKIP)[: ]' | tee -a "$sum"
    [ "${PIPESTATUS[0]}" = 124 ] && log "ctest -L gpu: cut at $budget s (LIMIT): the tests not listed above did not run"
    skipped=$(grep -c '\*\*\*Skipped' "$out/ctest-gpu.txt")
    if [ "$skipped" -gt 0 ]; then
        log "$skipped GPU test(s) SKIPPED on a GPU machine: not a pass. Why, from ctest's log:"
        grep -h "^SKIP" build-gpu/Testing/Temporary/LastTest.log | sort | uniq -c | head -8 | tee -a "$sum"
    fi
fi
stamp

# The user-loop example on the GPU (ctest -L gpu ran it once; here both ways, with their output):
# one rank alone, and with DTRAIN_COMM_WORLD1=1 the reducer's NCCL bucket path on the example's stream.
log "examples/custom_loop_cuda: caller's buffers, stream and cuBLAS, the reducer on that stream"
for w1 in 0 1; do
    echo "-- DTRAIN_COMM_WORLD1=$w1" | tee -a "$sum"
    DTRAIN_COMM_WORLD1=$w1 bounded 120 build-gpu/example_custom_loop_cuda >"$out/custom_loop_cuda-$w1.txt" 2>&1
    rc=$?
    grep -E "^(reducer|blocking|custom_loop_cuda)|SKIP|[Ee]rror|ERROR|WARN" "$out/custom_loop_cuda-$w1.txt" | tee -a "$sum"
    log "custom_loop_cuda (DTRAIN_COMM_WORLD1=$w1) exit $rc"
done
# A rank placed on the CPU in a CUDA build must not open a CUDA context (GPU memory, and a refusal
# on GPUs in exclusive-process mode): the buffer checks ask cudaPointerGetAttributes whether a
# pointer is device memory. Seen by nvidia-smi while a --device cpu run is alive.
build-gpu/dtrain train --device cpu --model mlp --steps 400 --batch 64 >"$out/cpu-ctx.txt" 2>&1 &
cpid=$!
sleep 4
apps=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader 2>&1)
if grep -q "^$cpid," <<<"$apps"; then
    log "--device cpu run: HAS a CUDA context on the GPU ($(grep "^$cpid," <<<"$apps")): a CPU rank costs GPU memory"
else
    log "--device cpu run: no CUDA context on the GPU (compute apps: ${apps:-none})"
fi
kill "$cpid" 2>/dev/null; wait "$cpid" 2>/dev/null
stamp

fi # tests

if want sanitize; then
# compute-sanitizer over the GPU tests (issue 18): memcheck on every CUDA op table test and a short
# GPU train, racecheck and synccheck on the ops that use shared memory. Each run is bounded (the
# tools slow kernels 10-100x); a run cut by its timeout says so instead of passing. SANITIZE=0 skips.
cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer 2>/dev/null | head -1)
if [ "${SANITIZE:-1}" = 0 ]; then
    log "compute-sanitizer: skipped (SANITIZE=0)"
elif [ -z "$cs" ]; then
    log "compute-sanitizer: SKIP: not installed on this machine (no compute-sanitizer on PATH or under /usr/local/cuda)"
else
    log "compute-sanitizer ($cs): memcheck, racecheck, synccheck"
    sanitize() { # tool, label, command...
        local tool=$1 label=$2; shift 2
        local f="$out/sanitize-$tool-$label.txt"
        local cap=$(( $(left) - 30 ))
        [ "$cap" -gt 120 ] && cap=120
        if [ $(( $(date +%s) - ts0 )) -gt "${SANITIZE_BUDGET:-300}" ] || [ "$cap" -lt 20 ]; then
            echo "   $tool $label: not run: past SANITIZE_BUDGET (${SANITIZE_BUDGET:-300} s) or LIMIT" | tee -a "$sum"
            return
        fi
        # application-only: the tool follows no launcher daemon (an MPI singleton's) that uses no GPU.
        timeout "$cap" "$cs" --target-processes application-only --tool "$tool" --error-exitcode 99 --print-limit 20 "$@" >"$f" 2>&1
        local rc=$?
        local said; said=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$f" | tail -1)
        case $rc in
        0) echo "   $tool $label: exit 0, ${said:-no summary}" ;;
        77) echo "   $tool $label: SKIP (exit 77: not a pass; the tool may have refused the device), ${said:-no summary}" ;;
        124) echo "   $tool $label: TIMEOUT after $cap s (not a pass), ${said:-no summary}" ;;
        *) echo "   $tool $label: FAIL exit $rc, ${said:-no summary} (see $(basename "$f"))" ;;
        esac | tee -a "$sum"
    }
    ts0=$(date +%s)
    # Whole training paths first (the budget cuts the last runs): convolutions, fp16's queued
    # verdict, and the step graphs.
    sanitize memcheck train-cnn-bf16 build-gpu/dtrain train --device cuda --model cnn --batch 64 --steps 4 --precision bf16
    sanitize memcheck train-mlp-fp16 build-gpu/dtrain train --device cuda --model mlp --batch 64 --steps 4 --precision fp16
    sanitize memcheck train-mlp-graphs build-gpu/dtrain train --device cuda --model mlp --batch 64 --steps 6 --graphs 1
    # Host batches staged ahead of their steps (the copy stream's slots, dropped and mended batches).
    [ -x build-gpu/tests/test_stage_batch_gpu ] && sanitize memcheck stage-batch build-gpu/tests/test_stage_batch_gpu
    # An optimizer replaced between step graphs (a replay of the old one's would step freed state).
    [ -x build-gpu/tests/test_model_api_gpu ] && sanitize memcheck model-api build-gpu/tests/test_model_api_gpu
    # ctest's binaries are in build-gpu/tests/; one missing is said, not passed over.
    for t in cast ops_table ops_gemm ops_conv ops_pool ops_amp16 ops_loss ops_optim ops_nonfinite ops_synth; do
        b=build-gpu/tests/test_cuda_$t
        if [ -x "$b" ]; then sanitize memcheck "test_cuda_$t" "$b"; else log "compute-sanitizer: $b not built"; fi
    done
    # The kernels with shared memory and block-wide reductions: conv's bias gradient, pooling, the
    # loss, the optimizers' and finite checks' reductions (nonfinite), the synthetic batch.
    for t in conv loss nonfinite synth pool; do
        [ -x build-gpu/tests/test_cuda_ops_$t ] || continue
        sanitize racecheck "test_cuda_ops_$t" build-gpu/tests/test_cuda_ops_$t
        sanitize synccheck "test_cuda_ops_$t" build-gpu/tests/test_cuda_ops_$t
    done
fi
stamp

fi # sanitize


if want bench; then
log "dtrain bench gemm at n=8192"
bounded 120 $D bench gemm --n 8192 --dtype fp32,bf16 --max-seconds 1 >"$out/bench.txt" 2>&1
cat "$out/bench.txt" | tee -a "$sum"
stamp

# Training steps: each precision side by side in one run, then a profiled split of a step.
step() { # label, then bench step flags
    local label=$1; shift
    echo "-- bench step $label: $*" | tee -a "$sum"
    bounded 150 $D bench step --device cuda "$@" 2>&1 | tee -a "$out/bench.txt" | grep -vE '^      layer' | tee -a "$sum"
    local rc=${PIPESTATUS[0]}
    [ "$rc" = 0 ] || [ "$rc" = 125 ] ||
        echo "   bench step $label: exit $rc$([ "$rc" = 124 ] && echo ' (cut at 150 s or by LIMIT)')" | tee -a "$sum"
}
# Host-made batches (--synthetic-on host): the thread count applies only to them; on the device
# (auto) no loader thread runs. The profiled rows keep auto, as dtrain train runs.
log "GPU steps by precision, background loader (auto threads) against the training thread making batches"
step "fc:8192x3, loader auto" --model $FC --input 1024 --batch 1024 --steps 40 --profile 10
step "fc:8192x3, host batches, loader auto" --model $FC --input 1024 --batch 1024 --steps 40 --synthetic-on host
step "fc:8192x3, host batches, loader 0" --model $FC --input 1024 --batch 1024 --steps 40 --synthetic-on host --loader-threads 0
step "cnn, loader auto" --model cnn --input 1x28x28 --batch 1024 --steps 60 --profile 10
step "cnn, host batches, loader auto" --model cnn --input 1x28x28 --batch 1024 --steps 60 --synthetic-on host
step "cnn, host batches, loader 0" --model cnn --input 1x28x28 --batch 1024 --steps 60 --synthetic-on host --loader-threads 0
step "cnn 3x32x32 batch 512" --model cnn --input 3x32x32 --batch 512 --steps 60 --profile 5
step "mlp batch 256" --model mlp --batch 256 --steps 100
# Step graphs (forward and backward as one launch) against kernel by kernel, side by side: the
# host-bound mlp (the issue's 2x), the cnn, and the mlp with its buckets on NCCL after the launch.
step "mlp batch 256 graphs 1 vs 0" --model mlp --batch 256 --steps 300 --warmup 10 --precision bf16,fp32,fp16 --graphs 1,0
step "cnn 3x32x32 graphs 1 vs 0" --model cnn --input 3x32x32 --batch 512 --steps 60 --precision bf16 --graphs 1,0
# fp16's verdict taken before the next step is queued (dtrain train's order) against each step
# waiting for its own, bf16 beside them for the gap fp16 should no longer leave.
step "mlp batch 256 fp16 verdict deferred" --model mlp --batch 256 --steps 300 --warmup 10 --precision bf16,fp16 --graphs 1
step "mlp batch 256 fp16 verdict waited" --model mlp --batch 256 --steps 300 --warmup 10 --precision bf16,fp16 --graphs 1 --defer-verdict 0
# Relu layers run inside their neighbours (forward: cuBLASLt's RELU_BIAS epilogue, the conv
# scatter; backward: the max pool after one) against kernels of their own, as dtrain train runs
# them (1) and as before (0).
step "mlp batch 256 relu fused" --model mlp --batch 256 --steps 300 --warmup 10 --precision bf16,fp16,fp32 --graphs 1
step "mlp batch 256 relu unfused" --model mlp --batch 256 --steps 300 --warmup 10 --precision bf16,fp16,fp32 --graphs 1 --fused-relu 0
step "cnn 3x32x32 relu fused" --model cnn --input 3x32x32 --batch 512 --steps 60 --precision bf16,fp32
step "cnn 3x32x32 relu unfused" --model cnn --input 3x32x32 --batch 512 --steps 60 --precision bf16,fp32 --fused-relu 0
DTRAIN_COMM_WORLD1=1 step "mlp NCCL buckets graphs 1 vs 0" --model mlp --batch 256 --steps 300 --warmup 10 --precision bf16 --graphs 1,0
# Synthetic batches made on the GPU by one kernel (auto there) against the loader threads making
# them on the host and the model copying them, side by side: the cnn at 3x32x32 and 3x128x128
# (the widest inputs per FLOP: host making bound first), and the host-bound mlp with graphs.
# fp16 too: its host batches are staged before the last step's verdict is taken (the copy then
# runs during that wait), so fp16 host should trail bf16 host no more than fp16 device trails bf16 device.
step "cnn 3x32x32 synthetic device vs host" --model cnn --input 3x32x32 --batch 512 --steps 60 --precision bf16,fp32,fp16 --synthetic-on device,host
step "cnn 3x128x128 synthetic device vs host" --model cnn --input 3x128x128 --batch 256 --steps 20 --precision bf16 --synthetic-on device,host
step "mlp batch 256 synthetic device vs host" --model mlp --batch 256 --steps 300 --warmup 10 --precision bf16,fp16 --synthetic-on device,host
# auto leaves models of 8M+ parameters kernel by kernel: what a graph would give fc:8192x3 (its step
# after backward, so the graph may record).
step "fc:8192x3 graphs 1 vs 0, step overlap 0" --model $FC --input 1024 --batch 1024 --steps 40 --precision bf16 --step-overlap 0 --graphs 1,0
# fp16 alone, profiled (the scaler's check reads the gradients; the optimizer applies the unscale
# and writes the 16-bit copy), and what the loader's threads make on this host.
step "fc:8192x3 fp16" --model $FC --input 1024 --batch 1024 --steps 40 --precision fp16 --profile 10
# The optimizer step layer by layer on the side stream, beside backward's GEMMs (auto takes it for
# this model), against the one step after backward, side by side; and the clipped step's cost.
step "fc:8192x3 step overlap auto vs 0" --model $FC --input 1024 --batch 1024 --steps 40 --precision bf16,fp32 --step-overlap auto,0
step "fc:8192x3 bf16 clipped" --model $FC --input 1024 --batch 1024 --steps 40 --precision bf16 --clip-grad-norm 1
log "loader: $(nproc) cores; bench data --data synthetic 3x32x32 at 1, 8 and the auto count"
bounded 120 $D bench data --data synthetic --threads 1,8,$(( $(nproc) - 1 )) --batch 512 --batches 40 2>&1 | tail -4 | tee -a "$sum"
stamp
if [ -x build-old/dtrain ]; then
    log "earlier version against this one, same steps (samples/s; loader auto in both)"
    for spec in "cnn 1x28x28 1024" "cnn 3x32x32 512" "$FC 1024 1024" "mlp 784 256"; do
        set -- $spec
        for bin in build-old/dtrain $D; do
            echo "-- $bin: $1 $2 batch $3" | tee -a "$sum"
            bounded 150 $bin bench step --device cuda --model "$1" --input "$2" --batch "$3" --steps 60 2>&1 | tail -3 | tee -a "$sum"
        done
    done
    stamp
fi
log "NCCL bucket path on one rank (DTRAIN_COMM_WORLD1=1) against none"
DTRAIN_COMM_WORLD1=1 step "fc:8192x3 NCCL buckets" --model $FC --input 1024 --batch 1024 --steps 40 --precision fp32,bf16 --profile 10
# Each bucket's optimizer step queued behind its own collective (auto) against the step after the last.
DTRAIN_COMM_WORLD1=1 step "fc:8192x3 NCCL buckets, step overlap auto vs 0" --model $FC --input 1024 --batch 1024 --steps 40 --precision bf16 --step-overlap auto,0
# ZeRO-1 through NCCL's halves at one rank (the sharded state on the device; no bytes saved at W=1):
# the step time of --zero 1 against --zero 0 with AdamW, side by side.
DTRAIN_COMM_WORLD1=1 step "fc:8192x3 --zero 0,1 AdamW, NCCL" --model $FC --input 1024 --batch 1024 --steps 40 \
    --precision fp32,bf16 --optim adamw --zero 0,1
stamp
log "dtrain train --device auto (takes the GPU)"
bounded 120 $D train --model cnn --batch 1024 --steps 200 --log-every 50 --precision bf16 >"$out/train.txt" 2>&1
grep -E "^data|^GPU|^memory|^step|^done" "$out/train.txt" | tee -a "$sum"
# GPU spans (docs/trace.md): a traced cnn run with the NCCL bucket path, the trace kept for the
# issue note, and per track the spans and their summed time (device time against host queueing).
log "dtrain train --trace on the GPU (cnn, NCCL buckets, steps 10:12), kept as trace-gpu.json"
DTRAIN_COMM_WORLD1=1 bounded 120 $D train --model cnn --batch 256 --steps 20 --trace-steps 10:12 \
    --trace "$out/trace-gpu.json" >"$out/trace.txt" 2>&1 || log "the traced run failed: see trace.txt"
spans() { # trace file: spans per track and their summed time
    [ -s "$1" ] || { echo "   no trace in $(basename "$1")" | tee -a "$sum"; return; }
    python3 -c 'import json,sys,collections; d=json.load(open(sys.argv[1])); c=collections.Counter(); t=collections.Counter()
for e in d["traceEvents"]:
    if e["ph"]=="X": c[e["tid"]]+=1; t[e["tid"]]+=e["dur"]
print("   spans per track (tid: count, summed us):", {k:(c[k],round(t[k])) for k in sorted(c)}, "dropped", d["otherData"]["dropped_events"])' \
        "$1" 2>&1 | tee -a "$sum"
}
spans "$out/trace-gpu.json"
# The host-bound mlp (bf16, batch 256): host queueing per layer against the device's run time.
log "dtrain train --trace, mlp bf16 batch 256 (steps 30:32), kept as trace-mlp.json"
bounded 120 $D train --device cuda --model mlp --batch 256 --precision bf16 --steps 40 --trace-steps 30:32 \
    --trace "$out/trace-mlp.json" >"$out/trace-mlp.txt" 2>&1 || log "the traced mlp run failed: see trace-mlp.txt"
spans "$out/trace-mlp.json"
stamp
if [ "${QUICK:-0}" != 1 ]; then
    log "the same steps on this machine's CPU cores (fp32, OpenBLAS)"
    bounded 120 $D bench step --device cpu --model cnn --input 1x28x28 --batch 256 --steps 5 --warmup 1 --precision fp32 2>&1 | tail -1 | tee -a "$sum"
    bounded 120 $D bench step --device cpu --model mlp --batch 256 --steps 20 --precision fp32 2>&1 | tail -1 | tee -a "$sum"
    # The host reducer where cores are not scarce (each rank has several: the communication thread
    # need not share the GEMMs' core), against the 2-core numbers in bench/REDUCER-NOTES.md.
    log "bench reducer at np 2 on this machine's cores (host memory), 1 BLAS thread, then the default"
    for bt in 1 0; do
        bounded 120 mpirun -np 2 $D bench reducer --blas-threads $bt 2>&1 | grep -vE '^#( 20|$)' | tee -a "$sum"
    done
fi
stamp
fi # bench
# A pass that could not be recorded runs kernel by kernel with a warning and still passes: count
# them, so a benchmark's graphs rows are not read as graphs when they were not.
off=$(grep -l "step graphs are off" "$out"/*.txt 2>/dev/null | xargs -r -n1 basename | tr '\n' ' ')
log "step graphs off (recording failed) in: ${off:-no output}"
log "done"
pack
