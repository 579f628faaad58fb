#!/usr/bin/env bash
# measure_local.sh OUTDIR [REPS] - the local half of the step-time model's validation matrix: for the
# mlp and cnn presets at 1-4 ranks on this machine, REPS (3) runs each of `bench step --profile`
# (the model's compute input and the measured step time) and `bench allreduce` (the link fit).
# The load average (taken before the run) is written beside every run, since this machine is shared and its load moves
# the times. validate.py turns OUTDIR into the error table.
set -u
out=${1:?usage: measure_local.sh OUTDIR [REPS]}
reps=${2:-3}
dtrain=${DTRAIN:-build/dtrain}
mkdir -p "$out"
# The benchmarks run at nice -15 (NICE): the background fuzzers otherwise take the cores at random
# moments and a run's timed and profiled steps see different machines (2x apart in one process).
nice=${NICE:--15}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_mpi_yield_when_idle=1 DTRAIN_DEVICE=cpu
for rep in $(seq 1 "$reps"); do
    for w in 1 2 3 4; do
        for m in mlp:128 cnn:32; do
            model=${m%%:*} batch=${m##*:}
            f="$out/step-$model-w$w-r$rep.txt"
            cut -d' ' -f1 /proc/loadavg >"$f.load"
            timeout 300 nice -n "$nice" mpirun -np "$w" "$dtrain" bench step --model "$model" --batch "$batch" --precision fp32 \
                --steps 60 --warmup 3 --profile 30 --blas-threads 1 >"$f" 2>&1 || echo "failed: $f" >&2
        done
        if [ "$w" -ge 2 ]; then
            f="$out/allreduce-w$w-r$rep.txt"
            cut -d' ' -f1 /proc/loadavg >"$f.load"
            timeout 300 nice -n "$nice" mpirun -np "$w" "$dtrain" bench allreduce -b 64K -e 16M -f 4 --iters 10 --warmup 3 \
                >"$f" 2>&1 || echo "failed: $f" >&2
        fi
    done
done
