#!/usr/bin/env bash
# The run record of `dtrain train`'s checkpoints (launch/train/train_record.h) at --resume auto: a data
# order that is not the one the saved position counts in (another --seed, --shuffle or training set
# mid-epoch, another --seed for the synthetic data) is refused before a step, naming both values and
# the fix, where it would repeat some samples of the epoch and skip others; at an epoch's start a
# new seed goes on, said; a changed precision or global batch goes on, said (one past 2^31 samples
# too); --steps below the checkpoint's step is refused rather than reported as a negative count,
# and --steps or --epochs already reached says so and how to train further.
here=$(dirname "$0"); source "$here/lib.sh"
DTRAIN=$1
MPIRUN=$2
dt() { timeout 120 "$DTRAIN" "$@"; }

python3 "$here/make_idx.py" "$tmp/d" 400 100 10 60
D="--data $tmp/d --model fc:16,relu,fc:10 --batch 20 --device cpu --quiet"

# 5 steps x 20 = 100 samples into epoch 0 (20 steps an epoch).
fresh() { rm -rf "$tmp/ck"; dt train $D --steps 5 --checkpoint-dir "$tmp/ck" "$@" >"$tmp/out0" 2>&1 ||
    { bad "first leg $* failed"; cat "$tmp/out0"; }; }

fresh
expect 2 "was written with --seed 1 and this run has --seed 7; it stopped 100 samples into epoch 0" \
    dt train $D --steps 10 --checkpoint-dir "$tmp/ck" --resume auto --seed 7
grep -qF "Resume with --seed 1 (and the same data), or start a new run in another --checkpoint-dir" "$tmp/out" &&
    ok "the seed refusal names the fix" || { bad "seed refusal's fix"; cat "$tmp/out"; }
[ ! -e "$tmp/ck/ckpt-0000000010.dtc" ] && ok "the refused resume wrote no checkpoint" || bad "refused resume wrote"

expect 2 "was written with --shuffle epoch and this run has --shuffle none" \
    dt train $D --steps 10 --checkpoint-dir "$tmp/ck" --resume auto --shuffle none
expect 2 "was written with a training set of 400 samples and this run has a training set of 360 samples" \
    dt train $D --steps 10 --checkpoint-dir "$tmp/ck" --resume auto --holdout 0.1

# The same flags resume, silently (no record line); the sampler log shows the order goes on.
expect 0 "" dt train $D --steps 10 --checkpoint-dir "$tmp/ck" --resume auto
grep -q -- "--resume:" "$tmp/out" && { bad "an unchanged resume said something"; cat "$tmp/out"; } ||
    ok "an unchanged resume says nothing of the record"

# At an epoch's start (20 steps = 400 samples) the seed may change: said, not refused.
rm -rf "$tmp/ck"
dt train $D --steps 20 --checkpoint-dir "$tmp/ck" >/dev/null 2>&1
expect 0 "--seed 7, the checkpoint's run had --seed 1: the epochs' orders and the augmentation from here" \
    dt train $D --steps 25 --checkpoint-dir "$tmp/ck" --resume auto --seed 7

# The synthetic data's samples come from the seed: refused even at an epoch's start.
S="--model fc:16,relu,fc:10 --input 32 --dataset-size 200 --batch 20 --device cpu --quiet"
rm -rf "$tmp/ck"
dt train $S --steps 10 --checkpoint-dir "$tmp/ck" >/dev/null 2>&1
expect 2 "it stopped at the start of epoch 1, and the synthetic data's samples are made from the seed" \
    dt train $S --steps 12 --checkpoint-dir "$tmp/ck" --resume auto --seed 3

# A damaged record (its CRC fails) leaves the run unchecked, said; the model state it came with
# passed its own checks, so the resume goes on.
fresh
python3 - "$tmp/ck/ckpt-0000000005.dtc" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], 'rb').read())
i = b.find(struct.pack('<IIQQ', 1, 1, 1, 400))  # version, shuffle, seed, samples
assert i >= 0, 'no run record'
b[i + 16] ^= 1
open(sys.argv[1], 'wb').write(b)
PY
expect 0 'section "dtrain.run" is damaged (CRC mismatch)): the data order, precision and batch are not compared' \
    dt train $D --steps 7 --checkpoint-dir "$tmp/ck" --resume auto

# Precision and batch go on, each said.
fresh
expect 0 "the checkpoint's run trained in fp32, this one in bf16: the fp32 master weights go on" \
    dt train $D --steps 7 --checkpoint-dir "$tmp/ck" --resume auto --precision bf16 --batch 10
