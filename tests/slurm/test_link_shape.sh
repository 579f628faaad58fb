#!/usr/bin/env bash
# The link emulation of the local SLURM cluster works: with up.sh --link RATE, `dtrain bench
# allreduce` between two nodes (one rank each, so every byte crosses the shaped veths over Open
# MPI's TCP BTL) measures an MPI_Allreduce busbw within 25% of RATE at two rates (the engine's at
# least half of RATE, never above 1.25x), and four times the rate gives four times the busbw
# (within 25%), each from the fastest of 3 timed allreduces. First the same run unshaped, to know
# the host can outrun the faster rate at all: on a loaded 2-core VM it may not, and then the
# shaping cannot be told apart from the CPU limit (exit 77, SKIP, with the numbers). Also: bad
# --link specs are refused naming the value and the fix, and a DELAY is refused naming
# CONFIG_NET_SCH_NETEM where the kernel has no netem (found out at run time), or shaped with netem
# where it has. Last, the engine across
# nodes with 2 ranks a node (2 x 2 and 3 x 2 at 200 Mbit/s, where it takes its pipelined chain):
# at least 0.9x MPI_Allreduce's busbw on average from 1 to 4 MiB, 0.8x at each size.
here=$(dirname "$0"); source "$here/../mpi/lib.sh"
DTRAIN=$1
repo=$(cd "$here/../.." && pwd)
cluster="$tmp/cluster"
up="$repo/slurm/cluster/up.sh"
down="$repo/slurm/cluster/down.sh"

if [ "$(id -u)" -ne 0 ]; then echo "SKIP: the local SLURM cluster needs root (network namespaces)"; exit 77; fi
for b in slurmctld slurmd srun munged ip tc unshare nsenter; do
    command -v "$b" >/dev/null || { echo "SKIP: $b is not installed (make test installs it: see the Makefile)"; exit 77; }
done
trap 'bash "$down" "$cluster" >/dev/null 2>&1; rm -rf "$tmp"' EXIT

# --- refused before anything starts: exit 2 and a message naming the value and the fix.
expect 2 "rate '10xbit' is not a number followed by bit, kbit, mbit" bash "$up" "$cluster" --link 10xbit
expect 2 "delay '5' is not a number followed by us, ms or s" bash "$up" "$cluster" --link 1gbit:5
expect 2 "has 2 specs for 3 nodes" bash "$up" "$cluster" --nodes 3 --link 1gbit,2gbit
expect 2 "outside 1mbit..100gbit" bash "$up" "$cluster" --link 500kbit
expect 2 "jitter '2ms' is larger than the delay '1ms'" bash "$up" "$cluster" --link 1gbit:1ms:2ms
expect 2 "NODES given twice, 2 and 3" bash "$up" "$cluster" 2 --nodes 3
expect 2 "unknown option '--lnk'" bash "$up" "$cluster" --lnk 1gbit

# --- a delay: netem or a clear refusal, whichever this kernel allows
if bash "$up" "$cluster" 2 1 0 --link 1gbit:200us >"$tmp/delay.log" 2>&1; then
    nsenter --net="/run/netns/$(sed -n 's/.*bridge \(dt[0-9]*\)br.*/\1/p' "$tmp/delay.log")-node1" tc qdisc show dev eth0 >"$tmp/q"
    grep -q "netem.*delay 200us" "$tmp/q" && ok "--link 1gbit:200us: netem delay on node1's egress" || { bad "no netem delay on node1"; cat "$tmp/q"; }
    bash "$down" "$cluster" >/dev/null 2>&1
elif grep -q "CONFIG_NET_SCH_NETEM" "$tmp/delay.log" && ! ip link show 2>/dev/null | grep -q "nt[01]@"; then
    ok "--link 1gbit:200us on a kernel without netem: refused naming CONFIG_NET_SCH_NETEM, scratch veth gone"
else
    bad "--link 1gbit:200us neither started nor was refused naming CONFIG_NET_SCH_NETEM"; cat "$tmp/delay.log"
fi

# --- one spec per node: each node's two shapers at its own rate, shown by up.sh and env.sh
if bash "$up" "$cluster" --nodes 2 --cpus 1 --gpus 0 --link=100mbit,400mbit >"$tmp/pn.log" 2>&1; then
    tag=$(sed -n 's/.*bridge \(dt[0-9]*\)br.*/\1/p' "$tmp/pn.log")
    shown=$(for i in 1 2; do
        tc qdisc show dev "${tag}v$i" | grep -o 'tbf.*rate [0-9]*Mbit' | sed 's/.*rate //'
        nsenter --net="/run/netns/$tag-node$i" tc qdisc show dev eth0 | grep -o 'tbf.*rate [0-9]*Mbit' | sed 's/.*rate //'
    done | tr '\n' ' ')
    [ "$shown" = "100Mbit 100Mbit 400Mbit 400Mbit " ] && ok "--link=100mbit,400mbit: node1 100Mbit both ways, node2 400Mbit" ||
        bad "--link=100mbit,400mbit: tbf rates (node1 host-side, eth0, node2 ...) are '$shown'"
    env_links=$(bash "$repo/slurm/cluster/env.sh" "$cluster" | grep -c -E '^# link: node[12] (100|400)mbit: ')
    [ "$env_links" -eq 2 ] && grep -q "link node2 400mbit: 400mbit each way" "$tmp/pn.log" &&
        ok "env.sh and up.sh show each node's link" || { bad "the shaping is not shown"; cat "$tmp/pn.log"; }
    bash "$down" "$cluster" >/dev/null 2>&1
