#!/usr/bin/env bash
# --zero 1 (ZeRO-1: optimizer state sharded across ranks): the same parameters as --zero 0, bit for
# bit where the arithmetic is the same (fp32 and 16-bit gradients, SGD and AdamW, 16-bit wire,
# accumulation, loss scaling) and within 1e-6 with clipping (the norm's sum runs in another order);
# at 1 to 4 ranks (3: parts of unequal size); the optimizer memory per rank 1/W; checkpoints that
# any world size and either --zero reads; bad values refused.
# PART (the fourth argument): bits, the checks of bits, counts and messages, which ctest runs beside
# other tests (mpi.zero.bits); timed, the two that watch the clock (the overlap seen in a trace, the
# watchdog's deadline), run alone (mpi.zero.timed); all (the default), both.
here=$(dirname "$0"); source "$here/lib.sh"
DTRAIN=$1 MPIRUN=$2 CMP=$3 PART=${4:-all}
case $PART in bits | timed | all) ;; *) echo "test_zero.sh: PART '$PART' is not bits, timed or all" >&2; exit 2 ;; esac
part() { [ "$PART" = all ] || [ "$PART" = "$1" ]; }

train() { # ranks, then train flags
    local np=$1; shift
    "$MPIRUN" -np "$np" "$DTRAIN" train --blas-threads 1 "$@" >"$tmp/log" 2>&1 || { cat "$tmp/log"; return 1; }
}

# Small buckets, so that every bucket is split and some parts cross layers.
bk="--bucket-mb 0.05 --first-bucket-mb 0.01"
if part bits; then
# One rank (one shard: everything) once; 2-4 ranks (3: parts of unequal size) for each rule.
zero_same 1 exact --model mlp --steps 8 --batch 4 --optim adamw --lr 0.003 --weight-decay 0.01 --seed 3 --log-every 8 $bk
for np in 2 3 4; do
    zero_same $np exact --model mlp --steps 8 --batch 4 --optim adamw --lr 0.003 --weight-decay 0.01 --seed 3 --log-every 8 $bk
    zero_same $np exact --model mlp --steps 8 --batch 4 --optim sgd --momentum 0.9 --lr 0.05 --weight-decay 0.0005 --seed 3 --log-every 8 $bk
    zero_same $np exact --model mlp --steps 6 --batch 4 --optim adamw --lr 0.003 --seed 3 --log-every 6 $bk --precision fp16
done
# The layouts and wires at 3 ranks, where the parts are unequal.
zero_same 3 exact --model cnn --steps 5 --batch 4 --optim adamw --lr 0.003 --seed 5 --log-every 5 --bucket-mb 0.01 --first-bucket-mb 0.005
# Default buckets (one big and one small), no overlap.
zero_same 3 exact --model mlp --steps 6 --batch 4 --optim adamw --lr 0.003 --seed 5 --log-every 6 --no-overlap
# fp32 gradients on a 16-bit wire; accumulation.
zero_same 3 exact --model mlp --steps 6 --batch 4 --optim adamw --lr 0.003 --seed 5 --log-every 6 $bk --grad-comm bf16
zero_same 3 exact --model mlp --steps 6 --batch 4 --optim sgd --lr 0.05 --seed 5 --log-every 6 $bk --accum-steps 2
for np in 2 3; do
    # Mixed precision: 16-bit gradients, the dynamic loss scaler (its verdict summed over the shards).
    zero_same $np exact --model mlp --steps 8 --batch 4 --optim adamw --lr 0.003 --seed 5 --log-every 8 $bk --precision bf16
    zero_same $np exact --model mlp --steps 8 --batch 4 --optim adamw --lr 0.003 --seed 5 --log-every 8 $bk --precision fp16
    # Clipping that clips: the global norm from the shards' sums, so the coefficient may differ in
    # its last bit.
    zero_same $np 1e-6 --model mlp --steps 8 --batch 4 --optim adamw --lr 0.003 --seed 5 --log-every 8 $bk --clip-grad-norm 0.5
    zero_same $np 1e-6 --model mlp --steps 8 --batch 4 --optim sgd --lr 0.05 --seed 5 --log-every 8 $bk --precision fp16 --clip-grad-norm 0.5
done
# An overflow on one rank (an inf in rank 1's gradients at step 3): the shard that holds it sees it,
# the summed verdict makes every rank skip that step and back the scale off, as at --zero 0.
for z in 0 1; do
    DTRAIN_FAULT=inf:1:3 "$MPIRUN" -np 3 -x DTRAIN_FAULT "$DTRAIN" train --blas-threads 1 --model mlp --steps 6 --batch 4 \
        --optim adamw --lr 0.003 --seed 5 --log-every 6 $bk --precision fp16 --zero $z --dump-params "$tmp/inf$z" >"$tmp/log" 2>&1 ||
        { cat "$tmp/log"; bad "inf at --zero $z failed"; }
    grep -q "1 of 6 steps skipped" "$tmp/log" || { bad "--zero $z: no skipped step reported"; grep -i skip "$tmp/log"; }
