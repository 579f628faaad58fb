#!/usr/bin/env bash
# CPU pinning with 2 ranks: under `mpirun --bind-to none` dtrain splits the cores into disjoint
# sets itself; under `--bind-to core` the launcher's binding is kept; `--pin none` leaves it alone,
# and ranks on the same cores share them among their BLAS threads; a topology hwloc takes for another
# machine's is not pinned.
here=$(dirname "$0"); source "$here/lib.sh"
DTRAIN=$1 MPIRUN=$2

if [ "$(nproc)" -lt 2 ]; then echo "SKIP: needs 2 cores, have $(nproc)"; exit 77; fi

run_env() { "$MPIRUN" -np 2 "$@" "$DTRAIN" env >"$tmp/env" 2>&1 || { cat "$tmp/env"; bad "'$*' failed"; }; cat "$tmp/env"; env_rows "$tmp/env" >"$tmp/rows"; }

run_env --bind-to none
[ "$(awk '{print $9}' "$tmp/rows" | sort -u)" = "dtrain" ] && ok "--bind-to none: dtrain pinned" || bad "--bind-to none: BOUND is not dtrain"
for c in $(awk '{print $8}' "$tmp/rows"); do expand_cpus "$c"; done | sort | uniq -d >"$tmp/dups"
[ ! -s "$tmp/dups" ] && ok "--bind-to none: disjoint cores" || bad "--bind-to none: overlapping cores"
[ "$(awk '{print $10}' "$tmp/rows" | sort -u)" -ge 1 ] && ok "BLAS threads set" || bad "BLAS threads missing"
want_blas=$(( $(nproc) / 2 ))
awk -v w="$want_blas" '$10 != w {exit 1}' "$tmp/rows" && ok "BLAS threads = cores per rank ($want_blas)" || bad "BLAS threads not $want_blas"

run_env --bind-to core
[ "$(awk '{print $9}' "$tmp/rows" | sort -u)" = "launcher" ] && ok "--bind-to core: launcher binding kept" || bad "--bind-to core: BOUND is not launcher"
[ "$(awk '{print $8}' "$tmp/rows" | sort -u | wc -l)" -eq 2 ] && ok "--bind-to core: two different cores" || bad "--bind-to core: cores not distinct"
# What mpirun bound each rank to, seen from outside dtrain, must be what dtrain reports.
"$MPIRUN" -np 2 --bind-to core bash -c 'echo "$OMPI_COMM_WORLD_RANK $(taskset -cp $$ | sed "s/.*: //")"' |
    while read -r r c; do echo "$r $(expand_cpus "$c" | tr '\n' ' ')"; done | sort >"$tmp/launcher"
awk '{split($1,a,"/"); print a[1], $8}' "$tmp/rows" | while read -r r c; do echo "$r $(expand_cpus "$c" | tr '\n' ' ')"; done | sort >"$tmp/reported"
diff "$tmp/launcher" "$tmp/reported" >/dev/null && ok "reported cores = mpirun's binding" || { bad "reported cores differ from mpirun's"; cat "$tmp/launcher" "$tmp/reported"; }

# --pin is a dtrain flag: pass it after the command.
"$MPIRUN" -np 2 --bind-to none "$DTRAIN" env --pin none >"$tmp/env" 2>&1; cat "$tmp/env"; env_rows "$tmp/env" >"$tmp/rows"
[ "$(awk '{print $9}' "$tmp/rows" | sort -u)" = "none" ] && ok "--pin none: not pinned" || bad "--pin none: BOUND is not none"
all=$(expand_cpus "$(taskset -cp $$ | sed 's/.*: //')" | tr '\n' ' ')
for c in $(awk '{print $8}' "$tmp/rows"); do
    [ "$(expand_cpus "$c" | tr '\n' ' ')" = "$all" ] && ok "--pin none: all cores ($c)" || bad "--pin none: $c is not all of $all"
done
# Both ranks on all cores: their BLAS threads share them (before, each took one per core).
awk -v w="$want_blas" '$10 != w {exit 1}' "$tmp/rows" && ok "--pin none: BLAS threads = cores / 2 ranks ($want_blas)" ||
    bad "--pin none: BLAS threads $(awk '{print $10}' "$tmp/rows" | tr '\n' ' ')not $want_blas"
