#!/usr/bin/env bash
# `dtrain doctor --model`: on a device faked small by DTRAIN_TEST_MEM_LIMIT, the batch doctor calls
# the largest that fits passes, one more fails (exit 1) with the fix naming the one that fits, and
# training at that batch runs; a bad --model fails naming it; ranks of a node share its host memory
# without the limit; a faked meminfo short of memory warns.
here=$(dirname "$0"); source "$here/lib.sh"
DTRAIN=$1 MPIRUN=$2
limit=$((64 * 1024 * 1024))
model=(--model cnn --input 3x32x32)

# row FILE NAME: the first memory row NAME of a --json report as "status<TAB>seen<TAB>fix<TAB>ranks".
row() {
    python3 - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows = [c for c in d["checks"] if c["name"] == sys.argv[2]]
if not rows: print("none"); sys.exit(1)
c = rows[0]
print("\t".join([c["status"], c["seen"], c["fix"], json.dumps(c["ranks"])]))
PY
}
largest() { sed -n 's/.*the largest batch that fits is \([0-9]*\).*/\1/p' <<<"$1"; }

DTRAIN_TEST_MEM_LIMIT=$limit "$MPIRUN" -np 2 -x DTRAIN_TEST_MEM_LIMIT "$DTRAIN" doctor --no-comm --json "${model[@]}" \
    --batch 8 >"$tmp/j" 2>"$tmp/err"
rc=$?
r=$(row "$tmp/j" memory.model)
max=$(largest "$r")
[ $rc -eq 0 ] && [ "${r%%$'\t'*}" = pass ] && [ -n "$max" ] && [ "$max" -gt 8 ] &&
    grep -q "DTRAIN_TEST_MEM_LIMIT 64.0 MiB" <<<"$r" &&
    ok "2 ranks, batch 8 under a 64 MiB limit: pass, the largest that fits is $max" ||
    bad "batch 8: rc $rc, row '$r': $(cat "$tmp/err")"
p=$(row "$tmp/j" memory.plan)
[[ $p == pass$'\t'"fp32 at batch 8 on the CPU: peak"*"; biggest: parameters (fp32) "*$'\t[0, 1]' ]] &&
    ok "memory.plan: one row for both ranks with the biggest buffers" || bad "memory.plan row '$p'"
r=$(row "$tmp/j" memory.host)
[ "${r%%$'\t'*}" = pass ] && grep -q "GiB available of" <<<"$r" && ok "memory.host: $(cut -f2 <<<"$r")" ||
    bad "memory.host row '$r'"

if [ -n "$max" ]; then
    DTRAIN_TEST_MEM_LIMIT=$limit "$MPIRUN" -np 2 -x DTRAIN_TEST_MEM_LIMIT "$DTRAIN" doctor --no-comm --json \
        "${model[@]}" --batch "$max" >"$tmp/j" 2>"$tmp/err"
    rc=$?
    r=$(row "$tmp/j" memory.model)
    [ $rc -eq 0 ] && [ "${r%%$'\t'*}" = pass ] && [ "$(largest "$r")" = "$max" ] &&
        ok "--batch $max (the largest): pass, exit 0" || bad "--batch $max: rc $rc, row '$r'"
    DTRAIN_TEST_MEM_LIMIT=$limit "$MPIRUN" -np 2 -x DTRAIN_TEST_MEM_LIMIT "$DTRAIN" doctor --no-comm --json \
        "${model[@]}" --batch $((max + 1)) >"$tmp/j" 2>"$tmp/err"
    rc=$?
    r=$(row "$tmp/j" memory.model)
    [ $rc -eq 1 ] && [ "${r%%$'\t'*}" = fail ] && grep -q "use --batch $max" <<<"$r" && grep -q $'\t\\[0, 1\\]$' <<<"$r" &&
        ok "--batch $((max + 1)): fail on both ranks, exit 1, fix 'use --batch $max'" ||
        bad "--batch $((max + 1)): rc $rc, row '$r'"
    # What doctor promises, training keeps: a step at that batch under the same limit.
    expect 0 "done: 1 step" env DTRAIN_TEST_MEM_LIMIT=$limit "$DTRAIN" train "${model[@]}" --batch "$max" --steps 1