done
out=$("$CMP" "$tmp/inf1" "$tmp/inf0" exact) && ok "an inf on rank 1 at step 3: --zero 1 skips it like --zero 0: $out" || bad "inf skip: $out"

# Without a communication thread (the engine inline).
DTRAIN_COMM_THREAD=0 "$MPIRUN" -np 2 -x DTRAIN_COMM_THREAD "$DTRAIN" train --blas-threads 1 --model mlp --steps 6 --batch 4 \
    --optim adamw --lr 0.003 --seed 5 --log-every 6 $bk --zero 1 --dump-params "$tmp/inl" >"$tmp/log" 2>&1 || { cat "$tmp/log"; bad "inline failed"; }
train 2 --model mlp --steps 6 --batch 4 --optim adamw --lr 0.003 --seed 5 --log-every 6 $bk --dump-params "$tmp/z0"
out=$("$CMP" "$tmp/inl" "$tmp/z0" exact) && ok "--zero 1 inline (DTRAIN_COMM_THREAD=0) == --zero 0: $out" || bad "inline: $out"

# --- Memory: the optimizer line is 1/W of the replicated one (AdamW: two moments of 4 bytes).
mem() { sed -n 's/.* optimizer \([0-9.]*\) MiB.*/\1/p' "$tmp/log"; }
train 1 --model mlp --steps 1 --batch 4 --optim adamw --zero 0 && full=$(mem)
for np in 2 4; do
    train $np --model mlp --steps 1 --batch 4 --optim adamw --zero 1 && shard=$(mem)
    awk -v f="$full" -v s="$shard" -v w=$np 'BEGIN { d = s * w - f; if (d < 0) d = -d; exit !(s > 0 && d <= 0.005 * w + 0.005) }' &&
        grep -q "(this rank's 1/W shard, --zero 1)" "$tmp/log" &&
        ok "optimizer memory at $np ranks: $shard MiB = $full MiB / $np" || { bad "optimizer memory at $np: $shard vs $full / $np"; grep memory "$tmp/log"; }
    grep -q "reduce-scattered during backward, parameters allgathered (--zero 1)" "$tmp/log" && ok "the reduction is reported" || bad "not reported"
done

# --- Checkpoints: written at full size, so a --zero 1 run stopped at 4 ranks resumes at 2 and 1
# (the global batch kept: 4 x 4, 2 x 8, 1 x 16), with either --zero.
ck1="--model mlp --steps 30 --optim adamw --lr 0.003 --seed 4 --log-every 10 $bk"
stop() { # dir, zero
    DTRAIN_FAULT=usr1:1:13 "$MPIRUN" -np 4 -x DTRAIN_FAULT "$DTRAIN" train --blas-threads 1 $ck1 --batch 4 --zero "$2" \
        --checkpoint-dir "$1" --resume auto >"$tmp/log" 2>&1
    [ $? -eq 75 ] && [ -f "$1/ckpt-0000000013.dtc" ] && ok "--zero $2 stopped at 4 ranks after step 13 with a checkpoint" ||
        { bad "--zero $2 stop at 4 ranks"; cat "$tmp/log"; }
}
stop "$tmp/ck1" 1
stop "$tmp/ck0" 0
cmp -s "$tmp/ck1/ckpt-0000000013.dtc" "$tmp/ck0/ckpt-0000000013.dtc" && ok "the --zero 1 checkpoint is byte for byte the --zero 0 one" ||
    bad "--zero 1 and --zero 0 checkpoints differ"
train 4 $ck1 --batch 4 --zero 1 --dump-params "$tmp/ref4" || bad "uninterrupted 4-rank run failed"
for np in 4 2 1; do
    b=$((16 / np))
    for z in 1 0; do
        rm -rf "$tmp/ckr"; cp -r "$tmp/ck1" "$tmp/ckr"
        train $np $ck1 --batch $b --zero $z --checkpoint-dir "$tmp/ckr" --resume auto --dump-params "$tmp/r$np.$z" ||
            bad "resume at $np --zero $z failed"
        grep -q "resumed from .*ckpt-0000000013.dtc at step 13" "$tmp/log" || { bad "no resume at $np --zero $z"; cat "$tmp/log"; }
    done
    out=$("$CMP" "$tmp/r$np.1" "$tmp/r$np.0" exact) && ok "resumed at $np ranks: --zero 1 == --zero 0 from the --zero 1 checkpoint: $out" ||
        bad "resumed at $np: --zero 1 vs 0: $out"
    tol=exact; [ $np -ne 4 ] && tol=1e-5 # another world sums the gradients in another order
    out=$("$CMP" "$tmp/r$np.1" "$tmp/ref4" $tol) && ok "stopped at 4, resumed at $np (--zero 1) == uninterrupted at 4 ($tol): $out" ||
        bad "stopped at 4, resumed at $np vs uninterrupted: $out"
done

# --- bench step --zero 0,1: both rows side by side; the sharded one holds half the optimizer
# bytes at 2 ranks and sends the same fp32 bytes (reduce-scatter + allgather = allreduce).
"$MPIRUN" -np 2 "$DTRAIN" bench step --model mlp --batch 8 --steps 2 --warmup 1 --precision fp32 --zero 0,1 --optim adamw \
    --blas-threads 1 >"$tmp/b" 2>&1