grep -qF "had a global batch of 20 samples a step (1 rank x --batch 20 x --accum-steps 1), this one 10 (1 x 10 x 1): the data position goes on, and the learning-rate schedule by optimizer steps; --batch 20 keeps the global batch of 20" "$tmp/out" &&
    ok "a changed global batch is said, with the --batch that keeps it" || { bad "batch line"; cat "$tmp/out"; }
# The same global batch split otherwise (1 x 20 -> 2 x 10, or 1 x 10 x --accum-steps 2) trains as
# before: no batch line, and the rank count's line claims no change of the global batch.
fresh
expect 0 "was written by 1 rank, resuming on 2: each rank reads another share of the data" \
    timeout 120 "$MPIRUN" -np 2 "$DTRAIN" train $D --steps 7 --batch 10 --checkpoint-dir "$tmp/ck" --resume auto
grep -qE "samples a step|global batch|OpenBLAS" "$tmp/out" && { bad "the same global batch said as changed"; cat "$tmp/out"; } ||
    ok "the same global batch over 2 ranks: no batch line, none of the BLAS threads (the rank count changes the sums)"
expect 0 "" dt train $D --steps 9 --batch 10 --accum-steps 2 --checkpoint-dir "$tmp/ck" --resume auto
grep -q -- "--resume:" "$tmp/out" && { bad "the same global batch in 2 micro-steps said"; cat "$tmp/out"; } ||
    ok "the same global batch in --accum-steps 2: no batch line"
# Another OpenBLAS thread count (by default the rank's cores: another allocation or binding changes
# it unseen) at the same ranks and batch goes on, said with the flag that keeps the bits: OpenBLAS
# sums a GEMM in another order at another count. The same count says nothing (above).
fresh --blas-threads 1
expect 0 "--resume: the checkpoint's run gave OpenBLAS 1 thread a rank, this one 2: its matrix products sum in another order, so the results from here can differ in their last bits from a run that kept 1 (--blas-threads 1 keeps them)" \
    dt train $D --steps 7 --checkpoint-dir "$tmp/ck" --resume auto --blas-threads 2
expect 0 "" dt train $D --steps 9 --checkpoint-dir "$tmp/ck" --resume auto --blas-threads 2
grep -q -- "--resume:" "$tmp/out" && { bad "the same BLAS threads said as changed"; cat "$tmp/out"; } ||
    ok "resumed again at 2 BLAS threads (the step-7 checkpoint's): nothing said"
# bf16 to fp16: the scaler's fresh start said once, with why (no second line of the precision).
fresh --precision bf16
expect 0 "holds no loss-scaler state (it was saved without one: a run in bf16 or fp32 has none): the loss scale starts from its initial value" \
    dt train $D --steps 7 --checkpoint-dir "$tmp/ck" --resume auto --precision fp16
[ "$(grep -c "WARN" "$tmp/out")" -eq 1 ] && ok "bf16 to fp16: one warning" || { bad "bf16 to fp16 warnings"; cat "$tmp/out"; }
fresh --precision fp16
expect 0 "trained in fp16, this one in fp32: the fp32 master weights go on; the fp16 loss scaler's state is not used" \
    dt train $D --steps 7 --checkpoint-dir "$tmp/ck" --resume auto

# --steps below the checkpoint's step.
fresh
expect 2 "--steps 3: the checkpoint in $tmp/ck is of step 5, past it, so there is nothing to train" \
    dt train $D --steps 3 --checkpoint-dir "$tmp/ck" --resume auto
# At 2 ranks rank 0 says it once (every rank has the checkpoint's step), and no rank aborts the job.
expect 2 "--steps 3: the checkpoint in $tmp/ck is of step 5, past it, so there is nothing to train" \
    timeout 120 "$MPIRUN" -np 2 "$DTRAIN" train $D --steps 3 --checkpoint-dir "$tmp/ck" --resume auto
[ "$(grep -c "dtrain: error" "$tmp/out")" -eq 1 ] && ! grep -q "MPI_ABORT" "$tmp/out" && ! grep -q "(rank " "$tmp/out" &&
    ok "--steps below the checkpoint at 2 ranks: one line, no MPI_Abort" ||
    { bad "--steps below the checkpoint at 2 ranks"; cat "$tmp/out"; }
# At it: nothing to train, said plainly with how to go on (not a rate of 0 samples/s).
expect 0 "done: nothing to train: the run had already reached --steps 5 (its checkpoint in $tmp/ck is of step 5); give --steps 6 or more to train further" \
    dt train $D --steps 5 --checkpoint-dir "$tmp/ck" --resume auto
