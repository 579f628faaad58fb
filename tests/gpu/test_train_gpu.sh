#!/usr/bin/env bash
# GPU training: `dtrain train --device cuda` follows the CPU run of the same seed: the loss of
# every one of 50 steps within 2e-3 relative, the final parameters within 1e-2 (cuBLAS and
# OpenBLAS sum in different orders, and 50 steps of SGD carry the differences along); mlp and
# cnn; then the same for bf16 and fp16. Exit 77 (SKIP) with the reason when no GPU can be used.
# Arguments: dtrain, mpirun, cmp_params, then the parts to run (comma-separated; default all):
# precision (GPU against CPU in fp32, bf16, fp16), paths (stop and resume, NCCL buckets at one
# rank, the step beside backward), graphs (step graphs, batches made on the GPU), ranks (ranks
# sharing the GPU, --bucket-mb auto, the fp16 stop, refusals, out of memory, real data). ctest
# runs each part as a test of its own (gpu.train.PART), so a cut run keeps the parts that ended.
here=$(dirname "$0"); source "$here/../mpi/lib.sh"
DTRAIN=$1 MPIRUN=$2 CMP=$3 PARTS=${4:-all}
part() { [ "$PARTS" = all ] || [[ ",$PARTS," == *",$1,"* ]]; }

if ! "$DTRAIN" env --device cuda >"$tmp/env" 2>&1; then
    echo "SKIP: no usable GPU: $(grep -m1 -i 'error' "$tmp/env" || head -1 "$tmp/env")"
    exit 77
fi
grep -E '^0/1 ' "$tmp/env"

run() { # device, model, out prefix, extra flags
    local dev=$1 model=$2 out=$3; shift 3
    "$MPIRUN" -np 1 "$DTRAIN" train --device "$dev" --model "$model" --steps 50 --batch 32 --lr 0.05 --seed 11 \
        --log-every 1 --metrics "$out.jsonl" --dump-params "$out.params" "$@" >"$out.log" 2>&1
}
if part precision; then
for model in mlp cnn; do
    if ! run cpu $model "$tmp/cpu-$model"; then bad "$model on the CPU failed"; cat "$tmp/cpu-$model.log"; continue; fi
    if ! run cuda $model "$tmp/gpu-$model"; then bad "$model on the GPU failed"; cat "$tmp/gpu-$model.log"; continue; fi
    worst=$(paste -d' ' <(sed 's/.*"loss": \([0-9.e+-]*\).*/\1/' "$tmp/cpu-$model.jsonl") \
                        <(sed 's/.*"loss": \([0-9.e+-]*\).*/\1/' "$tmp/gpu-$model.jsonl") |
            awk '{ d = $1 - $2; if (d < 0) d = -d; r = d / ($1 > 0 ? $1 : 1); if (r > w) w = r } END { printf "%.3g", w }')
    steps=$(wc -l <"$tmp/gpu-$model.jsonl")
    if [ "$steps" -eq 50 ] && awk -v w="$worst" 'BEGIN { exit !(w <= 2e-3) }'; then
        ok "$model: GPU loss curve = CPU's over 50 steps, worst relative difference $worst"
    else
        bad "$model: GPU loss curve ($steps steps) differs from the CPU's by $worst"
    fi
    out=$("$CMP" "$tmp/gpu-$model.params" "$tmp/cpu-$model.params" 1e-2)
    [ $? -eq 0 ] && ok "$model: final parameters GPU vs CPU: $out" || bad "$model: final parameters: $out"
    grep -h "samples/s" "$tmp/cpu-$model.log" "$tmp/gpu-$model.log" | grep '^done' | sed "s/^/    $model: /"
