#!/usr/bin/env bash
# engine_curve.sh [OUT.txt] [OUT.png] - the engine's host allreduce modelled to 512 ranks and its
# calibration (docs/performance.md, "The engine's algorithms at scale"): `dtrain model-perf
# --engine-curve` on the CPU cluster's defaults, plotted; then on the shaped cluster's links
# (slurm/cluster, every node's link shaped by tc tbf to 200 Mbit/s) at 2 x 2, 3 x 2 and 3 x 1
# ranks, its algbw against the algbw measured there, as a markdown table of errors.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dtrain=${DTRAIN:-$here/../../build/dtrain}
out=${1:-/dev/stdout}
png=${2:-$(cd "$here/../.." && pwd)/docs/img/engine-curve.png}
# The shaped cluster: 2 ranks a node; 200 Mbit/s = 25 MB/s each way, ~24 MB/s of payload after
# headers, 200 us a hop through tbf's queue and TCP; shared memory 2 GB/s a rank and 5 us a message
# (a loaded 2-core VM); 10 us of MPI's host work a message.
shaped=(--net-gbs 0.024 --net-alpha-us 200 --busbw-gbs 2 --alpha-us 5 --msg-us 10)
# Measured algbw in MB/s, low and high of the runs, for 1-16 MiB: topology, ranks, ranks a node,
# then chain, direct and MPI's (MPI_Allreduce, Open MPI's own choice of algorithm).
measured="2x2 4 2 23 24 11 12 17 21
3x1 3 1 11 12 12 16 7 7
3x2 6 2 11 11 6 8 8 12"
{
    echo "## The CPU cluster's defaults, 2 to 512 ranks"
    "$dtrain" model-perf --engine-curve 1M,16M --plot "$png" | grep -v '^model-perf: wrote'
    echo
    echo "## Calibration: the shaped cluster, predicted algbw against measured (MB/s; error against the middle of the measured range)"
    echo "| ranks | algorithm | measured | 1 MiB | 4 MiB | 16 MiB | error 1 MiB | error 4 MiB | error 16 MiB |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
    while read -r topo w g clo chi dlo dhi mlo mhi; do
        "$dtrain" model-perf --engine-curve 1M,4M,16M --world "$w" --gpus-per-node "$g" "${shaped[@]}" |
            awk -v topo="$topo" -v w="$w" -v m="chain $clo $chi direct $dlo $dhi MPI $mlo $mhi" '
                /^# [0-9]+ [KMG]iB/ { size = $2 " " $3 }
                /^ +[0-9]+ +[0-9]+ / { f = 1000 * w / (2 * (w - 1)); chain[size] = $5 * f; direct[size] = $4 * f; ring[size] = $3 * f }
                END {
                    split(m, v, " ")
                    for (i = 1; i <= 9; i += 3) {
                        lo = v[i + 1]; hi = v[i + 2]; mid = (lo + hi) / 2
                        range = lo == hi ? lo : lo "-" hi
                        row = "| " topo " | " v[i] " | " range
                        err = ""
                        split("1 MiB,4 MiB,16 MiB", s, ",")
                        for (k = 1; k <= 3; k++) {
                            p = v[i] == "chain" ? chain[s[k]] : v[i] == "direct" ? direct[s[k]] : ring[s[k]]
                            row = row sprintf(" | %.1f", p)
                            err = err sprintf(" | %+.0f%%", 100 * (p - mid) / mid)
                        }
                        print row err " |"
                    }
                }'
    done <<<"$measured"
} >"$out"
