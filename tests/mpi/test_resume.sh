#!/usr/bin/env bash
# Stop and resume: a SIGUSR1 or SIGTERM on one rank stops every rank after the same step with a
# checkpoint and exit code 75 (SIGINT and SIGHUP: the same stop, exit 130 and 129); --resume auto
# continues from it, and the final parameters equal an uninterrupted run's bit for bit. A stop
# asked for during a checkpoint's save stops after it, one in the last step finishes the run, one before the first step (or before the
# handlers, from the program's start) stops before training, and a second SIGINT ends at once; a
# reader of the output that the signal ended too (| tee) costs no checkpoint, and one landing
# while a write waits on a full pipe loses no line. Damaged checkpoints are skipped for an older sound one; a
# checkpoint of another model is refused (at 2 ranks said once). --metrics keeps the records up to the checkpoint's step and
# appends, so the file of a requeued job holds every logged step once.
here=$(dirname "$0"); source "$here/lib.sh"
DTRAIN=$1 MPIRUN=$2 CMP=$3 CRAFT=$4
common="--model mlp --steps 60 --batch 8 --lr 0.05 --seed 4 --log-every 10 --blas-threads 1"
iso='"time": "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z", '
# metrics_steps FILE: the steps of its records, space-separated; and every record has its time.
metrics_steps() { sed -n 's/.*"step": \([0-9]*\),.*/\1/p' "$1" | tr '\n' ' '; }
metrics_timed() { [ -s "$1" ] && ! grep -vqE "^\{$iso\"step\": [0-9]+, .*\}$" "$1"; }

"$MPIRUN" -np 2 "$DTRAIN" train $common --dump-params "$tmp/ref" >"$tmp/log" 2>&1 || { cat "$tmp/log"; bad "reference run failed"; }

for sig in usr1 term int hup; do
    ck="$tmp/ck-$sig" want=75
    [ $sig = int ] && want=130
    [ $sig = hup ] && want=129
    DTRAIN_FAULT=$sig:1:23 "$MPIRUN" -np 2 -x DTRAIN_FAULT "$DTRAIN" train $common --checkpoint-dir "$ck" --resume auto \
        --dump-params "$tmp/p-$sig" --metrics "$tmp/m-$sig.jsonl" >"$tmp/log" 2>&1
    rc=$?
    if [ "$rc" -eq $want ] && grep -q "stopping after step 23 on a signal (SIG${sig^^}.*, on another rank)" "$tmp/log" &&
        [ -f "$ck/ckpt-0000000023.dtc" ]; then
        ok "$sig on rank 1 at step 23: every rank stopped after step 23, exit $want, checkpoint written"
    else
        bad "$sig: exit $rc"; cat "$tmp/log"
    fi
    "$MPIRUN" -np 2 "$DTRAIN" train $common --checkpoint-dir "$ck" --resume auto --dump-params "$tmp/p-$sig" \
        --metrics "$tmp/m-$sig.jsonl" >"$tmp/log" 2>&1 || { cat "$tmp/log"; bad "resume after $sig failed"; }
    grep -q "resumed from .*ckpt-0000000023.dtc at step 23" "$tmp/log" && ok "resumed at step 23" || { bad "did not resume at 23"; cat "$tmp/log"; }
    # The stop at 23 logged steps 21-23 (the resumed run starts after them), then 24-30 make step 30's.
    [ "$(metrics_steps "$tmp/m-$sig.jsonl")" = "10 20 23 30 40 50 60 " ] && metrics_timed "$tmp/m-$sig.jsonl" &&
        grep -q "metrics: appending to .*m-$sig.jsonl after its 3 records up to step 23$" "$tmp/log" &&
        ok "--metrics after the resume: steps $(metrics_steps "$tmp/m-$sig.jsonl")each once, each with its time" ||
        { bad "--metrics after the resume at 23: steps $(metrics_steps "$tmp/m-$sig.jsonl")"; cat "$tmp/m-$sig.jsonl"; grep metrics "$tmp/log"; }
    grep -q "^done: 60 steps (37 here, resumed after step 23) in " "$tmp/log" && ok "the done line counts the 37 steps run here" ||
        { bad "the resumed run's done line"; grep "^done" "$tmp/log"; }
    out=$("$CMP" "$tmp/p-$sig" "$tmp/ref" exact) && ok "interrupted + resumed == uninterrupted: $out" || bad "after $sig: $out"
done

# Periodic checkpoints; the newest damaged: it is skipped for the older sound one, same result.
ck="$tmp/ck-every"
DTRAIN_FAULT=usr1:0:35 "$MPIRUN" -np 2 -x DTRAIN_FAULT "$DTRAIN" train $common --checkpoint-dir "$ck" --checkpoint-every 10 \
    --metrics "$tmp/m-every.jsonl" >"$tmp/log" 2>&1