done
# Mixed precision on the GPU (fc layers on the tensor cores, fp32 gradients) follows the CPU's
# mixed precision with fp32 gradients: every step's loss within 1e-2 relative (16-bit rounding
# amplifies the different summation orders), and the loss falls.
for p in bf16 fp16; do
    for model in mlp cnn; do
        if ! run cpu $model "$tmp/cpu-$model-$p" --precision $p --grad-comm fp32; then bad "$model $p on the CPU failed"; cat "$tmp/cpu-$model-$p.log"; continue; fi
        if ! run cuda $model "$tmp/gpu-$model-$p" --precision $p; then bad "$model $p on the GPU failed"; cat "$tmp/gpu-$model-$p.log"; continue; fi
        worst=$(paste -d' ' <(sed 's/.*"loss": \([0-9.e+-]*\).*/\1/' "$tmp/cpu-$model-$p.jsonl") \
                            <(sed 's/.*"loss": \([0-9.e+-]*\).*/\1/' "$tmp/gpu-$model-$p.jsonl") |
                awk '{ d = $1 - $2; if (d < 0) d = -d; r = d / ($1 > 0 ? $1 : 1); if (r > w) w = r } END { printf "%.3g", w }')
        first=$(head -1 "$tmp/gpu-$model-$p.jsonl" | sed 's/.*"loss": \([0-9.e+-]*\).*/\1/')
        last=$(tail -1 "$tmp/gpu-$model-$p.jsonl" | sed 's/.*"loss": \([0-9.e+-]*\).*/\1/')
        if awk -v w="$worst" -v a="$first" -v b="$last" 'BEGIN { exit !(w <= 1e-2 && b < a) }'; then
            ok "$model $p on the GPU follows the CPU's $p: worst relative loss difference $worst, loss $first -> $last"
        else
            bad "$model $p on the GPU: worst relative loss difference $worst, loss $first -> $last"
        fi
        grep -h "^memory" "$tmp/gpu-$model-$p.log" | sed "s/^/    $model $p: /"
    done
done
fi # precision

if part paths; then
# Stop and resume on the GPU: the checkpoint goes through host memory, and the resumed run ends
# bit for bit where the uninterrupted one does (fp32 cnn; fp16 mlp with its loss scaler).
for cfg in "cnn fp32" "mlp fp16"; do
    set -- $cfg
    common="--device cuda --model $1 --precision $2 --steps 24 --batch 32 --lr 0.05 --seed 5 --log-every 8 --loss-scale-interval 3"
    [ "$2" = fp32 ] && common=${common% --loss-scale-interval 3}
    "$MPIRUN" -np 1 "$DTRAIN" train $common --dump-params "$tmp/ref" >"$tmp/log" 2>&1 || { bad "$cfg reference failed"; cat "$tmp/log"; continue; }
    DTRAIN_FAULT=usr1:0:11 "$MPIRUN" -np 1 -x DTRAIN_FAULT "$DTRAIN" train $common --checkpoint-dir "$tmp/ck-$1" >"$tmp/log" 2>&1
    [ $? -eq 75 ] && ok "$cfg on the GPU stopped at step 11 with a checkpoint" || { bad "$cfg stop"; cat "$tmp/log"; }
    "$MPIRUN" -np 1 "$DTRAIN" train $common --checkpoint-dir "$tmp/ck-$1" --resume auto --dump-params "$tmp/res" >"$tmp/log" 2>&1 ||
        { bad "$cfg resume failed"; cat "$tmp/log"; }
    out=$("$CMP" "$tmp/res" "$tmp/ref" exact) && ok "$cfg on the GPU: stopped + resumed == uninterrupted: $out" || bad "$cfg resume: $out"
