#!/usr/bin/env bash
# --keep-checkpoints N: after each checkpoint is committed, rank 0 removes the files of earlier steps
# beyond the N - 1 newest, so a long run does not fill its disk. Files of later steps (a damaged one
# a resume skipped) are neither counted nor removed, so the file just written always stays; nothing
# but the writer's regular files is touched; without the flag every checkpoint stays.
here=$(dirname "$0"); source "$here/lib.sh"
DTRAIN=$1
MPIRUN=$2
S="--model fc:16,relu,fc:10 --input 32 --dataset-size 256 --batch 16 --device cpu --quiet"
ckpts() { (cd "$1" && ls ckpt-*.dtc 2>/dev/null | sed 's/ckpt-0*\([0-9]*\)\.dtc/\1/' | sort -n | tr '\n' ' '); }

timeout 120 "$DTRAIN" train $S --steps 9 --checkpoint-every 2 --checkpoint-dir "$tmp/all" >/dev/null 2>&1
[ "$(ckpts "$tmp/all")" = "2 4 6 8 9 " ] && ok "without --keep-checkpoints every checkpoint stays" ||
    bad "default kept: $(ckpts "$tmp/all")"

timeout 120 "$DTRAIN" train $S --steps 9 --checkpoint-every 2 --checkpoint-dir "$tmp/k2" --keep-checkpoints 2 \
    >"$tmp/out" 2>&1
[ "$(ckpts "$tmp/k2")" = "8 9 " ] && ok "--keep-checkpoints 2 keeps the newest two (8, 9)" ||
    { bad "--keep-checkpoints 2 kept: $(ckpts "$tmp/k2")"; cat "$tmp/out"; }

# A damaged file of a later step, a FIFO named like a checkpoint: left alone; the resume skips the
# damaged one, and the run's own newest file is kept whatever N is.
mkdir -p "$tmp/k1"
timeout 120 "$DTRAIN" train $S --steps 4 --checkpoint-every 2 --checkpoint-dir "$tmp/k1" >/dev/null 2>&1
head -c 100 /dev/urandom >"$tmp/k1/ckpt-0000000100.dtc"
mkfifo "$tmp/k1/ckpt-0000000001.dtc"
timeout 120 "$DTRAIN" train $S --steps 8 --checkpoint-every 2 --checkpoint-dir "$tmp/k1" --resume auto \
    --keep-checkpoints 1 >"$tmp/out" 2>&1
rc=$?
if [ $rc -eq 0 ] && [ "$(ckpts "$tmp/k1")" = "1 8 100 " ] && [ -p "$tmp/k1/ckpt-0000000001.dtc" ] &&
    grep -q "skipping checkpoint" "$tmp/out"; then
    ok "--keep-checkpoints 1 after a skipped damaged file: the run's newest kept, the later file and the FIFO untouched"
else
    bad "keep 1 with a damaged later file: exit $rc, left $(ckpts "$tmp/k1")"; cat "$tmp/out"
fi
rm -f "$tmp/k1/ckpt-0000000001.dtc"

# Two ranks: rank 0 prunes, the run ends well.
expect 0 "" timeout 120 "$MPIRUN" -np 2 "$DTRAIN" train $S --steps 6 --checkpoint-every 1 \
    --checkpoint-dir "$tmp/r2" --keep-checkpoints 3
[ "$(ckpts "$tmp/r2")" = "4 5 6 " ] && ok "2 ranks: the newest three (4, 5, 6)" || bad "2 ranks kept: $(ckpts "$tmp/r2")"

# A run without --resume into a directory holding an earlier run's checkpoints is warned, once,
# with the steps there and the two ways on; a resume, or an empty directory, is not.
timeout 120 "$DTRAIN" train $S --steps 3 --checkpoint-dir "$tmp/all" >"$tmp/out" 2>&1
n=$(grep -c "warning: --checkpoint-dir $tmp/all already holds 5 checkpoints of an earlier run (steps 2 to 9) and this run does not resume: .* give --resume auto to go on from step 9, or an empty --checkpoint-dir to start over" "$tmp/out")
timeout 120 "$DTRAIN" train $S --steps 10 --checkpoint-dir "$tmp/all" --resume auto >"$tmp/out2" 2>&1
[ "$n" -eq 1 ] && ! grep -q "already holds" "$tmp/out2" &&
    ok "a fresh run into an earlier run's checkpoints is warned once; --resume auto is not" ||
    { bad "the earlier-checkpoints warning ($n lines)"; cat "$tmp/out" "$tmp/out2"; }
expect 2 "--keep-checkpoints needs --checkpoint-dir DIR" "$DTRAIN" train $S --steps 1 --keep-checkpoints 2
expect 2 "--keep-checkpoints" "$DTRAIN" train $S --steps 1 --checkpoint-dir "$tmp/x" --keep-checkpoints -1
finish
