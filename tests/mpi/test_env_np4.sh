#!/usr/bin/env bash
# `dtrain env` under mpirun -np 4: four distinct ranks, local ranks 0-3, and either disjoint core
# sets or the note that cores are shared (this machine may have fewer than 4 cores), blaming the
# ranks per node; one line per node; a malformed CUDA_VISIBLE_DEVICES warned about once per value,
# naming its ranks (8 at most, then "...").
here=$(dirname "$0"); source "$here/lib.sh"
DTRAIN=$1 MPIRUN=$2

"$MPIRUN" -np 4 --oversubscribe "$DTRAIN" env >"$tmp/env" 2>&1 || { cat "$tmp/env"; bad "dtrain env exited non-zero"; finish; exit; }
cat "$tmp/env"
env_rows "$tmp/env" >"$tmp/rows"
[ "$(wc -l <"$tmp/rows")" -eq 4 ] && ok "4 rows" || bad "expected 4 rows"
[ "$(awk '{print $1}' "$tmp/rows" | sort -u | tr '\n' ' ')" = "0/4 1/4 2/4 3/4 " ] && ok "ranks 0-3 of 4" || bad "ranks are not 0-3 of 4"
[ "$(awk '{print $2}' "$tmp/rows" | sort -u | tr '\n' ' ')" = "0/4 1/4 2/4 3/4 " ] && ok "local ranks 0-3 of 4" || bad "local ranks are not 0-3 of 4"
[ "$(awk '{print $5}' "$tmp/rows" | sort -u)" = "openmpi" ] && ok "launcher openmpi" || bad "launcher not openmpi"
[ "$(awk '{print $6}' "$tmp/rows" | sort -u)" = "cpu" ] && ok "device cpu" || bad "device not cpu"
if grep -q "cores are shared" "$tmp/env"; then
    cores=$(nproc)
    [ "$cores" -lt 4 ] && ok "shared-cores note with $cores cores for 4 ranks" || bad "shared note although $cores cores >= 4"
    [ "$(awk '{print $9}' "$tmp/rows" | sort -u)" = "shared" ] && ok "every rank says shared" || bad "BOUND column not 'shared'"
else
    for c in $(awk '{print $8}' "$tmp/rows"); do expand_cpus "$c"; done | sort | uniq -d >"$tmp/dups"
    [ ! -s "$tmp/dups" ] && ok "core sets are disjoint" || bad "core sets overlap: $(tr '\n' ' ' <"$tmp/dups")"
fi
# Why the cores are shared: more ranks than the node has CPUs, when nothing narrowed the CPUs this
# test may use, is not blamed on a launcher's confinement (test_pinning.sh has the confined case).
if grep -q "cores are shared" "$tmp/env" && [ "$(nproc)" -eq "$(getconf _NPROCESSORS_ONLN)" ]; then
    grep -q "start fewer ranks per node" "$tmp/env" && ! grep -q "confined ranks" "$tmp/env" &&
        ok "shared cores: the note blames the ranks per node" || bad "shared cores: the note blames a confinement"
fi
! grep -q "^warning:" "$tmp/env" && ok "no warning without a CUDA_VISIBLE_DEVICES" || bad "a warning without a cause"

# A malformed CUDA_VISIBLE_DEVICES is said once per distinct value, naming its ranks (rank/ranks),
# and a rank with a good list is not named at all.
"$MPIRUN" -np 4 --oversubscribe bash -c 'case $OMPI_COMM_WORLD_RANK in 0 | 2) v=-1 ;; 1) v=a ;; *) v=0 ;; esac
    CUDA_VISIBLE_DEVICES=$v exec "$0" env' "$DTRAIN" >"$tmp/cvd" 2>&1
grep "^warning:" "$tmp/cvd" >"$tmp/warn"
[ "$(wc -l <"$tmp/warn")" -eq 2 ] && grep -q "^warning: CUDA_VISIBLE_DEVICES='-1': .* (ranks 0, 2)$" "$tmp/warn" &&
    grep -q "^warning: CUDA_VISIBLE_DEVICES='a': .* (rank 1)$" "$tmp/warn" &&
    ok "per-rank CUDA_VISIBLE_DEVICES: one warning per value, naming its ranks" ||
    { bad "per-rank CUDA_VISIBLE_DEVICES warnings"; cat "$tmp/cvd"; }
# Past 8 ranks the list of ranks ends in "...".
"$MPIRUN" -np 9 --oversubscribe -x CUDA_VISIBLE_DEVICES=a "$DTRAIN" env >"$tmp/cvd" 2>&1
[ "$(grep -c "^warning:" "$tmp/cvd")" -eq 1 ] && grep -q "^warning: .* (ranks 0, 1, 2, 3, 4, 5, 6, 7, ...)$" "$tmp/cvd" &&
    ok "9 ranks with one bad CUDA_VISIBLE_DEVICES: 8 named, then ..." || { bad "9 ranks' warning"; cat "$tmp/cvd"; }
# One node: one line naming it.
[ "$(grep -c "^node " "$tmp/env")" -eq 1 ] && grep -q "^node 0: " "$tmp/env" && ok "one line for node 0" ||
    bad "node lines: $(grep "^node " "$tmp/env" | tr '\n' ' ')"
finish