fi

# A preset brings its input shape, as under dtrain train: --model cnn alone plans the cnn at its
# 1x28x28, the same largest batch as with --input 1x28x28; a layer list without --input is bad usage.
declare -A at
for in in "" 1x28x28 3x32x32; do
    DTRAIN_TEST_MEM_LIMIT=$limit "$DTRAIN" doctor --no-comm --json --model cnn ${in:+--input $in} >"$tmp/j" 2>"$tmp/err"
    r=$(row "$tmp/j" memory.model)
    [ "${r%%$'\t'*}" = pass ] && at[${in:-preset}]=$(largest "$r") || bad "--model cnn ${in:+--input $in}: row '$r'"
done
[ -n "${at[preset]}" ] && [ "${at[preset]}" = "${at[1x28x28]}" ] && [ "${at[preset]}" != "${at[3x32x32]}" ] &&
    ok "--model cnn without --input: planned at 1x28x28 (largest batch ${at[preset]})" ||
    bad "--model cnn without --input: largest batch '${at[preset]}', with 1x28x28 '${at[1x28x28]}'"
expect 2 "--model fc:10 needs --input N|CxHxW" "$DTRAIN" doctor --no-comm --model fc:10
# A wrong name is said as one, not as a layer list that lacks --input.
expect 2 "model 'resnet18' is neither a preset (mlp, cnn) nor a layer list" "$DTRAIN" doctor --no-comm --model resnet18

# A model that cannot be planned: FAIL naming it, exit 1 (the table, for people).
expect 1 "layer 2 'bogus' is not a layer" "$MPIRUN" -np 2 "$DTRAIN" doctor --no-comm --model conv:8:3:1:1,bogus,fc:10 \
    --input 3x32x32
grep -q "^memory.model  *FAIL" "$tmp/out" && ok "bad --model: memory.model FAIL" || bad "bad --model: no FAIL row"

# Without the limit the CPU ranks of a node share its MemAvailable (no memory cgroup: a faked empty
# tree, so that a job's real cgroup limit does not decide here).
DTRAIN_TEST_CGROUP_ROOT=$tmp/nocg "$MPIRUN" -np 2 -x DTRAIN_TEST_CGROUP_ROOT "$DTRAIN" doctor --no-comm --json \
    "${model[@]}" >"$tmp/j" 2>"$tmp/err"
r=$(row "$tmp/j" memory.model)
# "... of Y GiB free (MemAvailable X GiB of HOST shared by its 2 ranks on the CPU)": Y is X / 2.
half=$(sed -n 's/.* of \([0-9.]*\) GiB free (MemAvailable \([0-9.]*\) GiB of .* shared by its 2 ranks on the CPU).*/\1 \2/p' <<<"$r")
[[ $r == pass$'\t'"the largest batch that fits is "* ]] && [ -n "$half" ] &&
    python3 -c 'import sys; y, x = map(float, sys.argv[1:]); assert abs(y - x / 2) <= 0.1' $half &&
    ok "no limit: each of 2 ranks gets half the host's MemAvailable ($half)" || bad "no limit: row '$r'"

# A memory cgroup of 1 GiB (faked: a v2 tree read instead of /proc/self/cgroup and /sys/fs/cgroup)
# shared by 2 ranks: doctor fails naming it and the batch that fits under it, and train refuses
# before its first step (not killed by the kernel mid-run) with the same batch.
cg=$tmp/cg
mkdir -p "$cg/proc/self" "$cg/sys/fs/cgroup/job"
echo "0::/job" >"$cg/proc/self/cgroup"
echo 1073741824 >"$cg/sys/fs/cgroup/job/memory.max"
echo 0 >"$cg/sys/fs/cgroup/job/memory.current"
DTRAIN_TEST_CGROUP_ROOT=$cg "$MPIRUN" -np 2 -x DTRAIN_TEST_CGROUP_ROOT "$DTRAIN" doctor --no-comm --json "${model[@]}" \
    --batch 1024 >"$tmp/j" 2>"$tmp/err"
