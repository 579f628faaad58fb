#!/usr/bin/env bash
# `dtrain train`: N ranks on B samples each learn what 1 rank learns on N*B; the same command
# twice gives bit-identical parameters; mlp and cnn learn well above chance; bad flags are refused.
here=$(dirname "$0"); source "$here/lib.sh"
DTRAIN=$1 MPIRUN=$2 CMP=$3

train() { # ranks, then train flags
    local np=$1; shift
    "$MPIRUN" -np "$np" "$DTRAIN" train --blas-threads 1 "$@" >"$tmp/log" 2>&1 || { cat "$tmp/log"; return 1; }
}

# --- Equivalence: 20 steps of SGD with momentum, global batch 32 (mlp) and 16 (cnn).
for model in mlp cnn; do
    gb=32; [ $model = cnn ] && gb=16
    common="--model $model --steps 20 --optim sgd --momentum 0.9 --lr 0.05 --weight-decay 0.0005 --seed 3 --log-every 20"
    train 1 $common --batch $gb --dump-params "$tmp/$model.1" || bad "$model 1 rank failed"
    for np in 2 4; do
        train $np $common --batch $((gb / np)) --dump-params "$tmp/$model.$np" || bad "$model $np ranks failed"
        out=$("$CMP" "$tmp/$model.$np" "$tmp/$model.1" 1e-5)
        [ $? -eq 0 ] && ok "$model: $np ranks x $((gb / np)) == 1 rank x $gb: $out" || bad "$model: $np ranks x $((gb / np)) != 1 rank x $gb: $out"
    done
done

# The same with AdamW, clipping that binds (the global batch's gradient norm is near 1), accumulation
# and ZeRO-1, on a conv model: 2 ranks x 4 x 2 micro-batches == 1 rank x 8 x 2 (mpi.torch_parity,
# which also checks AdamW at 2 ranks, skips without torch).
common="--model conv:4:3:1:1,relu,pool:2,fc:16,relu,fc:10 --input 1x12x12 --steps 12 --optim adamw --lr 0.01
        --weight-decay 0.01 --clip-grad-norm 0.05 --accum-steps 2 --seed 1 --log-every 12"
if train 1 $common --batch 8 --dump-params "$tmp/aw.1" && train 2 $common --batch 4 --zero 1 --dump-params "$tmp/aw.2"; then
    out=$("$CMP" "$tmp/aw.2" "$tmp/aw.1" 1e-5) && ok "conv adamw, clipped, accum 2: 2 ranks x 4 --zero 1 == 1 rank x 8: $out" ||
        bad "conv adamw, clipped, accum 2: 2 ranks x 4 --zero 1 != 1 rank x 8: $out"
else
    bad "the adamw equivalence runs failed"
fi

# --clip-grad-norm inf reports the norm and clips nothing (torch's clip_grad_norm_(max_norm=inf),
# used to log it): the parameters of a run without clipping, bit for bit, and a grad_norm a record.
common="--model fc:16,relu,fc:10 --input 20 --steps 6 --batch 8 --lr 0.05 --seed 3 --log-every 3"
if train 2 $common --dump-params "$tmp/ci0" && train 2 $common --clip-grad-norm inf --dump-params "$tmp/ci1" \
    --metrics "$tmp/ci1.jsonl" && grep -q "^gradient norm: reported as grad_norm, not clipped (--clip-grad-norm inf)$" "$tmp/log"; then
    out=$("$CMP" "$tmp/ci1" "$tmp/ci0" exact) &&
        [ "$(grep -cE '"grad_norm": [0-9.e+-]+[,}]' "$tmp/ci1.jsonl")" = 2 ] &&
        ok "--clip-grad-norm inf: unclipped parameters ($out), grad_norm in both records" ||
        { bad "--clip-grad-norm inf: $out"; cat "$tmp/ci1.jsonl"; }
else
    bad "the --clip-grad-norm inf runs failed"; cat "$tmp/log"
fi

# --- Relu layers run inside their neighbours (--fused-relu 1, the default) or on their own: the
# same parameters bit for bit on the CPU, for the cnn (relus before pools and an fc) in bf16 too.
for prec in fp32 bf16; do
    common="--model cnn --steps 6 --batch 8 --lr 0.05 --seed 5 --log-every 6 --precision $prec"
    if train 2 $common --fused-relu 1 --dump-params "$tmp/fr1" && train 2 $common --fused-relu 0 --dump-params "$tmp/fr0"; then
        out=$("$CMP" "$tmp/fr1" "$tmp/fr0" exact) && ok "cnn $prec, 2 ranks: --fused-relu 1 == 0: $out" ||
            bad "cnn $prec: --fused-relu 1 != 0: $out"
    else
        bad "the --fused-relu runs failed"
    fi
