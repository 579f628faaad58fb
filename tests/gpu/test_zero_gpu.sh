#!/usr/bin/env bash
# --zero 1 on the GPU: the optimizer's state on the device holds only this rank's slices, the
# parameters are allgathered after its step, and the results are those of --zero 0 bit for bit
# wherever the reduction is the same one:
# - NCCL (the default) at one rank with DTRAIN_COMM_WORLD1=1: every bucket goes through
#   ncclReduceScatter / ncclAllGather on NCCL's stream (a sum over one rank changes no bit), fp32,
#   bf16 and fp16, SGD and AdamW, a 16-bit wire, small buckets; a stop and resume;
# - 2 and 3 ranks sharing the GPU through --gpu-comm mpi (NCCL refuses ranks that share a GPU,
#   so more than one NCCL rank needs more than one GPU): the whole-buffer allreduce stays there, the
#   state and the step are sharded by coll_part's split (3 ranks: a tail on the last rank); the
#   optimizer memory line 1/W; a checkpoint written at 2 ranks is byte for byte the --zero 0 one
#   and resumes at 1 with either --zero.
# Exit 77 (SKIP) with the reason when no GPU can be used.
here=$(dirname "$0"); source "$here/../mpi/lib.sh"
DTRAIN=$1 MPIRUN=$2 CMP=$3

if ! "$DTRAIN" env --device cuda >"$tmp/env" 2>&1; then
    echo "SKIP: no usable GPU: $(grep -m1 -i 'error' "$tmp/env" || head -1 "$tmp/env")"
    exit 77
fi

train() { # ranks, then train flags
    local np=$1; shift
    "$MPIRUN" -np "$np" -x DTRAIN_COMM_WORLD1 "$DTRAIN" train --device cuda "$@" >"$tmp/log" 2>&1 || { cat "$tmp/log"; return 1; }
}
ZERO_WHERE='GPU, '
bk="--bucket-mb 0.05 --first-bucket-mb 0.01"

export DTRAIN_COMM_WORLD1=1
zero_same 1 exact --model mlp --steps 8 --batch 32 --optim adamw --lr 0.003 --weight-decay 0.01 --seed 3 --log-every 8 $bk
zero_same 1 exact --model mlp --steps 8 --batch 32 --optim sgd --momentum 0.9 --lr 0.05 --seed 3 --log-every 8 $bk
zero_same 1 exact --model cnn --steps 6 --batch 32 --optim adamw --lr 0.003 --seed 5 --log-every 6 $bk --precision bf16
zero_same 1 exact --model mlp --steps 8 --batch 32 --optim adamw --lr 0.003 --seed 5 --log-every 8 --precision fp16
zero_same 1 exact --model mlp --steps 8 --batch 32 --optim adamw --lr 0.003 --seed 5 --log-every 8 $bk --grad-comm bf16
zero_same 1 1e-6 --model mlp --steps 8 --batch 32 --optim adamw --lr 0.003 --seed 5 --log-every 8 $bk --clip-grad-norm 0.5
train 1 --model mlp --steps 2 --batch 32 --zero 1 --trace "$tmp/t.json" &&
    grep -q '"reduce-scatter b0"' "$tmp/t.json" && grep -q '"allgather b0"' "$tmp/t.json" &&
    ok "the NCCL stream's spans name reduce-scatters and allgathers" || bad "no reduce-scatter / allgather spans in the trace"
# Stop and resume through NCCL at one rank: bit for bit the uninterrupted run.
ck="--model mlp --steps 24 --batch 32 --optim adamw --lr 0.003 --seed 4 --log-every 8 $bk --zero 1"
train 1 $ck --dump-params "$tmp/ref" || bad "uninterrupted --zero 1 run failed"
DTRAIN_FAULT=usr1:0:11 "$MPIRUN" -np 1 -x DTRAIN_FAULT -x DTRAIN_COMM_WORLD1 "$DTRAIN" train --device cuda $ck \
    --checkpoint-dir "$tmp/ck" >"$tmp/log" 2>&1
[ $? -eq 75 ] && ok "--zero 1 on the GPU stopped at step 11 with a checkpoint" || { bad "--zero 1 GPU stop"; cat "$tmp/log"; }
train 1 $ck --checkpoint-dir "$tmp/ck" --resume auto --dump-params "$tmp/res" || bad "--zero 1 GPU resume failed"
out=$("$CMP" "$tmp/res" "$tmp/ref" exact) && ok "--zero 1 on the GPU: stopped + resumed == uninterrupted: $out" || bad "resume: $out"
export DTRAIN_COMM_WORLD1=0

# Ranks sharing the GPU through MPI.
for np in 2 3; do
    zero_same $np exact --gpu-comm mpi --model mlp --steps 8 --batch 16 --optim adamw --lr 0.003 --seed 3 --log-every 8 $bk
    zero_same $np exact --gpu-comm mpi --model cnn --steps 6 --batch 16 --optim sgd --momentum 0.9 --lr 0.05 --seed 5 --log-every 6 $bk --precision bf16
done
full='' shard=''
mem() { sed -n 's/.* optimizer \([0-9.]*\) MiB.*/\1/p' "$tmp/log"; }
train 1 --model mlp --steps 1 --batch 16 --optim adamw --zero 0 && full=$(mem)
train 2 --gpu-comm mpi --model mlp --steps 1 --batch 16 --optim adamw --zero 1 && shard=$(mem)
awk -v f="$full" -v s="$shard" 'BEGIN { d = 2 * s - f; if (d < 0) d = -d; exit !(s > 0 && d <= 0.02) }' &&
    ok "GPU optimizer memory at 2 ranks: $shard MiB = $full MiB / 2" || { bad "GPU optimizer memory: $shard vs $full / 2"; grep memory "$tmp/log"; }
ck2="--gpu-comm mpi --model mlp --steps 30 --optim adamw --lr 0.003 --seed 4 --log-every 10 $bk"
for z in 1 0; do
    DTRAIN_FAULT=usr1:1:13 "$MPIRUN" -np 2 -x DTRAIN_FAULT "$DTRAIN" train --device cuda $ck2 --batch 16 --zero $z \
        --checkpoint-dir "$tmp/ck2.$z" >"$tmp/log" 2>&1
    [ $? -eq 75 ] && [ -f "$tmp/ck2.$z/ckpt-0000000013.dtc" ] || { bad "--zero $z stop at 2 ranks on one GPU"; cat "$tmp/log"; }
done
cmp -s "$tmp/ck2.1/ckpt-0000000013.dtc" "$tmp/ck2.0/ckpt-0000000013.dtc" &&
    ok "GPU: the --zero 1 checkpoint of 2 ranks is byte for byte the --zero 0 one" || bad "GPU --zero 1 and --zero 0 checkpoints differ"
for z in 1 0; do
    rm -rf "$tmp/ckr"; cp -r "$tmp/ck2.1" "$tmp/ckr"
    train 1 $ck2 --batch 32 --zero $z --checkpoint-dir "$tmp/ckr" --resume auto --dump-params "$tmp/r1.$z" || bad "resume at 1 --zero $z failed"
    grep -q "resumed from .*ckpt-0000000013.dtc at step 13" "$tmp/log" || bad "no resume at 1 rank --zero $z"
done
out=$("$CMP" "$tmp/r1.1" "$tmp/r1.0" exact) && ok "stopped at 2 ranks, resumed at 1 on the GPU: --zero 1 == --zero 0: $out" ||
    bad "resumed at 1: --zero 1 vs 0: $out"
finish