ls "$ck" | tr '\n' ' ' | grep -q "ckpt-0000000010.dtc ckpt-0000000020.dtc ckpt-0000000030.dtc ckpt-0000000035.dtc" &&
    ok "checkpoints every 10 steps and at the stop: $(ls "$ck" | tr '\n' ' ')" || bad "checkpoint files: $(ls "$ck" | tr '\n' ' ')"
truncate -s 1000 "$ck/ckpt-0000000035.dtc"
printf 'X' | dd of="$ck/ckpt-0000000030.dtc" bs=1 seek=5000 conv=notrunc status=none
cp "$tmp/m-every.jsonl" "$tmp/m-every.before"
"$MPIRUN" -np 2 "$DTRAIN" train $common --checkpoint-dir "$ck" --resume auto --dump-params "$tmp/p-every" \
    --metrics "$tmp/m-every.jsonl" >"$tmp/log" 2>&1 || { cat "$tmp/log"; bad "resume from older checkpoint failed"; }
grep -q "skipping checkpoint: checkpoint .*ckpt-0000000035.dtc is 1000 bytes; its header describes .* (truncated)" "$tmp/log" &&
grep -q "skipping checkpoint: checkpoint .*ckpt-0000000030.dtc: section \"params\" is damaged (CRC mismatch)" "$tmp/log" &&
grep -q "resumed from .*ckpt-0000000020.dtc at step 20" "$tmp/log" && ok "damaged checkpoints 35 and 30 skipped, resumed at 20" ||
    { bad "damaged checkpoints not handled"; cat "$tmp/log"; }
out=$("$CMP" "$tmp/p-every" "$tmp/ref" exact) && ok "resumed from the older checkpoint == uninterrupted: $out" || bad "older: $out"
# Resumed at 20 with records up to 35: those of steps 30 and 35 are dropped, 10 and 20 kept as they were.
[ "$(metrics_steps "$tmp/m-every.before")" = "10 20 30 35 " ] && [ "$(metrics_steps "$tmp/m-every.jsonl")" = "10 20 30 40 50 60 " ] &&
    [ "$(head -2 "$tmp/m-every.jsonl")" = "$(head -2 "$tmp/m-every.before")" ] && metrics_timed "$tmp/m-every.jsonl" &&
    grep -q "after its 2 records up to step 20; dropped 2 records of steps 30 to 35 (those steps run again)" "$tmp/log" &&
    ok "--metrics resumed at 20: kept 10 and 20 byte for byte, dropped 30 and 35, appended 30 to 60" ||
    { bad "--metrics resumed at 20: before $(metrics_steps "$tmp/m-every.before"), after $(metrics_steps "$tmp/m-every.jsonl")";
      cat "$tmp/m-every.jsonl"; grep metrics "$tmp/log"; }

# Crafted files with valid CRCs (the audit's): the parameters longer than the model (they used to be
# copied past the parameter buffer), a header step that is not the name's, a FIFO and a directory
# named like checkpoints (a FIFO used to block the open forever). Each is skipped with a message
# naming the field and both values, and the run resumes from the sound step-20 file, bit for bit.
ck="$tmp/ck-craft"
mkdir -p "$ck" && cp "$tmp/ck-every/ckpt-0000000020.dtc" "$ck/"
"$CRAFT" "$ck/ckpt-0000000020.dtc" "$tmp/step40" step 40 && "$CRAFT" "$tmp/step40" "$ck/ckpt-0000000040.dtc" section0-plus 4096 &&
    "$CRAFT" "$ck/ckpt-0000000020.dtc" "$ck/ckpt-0000000041.dtc" step 4611686018427387904 &&
    "$CRAFT" "$ck/ckpt-0000000020.dtc" "$ck/ckpt-0000000042.dtc" step 42 && mv "$ck/ckpt-0000000042.dtc" "$ck/ckpt-0000000043.dtc" &&
    mkfifo "$ck/ckpt-0000000050.dtc" && mkdir "$ck/ckpt-0000000045.dtc" || bad "crafting checkpoints failed"
timeout -s KILL 120 "$MPIRUN" -np 2 "$DTRAIN" train $common --checkpoint-dir "$ck" --resume auto --dump-params "$tmp/p-craft" \
    >"$tmp/log" 2>&1 || { cat "$tmp/log"; bad "resume past crafted checkpoints failed"; }