done
expect 2 "--fused-relu (1: relu layers run inside their neighbours, 0: on their own) '3' is out of range" \
    "$DTRAIN" train --fused-relu 3

# --- The loader's device path (the CPU standing in for a GPU, DTRAIN_TEST_SYNTH_DEVICE): the same
# batches at every rank, so the same parameters bit for bit as batches made by loader threads,
# through an epoch boundary (300 samples, 2 x 8 a step) and a stop + resume between.
common="--model mlp --steps 30 --batch 8 --dataset-size 300 --lr 0.05 --seed 4 --log-every 30"
rm -rf "$tmp/ck-sd"
if train 2 $common --loader-threads 2 --dump-params "$tmp/sd-host" &&
   DTRAIN_TEST_SYNTH_DEVICE=1 DTRAIN_FAULT=usr1:0:12 "$MPIRUN" -np 2 -x DTRAIN_TEST_SYNTH_DEVICE -x DTRAIN_FAULT "$DTRAIN" train \
       --blas-threads 1 $common --checkpoint-dir "$tmp/ck-sd" >"$tmp/log" 2>&1; [ $? -eq 75 ] &&
   grep -q "made on the GPU by one kernel" "$tmp/log" &&
   DTRAIN_TEST_SYNTH_DEVICE=1 "$MPIRUN" -np 2 -x DTRAIN_TEST_SYNTH_DEVICE "$DTRAIN" train --blas-threads 1 $common \
       --checkpoint-dir "$tmp/ck-sd" --resume auto --dump-params "$tmp/sd-dev" >"$tmp/log" 2>&1; then
    out=$("$CMP" "$tmp/sd-dev" "$tmp/sd-host" exact) && ok "mlp, 2 ranks: batches on the (stand-in) device, stopped at 12 + resumed == loader threads: $out" ||
        bad "device-path batches vs loader threads: $out"
else
    bad "the device-path runs failed"; cat "$tmp/log"
fi

# --- Buckets: overlapped bucketed allreduce == one allreduce of the whole buffer after backward,
# bit for bit, whatever the buckets (the engine adds every element in rank order).
for np in 2 4; do
    for model in mlp cnn; do
        common="--model $model --steps 20 --batch 4 --lr 0.05 --seed 5 --log-every 20"
        train $np $common --no-overlap --bucket-mb 0 --first-bucket-mb 0 --dump-params "$tmp/whole" || bad "$model whole-buffer run failed"
        cp "$tmp/whole" "$tmp/whole.$model.$np" # the reference of the inline engine's run below, too
        for cfg in "--bucket-mb 25 --first-bucket-mb 1" "--bucket-mb 0 --first-bucket-mb 0" \
                   "--bucket-mb 0.000001 --first-bucket-mb 0.000001" "--bucket-mb 0.5 --first-bucket-mb 0.1"; do
            train $np $common $cfg --dump-params "$tmp/bk" || bad "$model $cfg failed"
            nb=$(sed -n 's/^gradients: \([0-9]*\) bucket.*/\1/p' "$tmp/log")
            out=$("$CMP" "$tmp/bk" "$tmp/whole" exact) && ok "$model, $np ranks, $nb bucket(s) ($cfg), overlapped: $out" || bad "$model, $np ranks, $cfg: $out"
        done
    done
done
# 16-bit gradient communication: also independent of the buckets, bit for bit.
for np in 2 4; do
    for wire in fp16 bf16; do
        common="--model mlp --steps 10 --batch 4 --lr 0.05 --seed 5 --log-every 10 --grad-comm $wire"
        train $np $common --no-overlap --bucket-mb 0 --first-bucket-mb 0 --dump-params "$tmp/w16" || bad "$wire whole failed"
        train $np $common --bucket-mb 0.000001 --first-bucket-mb 0.000001 --dump-params "$tmp/b16" || bad "$wire buckets failed"
        out=$("$CMP" "$tmp/b16" "$tmp/w16" exact) && ok "--grad-comm $wire, $np ranks: per-layer buckets == whole buffer: $out" || bad "--grad-comm $wire, $np ranks: $out"
        grep -q "$wire on the wire" "$tmp/log" && ok "--grad-comm $wire reported" || bad "--grad-comm $wire not reported"
        # fp16 without a loss scaler rounds small fp32 gradients to 0 on the wire: said at start.
        w=$(grep -c "WARN --grad-comm fp16 sends fp32 gradients as fp16 with no loss scaler" "$tmp/log")
        want=0; [ $wire = fp16 ] && want=1
        [ "$w" = $want ] && ok "--grad-comm $wire, $np ranks: $w underflow warning(s)" || bad "--grad-comm $wire: $w underflow warnings, not $want"
    done