else
    bad "up.sh --link=100mbit,400mbit did not start"; cat "$tmp/pn.log"
fi

# bench NAME BYTES [--link SPEC]: brings the 2-node cluster up, times allreduces of BYTES, tears
# it down; sets bus_mpi / bus_dt from each side's fastest timed allreduce (bytes/s, from the size
# and the min-max columns: the GB/s columns have only 3 decimals, 8% of 12.5 MB/s) and shows how
# the cluster says it is shaped. The size grows with the rate (8 MiB at 100 Mbit/s, 32 MiB at
# 400), so an allreduce takes ~0.7 s at either and the fixed costs (rendezvous handshakes, TCP's
# ramp after each phase, a rank waiting for a CPU) weigh the same: with 8 MiB at 400 Mbit/s they
# cost ~20%. The fastest: the background load of a shared 2-core VM only ever slows an allreduce
# down (one of a pair of means measured 0.77x of 400 Mbit/s while the other measured 0.92x), and
# no allreduce can beat the shaper by more than its bucket (128 KiB, 1.5% of 8 MiB). One size
# and the fastest of its 3 rather than the better mean of two sizes (8 and 16 MiB, 32 and 64):
# as robust, in a third of the time (~7 s a rate instead of ~23 s).
cluster_allreduce() ( # NODES NP MINBYTES MAXBYTES: bench allreduce on the cluster, in its environment
    source "$repo/slurm/cluster/env.sh" "$cluster" >/dev/null
    timeout 120 srun -N "$1" -n "$2" --mpi=pmix "$DTRAIN" bench allreduce -b "$3" -e "$4" --iters 3 --warmup 1
)
bench() {
    local name=$1 bytes=$2; shift 2
    bus_mpi=; bus_dt=
    if ! bash "$up" "$cluster" 2 1 0 "$@" >"$tmp/up.log" 2>&1; then
        cat "$tmp/up.log"; bad "$name: the cluster did not start"; return 1
    fi
    "$repo/slurm/cluster/env.sh" "$cluster" | grep -E '^# link|btl' | sed "s/^/    $name env: /"
    # once more after Open MPI's crash inside MPI_Init (once_more, tests/mpi/lib.sh)
    once_more "$tmp/$name.out" "$tmp/$name.out" cluster_allreduce 2 2 "$bytes" "$bytes"
    local rc=$?
    bash "$down" "$cluster" >/dev/null 2>&1
    # size count type dtrain_us algbw busbw #wrong mpi_us algbw busbw #wrong ratio min-max min-max; n = 2:
    # busbw = algbw * 2(n-1)/n = size / time, here of the fastest allreduce (min-max's first number)
    read -r bus_dt bus_mpi < <(awk '$1 ~ /^[0-9]+$/ && NF == 14 { split($13, d, "-"); split($14, m, "-")
        if (d[1] > 0 && m[1] > 0) printf "%.0f %.0f\n", $1 / d[1] * 1e6, $1 / m[1] * 1e6 }' "$tmp/$name.out")
    if [ $rc -ne 0 ] || [ -z "$bus_mpi" ]; then
        cat "$tmp/$name.out"; bad "$name: srun dtrain bench allreduce failed (rc $rc)"; return 1
    fi
    echo "    $name: busbw MPI $(awk -v b="$bus_mpi" 'BEGIN { printf "%.1f", b / 1e6 }') MB/s, dtrain engine $(awk -v b="$bus_dt" 'BEGIN { printf "%.1f", b / 1e6 }') MB/s"
}

# within NAME BUSBW RATE_BITS LOW: busbw (bytes/s) between LOW and 1.25 x the link rate (bits/s)
within() {
    local r mb
    r=$(awk -v b="$2" -v l="$3" 'BEGIN { printf "%.3f", b * 8 / l }')
    mb=$(awk -v b="$2" 'BEGIN { printf "%.1f", b / 1e6 }')
    if awk -v r="$r" -v lo="$4" 'BEGIN { exit !(r >= lo && r <= 1.25) }'; then
        ok "$1: busbw $mb MB/s = $r x the link rate (allowed $4..1.25)"
    else
        bad "$1: busbw $mb MB/s = $r x the link rate, outside $4..1.25"
    fi
}
# MPI_Allreduce is the reference: its busbw must be within 25% of the rate. The engine's must not
# beat the shaper either, but with one rank a node (2 ranks: MPI_Allreduce underneath) it only
# shows the emulation: from 0.5 x the rate. The engine's own efficiency across nodes is checked
# with 2 ranks a node at the end (engine_vs_mpi).