done
# The NCCL bucket path on one GPU (DTRAIN_COMM_WORLD1=1: buckets reduced on the NCCL stream as
# backward completes them, even in a world of one, where the sum changes no bit): every config
# ends bit for bit where the run without communication does; and the loader's thread count
# changes nothing either (batches made by the host's threads: on a GPU the synthetic set is
# otherwise made on the device, where no loader thread runs).
for cfg in "cnn fp32 --no-overlap" "cnn fp32 --bucket-mb=0.05" "mlp bf16 --first-bucket-mb=0.1" \
    "cnn fp16 --loader-threads=3 --synthetic-on=host"; do
    set -- $cfg
    common="--device cuda --model $1 --precision $2 --steps 12 --batch 32 --lr 0.05 --seed 5 --log-every 12 ${*:3}"
    "$MPIRUN" -np 1 "$DTRAIN" train $common --loader-threads 0 --dump-params "$tmp/ref" >"$tmp/log" 2>&1 || { bad "$cfg reference failed"; cat "$tmp/log"; continue; }
    DTRAIN_COMM_WORLD1=1 "$MPIRUN" -np 1 -x DTRAIN_COMM_WORLD1 "$DTRAIN" train $common --dump-params "$tmp/nccl" >"$tmp/log" 2>&1 ||
        { bad "$cfg with NCCL buckets failed"; cat "$tmp/log"; continue; }
    out=$("$CMP" "$tmp/nccl" "$tmp/ref" exact) && ok "$cfg: NCCL buckets on their stream == no communication: $out" || bad "$cfg NCCL buckets: $out"
done
# The optimizer step layer by layer on the side stream (--step-overlap; auto takes it for this
# model of 10.5M parameters) ends bit for bit where the step after backward does (the CUDA
# optimizer kernels compute every element alike, whatever the slice): fp32 and bf16 (each layer
# stepped as soon as its parameter gradients are queued, into the spare 16-bit copy, beside its own
# data gradient, which reads the current copy: a step into that one would change dx), SGD and
# AdamW; and a checkpoint taken right after
# such a step (its parameters read while the side stream may still run) resumes bit for bit.
wide="fc:2048,relu,fc:2048,relu,fc:2048,relu,fc:10"
for cfg in "fp32 sgd" "bf16 sgd" "bf16 adamw"; do
    set -- $cfg
    common="--device cuda --model $wide --input 1024 --precision $1 --optim $2 --steps 12 --batch 64 --lr 0.01 --seed 5 --log-every 12"
    "$MPIRUN" -np 1 "$DTRAIN" train $common --step-overlap 0 --dump-params "$tmp/ov0-$1-$2" >"$tmp/log" 2>&1 || { bad "$cfg --step-overlap 0 failed"; cat "$tmp/log"; continue; }
    "$MPIRUN" -np 1 "$DTRAIN" train $common --dump-params "$tmp/ov1" >"$tmp/log" 2>&1 || { bad "$cfg --step-overlap auto failed"; cat "$tmp/log"; continue; }
    out=$("$CMP" "$tmp/ov1" "$tmp/ov0-$1-$2" exact) && ok "$cfg on the GPU: step layer by layer beside backward == after it: $out" ||
        bad "$cfg --step-overlap on the GPU: $out"
done
# Bucket by bucket on NCCL (DTRAIN_COMM_WORLD1=1: the buckets go through NCCL even in a world of
# one, where the sums change no bit): each bucket's step queued behind its collective alone, a
# 16-bit wire widened bucket by bucket, == the step after the last bucket.
for cfg in "fp32 --bucket-mb=8" "fp32 --grad-comm=bf16" "bf16 --bucket-mb=4"; do
    set -- $cfg
    common="--device cuda --model $wide --input 1024 --precision $1 $2 --steps 12 --batch 64 --lr 0.01 --seed 5 --log-every 12"
    DTRAIN_COMM_WORLD1=1 "$MPIRUN" -np 1 -x DTRAIN_COMM_WORLD1 "$DTRAIN" train $common --step-overlap 0 --dump-params "$tmp/nb0" >"$tmp/log" 2>&1 ||
        { bad "$cfg NCCL --step-overlap 0 failed"; cat "$tmp/log"; continue; }
    DTRAIN_COMM_WORLD1=1 "$MPIRUN" -np 1 -x DTRAIN_COMM_WORLD1 "$DTRAIN" train $common --dump-params "$tmp/nb1" >"$tmp/log" 2>&1 ||
        { bad "$cfg NCCL --step-overlap auto failed"; cat "$tmp/log"; continue; }
    out=$("$CMP" "$tmp/nb1" "$tmp/nb0" exact) && ok "$cfg, NCCL buckets: each bucket stepped behind its collective == after the last: $out" ||
        bad "$cfg NCCL bucket steps: $out"
