#!/usr/bin/env bash
# `dtrain train --data` and `dtrain eval` on an IDX dataset this test writes (make_idx.py: 8x8
# bytes, 10 classes, a class's bright block under noise): the model learns it to high held-out
# accuracy; the sampler's promises hold through real runs (every sample once per epoch, and a
# stop/resume on another rank count continues mid-epoch without repeating or skipping one);
# evaluation counts are exact whatever the rank count; bad data and flags are refused, at several
# ranks a shared failure said once.
here=$(dirname "$0"); source "$here/lib.sh"
DTRAIN=$1
MPIRUN=$2
run() { local np=$1; shift; timeout 240 "$MPIRUN" -np "$np" "$DTRAIN" "$@"; }

python3 "$here/make_idx.py" "$tmp/easy" 3000 500 10 60
python3 "$here/make_idx.py" "$tmp/hard" 3000 500 10 200

# --- Learning, with held-out figures in the step lines and the metrics.
run 2 train --data "$tmp/easy" --model mlp --batch 32 --epochs 2 --lr 0.05 --log-every 20 --eval-every 40 \
    --metrics "$tmp/m.jsonl" >"$tmp/out" 2>&1
rc=$?
acc=$(grep "^eval  *94/94" "$tmp/out" | sed 's/.*acc \([0-9.]*\).*/\1/')
if [ $rc -eq 0 ] && grep -q "data: $tmp/easy (idx), 3000 samples of 1x8x8, 10 classes; 47 steps per epoch" "$tmp/out" &&
    grep -q "held-out: 500 samples from the test split" "$tmp/out" &&
    awk -v a="$acc" 'BEGIN { exit !(a >= 0.95) }'; then
    ok "mlp learns the IDX set: held-out accuracy $acc after 2 epochs"
else
    bad "training on IDX data: exit $rc, held-out accuracy '$acc'"; cat "$tmp/out"
fi
grep -q '"step": 40, "epoch": 0.85[0-9]*, .*"eval_loss": [0-9.e+-]*, "eval_accuracy": [0-9.]*}' "$tmp/m.jsonl" &&
    ok "metrics carry epoch, eval_loss and eval_accuracy" || { bad "metrics eval fields"; cat "$tmp/m.jsonl"; }
grep -q "normalize: standard, per channel mean / std (of values / 255): 0.1" "$tmp/out" &&
    ok "standard normalization from the training split, printed" || bad "normalization line"

# --- The sampler through real runs: 2 ranks x 25 for 20 steps (1000 samples of the 3000), then
# --resume auto on 3 ranks x 25 to the end of the epoch: ceil(2000 / 75) = 27 steps, the last one
# padded with 25 samples from the epoch's start. Every sample is seen, exactly 25 twice. The first
# leg is the same for both resumes: run once, its checkpoint and sample logs copied for each.
mkdir -p "$tmp/leg1"
DTRAIN_TEST_SAMPLE_LOG="$tmp/leg1/log" run 2 train --data "$tmp/hard" --batch 25 --steps 20 \
    --checkpoint-dir "$tmp/leg1/ck" --log-every 10 >"$tmp/out1" 2>&1
