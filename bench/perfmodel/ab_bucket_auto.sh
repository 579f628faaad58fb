#!/usr/bin/env bash
# ab_bucket_auto.sh OUTDIR [RATE] [MODEL] [REPS] - `train --bucket-mb auto` against fixed caps on 2
# shaped nodes of the local SLURM cluster (slurm/cluster/, 1 rank a node; needs root): REPS rounds,
# each a run with auto, 25 (the default), 1 and 0 (one bucket), interleaved so load drifts hit all
# alike; the step time of each run's last log interval, and what auto chose.
set -u
out=${1:?usage: ab_bucket_auto.sh OUTDIR [RATE] [MODEL] [REPS]}
rate=${2:-1gbit} model=${3:-cnn} reps=${4:-3}
repo=$(cd "$(dirname "$0")/../.." && pwd)
dtrain=$(realpath "${DTRAIN:-$repo/build/dtrain}")
mkdir -p "$out"
cluster=$(mktemp -d /tmp/dtab.XXXXXX)
trap 'bash "$repo/slurm/cluster/down.sh" "$cluster" >/dev/null 2>&1' EXIT
bash "$repo/slurm/cluster/up.sh" "$cluster" --nodes 2 --cpus 2 --gpus 0 --link "$rate" >"$out/up.log" 2>&1 ||
    { echo "the cluster did not start: $out/up.log" >&2; exit 1; }
source "$repo/slurm/cluster/env.sh" "$cluster" >/dev/null
export DTRAIN_DEVICE=cpu
for rep in $(seq 1 "$reps"); do
    for cap in auto 25 1 0; do
        f="$out/train-$model-$cap-r$rep.txt"
        cut -d' ' -f1 /proc/loadavg >"$f.load"
        timeout 300 srun -N 2 -n 2 --mpi=pmix nice -n -15 "$dtrain" train --model "$model" --batch 32 --steps 40 \
            --log-every 20 --blas-threads 1 --bucket-mb "$cap" >"$f" 2>&1 || echo "failed: $f" >&2
        printf '%s r%s cap %-4s load %s: %s %s\n' "$model" "$rep" "$cap" "$(cat "$f.load")" \
            "$(grep -E '^step +40/' "$f" | grep -oE 'step +[0-9.]+ ms' | tail -1)" \
            "$(grep -oE 'auto (chose|keeps) [0-9.]+ MiB[^:]*' "$f")"
    done
done | tee "$out/summary.txt"