grep -q "ckpt-0000000050.dtc is a FIFO (named pipe), not a checkpoint file" "$tmp/log" &&
grep -q "ckpt-0000000045.dtc is a directory, not a checkpoint file" "$tmp/log" &&
grep -q "ckpt-0000000043.dtc: header field step is 42 but the file name says step 43" "$tmp/log" &&
grep -q "ckpt-0000000041.dtc: header field step is 4611686018427387904 but the file name says step 41" "$tmp/log" &&
grep -q "ckpt-0000000040.dtc: section \"params\" holds 1867786 floats; the model has 1863690" "$tmp/log" &&
grep -q "resumed from .*ckpt-0000000020.dtc at step 20" "$tmp/log" &&
    ok "FIFO, directory, wrong steps and a longer section 0 skipped with their fields named, resumed at 20" ||
    { bad "crafted checkpoints not handled"; cat "$tmp/log"; }
out=$("$CMP" "$tmp/p-craft" "$tmp/ref" exact) && ok "resumed past crafted files == uninterrupted: $out" || bad "crafted: $out"

# A --metrics file that is not ours is kept aside, with a warning, never rewritten or lost.
small="--model fc:16,relu,fc:10 --input 16 --batch 4 --log-every 5 --blas-threads 1 --checkpoint-dir $tmp/ck-small"
"$DTRAIN" train $small --steps 10 --metrics "$tmp/m-small.jsonl" >"$tmp/log" 2>&1 || { bad "small run failed"; cat "$tmp/log"; }
printf 'step,loss\n5,2.3\n' >"$tmp/m-small.jsonl"
expect 0 "warning: --metrics $tmp/m-small.jsonl: line 1 is not a metrics record, so it is not this run's metrics file: kept it as $tmp/m-small.jsonl.bad-" \
    "$DTRAIN" train $small --steps 15 --resume auto --metrics "$tmp/m-small.jsonl"
bad_copy=$(ls "$tmp"/m-small.jsonl.bad-* 2>/dev/null | head -1)
[ -n "$bad_copy" ] && [ "$(cat "$bad_copy")" = "$(printf 'step,loss\n5,2.3')" ] && [ "$(metrics_steps "$tmp/m-small.jsonl")" = "15 " ] &&
    ok "the foreign file kept as ${bad_copy##*/}, a fresh one holds step 15" ||
    { bad "foreign metrics file: aside '$bad_copy', new steps $(metrics_steps "$tmp/m-small.jsonl")"; ls "$tmp"; }
# A record cut short after the checkpoint's step (a stop in mid-write) is dropped with the others.
"$DTRAIN" train $small --steps 10 --checkpoint-dir "$tmp/ck-5" --checkpoint-every 5 --metrics "$tmp/m-cut.jsonl" >"$tmp/log" 2>&1
rm -f "$tmp/ck-5/ckpt-0000000010.dtc"
truncate -s -9 "$tmp/m-cut.jsonl"
expect 0 "after its 1 record up to step 5; dropped a last line cut short (line 2)" "$DTRAIN" train $small --steps 10 --checkpoint-dir "$tmp/ck-5" \
    --resume auto --metrics "$tmp/m-cut.jsonl"
[ "$(metrics_steps "$tmp/m-cut.jsonl")" = "5 10 " ] && metrics_timed "$tmp/m-cut.jsonl" && ! ls "$tmp"/m-cut.jsonl.bad-* >/dev/null 2>&1 &&
    ok "a record cut short after the checkpoint is dropped: steps 5 10" || { bad "cut record"; cat "$tmp/m-cut.jsonl"; }
# Without --resume the file starts afresh, as before.
"$DTRAIN" train $small --steps 5 --checkpoint-dir "$tmp/ck-fresh" --metrics "$tmp/m-cut.jsonl" >"$tmp/log" 2>&1
[ "$(metrics_steps "$tmp/m-cut.jsonl")" = "5 " ] && ok "a run that does not resume starts its --metrics afresh" ||
    bad "fresh run: steps $(metrics_steps "$tmp/m-cut.jsonl")"
expect 2 "was written for another model" "$DTRAIN" train --model fc:16,relu,fc:10 --input 784 --steps 5 --checkpoint-dir "$ck" --resume auto
# At 2 ranks rank 0 says so once; rank 1, which has only its verdict, says nothing of its own.
expect 2 "was written for another model" "$MPIRUN" -np 2 "$DTRAIN" train --model fc:16,relu,fc:10 --input 784 --steps 5 \
    --checkpoint-dir "$ck" --resume auto
[ "$(grep -c '^dtrain: error:' "$tmp/out")" -eq 1 ] && ok "2 ranks: the refusal is said once" || { bad "2 ranks: refusal lines"; cat "$tmp/out"; }
expect 2 "--resume auto needs --checkpoint-dir" "$DTRAIN" train --resume auto
expect 2 "--resume 'yes'" "$DTRAIN" train --resume yes
# A --checkpoint-dir that cannot be made stops the run before it trains (not at its first save);
# a save interrupted by a kill leaves a temporary file that the next run removes.
expect 2 "cannot create checkpoint directory $tmp/none/ck: its parent $tmp/none does not exist: make it (mkdir -p $tmp/none)" \
    "$DTRAIN" train --model mlp --steps 2 --batch 8 --checkpoint-dir "$tmp/none/ck"
