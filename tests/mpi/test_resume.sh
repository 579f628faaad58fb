#!/usr/bin/env bash
# Stop and resume: a SIGUSR1 or SIGTERM on one rank stops every rank after the same step with a
# checkpoint and exit code 75; --resume auto continues from it, and the final parameters equal an
# uninterrupted run's bit for bit. Damaged checkpoints are skipped for an older sound one; a
# checkpoint of another model is refused.
here=$(dirname "$0"); source "$here/lib.sh"
DTRAIN=$1 MPIRUN=$2 CMP=$3
common="--model mlp --steps 60 --batch 8 --lr 0.05 --seed 4 --log-every 10 --blas-threads 1"

"$MPIRUN" -np 2 "$DTRAIN" train $common --dump-params "$tmp/ref" >"$tmp/log" 2>&1 || { cat "$tmp/log"; bad "reference run failed"; }

for sig in usr1 term; do
    ck="$tmp/ck-$sig"
    DTRAIN_FAULT=$sig:1:23 "$MPIRUN" -np 2 -x DTRAIN_FAULT "$DTRAIN" train $common --checkpoint-dir "$ck" --resume auto \
        --dump-params "$tmp/p-$sig" >"$tmp/log" 2>&1
    rc=$?
    if [ "$rc" -eq 75 ] && grep -q "stopping after step 23 on a signal" "$tmp/log" && [ -f "$ck/ckpt-0000000023.dtc" ]; then
        ok "$sig on rank 1 at step 23: every rank stopped after step 23, exit 75, checkpoint written"
    else
        bad "$sig: exit $rc"; cat "$tmp/log"
    fi
    "$MPIRUN" -np 2 "$DTRAIN" train $common --checkpoint-dir "$ck" --resume auto --dump-params "$tmp/p-$sig" >"$tmp/log" 2>&1 ||
        { cat "$tmp/log"; bad "resume after $sig failed"; }
    grep -q "resumed from .*ckpt-0000000023.dtc at step 23" "$tmp/log" && ok "resumed at step 23" || { bad "did not resume at 23"; cat "$tmp/log"; }
    out=$("$CMP" "$tmp/p-$sig" "$tmp/ref" exact) && ok "interrupted + resumed == uninterrupted: $out" || bad "after $sig: $out"
done

# Periodic checkpoints; the newest damaged: it is skipped for the older sound one, same result.
ck="$tmp/ck-every"
DTRAIN_FAULT=usr1:0:35 "$MPIRUN" -np 2 -x DTRAIN_FAULT "$DTRAIN" train $common --checkpoint-dir "$ck" --checkpoint-every 10 >"$tmp/log" 2>&1
ls "$ck" | tr '\n' ' ' | grep -q "ckpt-0000000010.dtc ckpt-0000000020.dtc ckpt-0000000030.dtc ckpt-0000000035.dtc" &&
    ok "checkpoints every 10 steps and at the stop: $(ls "$ck" | tr '\n' ' ')" || bad "checkpoint files: $(ls "$ck" | tr '\n' ' ')"
truncate -s 1000 "$ck/ckpt-0000000035.dtc"
printf 'X' | dd of="$ck/ckpt-0000000030.dtc" bs=1 seek=5000 conv=notrunc status=none
"$MPIRUN" -np 2 "$DTRAIN" train $common --checkpoint-dir "$ck" --resume auto --dump-params "$tmp/p-every" >"$tmp/log" 2>&1 ||
    { cat "$tmp/log"; bad "resume from older checkpoint failed"; }
grep -q "skipping checkpoint: checkpoint .*ckpt-0000000035.dtc is 1000 bytes; its header describes .* (truncated)" "$tmp/log" &&
grep -q "skipping checkpoint: checkpoint .*ckpt-0000000030.dtc: section 0 is damaged (CRC mismatch)" "$tmp/log" &&
grep -q "resumed from .*ckpt-0000000020.dtc at step 20" "$tmp/log" && ok "damaged checkpoints 35 and 30 skipped, resumed at 20" ||
    { bad "damaged checkpoints not handled"; cat "$tmp/log"; }
out=$("$CMP" "$tmp/p-every" "$tmp/ref" exact) && ok "resumed from the older checkpoint == uninterrupted: $out" || bad "older: $out"
expect 2 "was written for another model" "$DTRAIN" train --model fc:16,relu,fc:10 --input 784 --steps 5 --checkpoint-dir "$ck" --resume auto
expect 2 "--resume auto needs --checkpoint-dir" "$DTRAIN" train --resume auto
expect 2 "--resume 'yes'" "$DTRAIN" train --resume yes
finish
