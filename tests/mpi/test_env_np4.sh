#!/usr/bin/env bash
# `dtrain env` under mpirun -np 4: four distinct ranks, local ranks 0-3, and either disjoint core
# sets or the note that cores are shared (this machine may have fewer than 4 cores).
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
finish