grep -q "^step" "$tmp/out" && bad "a run with an unusable --checkpoint-dir trained" || ok "it did not train"
# A parent that exists but cannot be written (a read-only mount: root ignores modes) is said as
# such, with the read-only file system's fix. Needs root's unshare -m; skipped elsewhere.
mkdir -p "$tmp/ro"
if unshare -m sh -c 'mount -t tmpfs -o ro,size=4k none "$1"' _ "$tmp/ro" 2>/dev/null; then
    expect 2 "cannot create checkpoint directory $tmp/ro/ck: its parent $tmp/ro exists but cannot be written (Read-only file system): the file system is mounted read-only: remount it read-write or use another --checkpoint-dir" \
        unshare -m sh -c 'mount -t tmpfs -o ro,size=4k none "$1" && exec "$2" train --model mlp --steps 2 --batch 8 --checkpoint-dir "$1/ck"' \
        _ "$tmp/ro" "$DTRAIN"
else
    echo "skip: no tmpfs mount in a private namespace: the read-only parent does not run"
fi
mkdir -p "$tmp/ckt" && printf 'half' >"$tmp/ckt/ckpt-0000000005.dtc.tmp.4242"
expect 0 "removed 1 unfinished checkpoint file" "$DTRAIN" train --model mlp --steps 2 --batch 8 --checkpoint-dir "$tmp/ckt"
[ ! -e "$tmp/ckt/ckpt-0000000005.dtc.tmp.4242" ] && ok "the interrupted save's file is gone" || bad "stale file kept"
# --epochs after a resume at another rank count: the run ends where epoch N starts, counted from
# the checkpoint's data position (7 steps of 2 x 8 make epoch 1 of 103 samples; on 1 rank epoch 2
# is 13 more), not N x this run's steps per epoch from step 0.
"$MPIRUN" -np 2 "$DTRAIN" train --model mlp --dataset-size 103 --batch 8 --epochs 1 --checkpoint-dir "$tmp/cke" \
    --log-every 100 >"$tmp/log" 2>&1 || { cat "$tmp/log"; bad "the 2-rank epoch failed"; }
expect 0 "epochs: --epochs 2 ends at step 20 here" "$DTRAIN" train --model mlp --dataset-size 103 --batch 8 \
    --epochs 2 --checkpoint-dir "$tmp/cke" --resume auto --log-every 100
grep -q "step     20/20  epoch 2.00" "$tmp/out" && ok "it stopped at epoch 2.00" || { bad "not at epoch 2.00"; cat "$tmp/out"; }
# The cosine schedule of an --epochs run resumed at half the batch goes on from the checkpoint's data
# position: checkpointed at step 40 of 80 (batch 16, the start of epoch 1), the run at batch 8 ends
# at its step 120 (epoch 2), each step at the first run's rate where their steps start at the same
# position and at the rate of a batch-8 run from step 0 everywhere, down to that run's last rate
# at epoch 2. (It used to read 40 of 120 steps done, not half the data: 1.5 times the rate.)
cos="--model fc:8,relu,fc:10 --input 16 --dataset-size 640 --epochs 2 --lr 0.1 --lr-schedule cosine --log-every 1"
"$DTRAIN" train $cos --batch 16 --checkpoint-dir "$tmp/ck-cos" --checkpoint-every 40 --metrics "$tmp/m-cos16.jsonl" \
    >"$tmp/log" 2>&1 && "$DTRAIN" train $cos --batch 8 --metrics "$tmp/m-cos8.jsonl" >"$tmp/log" 2>&1 ||
    { cat "$tmp/log"; bad "the cosine runs at batch 16 and 8 failed"; }
mkdir -p "$tmp/ck-cosr" && cp "$tmp/ck-cos/ckpt-0000000040.dtc" "$tmp/ck-cosr/"
expect 0 "lr schedule: the checkpoint's data position is its step 80 of 160 at this global batch of 8" "$DTRAIN" train \
    $cos --batch 8 --checkpoint-dir "$tmp/ck-cosr" --resume auto --metrics "$tmp/m-cosr.jsonl"