# A global batch past 2^31 samples (--batch 32768 x --accum-steps 65536) is said as it is in the
# start line, which used to wrap it negative in an int.
G="--model fc:2 --input 1 --dataset-size 32768 --batch 32768 --device cpu"
rm -rf "$tmp/ck"
dt train $G --steps 1 --checkpoint-dir "$tmp/ck" >/dev/null 2>&1
expect 0 "1 rank x batch 32768 x 65536 accumulated = 2147483648 per step" \
    dt train $G --accum-steps 65536 --steps 1 --checkpoint-dir "$tmp/ck" --resume auto
rm -rf "$tmp/ck"
dt train $D --epochs 1 --checkpoint-dir "$tmp/ck" >/dev/null 2>&1
expect 0 "done: nothing to train: the run had already reached --epochs 1 (its checkpoint in $tmp/ck is of step 20); give --epochs 2 or more to train further" \
    dt train $D --epochs 1 --checkpoint-dir "$tmp/ck" --resume auto

# Two ranks agree on the refusal (each holds the record): both exit, no hang.
rm -rf "$tmp/ck"
timeout 120 "$MPIRUN" -np 2 "$DTRAIN" train $D --steps 5 --checkpoint-dir "$tmp/ck" >/dev/null 2>&1
expect 2 "this run has --seed 9" timeout 120 "$MPIRUN" -np 2 "$DTRAIN" train $D --steps 10 \
    --checkpoint-dir "$tmp/ck" --resume auto --seed 9

# Files of earlier dtrain builds (tests/fixtures/older/README.md) resume where their run stopped:
# the step, the learning-rate schedule, the data position and the loss scale of the resumed records
# are an uninterrupted run's, the losses and parameters too (within rounding: a kernel's numerics
# may change between builds; today the v3 and dtrain.run files give the same bits). The old
# --metrics file keeps its records to step 10 and takes the new ones.
old="$here/../fixtures/older"
python3 "$here/make_idx.py" "$tmp/d4" 400 100 10 60
O="--data $tmp/d4 --model fc:10 --batch 50 --device cpu --seed 3 --lr-schedule cosine --warmup-steps 2 --steps 16
   --blas-threads 1 --log-every 2"
SGD="--optim sgd --momentum 0.9 --lr 0.05"
AMP="--optim adamw --lr 0.01 --precision bf16 --loss-scale dynamic --loss-scale-interval 3"
# same_run A.jsonl B.jsonl A.bin B.bin: records after step 10 alike, parameters alike.
same_run() {
    python3 - "$@" <<'PY'
import json, struct, sys
def recs(p): return {r["step"]: r for r in map(json.loads, open(p)) if r["step"] > 10}
a, b = recs(sys.argv[1]), recs(sys.argv[2])
assert sorted(a) == [12, 14, 16] == sorted(b), (sorted(a), sorted(b))
for s in a:
    for k in ("epoch", "lr", "loss_scale"):
        assert a[s].get(k) == b[s].get(k), (s, k, a[s].get(k), b[s].get(k))
    assert abs(a[s]["loss"] - b[s]["loss"]) <= 1e-4 * abs(b[s]["loss"]), (s, a[s]["loss"], b[s]["loss"])
pa, pb = (open(p, "rb").read() for p in sys.argv[3:5])
fa, fb = (struct.unpack("<%df" % (len(x) // 4), x) for x in (pa, pb))
assert len(fa) == len(fb) == 650, (len(fa), len(fb))
assert max(abs(x - y) for x, y in zip(fa, fb)) <= 1e-5 * max(map(abs, fb)), "parameters differ"
PY
}
for fx in v3-sgd v4-amp v4run-amp; do
    case $fx in *sgd) opt=$SGD ref=sgd ;; *) opt=$AMP ref=amp ;; esac
    [ -f "$tmp/ref-$ref.bin" ] || dt train $O $opt --metrics "$tmp/ref-$ref.jsonl" --dump-params "$tmp/ref-$ref.bin" \
        >"$tmp/out" 2>&1 || { bad "$fx: the uninterrupted run failed"; cat "$tmp/out"; }
    rm -rf "$tmp/$fx" && cp -r "$old/$fx" "$tmp/$fx" && rm -f "$tmp/m.jsonl"
    [ -f "$old/$fx.jsonl" ] && cp "$old/$fx.jsonl" "$tmp/m.jsonl"
    dt train $O $opt --checkpoint-dir "$tmp/$fx" --resume auto --metrics "$tmp/m.jsonl" \
        --dump-params "$tmp/$fx.bin" >"$tmp/out" 2>&1 || { bad "$fx: the resume failed"; cat "$tmp/out"; }
    # Only the files without a dtrain.run section say that nothing of the run is compared.
    norec=$(grep -c "the checkpoint of step 10 keeps no run record (written before dtrain kept one" "$tmp/out")
    case $fx in v4run-*) want=0 ;; *) want=1 ;; esac
    [ "$norec" -eq "$want" ] || bad "$fx: $norec lines say the checkpoint keeps no run record, wanted $want"
    grep -q "resumed from .*ckpt-0000000010.dtc at step 10" "$tmp/out" && grep -q "data: resuming in epoch 1 after 100" "$tmp/out" &&
        same_run "$tmp/m.jsonl" "$tmp/ref-$ref.jsonl" "$tmp/$fx.bin" "$tmp/ref-$ref.bin" &&
        ok "$fx: an older build's checkpoint resumes at step 10 (epoch 1, 100 in) as the uninterrupted run" ||
        { bad "$fx: the resume is not the uninterrupted run"; cat "$tmp/out"; }