done
# A loss scaler lifts the gradients before the fp16 wire: no warning then.
if train 2 --model mlp --steps 1 --batch 4 --grad-comm fp16 --loss-scale dynamic; then
    ! grep -q "WARN --grad-comm fp16" "$tmp/log" && ok "--grad-comm fp16 with --loss-scale dynamic: no warning" ||
        bad "--grad-comm fp16 with --loss-scale dynamic warned: $(grep WARN "$tmp/log")"
else
    bad "--grad-comm fp16 --loss-scale dynamic failed"
fi
expect 2 "--grad-comm 'fp8'" "$DTRAIN" train --grad-comm fp8

# The pipelined chain (DTRAIN_ALLREDUCE=chain: what crosses nodes) gives the direct algorithm's
# bits: the same rank-ordered sum, computed along the ranks (at 3 ranks: mpi.engine_chain.np3, and
# a chain training under ThreadSanitizer, run_tsan.sh).
for np in 4; do
    common="--model mlp --steps 10 --batch 4 --lr 0.05 --seed 5 --log-every 10 --bucket-mb 0.5 --first-bucket-mb 0.1"
    for algo in direct chain; do
        DTRAIN_ALLREDUCE=$algo DTRAIN_LOG=info "$MPIRUN" -np $np -x DTRAIN_ALLREDUCE -x DTRAIN_LOG "$DTRAIN" train \
            --blas-threads 1 $common --dump-params "$tmp/algo.$algo" >"$tmp/log" 2>&1 || { bad "DTRAIN_ALLREDUCE=$algo run failed"; cat "$tmp/log"; }
    done
    grep -q "every fp32 bucket by the pipelined chain (DTRAIN_ALLREDUCE=chain)" "$tmp/log" && ok "DTRAIN_ALLREDUCE=chain reported" ||
        { bad "the chain is not reported"; grep "communication engine" "$tmp/log"; }
    out=$("$CMP" "$tmp/algo.chain" "$tmp/algo.direct" exact) && ok "$np ranks: the chain allreduce == the direct one: $out" ||
        bad "$np ranks: chain != direct: $out"
done
expect 2 "DTRAIN_ALLREDUCE='ring' is not one of auto, direct, chain" env DTRAIN_ALLREDUCE=ring "$DTRAIN" train

# Without a communication thread (requests progress inline) the result is the same too.
DTRAIN_COMM_THREAD=0 DTRAIN_LOG=info "$MPIRUN" -np 2 -x DTRAIN_COMM_THREAD -x DTRAIN_LOG "$DTRAIN" train --blas-threads 1 \
    --model mlp --steps 20 --batch 4 --lr 0.05 --seed 5 --log-every 20 --dump-params "$tmp/inline" >"$tmp/log" 2>&1
grep -q "communication engine: inline" "$tmp/log" && ok "DTRAIN_COMM_THREAD=0 runs the engine inline" || { bad "engine not inline"; cat "$tmp/log"; }
grep -q "comm thread off, comm world1 off" "$tmp/log" && ok "the printed configuration shows comm thread off" ||
    { bad "configuration line lacks comm thread off"; cat "$tmp/log"; }
expect 2 "DTRAIN_COMM_THREAD='no'" env DTRAIN_COMM_THREAD=no "$DTRAIN" train
# Against the one allreduce after backward of the same flags (the buckets' 2-rank mlp reference).
out=$("$CMP" "$tmp/inline" "$tmp/whole.mlp.2" exact) && ok "inline progress (DTRAIN_COMM_THREAD=0): $out" || bad "inline progress: $out"