# lr_by_start FILE STEPS_PER_EPOCH: "EPOCH LR" a record a line, EPOCH where its step's data starts.
lr_by_start() { sed -n 's/.*"epoch": \([0-9.]*\),.*"lr": \([0-9.e+-]*\).*/\1 \2/p' "$1" | awk -v n="$2" '{printf "%.4f %s\n", $1 - 1 / n, $2}'; }
same=$(join <(lr_by_start "$tmp/m-cos16.jsonl" 40 | sort) <(lr_by_start "$tmp/m-cosr.jsonl" 80 | sort) |
    awk '{d = $2 - $3; if (d < 0) d = -d; if (d <= 1e-6 * $2 + 1e-12) s++; else print "differ at epoch " $1 ": " $2 " " $3 > "/dev/stderr"} END {print s + 0}')
first=$(lr_by_start "$tmp/m-cosr.jsonl" 80 | head -1) last=$(tail -1 "$tmp/m-cosr.jsonl")
[ "$same" = 40 ] && [ "$first" = "1.0000 0.05" ] &&
    [ "$(lr_by_start "$tmp/m-cosr.jsonl" 80)" = "$(lr_by_start "$tmp/m-cos8.jsonl" 80 | tail -80)" ] &&
    [[ $last == *'"step": 120, "epoch": 2,'* ]] && [[ $last == *"$(tail -1 "$tmp/m-cos8.jsonl" | grep -o '"lr": [^,]*')"* ]] &&
    ok "cosine resumed at half the batch: lr 0.05 at epoch 1 as before, 40 of 40 shared positions at the first run's rate, the batch-8 curve to epoch 2" ||
    { bad "cosine resumed at half the batch: first (epoch lr) '$first', $same of 40 positions agree; last: $last"; cat "$tmp/out"; }
# Its first line comes before the checkpoint is read: it says its steps are counted from step 0, and
# the next lines where the run ends.
grep -q "= 8 per step, 160 steps to epoch 2 from step 0 (a checkpoint's data position moves the end), sgd" "$tmp/out" &&
    grep -q "epochs: --epochs 2 ends at step 120 here" "$tmp/out" &&
    ok "the resumed run's first line counts 160 steps to epoch 2 from step 0, then it ends at step 120" ||
    { bad "the resumed run's lines about its steps"; cat "$tmp/out"; }
# A stop on a log step logs it first: its record stays (before, the resumed run started after it
# and the record of step 20 was never written).
ck="$tmp/ck-logstep"
DTRAIN_FAULT=usr1:1:20 "$MPIRUN" -np 2 -x DTRAIN_FAULT "$DTRAIN" train $common --checkpoint-dir "$ck" --resume auto \
    --metrics "$tmp/m-log.jsonl" >"$tmp/log" 2>&1
[ $? -eq 75 ] || { bad "the stop at step 20 did not exit 75"; cat "$tmp/log"; }
"$MPIRUN" -np 2 "$DTRAIN" train $common --checkpoint-dir "$ck" --resume auto --metrics "$tmp/m-log.jsonl" \
    >"$tmp/log" 2>&1 || { cat "$tmp/log"; bad "resume after the stop at 20 failed"; }
[ "$(metrics_steps "$tmp/m-log.jsonl")" = "10 20 30 40 50 60 " ] && ok "stopped on log step 20: its record kept" ||
    bad "stopped on log step 20: records of steps $(metrics_steps "$tmp/m-log.jsonl")"
# A crash (SIGKILL, no checkpoint of its own) between checkpoints, with --log-every 7 that does not
# divide --checkpoint-every 10: every checkpoint step ends a log interval, so the resumed run's
# records equal the uninterrupted run's, steps and figures (the record of step 21 used to cover
# step 21 alone after a resume at 20, steps 15-20 in none). lr is written with the digits its
# float needs (it was cut to 6).
gap="--model fc:32,relu,fc:10 --input 64 --dataset-size 500 --steps 40 --batch 16 --lr 0.0123456789 --log-every 7
     --checkpoint-every 10 --blas-threads 1"
untimed() { sed -E 's/"(time|samples_per_s|step_time_s|comm_wait_s|data_wait_s)": [^,]*, //g' "$1"; }
"$DTRAIN" train $gap --checkpoint-dir "$tmp/ck-gapref" --metrics "$tmp/m-gapref.jsonl" >"$tmp/log" 2>&1 ||
    { cat "$tmp/log"; bad "the uninterrupted run of --log-every 7 failed"; }
DTRAIN_FAULT=kill:0:26 "$DTRAIN" train $gap --checkpoint-dir "$tmp/ck-gap" --resume auto --metrics "$tmp/m-gap.jsonl" \
    >"$tmp/log" 2>&1
"$DTRAIN" train $gap --checkpoint-dir "$tmp/ck-gap" --resume auto --metrics "$tmp/m-gap.jsonl" >"$tmp/log" 2>&1 ||
    { cat "$tmp/log"; bad "the resume after the kill at 26 failed"; }