done
# The v3 run's --metrics file, in a run of its own (the loop's last file is another's).
cp "$old/v3-sgd.jsonl" "$tmp/m3.jsonl" && rm -rf "$tmp/v3" && cp -r "$old/v3-sgd" "$tmp/v3"
dt train $O $SGD --checkpoint-dir "$tmp/v3" --resume auto --metrics "$tmp/m3.jsonl" >"$tmp/out" 2>&1
grep -q "metrics: appending to .*m3.jsonl after its 5 records up to step 10; dropped 3 records of steps 12 to 16" "$tmp/out" &&
    [ "$(head -5 "$tmp/m3.jsonl")" = "$(head -5 "$old/v3-sgd.jsonl")" ] && [ "$(wc -l <"$tmp/m3.jsonl")" -eq 8 ] &&
    ok "an older build's --metrics file keeps its records to step 10 byte for byte and takes steps 12 to 16" ||
    { bad "the older --metrics file across the resume"; cat "$tmp/out" "$tmp/m3.jsonl"; }
# At another rank count: the v3 checkpoint (one rank, epoch 1 100 samples in) resumed at 2 ranks
# takes exactly the rest of epoch 1, the samples an uninterrupted one-rank run takes in steps 11-16.
rm -rf "$tmp/v3w" "$tmp/slog".* && cp -r "$old/v3-sgd" "$tmp/v3w"
DTRAIN_TEST_SAMPLE_LOG="$tmp/slog1" dt train $O $SGD --steps 16 >/dev/null 2>&1
DTRAIN_TEST_SAMPLE_LOG="$tmp/slog2" timeout 120 "$MPIRUN" -np 2 "$DTRAIN" train $O $SGD --steps 13 \
    --checkpoint-dir "$tmp/v3w" --resume auto >"$tmp/out" 2>&1
verdict=$(python3 - "$tmp/slog1.0" "$tmp/slog2.0" "$tmp/slog2.1" <<'PY'
import collections, sys
def steps(p): return [(int(l.split()[0]), [int(x) for x in l.split()[1:]]) for l in open(p)]
# The log counts steps from 0: steps 11 to 16 are its 10 to 15.
want = collections.Counter(i for s, ids in steps(sys.argv[1]) if 10 <= s <= 15 for i in ids)
got = collections.Counter(i for p in sys.argv[2:] for s, ids in steps(p) for i in ids)
logged = sorted({s for p in sys.argv[2:] for s, _ in steps(p)})
print("same" if got == want and sum(want.values()) == 300 and logged == [10, 11, 12] else
      "differs: %d samples of the rest of the epoch, %d taken, steps (from 0) %s" % (sum(want.values()), sum(got.values()), logged))
PY
)
grep -q "data: resuming in epoch 1 after 100" "$tmp/out" && [ "$verdict" = same ] &&
    ok "an older build's one-rank checkpoint resumed at 2 ranks takes exactly the rest of its epoch" ||
    { bad "the older checkpoint at 2 ranks: $verdict"; cat "$tmp/out"; }
# A shard of before the flags field: verified, and read as the IDX files it was made from.
python3 "$here/make_idx.py" "$tmp/d40" 40 10 10 60
expect 0 "OK" dt data verify "$old/v1-noflag.dts"
dt train --data "$old/v1-noflag.dts" --model fc:10 --batch 8 --steps 3 --device cpu --quiet --dump-params "$tmp/s1" &&
    dt train --data "$tmp/d40" --model fc:10 --batch 8 --steps 3 --device cpu --quiet --dump-params "$tmp/s2" &&
    cmp -s "$tmp/s1" "$tmp/s2" && ok "an older build's .dts trains as the IDX files it was converted from" ||
    bad "the older .dts does not train as its IDX source"

finish