low=100mbit; high=400mbit; low_bits=100000000; high_bits=400000000
bench unshaped 32M || { finish; exit 1; }
unshaped=$bus_mpi
# The shaper can only be seen where the host is faster than it: ask for 1.5x the faster rate.
if awk -v b="$unshaped" -v l="$high_bits" 'BEGIN { exit !(b * 8 < 1.5 * l) }'; then
    echo "SKIP: unshaped busbw is only $(awk -v b="$unshaped" 'BEGIN { printf "%.1f", b / 1e6 }') MB/s, under 1.5x the $high link ($((high_bits * 3 / 16 / 1000000)) MB/s): the host is too loaded to tell shaping from its CPU limit"
    exit 77
fi
ok "unshaped: busbw $(awk -v b="$unshaped" 'BEGIN { printf "%.1f", b / 1e6 }') MB/s, over 1.5x the $high link"

bench "$low" 8M --link "$low" || { finish; exit 1; }
low_mpi=$bus_mpi; low_dt=$bus_dt
within "$low link, MPI_Allreduce" "$low_mpi" "$low_bits" 0.75
within "$low link, dtrain engine" "$low_dt" "$low_bits" 0.5
bench "$high" 32M --link "$high" || { finish; exit 1; }
high_mpi=$bus_mpi; high_dt=$bus_dt
within "$high link, MPI_Allreduce" "$high_mpi" "$high_bits" 0.75
within "$high link, dtrain engine" "$high_dt" "$high_bits" 0.5

# 4x the rate, 4x the busbw: the ratio of the ratios within 25% of 1
q=$(awk -v h="$high_mpi" -v l="$low_mpi" -v hb="$high_bits" -v lb="$low_bits" 'BEGIN { printf "%.3f", (h / l) / (hb / lb) }')
if awk -v q="$q" 'BEGIN { exit !(q >= 0.75 && q <= 1.25) }'; then
    ok "$high vs $low: MPI busbw grew $(awk -v h="$high_mpi" -v l="$low_mpi" 'BEGIN { printf "%.2f", h / l }')x for 4x the rate ($q of proportional)"
else
    bad "$high vs $low: MPI busbw grew $(awk -v h="$high_mpi" -v l="$low_mpi" 'BEGIN { printf "%.2f", h / l }')x for 4x the rate ($q of proportional, not within 25%)"
fi

# engine_vs_mpi NODES NP: the engine against MPI_Allreduce with 2 ranks a node at 200 Mbit/s, 1-4 MiB,
# where DT_ALLREDUCE_AUTO takes the pipelined chain (its header line says so): the busbw ratio
# (dtrain / MPI, the last column) at least 0.9 on average over the sizes and 0.8 at each, the issue's
# target with room for a loaded host (measured 1.03-1.37 at 2 x 2 and 0.99-1.33 at 3 x 2). A run
# that misses it is measured once more on the same cluster, and that one decides: MPI_Allreduce's
# time over the shaped link varies from run to run (at 4 MiB, 2 x 2, on an idle host: 176 to
# 240 ms in five runs, the engine's 176 to 184 ms), so one run's ratio at a size ranged 0.80-1.35.
engine_vs_mpi() {
    local nodes=$1 np=$2 name="$1 nodes x $(($2 / $1)) ranks, 200mbit"
    if ! bash "$up" "$cluster" "$nodes" 2 0 --link 200mbit >"$tmp/up.log" 2>&1; then
        cat "$tmp/up.log"; bad "$name: the cluster did not start"; return 1
    fi
    local rc verdict try
    for try in 1 2; do
        # once more after Open MPI's crash inside MPI_Init (once_more, tests/mpi/lib.sh)
        once_more "$tmp/evm.out" "$tmp/evm.out" cluster_allreduce "$nodes" "$np" 1M 4M
        rc=$?
        verdict=$(awk '$1 ~ /^[0-9]+$/ && NF == 14 { n++; s += $12; if (min == "" || $12 < min) min = $12; r = r sprintf(" %d MiB %.2f,", $1 / 1048576, $12) }
            END { if (!n) { print "none"; exit } printf "%s mean %.2f min %.2f %s\n", (s / n >= 0.9 && min >= 0.8) ? "ok" : "low", s / n, min, r }' "$tmp/evm.out")
        case "$rc:$verdict" in
        0:low*) [ $try -eq 1 ] && echo "    $name: run 1 ${verdict#low }: measured once more" ;;
        *) break ;;
        esac
    done
    bash "$down" "$cluster" >/dev/null 2>&1
    grep -q "algorithm by size (DTRAIN_ALLREDUCE=auto): chain from 1048576 bytes" "$tmp/evm.out" ||
        { bad "$name: the engine does not take the chain from 1 MiB"; cat "$tmp/evm.out"; return 1; }
    case "$rc:$verdict" in
    0:ok*) ok "$name: engine busbw / MPI_Allreduce's: ${verdict#ok }$([ "$try" -eq 2 ] && echo " (run 2)")" ;;
    *) bad "$name: engine busbw / MPI_Allreduce's (want mean >= 0.9, each >= 0.8; rc $rc): $verdict"; cat "$tmp/evm.out" ;;
    esac
}
engine_vs_mpi 2 4
engine_vs_mpi 3 6
finish