rc1=$?
for W2 in 3 1; do
    rm -rf "$tmp/ck" "$tmp/log".*
    cp -r "$tmp/leg1/ck" "$tmp/ck" && for f in "$tmp/leg1/log".*; do cp "$f" "$tmp/${f##*/}"; done
    steps2=$((20 + (2000 + 25 * W2 - 1) / (25 * W2)))
    DTRAIN_TEST_SAMPLE_LOG="$tmp/log" run $W2 train --data "$tmp/hard" --batch 25 --steps $steps2 \
        --checkpoint-dir "$tmp/ck" --resume auto --log-every 10 >"$tmp/out2" 2>&1
    rc2=$?
    pad=$(( (steps2 - 20) * 25 * W2 - 2000 ))
    verdict=$(cat "$tmp/log".* | python3 -c '
import sys, collections
c = collections.Counter()
for line in sys.stdin:
    f = line.split()
    c.update(int(x) for x in f[1:])
missing = [i for i in range(3000) if c[i] == 0]
twice = sum(1 for v in c.values() if v == 2)
more = sum(1 for v in c.values() if v > 2)
print("missing=%d twice=%d more=%d" % (len(missing), twice, more))')
    if [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ "$verdict" = "missing=0 twice=$pad more=0" ] &&
        grep -q "data: resuming in epoch 0 after 1000 of its samples" "$tmp/out2"; then
        ok "an epoch over a stop at 2 ranks and a resume at $W2: every sample, $pad padded ($verdict)"
    else
        bad "epoch across resume 2 -> $W2 ranks: exits $rc1 $rc2, $verdict (want missing=0 twice=$pad more=0)"
        cat "$tmp/out1" "$tmp/out2"
    fi
done

# --- Shuffle off: batch i of rank r is samples (i * W + r) * B ...
rm -f "$tmp/log".*
DTRAIN_TEST_SAMPLE_LOG="$tmp/log" run 2 train --data "$tmp/hard" --batch 4 --steps 2 --shuffle none >"$tmp/out" 2>&1
if [ "$(head -1 "$tmp/log.0")" = "0 0 1 2 3" ] && [ "$(head -1 "$tmp/log.1")" = "0 4 5 6 7" ] &&
    [ "$(sed -n 2p "$tmp/log.1")" = "1 12 13 14 15" ]; then
    ok "--shuffle none: rank r's batch i is samples (i * W + r) * B .."
else
    bad "--shuffle none order"; cat "$tmp/log".*
fi

# --- Evaluation is exact whatever the rank count: the same checkpoint at 1, 2 and 3 ranks.
rm -rf "$tmp/ck"
run 2 train --data "$tmp/hard" --batch 32 --steps 30 --lr 0.02 --checkpoint-dir "$tmp/ck" >"$tmp/out" 2>&1
for np in 1 2 3; do
    run $np eval --data "$tmp/hard" --checkpoint-dir "$tmp/ck" >"$tmp/eval$np" 2>&1 || bad "eval at $np ranks failed"
done
line1=$(grep "^accuracy" "$tmp/eval1")
if [ -n "$line1" ] && [ "$line1" = "$(grep "^accuracy" "$tmp/eval2")" ] && [ "$line1" = "$(grep "^accuracy" "$tmp/eval3")" ] &&
    cmp -s <(grep -A 12 "^confusion" "$tmp/eval1") <(grep -A 12 "^confusion" "$tmp/eval3") &&
    grep -q "of 500 correct" "$tmp/eval1"; then
    ok "dtrain eval at 1, 2, 3 ranks: the same counts and confusion matrix ($line1)"
else
    bad "eval differs across rank counts"; cat "$tmp/eval1" "$tmp/eval3"
fi
# The final held-out line of training is the same figure.
grep -q "$(grep '^accuracy' "$tmp/eval1" | sed 's/accuracy \([0-9.]*\) (\([0-9]*\) of.*/acc \1  (\2 of 500 correct/')" "$tmp/out" &&
    ok "training's last eval line equals dtrain eval's" || { bad "train vs eval figures"; grep "^eval" "$tmp/out"; cat "$tmp/eval1"; }

# Ranks given other evaluation flags (an MPMD line, a wrapper computing one per rank) are refused at
# once, said once: another --eval-data on rank 1 summed its shard of other samples into rank 0's
# figures under rank 0's header, without a word.
expect 2 "rank 1 was given '--eval-data PATH' where rank 0 was given 'no --eval-data'" timeout 60 "$MPIRUN" \
    -np 1 "$DTRAIN" eval --data "$tmp/hard" --checkpoint-dir "$tmp/ck" : \
    -np 1 "$DTRAIN" eval --data "$tmp/hard" --checkpoint-dir "$tmp/ck" --eval-data "$tmp/hard"
[ "$(grep -c "dtrain: error" "$tmp/out")" -eq 1 ] && ! grep -q "MPI_ABORT" "$tmp/out" && ! grep -q "^accuracy" "$tmp/out" &&
    ok "eval flags that differ between ranks: one line, no figures, no MPI_Abort" ||
    { bad "eval flags that differ between ranks"; cat "$tmp/out"; }

# --- Over 20 classes, eval prints no line of every class (at 1000 it ran to 17 KB) and no matrix: the
# mean of the classes' accuracies, the 10 lowest and the 10 largest confusions, the same at 1 and 2 ranks.
python3 - "$tmp/k40" <<'PY'
import os, random, struct, sys
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
rng = random.Random(7)
for prefix, n in (("train", 400), ("t10k", 301)):
    ys = [rng.randrange(40) for _ in range(n)]
    px = bytes(min(255, y * 6 + rng.randrange(40)) for y in ys for _ in range(64))
    for kind, dims, data in (("images-idx3", (n, 8, 8), px), ("labels-idx1", (n,), bytes(ys))):
        with open(os.path.join(d, "%s-%s-ubyte" % (prefix, kind)), "wb") as f:
            f.write(struct.pack(">BBBB", 0, 0, 8, len(dims)) + b"".join(struct.pack(">I", x) for x in dims) + data)
PY
run 1 train --data "$tmp/k40" --model fc:40 --steps 8 --batch 50 --checkpoint-dir "$tmp/ck40" --quiet >/dev/null 2>&1
for np in 1 2; do
    run $np eval --data "$tmp/k40" --model fc:40 --checkpoint-dir "$tmp/ck40" --batch 64 >"$tmp/e40.$np" 2>&1
done
if grep -q "^per class: [0-9]* of the 40 classes have samples, mean accuracy over them 0\.[0-9]*, [0-9]* with none right; the 10 lowest (class: accuracy (samples)): [0-9]*: [0-9.]* ([0-9]*)\(, [0-9]*: [0-9.]* ([0-9]*)\)\{9\}$" "$tmp/e40.1" &&
    grep -q "^confusions: [0-9]* (true, predicted) pairs of classes have some; the 10 largest (true -> predicted: samples): [0-9]* -> [0-9]*: [0-9]*\(, [0-9]* -> [0-9]*: [0-9]*\)\{9\}$" "$tmp/e40.1" &&
    grep -q "^confusion matrix: 40 classes, too many to print" "$tmp/e40.1" && grep -q "of 301 correct" "$tmp/e40.1" &&
    [ "$(awk 'length > 400' "$tmp/e40.1")" = "" ] && cmp -s "$tmp/e40.1" "$tmp/e40.2"; then
    ok "eval of 40 classes: the lowest classes and largest confusions, no line over 400 characters, the same at 2 ranks"
else
    bad "eval of 40 classes"; cat "$tmp/e40.1" "$tmp/e40.2"
fi

# --- --holdout keeps a fixed share aside; dtrain eval --holdout evaluates that same share.
expect 0 "held-out: 300 samples from --holdout 0.1 of $tmp/hard/train-images-idx3-ubyte" \
    run 1 train --data "$tmp/hard/train-images-idx3-ubyte" --holdout 0.1 --batch 32 --steps 5

# --- The loop's options through the command: accumulation, clipping, a schedule, in the metrics.
run 2 train --data "$tmp/hard" --batch 16 --accum-steps 2 --clip-grad-norm 1 --lr-schedule cosine --warmup-steps 5 \
    --epochs 1 --lr 0.05 --log-every 47 --metrics "$tmp/m3.jsonl" >"$tmp/out" 2>&1
if grep -q "2 ranks x batch 16 x 2 accumulated = 64 per step, 47 steps" "$tmp/out" &&
    grep -q "lr schedule: cosine from 0.05 to 0, 5 warmup steps" "$tmp/out" &&
    grep -q '"step": 47, .*"lr": [0-9.e-]*, "grad_norm": [0-9.e+-]*, "eval_loss"' "$tmp/m3.jsonl"; then
    ok "--accum-steps 2 --clip-grad-norm 1 --lr-schedule cosine: 47 steps an epoch, lr and grad_norm in metrics"
else
    bad "accumulation/clipping/schedule run"; cat "$tmp/out" "$tmp/m3.jsonl"
fi
# --init-params reads what --dump-params wrote: a step at lr 1e-12 leaves it (within 1e-6).
run 1 train --data "$tmp/hard" --steps 5 --dump-params "$tmp/p.bin" >/dev/null 2>&1
run 1 train --data "$tmp/hard" --steps 1 --lr 1e-12 --momentum 0 --init-params "$tmp/p.bin" --dump-params "$tmp/q.bin" \
    >"$tmp/out" 2>&1
python3 -c '
import array, sys
a, b = array.array("f"), array.array("f")
a.frombytes(open(sys.argv[1], "rb").read()); b.frombytes(open(sys.argv[2], "rb").read())
sys.exit(0 if len(a) == len(b) == 1126410 and max(abs(x - y) for x, y in zip(a, b)) < 1e-6 else 1)' "$tmp/p.bin" "$tmp/q.bin" &&
    ok "--init-params loads --dump-params' file exactly" || { bad "--init-params round trip"; cat "$tmp/out"; }
head -c 100 "$tmp/p.bin" >"$tmp/short.bin"
expect 2 "holds 100 bytes; this model has 1126410 parameters, 4505640 bytes" run 2 train --data "$tmp/hard" --init-params "$tmp/short.bin"
expect 2 "--lr-schedule step:10,5:0.1: " run 1 train --data "$tmp/hard" --lr-schedule step:10,5:0.1

# --- An image folder of PNGs (resized and center-cropped to --input), with one undecodable file:
# it fails naming the file, or --bad-samples skip replaces and counts it.
python3 "$here/make_images.py" "$tmp/imgs" 20 3
echo "not an image" >"$tmp/imgs/class1/zz.png"
expect 1 "$tmp/imgs/class1/zz.png is neither JPEG" run 1 train --data "$tmp/imgs" --input 3x8x8 --holdout 0.2 --steps 2
run 2 train --data "$tmp/imgs" --input 3x8x8 --holdout 0.2 --batch 8 --epochs 6 --lr 0.05 --bad-samples skip \
    --augment flip --loader-threads 2 >"$tmp/out" 2>&1
if grep -q "data: $tmp/imgs (imagefolder), 49 samples of 3x8x8, 3 classes" "$tmp/out" &&
    grep -qE "^--bad-samples skip: [1-9][0-9]* replacements? of an undecodable sample by the next one \(one each time such a sample was read; dtrain data verify PATH names every file\)" "$tmp/out"; then
    ok "image folder: trains with --bad-samples skip, and says how many it replaced"
else
    bad "image folder with a bad file and --bad-samples skip"; cat "$tmp/out"
fi
# 3 classes on the mlp's fc:10 train, warned once (rank 0), naming both counts and the fc:3 that fits.
[ "$(grep -cF "WARN --data $tmp/imgs has 3 classes but the model's last layer has 10 outputs: the 7 without a class are trained never to be predicted; to match the data end the model with fc:3 (--model 'fc:1024,relu,fc:1024,relu,fc:3' --input 3x8x8)" "$tmp/out")" -eq 1 ] &&
    ok "fewer classes than outputs: one warning with the fix" || { bad "fewer classes than outputs"; cat "$tmp/out"; }

# Met mid-run on one rank (zz.png is sample 40: in step 6 of 8 per step, file order), the ranks agree
# on it: the 5 steps before it are saved, and --resume auto with --bad-samples skip goes on from there.
rm -rf "$tmp/ckbad"
expect 1 "the batch of step 6 failed on 1 rank; the 5 steps before it are saved in $tmp/ckbad" \
    run 2 train --data "$tmp/imgs" --input 3x8x8 --normalize unit --shuffle none --batch 4 --steps 10 \
    --checkpoint-dir "$tmp/ckbad"
grep -qF "$tmp/imgs/class1/zz.png is neither JPEG" "$tmp/out" && [ -f "$tmp/ckbad/ckpt-0000000005.dtc" ] &&
    ok "a bad image mid-run: named, and the steps before it saved" || { bad "bad image mid-run"; cat "$tmp/out"; }
expect 0 "resumed after step 5" run 2 train --data "$tmp/imgs" --input 3x8x8 --normalize unit --shuffle none \
    --batch 4 --steps 10 --checkpoint-dir "$tmp/ckbad" --resume auto --bad-samples skip

# --normalize standard (the default) on an image folder: the figures are computed once for the job,
# each rank reading its share of the samples (blocks of 16: 32 + 28 of the 60 at 2 ranks, 16 + 16
# + 28 at 3), and they are the same bits at 1, 2 and 3 ranks and 1 or 3 threads. Four runs show it:
# 1 rank x 3 threads (its 4 blocks on 3 threads: one thread reads two), 3 ranks x 1 and x 3 threads
# (the thread count alone changes; the last rank's 2 blocks on 3 threads), and 2 ranks x 1 thread,
# the uninterrupted run of the resume check below. A resumed run computes none: it opens with its
# checkpoint's (the load would replace any it computed) and still ends on the uninterrupted run's
# bits.
python3 "$here/make_images.py" "$tmp/rs" 20 3
declare -A rs_parts=([1]="60 " [2]="32 28 " [3]="16 16 28 ")
rs_figs=""
# rs_stats NP THREADS TRAIN-FLAGS...: a run that logs its statistics pass (output in $tmp/out);
# checks each rank's share and that the figures are the first run's bits.
rs_stats() {
    local np=$1 lt=$2 parts want figs
    shift 2
    rm -f "$tmp/rs.log"
    DTRAIN_TEST_STATS_LOG="$tmp/rs.log" timeout 240 "$MPIRUN" -np $np -x DTRAIN_TEST_STATS_LOG "$DTRAIN" train \
        --data "$tmp/rs" --input 3x8x8 --batch 4 --loader-threads $lt "$@" >"$tmp/out" 2>&1 ||
        { bad "$np rank(s), $lt thread(s): the run failed"; cat "$tmp/out"; }
    parts=$(sed -n 's/^stats pass: \([0-9]*\) samples in .*/\1/p' "$tmp/rs.log" 2>/dev/null | sort -n | tr '\n' ' ')
    want=$(tr ' ' '\n' <<<"${rs_parts[$np]}" | sed '/^$/d' | sort -n | tr '\n' ' ')
    figs=$(grep "^stats figures:" "$tmp/rs.log" 2>/dev/null | sort -u)
    [ -n "$figs" ] && [ "$(wc -l <<<"$figs")" = 1 ] && [ "$parts" = "$want" ] && [ -z "$rs_figs" -o "$figs" = "$rs_figs" ] &&
        ok "standard figures at $np rank(s), $lt thread(s): samples read ${parts}, the same bits ($figs)" ||
        { bad "standard figures at $np rank(s), $lt thread(s): samples read '$parts' (want '$want'), '$figs' against '$rs_figs'"; cat "$tmp/rs.log"; }
    rs_figs=${rs_figs:-$figs}
}
rs_stats 1 3 --steps 1
rs_stats 3 1 --steps 1
rs_stats 3 3 --steps 1
rsf="--data $tmp/rs --input 3x8x8 --batch 4 --steps 8 --lr 0.05 --seed 2 --loader-threads 1"
rs_stats 2 1 --steps 8 --lr 0.05 --seed 2 --dump-params "$tmp/rs0.bin"
passes_fresh=$(grep -c "^stats pass: " "$tmp/rs.log" 2>/dev/null)
DTRAIN_FAULT=usr1:0:4 timeout 240 "$MPIRUN" -np 2 -x DTRAIN_FAULT "$DTRAIN" train $rsf --checkpoint-dir "$tmp/ckrs" \
    >"$tmp/out" 2>&1
rm -f "$tmp/rs.log"
DTRAIN_TEST_STATS_LOG="$tmp/rs.log" timeout 240 "$MPIRUN" -np 2 -x DTRAIN_TEST_STATS_LOG "$DTRAIN" train $rsf \
    --checkpoint-dir "$tmp/ckrs" --resume auto --dump-params "$tmp/rs1.bin" >"$tmp/out" 2>&1
[ "$passes_fresh" = 2 ] && [ ! -s "$tmp/rs.log" ] && grep -q "resumed from .*ckpt-0000000004.dtc at step 4" "$tmp/out" &&
    grep -q "^normalize: standard, .* (from the checkpoint of step 4)$" "$tmp/out" && cmp -s "$tmp/rs0.bin" "$tmp/rs1.bin" &&
    ok "standard normalization: a part of the pass a rank when fresh, none when resumed (the checkpoint's figures), same bits" ||
    { bad "resumed run's normalization: $passes_fresh passes fresh, resumed: $(cat "$tmp/rs.log" 2>/dev/null)"; cat "$tmp/out"; }

# A bad image among the held-out data, first read by the evaluation (at the end by default), on one
# rank and on two: at the end the run finishes without it (--dump-params written) and exits 1;
# mid-run (--eval-every) the steps trained are saved before the run fails.
python3 "$here/make_images.py" "$tmp/tv/train" 6 3
python3 "$here/make_images.py" "$tmp/tv/val" 2 3
echo "not an image" >"$tmp/tv/val/class1/zz.png"
for np in 1 2; do
    rm -rf "$tmp/ckev" "$tmp/ev.bin"
    expect 1 "the final evaluation failed; the run finishes without it (--dump-params written) and exits 1" \
        run $np train --data "$tmp/tv" --input 3x8x8 --normalize unit --batch 2 --steps 4 --dump-params "$tmp/ev.bin"
    [ -s "$tmp/ev.bin" ] && grep -qF "$tmp/tv/val/class1/zz.png is neither JPEG" "$tmp/out" &&
        ok "$np rank(s): a bad held-out image at the final evaluation: named, the parameters dumped" ||
        { bad "$np rank(s): bad held-out image at the end"; cat "$tmp/out"; }
    expect 1 "the evaluation after step 2 failed; the 2 steps are saved in $tmp/ckev" \
        run $np train --data "$tmp/tv" --input 3x8x8 --normalize unit --batch 2 --steps 4 --eval-every 2 \
        --checkpoint-dir "$tmp/ckev"
    [ -f "$tmp/ckev/ckpt-0000000002.dtc" ] && ok "$np rank(s): a bad held-out image mid-run: the steps saved" ||
        { bad "$np rank(s): bad held-out image mid-run"; cat "$tmp/out"; }
done

# --bad-samples skip in an evaluation leaves the undecodable val/class1/zz.png out (replaced by the
# next sample, class2's first, that one would count twice): 6 samples, 2 a class, in training's
# eval line and in dtrain eval at 2 ranks.
run 1 train --data "$tmp/tv" --input 3x8x8 --normalize unit --batch 2 --steps 4 --bad-samples skip \
    --checkpoint-dir "$tmp/ckbs" >"$tmp/out" 2>&1
run 2 eval --data "$tmp/tv" --input 3x8x8 --checkpoint-dir "$tmp/ckbs" --bad-samples skip >"$tmp/ebs" 2>&1
n=$(sed -n 's/^eval .* acc [0-9.]*  (\([0-9]*\) of 6 correct; 1 undecodable sample left out)$/\1/p' "$tmp/out")
if [ -n "$n" ] && grep -q "^accuracy [0-9.]* ($n of 6 correct)" "$tmp/ebs" &&
    grep -q "^--bad-samples skip: 1 of the 7 samples could not be decoded: left out" "$tmp/ebs" &&
    grep -qx "per class (accuracy, samples): 0: [0-9.]* (2), 1: [0-9.]* (2), 2: [0-9.]* (2)" "$tmp/ebs"; then
    ok "--bad-samples skip: an undecodable held-out image is left out, not counted twice ($n of 6)"
else
    bad "--bad-samples skip in the evaluation"; cat "$tmp/out" "$tmp/ebs"
fi

# A held-out image folder without class1 keeps training's labels, in training's --eval-data and in
# dtrain eval --eval-data (numbered by --data's classes; alone, its own folders would make class2
# label 1): the same figures, the same at 1 and 2 ranks.
python3 "$here/make_images.py" "$tmp/gap/train" 6 3
python3 "$here/make_images.py" "$tmp/gap/val" 2 3
rm -r "$tmp/gap/val/class1"
gap="--input 3x8x8 --model fc:3"
run 1 train --data "$tmp/gap/train" --eval-data "$tmp/gap/val" $gap --normalize unit --batch 6 --steps 3 --lr 0.02 \
    --checkpoint-dir "$tmp/ckgap" >"$tmp/out" 2>&1 || { bad "training with a held-out folder lacking a class"; cat "$tmp/out"; }
want=$(sed -n 's/^eval .*held-out loss \([0-9.]*\)  acc \([0-9.]*\)  (\([0-9]*\) of 4 correct)$/accuracy \2 (\3 of 4 correct), mean loss \1/p' "$tmp/out")
for np in 1 2; do
    run $np eval --data "$tmp/gap/train" --eval-data "$tmp/gap/val" $gap --checkpoint-dir "$tmp/ckgap" >"$tmp/eg$np" 2>&1
done
if [ -n "$want" ] && grep -qxF "$want" "$tmp/eg1" && grep -qxF "$want" "$tmp/eg2" &&
    grep -qx "per class (accuracy, samples): 0: [0-9.]* (2), 2: [0-9.]* (2)" "$tmp/eg1"; then
    ok "dtrain eval --eval-data: a val folder lacking a class keeps training's labels and figures ($want)"
else
    bad "dtrain eval --eval-data on a folder lacking a class (training: '$want')"; cat "$tmp/out" "$tmp/eg1" "$tmp/eg2"
fi
# The same folder against training's .dts, which keeps no class names: numbered in its own order,
# class2 would read as class1, so it is refused, naming both counts.
"$DTRAIN" data convert "$tmp/gap/train" "$tmp/gap.dts" --input 3x8x8 >"$tmp/out" 2>&1 || { bad "convert gap/train"; cat "$tmp/out"; }
expect 2 "$tmp/gap/val has 2 class folders but the training set $tmp/gap.dts (dts) has 3 classes" \
    run 1 train --data "$tmp/gap.dts" --eval-data "$tmp/gap/val" $gap --steps 1
# A folder with every class is read in its sorted order, decoded without --input to the .dts
# samples' shape, by training and by dtrain eval.
expect 0 "held-out: 18 samples from --eval-data $tmp/gap/train" run 1 train --data "$tmp/gap.dts" \
    --eval-data "$tmp/gap/train" --model fc:3 --steps 1 --checkpoint-dir "$tmp/ckdts"
expect 0 " of 18 correct), mean loss" run 1 eval --data "$tmp/gap.dts" --eval-data "$tmp/gap/train" --model fc:3 \
    --checkpoint-dir "$tmp/ckdts"
# One file is its own samples: eval says it scored all of them, not a test split it does not have.
expect 0 "dtrain eval: $tmp/gap.dts (one file: all its samples)" run 1 eval --data "$tmp/gap.dts" --model fc:3 \
    --checkpoint-dir "$tmp/ckdts"

# Augmentation is drawn from (seed, epoch, sample): the run is the same bits at 0 and 3 loader threads.
for lt in 0 3; do
    run 1 train --data "$tmp/imgs" --input 3x8x8 --batch 8 --steps 12 --augment crop:2,flip --bad-samples skip --loader-threads $lt \
        --dump-params "$tmp/aug$lt.bin" >"$tmp/out" 2>&1 || { bad "augmented run with $lt loader threads"; cat "$tmp/out"; }
done
cmp -s "$tmp/aug0.bin" "$tmp/aug3.bin" && ok "--augment crop:2,flip: the same parameters with 0 and 3 loader threads" ||
    bad "augmentation depends on the loader thread count"
# And through stops: stopped after step 4 and after step 9 (61 images: 8 steps of 8 an epoch, so one stop
# mid-epoch 0, one mid-epoch 1), resumed each time at another loader thread count, the augmented run
# ends on the uninterrupted run's bits: the crops and flips of the resumed epochs are redrawn alike.
rm -rf "$tmp/ckaug"
aug="--data $tmp/imgs --input 3x8x8 --batch 8 --steps 12 --augment crop:2,flip --bad-samples skip --checkpoint-dir $tmp/ckaug"
for leg in 3:4 0:9; do
    DTRAIN_FAULT=usr1:0:${leg#*:} timeout 240 "$MPIRUN" -np 1 -x DTRAIN_FAULT "$DTRAIN" train $aug --resume auto \
        --loader-threads ${leg%:*} >"$tmp/out" 2>&1
    [ $? -eq 75 ] || { bad "the augmented run did not stop at step ${leg#*:}"; cat "$tmp/out"; }
done
run 1 train $aug --resume auto --loader-threads 2 --dump-params "$tmp/augr.bin" >"$tmp/out" 2>&1 ||
    { bad "the augmented run's last resume"; cat "$tmp/out"; }
grep -q "resumed from .*ckpt-0000000009.dtc at step 9" "$tmp/out" && cmp -s "$tmp/augr.bin" "$tmp/aug0.bin" &&
    ok "--augment crop:2,flip stopped at 4 and 9, resumed at 0 and 2 loader threads == uninterrupted" ||
    { bad "the augmented run stopped twice and resumed differs from the uninterrupted one"; cat "$tmp/out"; }

# --- Refusals, each naming the value and the fix.
python3 "$here/make_idx.py" "$tmp/k12" 200 50 12 60
# A path that is not there is the command's to fix: exit 2, before any work (the exit of every
# rank follows the failing one's, so mpirun's too).
expect 2 "does not exist" run 1 train --data "$tmp/nothing"
expect 2 "--eval-data $tmp/nothing: dataset $tmp/nothing does not exist" run 1 train --data "$tmp/hard" --eval-data "$tmp/nothing"
# A dataset that only one rank cannot open (a path missing on one node of a job): the one error
# line in the job's merged output names that rank and its host, not the job as a whole.
expect 2 "dataset $tmp/nothing does not exist (rank 1 of 2, on $(hostname))" timeout 120 "$MPIRUN" \
    -np 1 "$DTRAIN" train --data "$tmp/hard" --steps 5 : -np 1 "$DTRAIN" train --data "$tmp/nothing" --steps 5
! grep -q "MPI_ABORT" "$tmp/out" && ok "one rank's missing data: every rank ends, no MPI_Abort" ||
    { bad "one rank's missing data ended by MPI_Abort"; cat "$tmp/out"; }
# Missing on every rank (a wrong path): said once for the job, with the count, and no abort (it
# was one error per rank, 1024 at 1024 ranks, then MPI_Abort's banner).
expect 2 "dataset $tmp/nothing does not exist (the same on all 4 ranks)" run 4 train \
    --data "$tmp/nothing" --steps 5
[ "$(grep -c "dtrain: error" "$tmp/out")" -eq 1 ] && ! grep -q "MPI_ABORT" "$tmp/out" && ! grep -q "ranks) (rank" "$tmp/out" &&
    ok "missing data on all 4 ranks: one error line, no MPI_Abort" || { bad "missing data on 4 ranks"; cat "$tmp/out"; }
# So are the refusals every rank meets once the model is made: data of another shape, a missing
# --eval-data, a model the grammar refuses (each was one line per rank, the first two then MPI_Abort).
alike() { # TEXT train-flags...: 2 ranks, exit 2, one error line saying TEXT "... (the same on all 2 ranks)", no abort
    local text=$1; shift
    expect 2 "$text" run 2 train --steps 1 "$@"
    [ "$(grep -c "dtrain: error" "$tmp/out")" -eq 1 ] && grep -q "(the same on all 2 ranks)$" "$tmp/out" &&
        ! grep -q "MPI_ABORT" "$tmp/out" &&
        ok "2 ranks, train $*: one error line, no MPI_Abort" || { bad "2 ranks, train $*"; cat "$tmp/out"; }
}
alike "holds samples of 1x8x8 (64 values) but the model takes 1x28x28 (784)" --data "$tmp/hard" --model cnn --input 1x28x28
alike "--eval-data $tmp/nothing: dataset $tmp/nothing does not exist" --data "$tmp/hard" --eval-data "$tmp/nothing"
alike "model 'conv:8:3,relu,fc:10' needs an input shape" --model conv:8:3,relu,fc:10
# --drop-last and data smaller than one global batch: no step at all, refused before the model is
# made (it was each rank's failure at its first batch).
alike "--data $tmp/hard: 3000 training samples are fewer than one global batch of 2 ranks x --batch 2000, and --drop-last leaves out a step" \
    --data "$tmp/hard" --drop-last --batch 2000
expect 2 "2700 training samples (after --holdout 0.1) are fewer than one global batch of 1 rank x --batch 2800" \
    run 1 train --data "$tmp/hard" --holdout 0.1 --drop-last --batch 2800
! grep -q "parameters" "$tmp/out" && ok "--drop-last's empty epoch refused before the model" || { bad "refused after the model"; cat "$tmp/out"; }
# Held-out labels past the model's outputs are named against those outputs (it said the training
# data's classes, which are not the limit).
expect 2 "the held-out data (--eval-data $tmp/k12) has labels up to 11 (12 classes), the model only 10 outputs (labels 0 to 9; the training data has 10 classes)" \
    run 1 train --data "$tmp/hard" --eval-data "$tmp/k12" --steps 1
expect 2 "holds samples of 1x8x8 (64 values) but the model takes 1x28x28 (784)" run 1 train --data "$tmp/hard" --model cnn --input 1x28x28
expect 2 "has 12 classes but the model's last layer has 10 outputs: end the model with fc:12 (--model 'fc:1024,relu,fc:1024,relu,fc:12')" run 1 train --data "$tmp/k12"
# The suggestion keeps the user's own layers (it offered an mlp to a cnn run).
expect 2 "(--model 'conv:32:3:1:1,relu,pool:2,conv:64:3:1:1,relu,pool:2,fc:128,relu,fc:12')" run 1 train --data "$tmp/k12" --model cnn
expect 2 "$tmp/k12 has labels up to 11 (12 classes), the model only 10 outputs (labels 0 to 9): its predictions could never be right" \
    run 2 eval --data "$tmp/k12" --checkpoint-dir "$tmp/ck"
expect 2 "give --epochs or --steps, not both" run 1 train --data "$tmp/hard" --epochs 1 --steps 5
expect 2 "--eval-data needs --data PATH" run 1 train --eval-data "$tmp/hard"
expect 2 "--augment part 'rotate' is not crop:P" run 1 train --data "$tmp/hard" --augment crop:2,rotate
expect 2 "--normalize 'z' is not one of none, unit" run 1 train --data "$tmp/hard" --normalize z
expect 2 "--synthetic-on device: --data $tmp/hard is read from files" run 1 train --data "$tmp/hard" --synthetic-on device
expect 2 "--shuffle 'yes' is not epoch" run 1 train --data "$tmp/hard" --shuffle yes
mkdir -p "$tmp/trunc"
head -c 1000 "$tmp/hard/train-images-idx3-ubyte" >"$tmp/trunc/train-images-idx3-ubyte"
cp "$tmp/hard/train-labels-idx1-ubyte" "$tmp/trunc/"
expect 1 "$tmp/trunc/train-images-idx3-ubyte" run 1 train --data "$tmp/trunc"
# A test split that is there but does not open: training refuses (it would otherwise run without the
# held-out set it was meant to have); --holdout names another held-out set; a dataset without a test
# split trains and says it has none.
mkdir -p "$tmp/badtest" && cp "$tmp/hard"/train-* "$tmp/hard"/t10k-images-idx3-ubyte "$tmp/badtest/"
head -c 100 "$tmp/hard/t10k-labels-idx1-ubyte" >"$tmp/badtest/t10k-labels-idx1-ubyte"
expect 1 "--data $tmp/badtest has a test split (the held-out set), and it does not open: $tmp/badtest/t10k-labels-idx1-ubyte is 100 bytes" \
    run 1 train --data "$tmp/badtest" --steps 2
expect 0 "held-out: 300 samples from --holdout 0.1 of $tmp/badtest" run 1 train --data "$tmp/badtest" --holdout 0.1 --steps 2
rm "$tmp/badtest"/t10k-*
expect 0 "held-out: none ($tmp/badtest has no test split" run 1 train --data "$tmp/badtest" --steps 2
expect 2 "needs --checkpoint-dir DIR" run 1 eval --data "$tmp/hard"
expect 2 "dataset $tmp/nothing does not exist" run 1 eval --data "$tmp/nothing" --checkpoint-dir "$tmp/ck"
expect 2 "--checkpoint-dir $tmp/none does not exist: give the directory a \`dtrain train --checkpoint-dir\` saved into" \
    run 1 eval --data "$tmp/hard" --checkpoint-dir "$tmp/none"
mkdir "$tmp/empty"
expect 1 "no loadable checkpoint in $tmp/empty" run 1 eval --data "$tmp/hard" --checkpoint-dir "$tmp/empty"
# Mistakes a newcomer makes: a checkpoint file for the directory, eval without training's --model
# (told which flags to give, not to "resume").
expect 2 "--checkpoint-dir $(ls "$tmp"/ck/ckpt-*.dtc | tail -1) is a file, not a directory: give the directory that holds the checkpoints ($tmp/ck)" \
    run 1 eval --data "$tmp/hard" --checkpoint-dir "$(ls "$tmp"/ck/ckpt-*.dtc | tail -1)"
expect 2 "was written for another model (fingerprint" run 1 eval --data "$tmp/hard" --model cnn --checkpoint-dir "$tmp/ck"
grep -qF "give the --model and --input it was trained with" "$tmp/out" && ok "eval of another model: names the flags to give" ||
    bad "eval of another model: $(cat "$tmp/out")"
# At several ranks a failure every rank shares is said once, by the rank that met it, not repeated
# by each of the others: a --data missing everywhere (with the count, and no MPI_Abort), no
# checkpoint, a checkpoint of another model (rank 0 reads it for all).
once() { # NP CODE TEXT eval-flags...
    local np=$1 code=$2 text=$3; shift 3
    run "$np" eval "$@" >"$tmp/out" 2>&1
    local rc=$? n; n=$(grep -c '^dtrain: error:' "$tmp/out")
    [ $rc -eq "$code" ] && [ "$n" -eq 1 ] && grep -qF -- "$text" "$tmp/out" && ! grep -q MPI_ABORT "$tmp/out" &&
        ok "$np ranks, eval $*: exit $rc, said once: '$text'" || { bad "$np ranks, eval $*: exit $rc, $n error lines"; cat "$tmp/out"; }
}
once 3 2 "dataset $tmp/nothing does not exist (the same on all 3 ranks)" --data "$tmp/nothing" --checkpoint-dir "$tmp/ck"
once 3 1 "no loadable checkpoint in $tmp/empty" --data "$tmp/hard" --checkpoint-dir "$tmp/empty"
once 3 2 "was written for another model (fingerprint" --data "$tmp/hard" --model cnn --checkpoint-dir "$tmp/ck"
once 2 2 "layer 1 'conv:8:3' must be conv:OUT:K:STRIDE:PAD" --data "$tmp/hard" --model conv:8:3,relu,fc:10 --checkpoint-dir "$tmp/ck"
# --normalize unit on an fp32 shard of bytes: divided by 255 as the bytes are (the shard's byte
# flag), so a checkpoint evaluates the same on the IDX files and on their shard.
run 1 train --data "$tmp/hard" --model fc:10 --steps 5 --batch 20 --normalize unit --checkpoint-dir "$tmp/cku" \
    --quiet >/dev/null 2>&1
run 1 data convert "$tmp/hard" "$tmp/hard32" --dtype fp32 >/dev/null 2>&1
l_idx=$(run 1 eval --data "$tmp/hard" --model fc:10 --checkpoint-dir "$tmp/cku" 2>&1 | grep -o "mean loss [0-9.]*")
l_dts=$(run 1 eval --data "$tmp/hard32" --model fc:10 --checkpoint-dir "$tmp/cku" 2>&1 | grep -o "mean loss [0-9.]*")
[ -n "$l_idx" ] && [ "$l_idx" = "$l_dts" ] && ok "--normalize unit: an fp32 shard of bytes evaluates as its source ($l_dts)" ||
    bad "--normalize unit on an fp32 shard: '$l_dts' against the IDX files' '$l_idx'"
# --normalize standard:M,..:S,..: the figures given, in /255 units for bytes (torchvision's
# Normalize after ToTensor): mean 0 and std 1 there is x / 255, bit for bit --normalize unit's.
for nz in unit standard:0:1; do
    run 1 train --data "$tmp/hard" --model fc:10 --steps 4 --batch 20 --normalize $nz --log-every 4 \
        --metrics "$tmp/nz-${nz%%:*}.jsonl" >"$tmp/out-nz" 2>&1 || { bad "--normalize $nz failed"; cat "$tmp/out-nz"; }
done
grep -qF "normalize: standard, per channel mean / std (of values / 255): 0.0000 / 1.0000" "$tmp/out-nz" &&
    [ "$(grep -o '"loss": [0-9.e-]*' "$tmp/nz-unit.jsonl")" = "$(grep -o '"loss": [0-9.e-]*' "$tmp/nz-standard.jsonl")" ] &&
    ok "--normalize standard:0:1 trains exactly as unit, and says its figures" ||
    { bad "--normalize standard:0:1 against unit"; cat "$tmp/out-nz" "$tmp"/nz-*.jsonl; }
expect 2 "2 figures of mean and std for data of 1 channel" run 1 train --data "$tmp/hard" --normalize standard:0.1,0.2:0.3,0.4
expect 2 "std figure 0 must be above 0" run 1 train --data "$tmp/hard" --normalize standard:0.1:0
expect 2 "gives 2 means and 1 std figure" run 1 train --data "$tmp/hard" --normalize standard:0.1,0.2:0.3
# A long list is read whole: 60 means of 40 characters (2459) were cut at 2047 to 50 and passed
# beside 50 stds.
long=$(printf '0.10000000000000000000000000000000000001,%.0s' $(seq 60)) ones=$(printf '1,%.0s' $(seq 50))
expect 2 "gives 60 means and 50 std figures" run 1 train --data "$tmp/hard" --normalize "standard:${long%,}:${ones%,}"
# Each figure where it was given, negative means and large ones included (the synthetic data: not bytes).
expect 0 "normalize: standard, per channel mean / std: -1000.5000 / 2000.0000 0.2500 / 0.5000 0.1250 / 64.0000" \
    "$DTRAIN" train --steps 1 --batch 2 --model fc:10 --input 3x2x2 --normalize standard:-1000.5,0.25,0.125:2000,0.5,64
finish