rc=$?
o0=$(awk '$1 == "fp32" && $12 == 0 { print $8 }' "$tmp/b") o1=$(awk '$1 == "fp32" && $12 == 1 { print $8 }' "$tmp/b")
s0=$(awk '$1 == "fp32" && $12 == 0 { print $13 }' "$tmp/b") s1=$(awk '$1 == "fp32" && $12 == 1 { print $13 }' "$tmp/b")
[ $rc -eq 0 ] && [ -n "$o0" ] && [ -n "$o1" ] && [ "$s0" = "$s1" ] &&
    awk -v a="$o0" -v b="$o1" 'BEGIN { d = a - 2 * b; exit !(b > 0 && d < 0.02 && d > -0.02) }' &&
    ok "bench step --zero 0,1: optimizer $o0 -> $o1 MiB, $s0 = $s1 MiB sent per rank per step" ||
    { bad "bench step --zero 0,1 (exit $rc)"; cat "$tmp/b"; }
expect 2 "--zero '3' is not supported" "$DTRAIN" bench step --zero 0,3

# --- Bad values.
expect 2 "--zero '2' is not supported: use 0 (every rank keeps the whole optimizer state) or 1" "$DTRAIN" train --zero 2
expect 2 "--zero 'x' is not supported" "$DTRAIN" train --zero x
expect 2 "--zero '' is not supported" "$DTRAIN" train --zero ""

fi

if part timed; then
# --- Overlap: in a --trace of --zero 1, bucket reduce-scatters start while backward still runs
# (before the backward of layer 0, the last one, ends), and the parameters' allgathers follow.
if command -v python3 >/dev/null; then
    "$MPIRUN" -np 2 "$DTRAIN" train --blas-threads 1 --model mlp --steps 4 --batch 8 --optim adamw --seed 5 --log-every 4 $bk \
        --zero 1 --trace "$tmp/t.json" >"$tmp/log" 2>&1 || { cat "$tmp/log"; bad "--zero 1 --trace failed"; }
    msg=$(python3 - "$tmp/t.json" <<'PY'
import json, sys
x = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X"]
bad = []
for r in (0, 1):
    mine = [e for e in x if e["pid"] == r]
    steps = [e for e in mine if e["cat"] == "step"]
    early = 0
    for st in steps:
        inside = lambda e: st["ts"] <= e["ts"] <= st["ts"] + st["dur"]
        bwd0 = [e for e in mine if e["name"].startswith("bwd 0 ") and inside(e)]
        rs = [e for e in mine if e["name"].startswith("reduce-scatter b") and inside(e)]
        ag = [e for e in mine if e["name"].startswith("allgather b") and inside(e)]
        if not bwd0 or not rs or not ag:
            bad.append("rank %d step %s: bwd 0 %d, reduce-scatters %d, allgathers %d" % (r, st["args"]["n"], len(bwd0), len(rs), len(ag)))
            continue
        end0 = bwd0[0]["ts"] + bwd0[0]["dur"]
        early += any(e["ts"] < end0 for e in rs)
        if min(e["ts"] for e in ag) < max(e["ts"] for e in rs):
            bad.append("rank %d step %s: an allgather before a reduce-scatter" % (r, st["args"]["n"]))
    if early < len(steps):
        bad.append("rank %d: only %d of %d steps started a reduce-scatter during backward" % (r, early, len(steps)))
    if any(e["name"].startswith("allreduce b") for e in mine):
        bad.append("rank %d: a gradient allreduce under --zero 1" % r)
print("; ".join(bad) if bad else "every step of both ranks started reduce-scatters during backward, then allgathered")
sys.exit(1 if bad else 0)
PY
)
    [ $? -eq 0 ] && ok "--zero 1 overlap: $msg" || bad "--zero 1 overlap: $msg"
fi

# --- The watchdog still names who is missing: rank 2 stalls at step 3, the others' reduce-scatter
# of that step names it within the timeout.
t0=$(date +%s)
DTRAIN_FAULT=stall:2:3 timeout -s KILL 60 "$MPIRUN" -np 4 -x DTRAIN_FAULT "$DTRAIN" train --blas-threads 1 --timeout 3 \
    --steps 40 --batch 4 --model fc:32,relu,fc:10 --input 16 --log-every 1 --zero 1 >"$tmp/log" 2>&1
rc=$? took=$(($(date +%s) - t0))
[ $rc -ne 0 ] && [ $rc -ne 137 ] && [ $took -le 20 ] &&
    grep -q "watchdog: collective #4 (reduce-scatter of bucket 0, .*no data yet from rank(s) 2" "$tmp/log" &&
    ok "--zero 1, rank 2 stalled: the watchdog named it in the reduce-scatter, job ended in $took s (exit $rc)" ||
    { bad "--zero 1 stall: exit $rc after $took s"; tail -5 "$tmp/log"; }
fi

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