done
common="--device cuda --model $wide --input 1024 --precision bf16 --steps 12 --batch 64 --lr 0.01 --seed 5 --log-every 12"
rm -rf "$tmp/ck-ov"
DTRAIN_FAULT=usr1:0:7 "$MPIRUN" -np 1 -x DTRAIN_FAULT "$DTRAIN" train $common --checkpoint-dir "$tmp/ck-ov" >"$tmp/log" 2>&1
[ $? -eq 75 ] || { bad "the overlapped run did not stop at step 7"; cat "$tmp/log"; }
"$MPIRUN" -np 1 "$DTRAIN" train $common --checkpoint-dir "$tmp/ck-ov" --resume auto --dump-params "$tmp/ov-res" >"$tmp/log" 2>&1 ||
    { bad "resume of the overlapped run failed"; cat "$tmp/log"; }
out=$("$CMP" "$tmp/ov-res" "$tmp/ov0-bf16-sgd" exact) && ok "bf16 step overlap on the GPU: stopped at 7 + resumed == uninterrupted: $out" ||
    bad "bf16 step overlap resume: $out"
fi # paths

if part graphs; then
# Step graphs (--graphs): forward and backward recorded at the second pass of each input buffer
# (GPU-made batches are read from the loader's one device buffer: one recording; host batches take
# turns in two input slots: two) and replayed as one launch end bit for bit where kernel-by-kernel
# passes do: fp32 and bf16 (the 16-bit copy cast before the launch after a checkpoint load is
# covered by the resume above, which runs with graphs on by default), fp16 with its scaler (a pass
# recorded again when the scale changes), the cnn, and NCCL buckets started after the launch.
for cfg in "mlp fp32" "mlp bf16" "mlp fp16 --loss-scale-interval=3" "cnn bf16" "cnn fp32" "mlp bf16 --world1"; do
    set -- $cfg
    extra=${3:-}; w1=0
    [ "$extra" = --world1 ] && { extra=; w1=1; }
    common="--device cuda --model $1 --precision $2 --steps 20 --batch 48 --lr 0.05 --seed 5 --log-every 20 $extra"
    DTRAIN_COMM_WORLD1=$w1 "$MPIRUN" -np 1 -x DTRAIN_COMM_WORLD1 "$DTRAIN" train $common --graphs 0 --dump-params "$tmp/g0" >"$tmp/log" 2>&1 ||
        { bad "$cfg --graphs 0 failed"; cat "$tmp/log"; continue; }
    DTRAIN_LOG=info DTRAIN_COMM_WORLD1=$w1 "$MPIRUN" -np 1 -x DTRAIN_LOG -x DTRAIN_COMM_WORLD1 "$DTRAIN" train $common --graphs 1 \
        --dump-params "$tmp/g1" >"$tmp/log" 2>&1 || { bad "$cfg --graphs 1 failed"; cat "$tmp/log"; continue; }
    recorded=$(grep -c "step graph [0-9]* recorded" "$tmp/log")
    if grep -q "step graphs are off" "$tmp/log" || [ "$recorded" -lt 1 ]; then
        bad "$cfg: graphs not used ($recorded recorded)"; grep -i "graph" "$tmp/log"; continue
    fi
    out=$("$CMP" "$tmp/g1" "$tmp/g0" exact) && ok "$cfg: $recorded step graphs recorded and replayed == kernel by kernel: $out" ||
        bad "$cfg --graphs 1 vs 0: $out"