[ "$(metrics_steps "$tmp/m-gapref.jsonl")" = "7 10 14 20 21 28 30 35 40 " ] &&
    [ "$(untimed "$tmp/m-gap.jsonl")" = "$(untimed "$tmp/m-gapref.jsonl")" ] &&
    grep -q "^metrics: appending to .*m-gap.jsonl after its 4 records up to step 20; dropped 1 record of step 21 (those steps run again)$" "$tmp/log" &&
    ok "killed at 26, resumed at 20: records of steps $(metrics_steps "$tmp/m-gap.jsonl")equal the uninterrupted run's" ||
    { bad "killed at 26, resumed at 20: the records differ from the uninterrupted run's"; diff <(untimed "$tmp/m-gapref.jsonl") \
      <(untimed "$tmp/m-gap.jsonl"); grep metrics "$tmp/log"; }
[ "$(grep -c '"lr": 0.012345679[,}]' "$tmp/m-gapref.jsonl")" = 9 ] &&
    ok "lr 0.0123456789 written as the float the optimizer uses, 0.012345679, in every record" ||
    bad "lr in the records: $(grep -o '"lr": [^,}]*' "$tmp/m-gapref.jsonl" | sort -u | tr '\n' ' ')"
# --quiet keeps the resume's info lines to itself but not a warning: a file whose record of the
# checkpoint's step is gone leaves steps in no record, and says which.
head -8 "$tmp/m-gap.jsonl" >"$tmp/m-gapq.jsonl"
"$DTRAIN" train $gap --steps 45 --checkpoint-dir "$tmp/ck-gap" --resume auto --metrics "$tmp/m-gapq.jsonl" --quiet \
    >"$tmp/log" 2>"$tmp/err" || { cat "$tmp/log" "$tmp/err"; bad "the --quiet resume at 40 failed"; }
[ "$(grep -c . "$tmp/log")" = "$(grep -c '^done: ' "$tmp/log")" ] && grep -q '^done: 45 steps (5 here' "$tmp/log" &&
    grep -q "warning: --metrics .*m-gapq.jsonl: its last record kept is of step 35 but this run resumed after step 40: steps 36 to 40 are in no record" "$tmp/err" &&
    [ "$(metrics_steps "$tmp/m-gapq.jsonl")" = "7 10 14 20 21 28 30 35 42 45 " ] &&
    ok "--quiet resume: the done line alone on stdout, the lost record of step 40 warned of" ||
    { bad "--quiet resume: stdout and stderr"; cat "$tmp/log" "$tmp/err"; }
# A stop before the first step (here during the set-up, on rank 1) ends the run before it trains:
# nothing to save, exit 75 with --checkpoint-dir (it used to train a step first).
expect 75 "stopping before step 1 on a signal (SIGTERM, on another rank): no step trained, nothing to save" \
    env DTRAIN_FAULT=term:1:0 timeout -s KILL 60 "$MPIRUN" -np 2 -x DTRAIN_FAULT "$DTRAIN" train $common --checkpoint-dir "$tmp/ck-pre"
! grep -q "^step " "$tmp/out" && [ -z "$(ls "$tmp/ck-pre")" ] && ok "no step trained, no file written" ||
    { bad "the stop before step 1 trained or wrote: $(ls "$tmp/ck-pre" | tr '\n' ' ')"; cat "$tmp/out"; }
# A Ctrl-C during the set-up says at once that the run stops before its first step with nothing
# saved (it promised a checkpoint "after this step").
expect 130 "dtrain: SIGINT: stopping before the first step, once the set-up in progress ends (nothing is trained or saved)" \
    env DTRAIN_FAULT=int:0:0 timeout -s KILL 60 "$DTRAIN" train --model fc:8,relu,fc:10 --input 8 --steps 3 --batch 2 \
    --checkpoint-dir "$tmp/ck-int-pre"
! grep -q "stopping after this step" "$tmp/out" && [ -z "$(ls "$tmp/ck-int-pre")" ] &&
    ok "Ctrl-C in the set-up: no checkpoint promised, none written" || { bad "Ctrl-C in the set-up"; cat "$tmp/out"; }
