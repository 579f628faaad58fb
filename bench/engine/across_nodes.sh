#!/usr/bin/env bash
# across_nodes.sh [OUT] [RATES] [TOPOLOGIES] - the engine's allreduce against MPI_Allreduce across
# emulated nodes: for each link rate ("200mbit 400mbit") and each topology NODESxRANKS ("2x1 2x2 3x1
# 3x2"), a fresh local SLURM cluster (slurm/cluster/up.sh, each node's link shaped by tc), then
# `dtrain bench allreduce -b 1M -e 16M` with DTRAIN_ALLREDUCE=auto and =direct, 3 timed iterations
# after 1. Writes the raw outputs to OUT (default bench/engine/across_nodes.txt) and prints one
# line per row: topology, rate, algorithm, size, dtrain and MPI algbw (MB/s), busbw ratio. Root only
# (network namespaces). Results: docs/performance.md "Across nodes: the pipelined chain".
set -u
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$repo/bench/engine/across_nodes.txt}
rates=${2:-200mbit 400mbit}
topos=${3:-2x1 2x2 3x1 3x2}
dtrain=$(realpath "${DTRAIN:-$repo/build/dtrain}")
cluster=$(mktemp -d /tmp/dtan.XXXXXX)
trap 'bash "$repo/slurm/cluster/down.sh" "$cluster" >/dev/null 2>&1' EXIT
: >"$out"
for rate in $rates; do
    for topo in $topos; do
        nodes=${topo%x*} per=${topo#*x}
        bash "$repo/slurm/cluster/up.sh" "$cluster" --nodes "$nodes" --cpus 2 --gpus 0 --link "$rate" >"$cluster/up.log" 2>&1 ||
            { cat "$cluster/up.log" >&2; exit 1; }
        for algo in auto direct; do
            echo "== $topo $rate $algo" >>"$out"
            (
                source "$repo/slurm/cluster/env.sh" "$cluster" >/dev/null
                DTRAIN_ALLREDUCE=$algo timeout 300 srun -N "$nodes" -n $((nodes * per)) --mpi=pmix "$dtrain" bench allreduce \
                    -b 1M -e 16M --iters 3 --warmup 1
            ) >>"$out" 2>&1 || echo "failed: $topo $rate $algo" >&2
        done
        bash "$repo/slurm/cluster/down.sh" "$cluster" >/dev/null 2>&1
    done
done
awk '/^== /{cfg=$2" "$3" "$4} $1 ~ /^[0-9]+$/ && NF == 14 {
    printf "%s %3d MiB  dtrain %5.1f MB/s  MPI %5.1f MB/s  ratio %.2f\n", cfg, $1 / 1048576, $1 / $4, $1 / $8, $12 }' "$out"