done
# Synthetic batches made on the GPU (--synthetic-on device, the default there) end bit for bit
# where batches made by the loader threads and copied do: the kernel makes the CPU's samples and
# labels, the model copies them into its input slot on the stream, graphs or not, and a resumed
# run goes on with the same data. The host batches are staged (dt_model_stage_batch) before the
# last step's verdict is taken: fp16's rows check that the staged copy is the one read.
for cfg in "mlp fp32 --graphs 0" "mlp bf16 --graphs 1" "cnn bf16 --graphs 1" "cnn fp32 --normalize standard" \
    "mlp fp16 --graphs 1" "cnn fp16 --graphs 0"; do
    set -- $cfg
    common="--device cuda --model $1 --precision $2 --steps 20 --batch 48 --lr 0.05 --seed 5 --log-every 20 $3 ${4:-}"
    "$MPIRUN" -np 1 "$DTRAIN" train $common --synthetic-on host --dump-params "$tmp/sh" >"$tmp/log" 2>&1 ||
        { bad "$cfg --synthetic-on host failed"; cat "$tmp/log"; continue; }
    "$MPIRUN" -np 1 "$DTRAIN" train $common --dump-params "$tmp/sd" >"$tmp/log" 2>&1 ||
        { bad "$cfg --synthetic-on auto failed"; cat "$tmp/log"; continue; }
    grep -q "made on the GPU by one kernel" "$tmp/log" || { bad "$cfg: auto did not make the batches on the GPU"; grep "^data" "$tmp/log"; continue; }
    out=$("$CMP" "$tmp/sd" "$tmp/sh" exact) && ok "$cfg: synthetic batches made on the GPU == made on the host: $out" ||
        bad "$cfg --synthetic-on device vs host: $out"
done
fi # graphs

if part ranks; then
# Data parallel on one GPU: --gpu-comm mpi (collectives through host memory) lets 2 ranks share it
# (NCCL refuses), so the multi-rank GPU path is checked here: 2 ranks x 16 == 1 rank x 32 after 20
# steps of SGD with momentum, fp32, within 1e-4 (cuBLAS sums a batch of 16 and one of 32 in
# different orders); and a 2-rank bf16 run ends with identical parameters on both ranks.
common="--device cuda --gpu-comm mpi --model cnn --steps 20 --momentum 0.9 --lr 0.05 --seed 3 --log-every 20"
if "$MPIRUN" -np 1 "$DTRAIN" train $common --batch 32 --dump-params "$tmp/dp1" >"$tmp/log" 2>&1 &&
   "$MPIRUN" -np 2 "$DTRAIN" train $common --batch 16 --dump-params "$tmp/dp2" >"$tmp/log" 2>&1; then
    out=$("$CMP" "$tmp/dp2" "$tmp/dp1" 1e-4) && ok "cnn on one GPU: 2 ranks x 16 == 1 rank x 32 (--gpu-comm mpi): $out" ||
        bad "cnn 2 ranks vs 1 on one GPU: $out"
else
    bad "2 ranks on one GPU with --gpu-comm mpi failed"; cat "$tmp/log"
fi
"$MPIRUN" -np 2 "$DTRAIN" train $common --precision bf16 --batch 16 >"$tmp/log" 2>&1 &&
    grep -q "parameters identical on all 2 ranks" "$tmp/log" && ok "bf16, 2 ranks on one GPU: parameters identical on both" ||
    { bad "bf16 2 ranks on one GPU"; cat "$tmp/log"; }
expect 1 "two ranks on one GPU" "$MPIRUN" -np 2 "$DTRAIN" env --device cuda
# --bucket-mb auto on GPU ranks times the allreduce on a device buffer (the buckets' path: here MPI
# through host memory), after its 3 profiled steps.
"$MPIRUN" -np 2 "$DTRAIN" train $common --batch 16 --steps 8 --bucket-mb auto >"$tmp/log" 2>&1 &&
    grep -q "buckets: --bucket-mb auto chose\|--bucket-mb auto keeps .* fits no ring" "$tmp/log" &&
    ok "--bucket-mb auto on 2 GPU ranks: $(grep -o 'auto \(chose\|keeps\) [0-9.]* MiB' "$tmp/log" | head -1)" ||
    { bad "--bucket-mb auto on 2 GPU ranks"; cat "$tmp/log"; }