# A topology hwloc reads from elsewhere (HWLOC_SYNTHETIC, HWLOC_XMLFILE) is another machine's to it
# unless HWLOC_THISSYSTEM=1: binding then returns success and does nothing, so dtrain must not
# claim it (it said "dtrain" on cores 0 and 1 while the kernel kept both ranks on all cores).
synth="core:$(nproc) pu:1"
HWLOC_SYNTHETIC="$synth" "$MPIRUN" -np 2 --bind-to none -x HWLOC_SYNTHETIC "$DTRAIN" env >"$tmp/env" 2>&1
cat "$tmp/env"; env_rows "$tmp/env" >"$tmp/rows"
[ "$(awk '{print $9}' "$tmp/rows" | sort -u)" = "none" ] && ok "HWLOC_SYNTHETIC: no binding claimed" ||
    bad "HWLOC_SYNTHETIC: BOUND $(awk '{print $9}' "$tmp/rows" | tr '\n' ' ')is not none"
for c in $(awk '{print $8}' "$tmp/rows"); do
    [ "$(expand_cpus "$c" | tr '\n' ' ')" = "$all" ] && ok "HWLOC_SYNTHETIC: the kernel's CPUs reported ($c)" ||
        bad "HWLOC_SYNTHETIC: $c reported, the kernel has $all"
done
[ "$(grep -c 'CPU pinning skipped' "$tmp/env")" -eq 1 ] && grep -q 'Fix: unset HWLOC_SYNTHETIC' "$tmp/env" &&
    ok "HWLOC_SYNTHETIC: one warning with the fix" || bad "HWLOC_SYNTHETIC: no single warning naming the variable"
# A lone rank that a taskset confined is the launcher's binding under a foreign topology too (its
# CPUs are counted from the kernel, not from the made-up machine).
HWLOC_SYNTHETIC="$synth" taskset -c 0 "$DTRAIN" env >"$tmp/env" 2>&1; env_rows "$tmp/env" >"$tmp/rows"
[ "$(awk '{print $9, $8}' "$tmp/rows")" = "launcher 0" ] && ! grep -q 'pinning skipped' "$tmp/env" &&
    ok "HWLOC_SYNTHETIC, taskset -c 0, one rank: the launcher's binding" ||
    { cat "$tmp/env"; bad "HWLOC_SYNTHETIC, taskset -c 0: not the launcher's binding on CPU 0"; }
# With HWLOC_THISSYSTEM=1 hwloc binds for real, and dtrain pins as usual.
HWLOC_THISSYSTEM=1 HWLOC_SYNTHETIC="$synth" "$MPIRUN" -np 2 --bind-to none -x HWLOC_SYNTHETIC -x HWLOC_THISSYSTEM \
    "$DTRAIN" env >"$tmp/env" 2>&1; env_rows "$tmp/env" >"$tmp/rows"
[ "$(awk '{print $9}' "$tmp/rows" | sort -u)" = "dtrain" ] && ! grep -q 'pinning skipped' "$tmp/env" &&
    ok "HWLOC_THISSYSTEM=1: dtrain pins" || { cat "$tmp/env"; bad "HWLOC_THISSYSTEM=1: not pinned by dtrain"; }
# Ranks confined by the launcher to one CPU of the node share it: the note blames the confinement,
# not the number of ranks per node.
"$MPIRUN" -np 2 --bind-to none bash -c 'exec taskset -c 0 "$0" env' "$DTRAIN" >"$tmp/env" 2>&1
cat "$tmp/env"; env_rows "$tmp/env" >"$tmp/rows"
[ "$(awk '{print $9}' "$tmp/rows" | sort -u)" = "shared" ] && grep -q "confined ranks to fewer CPUs than their node has" \
    "$tmp/env" && ! grep -q "start fewer ranks per node" "$tmp/env" && ok "taskset -c 0: the note names the confinement" ||
    bad "taskset -c 0: no note on the launcher's confinement"
# The note names the first confined rank, the CPUs it may use and how many its node has online.
grep -qF "(rank 0 may run on CPUs 0, $(getconf _NPROCESSORS_ONLN) online on " "$tmp/env" &&
    ok "taskset -c 0: the note names rank 0, CPU 0 and the node's $(getconf _NPROCESSORS_ONLN) CPUs" ||
    bad "taskset -c 0: the note's rank or CPUs: $(grep -o '(rank [^)]*)' "$tmp/env")"
DTRAIN_PIN=none "$MPIRUN" -np 2 --bind-to none -x DTRAIN_PIN "$DTRAIN" env >"$tmp/env" 2>&1; env_rows "$tmp/env" >"$tmp/rows"
[ "$(awk '{print $9}' "$tmp/rows" | sort -u)" = "none" ] && ok "DTRAIN_PIN=none: not pinned" || bad "DTRAIN_PIN=none ignored"
finish
