#!/usr/bin/env bash
# measure_cluster.sh OUTDIR [REPS] [RATES] - the emulated-node half of the step-time model's
# validation: the local SLURM cluster (slurm/cluster/up.sh, 3 nodes, 1 rank each, every node's link
# shaped to RATE by tc) at each of RATES ("200mbit 1gbit"), and 2 and 3 nodes on it: REPS runs of
# `bench allreduce` (the link fit) and of `bench step --profile` for mlp and cnn. Needs root (network
# namespaces). Load averages beside every run, as in measure_local.sh.
set -u
out=${1:?usage: measure_cluster.sh OUTDIR [REPS] [RATES]}
reps=${2:-3}
rates=${3:-200mbit 1gbit}
repo=$(cd "$(dirname "$0")/../.." && pwd)
dtrain=$(realpath "${DTRAIN:-$repo/build/dtrain}")
mkdir -p "$out"
# The benchmarks run at nice -15 (NICE): the background fuzzers otherwise take the cores at random
# moments and a run's timed and profiled steps see different machines (2x apart in one process).
nice=${NICE:--15}
cluster=$(mktemp -d /tmp/dtpm.XXXXXX)
trap 'bash "$repo/slurm/cluster/down.sh" "$cluster" >/dev/null 2>&1' EXIT
for rate in $rates; do
    bash "$repo/slurm/cluster/up.sh" "$cluster" --nodes 3 --cpus 2 --gpus 0 --link "$rate" >"$out/up-$rate.log" 2>&1 ||
        { echo "the cluster did not start at $rate: $out/up-$rate.log" >&2; exit 1; }
    (
        source "$repo/slurm/cluster/env.sh" "$cluster" >/dev/null
        export DTRAIN_DEVICE=cpu
        for rep in $(seq 1 "$reps"); do
            for n in 2 3; do
                f="$out/allreduce-$rate-n$n-r$rep.txt"
                cut -d' ' -f1 /proc/loadavg >"$f.load"
                timeout 300 srun -N "$n" -n "$n" --mpi=pmix nice -n "$nice" "$dtrain" bench allreduce -b 256K -e 16M -f 4 --iters 3 \
                    --warmup 1 >"$f" 2>&1 || echo "failed: $f" >&2
                for m in mlp:128 cnn:32; do
                    model=${m%%:*} batch=${m##*:}
                    f="$out/step-$model-$rate-n$n-r$rep.txt"
                    cut -d' ' -f1 /proc/loadavg >"$f.load"
                    timeout 300 srun -N "$n" -n "$n" --mpi=pmix nice -n "$nice" "$dtrain" bench step --model "$model" --batch "$batch" \
                        --precision fp32 --steps 10 --warmup 2 --profile 5 --blas-threads 1 >"$f" 2>&1 ||
                        echo "failed: $f" >&2
                done
            done
        done
    )
    bash "$repo/slurm/cluster/down.sh" "$cluster" >/dev/null 2>&1
done