# The per-layer finite check runs on the device without waiting (a flag per layer, read when
# the run gives up): the stop still names layer 4 (fc:10), where backward meets the inf first.
expect 1 "training stopped at step 3" env DTRAIN_FAULT=inf:0:3 "$MPIRUN" -np 1 -x DTRAIN_FAULT "$DTRAIN" train \
    --device cuda --model mlp --batch 8 --precision fp16 --loss-scale-init 1024 --loss-scale-min 1024 --steps 10
grep -q "rank 0 layer 4 (fc:10)" "$tmp/out" && ok "GPU fp16 stop names rank 0 layer 4 (fc:10)" || { bad "GPU stop message"; cat "$tmp/out"; }
expect 2 "keeps the gradients of a 16-bit model in fp32" "$DTRAIN" train --device cuda --precision bf16 --grad-comm bf16

# Out of GPU memory: an error naming what was asked, what is free of how much, and the fix. 24
# convolutions of 256 channels on 28x28 at batch 8192 want about 160 GB of activations (6.6 GB a
# layer; 159 MiB at batch 8), more than any GPU of today has; the input batch is 25 MB of host memory.
big=$(for i in $(seq 24); do printf 'conv:256:3:1:1,relu,'; done)fc:10
expect 1 "out of GPU memory for" "$MPIRUN" -np 1 "$DTRAIN" train --device cuda --model "$big" --input 1x28x28 --batch 8192 \
    --steps 1
grep -E "asked [0-9.]+ MiB, [0-9.]+ MiB free of [0-9.]+ MiB .*use a smaller --batch" "$tmp/out" >/dev/null &&
    ok "out of GPU memory: $(grep -o 'asked [0-9.]* MiB, [0-9.]* MiB free of [0-9.]* MiB' "$tmp/out" | head -1)" ||
    { bad "out-of-memory message"; cat "$tmp/out"; }
# Real data on the GPU: an IDX set, loader threads into pinned buffers, held-out evaluation
# (dt_model_evaluate's forward on the device) equal to the CPU's evaluation of the same checkpoint,
# accumulation and clipping (the device norm and accumulation kernels), and the same for bf16.
python3 "$here/../mpi/make_idx.py" "$tmp/idx" 3000 500 10 200
for prec in fp32 bf16; do
    rm -rf "$tmp/ck-$prec"
    if "$MPIRUN" -np 1 "$DTRAIN" train --device cuda --data "$tmp/idx" --precision $prec --batch 32 --epochs 1 --lr 0.02 \
        --accum-steps 2 --clip-grad-norm 1 --loader-threads 2 --checkpoint-dir "$tmp/ck-$prec" >"$tmp/out" 2>&1; then
        gpu=$(grep "^eval" "$tmp/out" | tail -1 | sed 's/.*(\([0-9]*\) of.*/\1/')
        "$MPIRUN" -np 1 "$DTRAIN" eval --device cpu --data "$tmp/idx" --checkpoint-dir "$tmp/ck-$prec" >"$tmp/eval" 2>&1
        cpu=$(sed -n 's/^accuracy [0-9.]* (\([0-9]*\) of.*/\1/p' "$tmp/eval")
        # fp32: the same count; bf16 runs the forward in 16 bits, so a few samples may flip.
        if [ -n "$gpu" ] && [ -n "$cpu" ] && [ $((gpu > cpu ? gpu - cpu : cpu - gpu)) -le $([ $prec = fp32 ] && echo 1 || echo 10) ]; then
            ok "GPU $prec on IDX data: held-out $gpu of 500 correct, the CPU's eval of the checkpoint $cpu"
        else
            bad "GPU $prec on IDX data: held-out '$gpu' vs CPU eval '$cpu'"; cat "$tmp/out" "$tmp/eval"
        fi
    else
        bad "GPU $prec training on IDX data failed"; cat "$tmp/out"
    fi
done
fi # ranks
finish