# A SIGTERM that came before the handlers (here: pending when the program starts, as one during a
# CUDA build's 50+ ms of library constructors is) is kept for them: train stops before step 1;
# any other command dies of it as before.
pending() { python3 -c 'import os, signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM]); os.kill(os.getpid(), signal.SIGTERM)
os.execv(sys.argv[1], sys.argv[1:])' "$@"; }
expect 75 "stopping before step 1 on a signal (SIGTERM)" pending "$DTRAIN" train --model fc:8,relu,fc:10 --input 8 \
    --steps 3 --batch 2 --checkpoint-dir "$tmp/ck-pend"
expect 143 "" pending "$DTRAIN" version
# A SIGHUP ignored when dtrain starts (nohup) stays ignored: the run goes on to its end.
expect 0 "done: 3 steps" env DTRAIN_FAULT=hup:0:2 bash -c 'trap "" HUP; exec "$@"' _ "$DTRAIN" train --model fc:8,relu,fc:10 \
    --input 8 --steps 3 --batch 2 --checkpoint-dir "$tmp/ck-nohup"
# A stop that comes with the last step has nothing left to stop: the run finishes (its checkpoint
# written, --dump-params, exit 0) rather than exit 75 and have a requeue only write the dump.
last="--model fc:8,relu,fc:10 --input 8 --steps 3 --batch 2 --seed 5"
"$DTRAIN" train $last --dump-params "$tmp/p-last-ref" >"$tmp/log" 2>&1 || { cat "$tmp/log"; bad "3-step reference failed"; }
expect 0 "signal (SIGUSR1) during the last step, 3: training is complete, checkpoint in $tmp/ck-last; finishing the run" \
    env DTRAIN_FAULT=usr1:0:3 "$DTRAIN" train $last --checkpoint-dir "$tmp/ck-last" --dump-params "$tmp/p-last"
grep -q "^done: 3 steps" "$tmp/out" && [ "$(ls "$tmp/ck-last" | tr '\n' ' ')" = "ckpt-0000000003.dtc " ] &&
    out=$("$CMP" "$tmp/p-last" "$tmp/p-last-ref" exact) &&
    ok "SIGUSR1 in the last step: finished, its checkpoint, --dump-params as an uninterrupted run's ($out)" ||
    { bad "SIGUSR1 in the last step: files $(ls "$tmp/ck-last" | tr '\n' ' ')"; cat "$tmp/out"; }
# A SIGTERM while the checkpoint of step 3 is written (1 s, by the test hook) stops right after it:
# that checkpoint is what the stop would save (it used to run step 4 and save again).
quick="--model fc:8,relu,fc:10 --input 8 --batch 2 --steps 12 --checkpoint-every 3 --log-every 3"
# in_save DIR PID: waits (20 s at most) until the save of step 3 has begun in DIR.
in_save() { for _ in $(seq 400); do ls "$1"/ckpt-0000000003.dtc.tmp* >/dev/null 2>&1 && return 0; kill -0 "$2" 2>/dev/null || return 1; sleep 0.05; done; return 1; }
DTRAIN_TEST_SLOW_CKPT=1 "$DTRAIN" train $quick --checkpoint-dir "$tmp/ck-save" >"$tmp/log" 2>&1 &
pid=$!
in_save "$tmp/ck-save" $pid && kill -TERM $pid
wait $pid
rc=$?
[ $rc -eq 75 ] && [ "$(ls "$tmp/ck-save" | tr '\n' ' ')" = "ckpt-0000000003.dtc " ] &&
    grep -q "stopping after step 3 on a signal (SIGTERM); checkpoint in" "$tmp/log" &&
    ok "SIGTERM during the save of step 3: stopped after it, exit 75, no second checkpoint" ||
    { bad "SIGTERM during the save of step 3: exit $rc, files $(ls "$tmp/ck-save" | tr '\n' ' ')"; cat "$tmp/log"; }
# A second run given the directory of a run that is saving (a copied job script) is refused before
# it trains, and before it removes the first run's temporary file (which failed that save). The
# first run's save takes 30 s (the test hook), so the second, however slow its start (ASan), meets
# it there; it is killed once checked.
DTRAIN_TEST_SLOW_CKPT=30 "$DTRAIN" train $quick --checkpoint-dir "$tmp/ck-two" >"$tmp/log2" 2>&1 &
pid=$!
if in_save "$tmp/ck-two" $pid; then
    expect 2 "--checkpoint-dir $tmp/ck-two is in use by another dtrain run (pid $pid on " \
        "$DTRAIN" train $quick --checkpoint-dir "$tmp/ck-two"
    ls "$tmp/ck-two"/ckpt-0000000003.dtc.tmp* >/dev/null 2>&1 && kill -0 $pid 2>/dev/null &&
        ok "the refused second run left the first one's save in progress" || bad "the first run's save is gone"
else
    bad "the first run on ck-two never began its save of step 3"; cat "$tmp/log2"
fi
kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
# Ctrl-C at a terminal reaches the whole pipeline: `dtrain train 2>&1 | tee log` loses tee at once.
# The stop still saves, logs its record and exits 130: the lines printed after the stop request
# (here the stop's, after the 1 s save of step 3, by when the reader is gone) are lost, and used to
# end the run by SIGPIPE (exit 141, the stop's record missing from --metrics). SIGINT and SIGPIPE
# set back to their defaults, as a terminal's shell has them (python ignores SIGPIPE).
mkfifo "$tmp/pipe"
cat "$tmp/pipe" >/dev/null &
reader=$!
DTRAIN_TEST_SLOW_CKPT=1 DTRAIN_FAULT=int:0:3 python3 -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL); signal.signal(signal.SIGPIPE, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])' "$DTRAIN" train $quick \
    --checkpoint-dir "$tmp/ck-pipe" --metrics "$tmp/m-pipe.jsonl" >"$tmp/pipe" 2>&1 &