# --- Reproducibility: the same command twice, bit for bit.
train 2 --model cnn --steps 10 --batch 8 --seed 9 --dump-params "$tmp/r1" &&
train 2 --model cnn --steps 10 --batch 8 --seed 9 --dump-params "$tmp/r2" || bad "reproducibility runs failed"
out=$("$CMP" "$tmp/r1" "$tmp/r2" exact) && ok "same command twice: $out" || bad "same command twice: $out"
# The background loader (threads making batches ahead, across epoch ends) trains on the same data.
train 2 --model cnn --steps 10 --batch 8 --seed 9 --dataset-size 40 --loader-threads 3 --dump-params "$tmp/l3" &&
train 2 --model cnn --steps 10 --batch 8 --seed 9 --dataset-size 40 --loader-threads 0 --dump-params "$tmp/l0" || bad "loader runs failed"
out=$("$CMP" "$tmp/l3" "$tmp/l0" exact) && ok "--loader-threads 3 == --loader-threads 0 over 5 epochs: $out" || bad "loader threads change the run: $out"
train 2 --model cnn --steps 10 --batch 8 --seed 10 --dump-params "$tmp/r3"
"$CMP" "$tmp/r1" "$tmp/r3" exact >/dev/null && bad "a different seed gave the same parameters" || ok "a different seed gives different parameters"

# --- Learning: accuracy of the last logged interval (samples not seen before: one pass).
learn() { # name, min accuracy, ranks, flags
    local name=$1 min=$2 np=$3; shift 3
    train "$np" "$@" --metrics "$tmp/m.jsonl" || { bad "$name: training failed"; return; }
    local last acc loss0 loss1
    last=$(tail -1 "$tmp/m.jsonl")
    acc=$(sed 's/.*"accuracy": \([0-9.e+-]*\).*/\1/' <<<"$last")
    loss0=$(head -1 "$tmp/m.jsonl" | sed 's/.*"loss": \([0-9.e+-]*\).*/\1/')
    loss1=$(sed 's/.*"loss": \([0-9.e+-]*\).*/\1/' <<<"$last")
    if awk -v a="$acc" -v m="$min" -v l0="$loss0" -v l1="$loss1" 'BEGIN { exit !(a >= m && l1 < l0) }'; then
        ok "$name: accuracy $acc >= $min (chance 0.10), loss $loss0 -> $loss1"
    else
        bad "$name: accuracy $acc < $min or loss did not fall ($loss0 -> $loss1)"; cat "$tmp/log"
    fi
}
learn mlp 0.50 2 --model mlp --steps 300 --batch 32 --lr 0.05 --log-every 50
learn cnn 0.45 2 --model cnn --steps 150 --batch 16 --lr 0.05 --log-every 50
# The variants' runs are as short as still clears 0.50 with room (seeded, so the figures repeat:
# fp16 on the wire 0.552 at step 200, adamw 0.547 at step 150; 0.60 and 0.62 at 300).
learn "mlp, fp16 gradients on the wire" 0.50 2 --model mlp --steps 200 --batch 32 --lr 0.05 --log-every 50 --grad-comm fp16
learn "mlp adamw" 0.50 2 --model mlp --steps 150 --batch 32 --optim adamw --lr 0.001 --weight-decay 0.01 --log-every 50

# --- Metrics and dump files.
train 1 --model fc:16,relu,fc:10 --input 12 --steps 6 --batch 4 --log-every 2 --metrics "$tmp/m2.jsonl" --dump-params "$tmp/p2"
[ "$(wc -l <"$tmp/m2.jsonl")" -eq 3 ] && ok "metrics: one line per logged step" || bad "metrics: expected 3 lines"
grep -q '"step": 6, "epoch": [0-9.]*, "loss": [0-9.]*, "accuracy": [0-9.]*, "samples_per_s": [0-9.]*, "step_time_s": [0-9.e+-]*, "comm_wait_s": [0-9.e+-]*, "data_wait_s": [0-9.e+-]*, "precision": "fp32", "loss_scale": 1, "skipped_steps": 0, "skipped_total": 0, "lr": 0.0[0-9]*}' "$tmp/m2.jsonl" && ok "metrics fields" || { bad "metrics fields"; cat "$tmp/m2.jsonl"; }
# Steps of a microsecond keep their digits: step time x samples/s is the global batch (it read
# 0.000001 s with six decimals, half or twice the time the rate says).
train 1 --model fc:2 --input 1 --batch 1 --steps 200 --log-every 50 --metrics "$tmp/m3.jsonl"
python3 - "$tmp/m3.jsonl" <<'PY' && ok "metrics: step times in significant digits" || bad "metrics: step times lose digits"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 4, rows
for r in rows:
    assert abs(r["step_time_s"] * r["samples_per_s"] - 1) < 1e-3, r