rc=$?
r=$(row "$tmp/j" memory.model)
fits=$(largest "$r")
[ $rc -eq 1 ] && [ "${r%%$'\t'*}" = fail ] && [ -n "$fits" ] && [ "$fits" -lt 1024 ] &&
    grep -q "under cgroup memory.max 1.0 GiB ($cg/sys/fs/cgroup/job): 1.0 GiB left, shared by 2 ranks" <<<"$r" &&
    grep -q "use --batch $fits.*raise the limit" <<<"$r" &&
    ok "cgroup 1 GiB, 2 ranks, batch 1024: FAIL naming the cgroup, batch $fits fits" ||
    bad "cgroup 1 GiB: rc $rc, row '$r'"
expect 1 "the kernel would kill it mid-run" env DTRAIN_TEST_CGROUP_ROOT="$cg" "$MPIRUN" -np 2 -x DTRAIN_TEST_CGROUP_ROOT \
    "$DTRAIN" train "${model[@]}" --batch 1024 --steps 1 --quiet
grep -q "before the first step (planned)" "$tmp/out" && grep -q "fix: batch $fits fits" "$tmp/out" &&
    ok "train under the cgroup: refused before the first step, batch $fits named" ||
    bad "train under the cgroup: $(grep -m3 'dtrain' "$tmp/out")"

# ulimit -v inside each rank (mpirun keeps its own): the plan counts against the address space left.
if [ -n "${ASAN_OPTIONS:-}" ]; then
    # AddressSanitizer reserves terabytes of shadow address space: no ulimit -v leaves it room.
    echo "skip: ulimit -v under AddressSanitizer (its shadow memory needs the address space)"
else
    "$MPIRUN" -np 2 -x DTRAIN_TEST_CGROUP_ROOT=$tmp/nocg bash -c "ulimit -S -v 1500000 && exec $DTRAIN doctor \
        --no-comm --json ${model[*]} --batch 4096" >"$tmp/j" 2>"$tmp/err"
    rc=$?
    r=$(row "$tmp/j" memory.model)
    [ $rc -eq 1 ] && [ "${r%%$'\t'*}" = fail ] && grep -q "under ulimit -v 1500000 KiB (RLIMIT_AS" <<<"$r" &&
        grep -q "use --batch [0-9].*ulimit -v" <<<"$r" &&
        ok "ulimit -v 1500000, batch 4096: FAIL naming the limit, batch $(largest "$r") fits" ||
        bad "ulimit -v: rc $rc, row '$r' $(cat "$tmp/err")"
fi

# A node short of host memory (a faked meminfo): WARN, exit 0.
printf 'MemTotal:       16777216 kB\nMemAvailable:     524288 kB\n' >"$tmp/meminfo"
DTRAIN_TEST_MEMINFO=$tmp/meminfo "$MPIRUN" -np 2 -x DTRAIN_TEST_MEMINFO "$DTRAIN" doctor --no-comm --json >"$tmp/j" 2>"$tmp/err"
rc=$?
r=$(row "$tmp/j" memory.host)
[ $rc -eq 0 ] && [[ $r == warn$'\t'*"has 512.0 MiB available of 16.0 GiB (3%)"*$'\t[0, 1]' ]] &&
    ok "faked low host memory: memory.host WARN, exit 0" || bad "low host memory: rc $rc, row '$r'"
printf 'MemTotal: 16 MB\n' >"$tmp/meminfo"
DTRAIN_TEST_MEMINFO=$tmp/meminfo "$DTRAIN" doctor --no-comm --json >"$tmp/j" 2>"$tmp/err"
r=$(row "$tmp/j" memory.host)
[[ $r == warn$'\t'*"host memory unknown: $tmp/meminfo: the MemTotal line 'MemTotal: 16 MB'"* ]] &&
    ok "unreadable meminfo: WARN naming the file and line" || bad "bad meminfo: row '$r'"
finish