pid=$!
in_save "$tmp/ck-pipe" $pid && kill -9 $reader
wait $pid
rc=$?
wait $reader 2>/dev/null
[ $rc -eq 130 ] && [ "$(ls "$tmp/ck-pipe" | tr '\n' ' ')" = "ckpt-0000000003.dtc " ] &&
    [ "$(metrics_steps "$tmp/m-pipe.jsonl")" = "3 " ] &&
    ok "Ctrl-C to dtrain | tee: saved, its record kept, exit 130 though the reader went" ||
    bad "Ctrl-C to dtrain | tee: exit $rc, files $(ls "$tmp/ck-pipe" | tr '\n' ' '), records $(metrics_steps "$tmp/m-pipe.jsonl")"
# A stop signal that lands while a write waits on a full pipe (`| less` paused, a slow reader): the
# write goes on once the reader reads (SA_RESTART), so nothing is lost and nothing is reported; it
# failed with EINTR, which stdio took for an I/O error ("writing standard output failed: part of
# the output was lost") and a step's line was gone. The reader waits until the pipe is full, sends
# SIGUSR1, reads on half a second later.
rm -f "$tmp/pipe"; mkfifo "$tmp/pipe"
"$DTRAIN" train --model fc:8,relu,fc:10 --input 8 --batch 2 --steps 100000 --log-every 1 \
    --checkpoint-dir "$tmp/ck-full" >"$tmp/pipe" 2>"$tmp/err-full" &
pid=$!
python3 -c 'import fcntl, os, struct, sys, termios, time
fd, n, end = os.open(sys.argv[1], os.O_RDONLY), 0, time.time() + 20
while n <= 65536 - 4096 and time.time() < end:
    n = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0]
    time.sleep(0.05)
time.sleep(0.2)
os.kill(int(sys.argv[2]), 10)
time.sleep(0.5)
with open(sys.argv[3], "wb") as f:
    while (b := os.read(fd, 65536)):
        f.write(b)' "$tmp/pipe" $pid "$tmp/out-full"
wait $pid
rc=$?
stop_step=$(sed -n 's/^stopping after step \([0-9]*\) on a signal (SIGUSR1).*/\1/p' "$tmp/out-full")
steps_logged=$(grep -c '^step ' "$tmp/out-full")
[ $rc -eq 75 ] && [ -n "$stop_step" ] && [ "$steps_logged" -eq "$stop_step" ] && ! grep -q "error" "$tmp/err-full" &&
    ok "a stop signal during a write to a full pipe: the write goes on, all $steps_logged steps' lines kept, exit 75" ||
    { bad "a stop signal during a write to a full pipe: exit $rc, stop at step '$stop_step', $steps_logged step lines"; cat "$tmp/err-full"; }
# Ctrl-C twice: the first says the run stops after this step and that a second ends it at once; the
# second, during the save, ends the process by SIGINT there and then, and removes the save's
# temporary file. SIGINT set back to its default first: a background job of a script ignores it,
# and dtrain keeps an ignored SIGINT ignored.
DTRAIN_TEST_SLOW_CKPT=3 python3 -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])' "$DTRAIN" train $quick --checkpoint-dir "$tmp/ck-int2" >"$tmp/log" 2>&1 &
pid=$!
in_save "$tmp/ck-int2" $pid && kill -INT $pid && sleep 0.3 && kill -INT $pid
wait $pid
rc=$?
[ $rc -eq 130 ] && [ ! -e "$tmp/ck-int2/ckpt-0000000003.dtc" ] && ! grep -q "^stopping" "$tmp/log" &&
    ! ls "$tmp/ck-int2"/ckpt-*.tmp* >/dev/null 2>&1 &&
    [ "$(grep -c "SIGINT: stopping after this step, with a checkpoint in .*; Ctrl-C again ends at once, without it" "$tmp/log")" = 1 ] &&
    ok "Ctrl-C twice during a save: said once, ended at once by SIGINT (exit 130), no checkpoint, no temporary file" ||
    { bad "Ctrl-C twice during a save: exit $rc, files $(ls "$tmp/ck-int2" | tr '\n' ' ')"; cat "$tmp/log"; }
finish