PY
# A loss near zero keeps its digits too (six decimals wrote 0.000003, one digit, then 0.000000): a
# small set learnt by heart (64 samples, lr 2) is at ~1e-6 by step 200.
train 1 --model fc:64,relu,fc:10 --input 16 --steps 300 --lr 2 --batch 64 --dataset-size 64 --log-every 100 \
    --metrics "$tmp/m4.jsonl"
python3 - "$tmp/m4.jsonl" <<'PY' && ok "metrics: a loss near zero in significant digits" || bad "metrics: a small loss loses digits"
import json, re, sys
lines = open(sys.argv[1]).read().splitlines()
text = re.search(r'"loss": ([^,]*),', lines[-1]).group(1)
digits = re.sub(r"e.*", "", text).replace(".", "").lstrip("0")
print("last loss", text)
assert 0 < float(text) < 1e-3 and len(digits) >= 4, text
PY
[ "$(stat -c %s "$tmp/p2")" -eq $(( (12 * 16 + 16 + 16 * 10 + 10) * 4 )) ] && ok "dump-params size = 4 x parameters" || bad "dump-params size"
# The records as a strict consumer reads them (check_outputs.py: JSON without NaN or Infinity,
# every field docs/training.md lists, of its type, and no other): 2 ranks in fp16 with clipping,
# accumulation and evaluations; then a run that diverges, whose last record's loss is null.
python3 "$here/make_idx.py" "$tmp/idx" 400 100 10 60
train 2 --data "$tmp/idx" --model fc:32,relu,fc:10 --steps 6 --batch 8 --accum-steps 2 --precision fp16 \
    --clip-grad-norm 1 --eval-every 4 --log-every 3 --metrics "$tmp/m5.jsonl"
out=$(python3 "$here/check_outputs.py" metrics "$tmp/m5.jsonl" --ranks 2 --clip --steps 3,4,6 --evals 4,6) &&
    ok "metrics read strictly: $out" || bad "metrics read strictly: $out"
"$DTRAIN" train --data "$tmp/idx" --model fc:32,relu,fc:10 --batch 16 --lr 1000 --steps 40 --log-every 1 --blas-threads 1 \
    --metrics "$tmp/m6.jsonl" >"$tmp/log" 2>&1
rc=$?
out=$(python3 "$here/check_outputs.py" metrics "$tmp/m6.jsonl")
[ "$rc" -eq 1 ] && grep -q "null: .*loss@$(tail -1 "$tmp/m6.jsonl" | sed 's/.*"step": \([0-9]*\).*/\1/')$" <<<"$out" &&
    ok "a diverged run's metrics read strictly, its last loss null: $out" || bad "diverged run: exit $rc, $out"

# --- Refusals.
expect 2 "layer 2 'softmax' is not a layer" "$DTRAIN" train --model fc:10,softmax --input 4
expect 2 "its 2x2 window does not fit the 1x1 map it gets (--input 1x2x2 after layers 1 to 2): drop this pool" "$DTRAIN" train --model conv:4:3:1:1,pool:2,pool:2,fc:10 --input 1x2x2
expect 2 "input shape '28x28'" "$DTRAIN" train --model cnn --input 28x28
expect 2 "--batch '0'" "$DTRAIN" train --batch 0
expect 2 "--lr 'fast'" "$DTRAIN" train --lr fast
expect 2 "--optim 'sgdm'" "$DTRAIN" train --optim sgdm
expect 2 "--momentum '1'" "$DTRAIN" train --momentum 1
expect 2 "--metrics /nonexistent/dir/m.jsonl cannot be written" "$DTRAIN" train --steps 1 --metrics /nonexistent/dir/m.jsonl
expect 2 "smaller than one global batch" "$DTRAIN" train --steps 1 --batch 64 --dataset-size 10
# A 0 that would divide by zero (--accum-steps, --log-every) or be taken as unset (--epochs, --holdout).
expect 2 "--accum-steps '0' is out of range" "$DTRAIN" train --accum-steps 0
expect 2 "--log-every '0' is out of range" "$DTRAIN" train --log-every 0
expect 2 "--epochs '0' is out of range" "$DTRAIN" train --epochs 0
expect 2 "--holdout (the fraction kept aside) '0' is out of range" "$DTRAIN" train --holdout 0
expect 1 "the loss became" "$DTRAIN" train --model fc:64,relu,fc:10 --input 32 --steps 40 --lr 900 --log-every 10
finish
