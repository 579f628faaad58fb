#!/usr/bin/env bash
# The command line: commands, flags and their values, exit codes, help screens.
here=$(dirname "$0"); source "$here/lib.sh"
DTRAIN=$1
MPIRUN=$2

expect 2 "usage: dtrain" "$DTRAIN"
expect 2 "unknown command 'bogus'" "$DTRAIN" bogus
expect 0 "usage: dtrain" "$DTRAIN" help
expect 0 "dtrain 0.2.0" "$DTRAIN" version
expect 0 "MPI: Open MPI" "$DTRAIN" version
expect 0 "CUDA-aware)" "$DTRAIN" version
expect 2 "device 'gpu' is not one of auto, cpu, cuda" "$DTRAIN" env --device gpu
expect 2 "pin mode 'always'" "$DTRAIN" env --pin always
expect 2 "--timeout 'x'" "$DTRAIN" env --timeout x
expect 2 "--timeout '-5'" "$DTRAIN" env --timeout -5
expect 2 "--blas-threads '1.5'" "$DTRAIN" env --blas-threads 1.5
expect 2 "needs a value" "$DTRAIN" env --device
expect 2 "unknown option '--frobnicate'" "$DTRAIN" env --frobnicate
expect 2 "unexpected argument 'extra'" "$DTRAIN" env extra
expect 0 "0/1" "$DTRAIN" env --device cpu --pin none --timeout 5 --blas-threads 1
# A CUDA_VISIBLE_DEVICES that hides GPUs by mistake is named, with what CUDA makes of it.
expect 0 "warning: CUDA_VISIBLE_DEVICES='GPU-xyz,,': entry 1 'GPU-xyz' is not a GPU UUID" \
    env CUDA_VISIBLE_DEVICES=GPU-xyz,, "$DTRAIN" env --device cpu
expect 0 "entry 1 '-1' is negative; CUDA reads the list up to its first invalid entry, so it sees no GPU" \
    env CUDA_VISIBLE_DEVICES=-1 "$DTRAIN" env --device cpu
expect 0 "entry 1 'a' is not a device index (0, 1, ...) or UUID" env CUDA_VISIBLE_DEVICES=a,b "$DTRAIN" env --device cpu
if CUDA_VISIBLE_DEVICES=0,1 "$DTRAIN" env --device cpu 2>&1 | grep -q "warning: CUDA_VISIBLE_DEVICES"; then
    bad "a well-formed CUDA_VISIBLE_DEVICES=0,1 was warned about"
else
    ok "no warning for CUDA_VISIBLE_DEVICES=0,1"
fi
# DTRAIN_LOG is read by every command (the level of its log lines): a malformed one is refused
# alike, exit 2 naming it, also by the commands that start no job.
for cmd in "plot m.jsonl" "data info d" "data verify d" "data convert d o.dts" "model-perf --synthetic a:1:4:10" \
    "bench data --data d" "version"; do
    # shellcheck disable=SC2086 # the command's words
    expect 2 "DTRAIN_LOG='verbose' is not a log level; use error, warn, info or debug" env DTRAIN_LOG=verbose "$DTRAIN" $cmd
done

# Help: `dtrain help X` and `dtrain X --help` print X's own screen to stdout (nothing on stderr)
# and exit 0; every screen fits a terminal of 24 x 80.
screen() { # CODE EXPECTED-TEXT command... : stdout and stderr apart
    local code=$1 text=$2
    shift 2
    "$@" >"$tmp/so" 2>"$tmp/se"
    local rc=$? lines cols
    lines=$(wc -l <"$tmp/so")
    cols=$(awk '{ if (length($0) > m) m = length($0) } END { print m + 0 }' "$tmp/so")
    if [ "$rc" -eq "$code" ] && [ ! -s "$tmp/se" ] && grep -qF -- "$text" "$tmp/so" && [ "$lines" -le 24 ] && [ "$cols" -le 80 ]; then
        ok "$* -> $rc, stdout only, $lines lines of at most $cols columns, says '$text'"
    else
        bad "'$*': exit $rc (wanted $code), $lines lines, $cols columns, stderr $(wc -c <"$tmp/se") bytes, wanted '$text'"
        sed 's/^/    /' "$tmp/so" "$tmp/se"
    fi
}
screen 0 "usage: dtrain <command>" "$DTRAIN" help
screen 0 "usage: dtrain <command>" "$DTRAIN" --help
screen 0 "bench gemm" "$DTRAIN" help
for topic in train eval plot model-perf env version bench "bench allreduce" "bench gemm" "bench step" "bench data" "bench reducer"; do
    screen 0 "usage: dtrain $topic" "$DTRAIN" help $topic
    "$DTRAIN" help $topic >"$tmp/a" 2>&1
    "$DTRAIN" $topic --help >"$tmp/b" 2>&1
    cmp -s "$tmp/a" "$tmp/b" && ok "dtrain $topic --help == dtrain help $topic" ||
        { bad "dtrain $topic --help differs from dtrain help $topic"; diff "$tmp/a" "$tmp/b" | head; }
done
screen 0 "usage: dtrain train" "$DTRAIN" train -h
screen 0 "usage: dtrain train --data PATH" "$DTRAIN" help train data
screen 0 "usage: dtrain train --precision" "$DTRAIN" help train precision
for topic in data "data convert" "data info" "data verify" doctor; do
    screen 0 "usage: dtrain $topic" "$DTRAIN" help $topic
done
# --drop-last drops the last partial step; without it the step is padded by wrapping (docs/training.md).
expect 0 "--drop-last (drop the last partial step)" "$DTRAIN" help train data
# Every flag a command takes is on its screen, spelled out (--loss-scale-growth, not -growth).
flags_of() { # the command's flags as its own unknown-option check sees them: try each word of the screen
    grep -oE -- '--[a-z0-9-]+[a-z0-9]' "$tmp/so" | sort -u
}
# train's flags are on its three screens (train, train data, train precision).
{ "$DTRAIN" help train; "$DTRAIN" help train data; "$DTRAIN" help train precision; } >"$tmp/so"
for f in model input batch steps lr optim momentum weight-decay beta1 beta2 eps seed log-every metrics dump-params \
         dataset-size bucket-mb first-bucket-mb no-overlap grad-comm checkpoint-dir checkpoint-every keep-checkpoints \
         resume precision \
         loss-scale loss-scale-init loss-scale-growth loss-scale-backoff loss-scale-interval loss-scale-hysteresis \
         loss-scale-min loss-scale-max loss-scale-window max-overflow-fraction loader-threads \
         data data-format cifar100-labels normalize eval-data holdout eval-every epochs drop-last shuffle augment \
         bad-samples lr-schedule warmup-steps min-lr accum-steps clip-grad-norm init-params progress quiet; do
    flags_of | grep -qx -- "--$f" || bad "dtrain help train (data, precision) does not name --$f"
done
! grep -qE -- '(^| )-[a-z]+ [A-Z]' "$tmp/so" && ok "dtrain help train spells every flag out" ||
    { bad "dtrain help train abbreviates a flag:"; grep -E -- '(^| )-[a-z]+ [A-Z]' "$tmp/so"; }
expect 2 "no help for 'bogus'" "$DTRAIN" help bogus
expect 2 "no help for 'bench bogus': the benchmarks are allreduce, gemm, step" "$DTRAIN" help bench bogus

# Unknown flags: the closest of the command's own flags, and the error's prefix once.
expect 2 "unknown option '--bach'; did you mean --batch?" "$DTRAIN" train --bach 4
expect 2 "did you mean --batch?" "$DTRAIN" train --bacth 4
expect 2 "did you mean --batch?" "$DTRAIN" train -batch 4
expect 2 "did you mean --loss-scale-growth?" "$DTRAIN" train --loss-scale-grwth 2
expect 2 "did you mean --iters?" "$DTRAIN" bench gemm --itres 1
expect 2 "did you mean --timeout?" "$DTRAIN" env --timeot 5
expect 2 "'--loss-scale-m' is ambiguous: it could be --loss-scale-min, --loss-scale-max" "$DTRAIN" train --loss-scale-m 3
expect 2 "--no-overlap takes no value" "$DTRAIN" train --no-overlap=1
# `--gpu 1` is a prefix of --gpu-comm: the refusal says which flag it was and that CUDA_VISIBLE_DEVICES chooses GPUs.
expect 2 "a shortened --gpu-comm: dtrain has no flag that chooses GPUs; CUDA_VISIBLE_DEVICES does" "$DTRAIN" env --gpu 1
expect 2 "CUDA_VISIBLE_DEVICES does" "$DTRAIN" env --gpu=1
"$DTRAIN" env --gpu-comm 1 >"$tmp/out" 2>&1
grep -q "shortened" "$tmp/out" && bad "the full --gpu-comm was called shortened: $(cat "$tmp/out")" ||
    ok "--gpu-comm spelled out: no shortening hint"
"$DTRAIN" train --frobnicate >"$tmp/out" 2>&1
grep -q "did you mean" "$tmp/out" && bad "a far-off flag got a suggestion: $(cat "$tmp/out")" || ok "no suggestion for a far-off flag"
"$DTRAIN" env --bach >"$tmp/out" 2>&1
grep -q "did you mean" "$tmp/out" && bad "env suggested another command's flag: $(cat "$tmp/out")" ||
    ok "env suggests only its own flags"
"$DTRAIN" train --bach 4 >"$tmp/out" 2>&1
[ "$(cat "$tmp/out")" = "dtrain: error: unknown option '--bach'; did you mean --batch? (see dtrain help train)" ] &&
    ok "one prefix: $(cat "$tmp/out")" || bad "unknown option message: $(cat "$tmp/out")"
expect 2 "the benchmarks are allreduce, gemm, step" "$DTRAIN" bench foo
"$DTRAIN" bench >"$tmp/out" 2>&1
grep -q "error: dtrain bench:" "$tmp/out" && bad "prefix twice: $(cat "$tmp/out")" || ok "dtrain bench: one prefix: $(cat "$tmp/out")"

# Bad usage found once the world is known is still exit 2; counts are singular or plural.
expect 2 "--dataset-size 3 is smaller than one global batch of 1 rank x 4" "$DTRAIN" train --dataset-size 3 --batch 4
# Every rank refuses it alike and ends by itself: no abort, which could cut the message off.
expect 2 "--dataset-size 7 is smaller than one global batch of 2 ranks x 4" "$MPIRUN" -np 2 "$DTRAIN" train \
    --dataset-size 7 --batch 4
grep -q "MPI_ABORT was invoked" "$tmp/out" && bad "the refusal at 2 ranks aborted the job" ||
    ok "--dataset-size refused at 2 ranks without an abort"
# Said once, by rank 0, for all: every rank has the same flags and the same verdict.
[ "$(grep -c "smaller than one global batch" "$tmp/out")" = 1 ] && ! grep -q "(rank 1 of 2" "$tmp/out" &&
    ok "--dataset-size at 2 ranks: one line" || bad "--dataset-size at 2 ranks, not one line: $(cat "$tmp/out")"
# The steps and schedule, refused alike on every rank once the data is known: one line, no abort.
expect 2 "give --epochs or --steps, not both (--epochs 1 is 4 steps here) (the same on all 2 ranks)" "$MPIRUN" -np 2 \
    "$DTRAIN" train --dataset-size 32 --batch 4 --epochs 1 --steps 5
[ "$(grep -c "not both" "$tmp/out")" = 1 ] && ! grep -q "MPI_ABORT was invoked" "$tmp/out" && ! grep -q "ranks) (rank" "$tmp/out" &&
    ok "--epochs with --steps at 2 ranks: one line, no abort" || bad "--epochs with --steps at 2 ranks: $(cat "$tmp/out")"
# A flag that needs --data, given without it, is every rank's refusal alike: one line, no abort.
expect 2 "--eval-every needs --data PATH (without it dtrain trains on its synthetic data)" \
    "$MPIRUN" -np 2 "$DTRAIN" train --dataset-size 32 --batch 4 --eval-every 5
[ "$(grep -c "needs --data" "$tmp/out")" = 1 ] && ! grep -q "MPI_ABORT was invoked" "$tmp/out" && ! grep -q "(rank " "$tmp/out" &&
    ok "--eval-every without --data at 2 ranks: one line, no abort" ||
    bad "--eval-every without --data at 2 ranks: $(cat "$tmp/out")"
# An optimizer step longer than an epoch (100 samples, 64 x --accum-steps 4): --epochs and epoch
# milestones are refused for that (a milestone was refused as if the data could not say its epoch
# length), and a --steps run's data line says so instead of "0 steps per epoch".
long_step="--model fc:8,relu,fc:10 --input 8 --dataset-size 100 --batch 64 --accum-steps 4"
expect 2 "--epochs: an epoch of 100 samples has no whole optimizer step of 1 rank x 64 x --accum-steps 4" \
    "$DTRAIN" train $long_step --epochs 3
expect 2 "--lr-schedule's epoch milestones: an epoch of 100 samples has no whole optimizer step of 1 rank x 64 x --accum-steps 4" \
    "$DTRAIN" train $long_step --steps 4 --lr-schedule step:2e:0.5
expect 0 "10 classes; a step of 4 batches is longer than an epoch (2 batches) (shuffled" "$DTRAIN" train $long_step --steps 2 \
    --lr-schedule step:1:0.5
# Steps that run on across an epoch's end: the epoch is a fraction of them (it said 6 for 6.5).
expect 0 "200 samples of 8 features, 10 classes; 6.50 steps per epoch (13 batches, 2 a step) (shuffled" \
    "$DTRAIN" train --model fc:8,relu,fc:10 --input 8 --dataset-size 200 --batch 16 --accum-steps 2 --steps 1
"$DTRAIN" train --model fc:16,relu,fc:10 --input 16 --batch 4 --steps 1 --log-every 1 --bucket-mb 0 --loader-threads 1 \
    >"$tmp/out" 2>&1 || bad "a 1-step run failed: $(cat "$tmp/out")"
if grep -qE '(^|[^0-9.])1 (ranks|steps|buckets|threads|intervals|log intervals|nodes)\b|\((s)\)' "$tmp/out"; then
    bad "wrong plurals:"; grep -E '(^|[^0-9.])1 (ranks|steps|buckets|threads|intervals|log intervals|nodes)\b|\((s)\)' "$tmp/out"
else
    grep -q "1 rank x batch 4 = 4 per step, 1 step," "$tmp/out" && grep -q "^gradients: 1 bucket " "$tmp/out" &&
        grep -q "1 loader thread makes" "$tmp/out" && grep -q "^done: 1 step in .* over 1 log interval; " "$tmp/out" &&
        ok "singular counts: 1 rank, 1 step, 1 bucket, 1 loader thread, 1 log interval" || { bad "singulars"; cat "$tmp/out"; }
fi
# Flags and DTRAIN_* variables share one number parser: blanks, tabs and hex are refused alike,
# with the range; --timeout is 0 (never) or 1 to 1e7 s, like DTRAIN_TIMEOUT.
expect 2 "--timeout '0x1p3' is not a number" "$DTRAIN" env --timeout 0x1p3
expect 2 "--lr '0x10' is not a number" "$DTRAIN" train --lr 0x10 --steps 1
expect 2 "has leading or trailing whitespace" "$DTRAIN" env --blas-threads "$(printf '\t1')"
expect 2 "has leading or trailing whitespace" "$DTRAIN" train --steps "$(printf '\t5')"
expect 2 "--timeout '1e-45' is out of range (expected 0 (never) or a number from 1 to 10000000)" "$DTRAIN" env --timeout 1e-45
expect 0 "" "$DTRAIN" env --timeout 0
expect 0 "1 rank on 1 node," "$DTRAIN" env
# A parameter file of the wrong size points to where its layout is documented.
head -c 100 /dev/zero >"$tmp/short.bin"
expect 2 "in the layout of docs/training.md, Parameter files" "$DTRAIN" train --model fc:16,relu,fc:10 --input 16 \
    --batch 4 --steps 1 --init-params "$tmp/short.bin"
# At 3 ranks rank 0 reads it for all and says why; every rank learns that and ends on its own.
expect 2 "in the layout of docs/training.md, Parameter files" "$MPIRUN" -np 3 "$DTRAIN" train --model fc:16,relu,fc:10 \
    --input 16 --batch 4 --steps 1 --init-params "$tmp/short.bin"
[ "$(grep -c "dtrain: error" "$tmp/out")" -eq 1 ] && ! grep -q "MPI_ABORT" "$tmp/out" &&
    ok "a short --init-params at 3 ranks: one line, no MPI_Abort" || bad "a short --init-params at 3 ranks: $(cat "$tmp/out")"

# Output files: two flags naming one file would leave only the one written last; refused at parsing,
# naming both, whether the names are equal, meet once the directory is resolved, or link one file.
small="--model fc:16,relu,fc:10 --input 16 --batch 4 --steps 1"
expect 2 "--metrics $tmp/same.out and --dump-params $tmp/same.out name the same file" \
    "$DTRAIN" train $small --metrics "$tmp/same.out" --dump-params "$tmp/same.out"
expect 2 "--metrics $tmp/x.out and --trace $tmp/../$(basename "$tmp")/x.out name the same file" \
    "$DTRAIN" train $small --metrics "$tmp/x.out" --trace "$tmp/../$(basename "$tmp")/x.out"
printf 'x' >"$tmp/p.bin" && ln -sf "$tmp/p.bin" "$tmp/link.bin"
expect 2 "--trace $tmp/link.bin and --dump-params $tmp/p.bin name the same file" \
    "$DTRAIN" train $small --trace "$tmp/link.bin" --dump-params "$tmp/p.bin"
expect 2 "--metrics $tmp/p.bin would overwrite --init-params $tmp/p.bin, the parameters this run starts from" \
    "$DTRAIN" train $small --init-params "$tmp/p.bin" --metrics "$tmp/p.bin"
[ "$(cat "$tmp/p.bin")" = x ] && ok "--init-params kept its bytes" || bad "--init-params was overwritten"
# --metrics is tried before training as --trace and --dump-params are: a directory is bad usage.
mkdir -p "$tmp/mdir"
expect 2 "--metrics $tmp/mdir is a directory: give a file path" "$DTRAIN" train $small --metrics "$tmp/mdir"
# --init-params may be --dump-params' file: it is read before anything is written (here it is too short).
expect 2 "--init-params $tmp/p.bin holds 1 bytes" "$DTRAIN" train $small --init-params "$tmp/p.bin" --dump-params "$tmp/p.bin"
# A file of the right size holding a NaN is there but damaged, as a truncated --data file is: a
# run-time failure, 1 (docs/troubleshooting.md, Exit codes), on every rank and without MPI_Abort.
head -c 1768 /dev/zero | tr '\0' '\377' >"$tmp/nan.bin"
expect 1 "--init-params $tmp/nan.bin: parameter 0 (byte offset 0) is -nan, not a finite number" \
    "$DTRAIN" train $small --init-params "$tmp/nan.bin"
expect 1 "is -nan, not a finite number" "$MPIRUN" -np 2 "$DTRAIN" train $small --init-params "$tmp/nan.bin"
grep -q MPI_ABORT "$tmp/out" && bad "a damaged --init-params aborted the job" || ok "a damaged --init-params: no MPI_Abort"
# An open of a good file that the system fails (EMFILE, injected by strace into the opens of that
# path alone) is no fault of the command line: 1, as a failed read is; a missing file stays 2.
head -c 1768 /dev/zero >"$tmp/zero.bin"
if can_trace; then
    expect 1 "cannot open --init-params $tmp/zero.bin: Too many open files" \
        traced -P "$tmp/zero.bin" -e trace=openat -e inject=openat:error=EMFILE -- "$DTRAIN" train $small \
        --init-params "$tmp/zero.bin"
else
    ok "an --init-params open failed by the system: SKIP: no strace that can trace here"
fi
expect 2 "cannot open --init-params $tmp/none.bin: No such file or directory" "$DTRAIN" train $small \
    --init-params "$tmp/none.bin"
# A socket cannot be opened at all (ENXIO): not a regular file, the command line's mistake, 2.
python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$tmp/sock"
expect 2 "cannot open --init-params $tmp/sock" "$DTRAIN" train $small --init-params "$tmp/sock"
# A character device keeps nothing, so every output may share it.
expect 0 "trace of 1 rank in /dev/null" "$DTRAIN" train $small --metrics /dev/null --dump-params /dev/null --trace /dev/null
# Flags that would be ignored, or override another silently, are refused naming both (any order).
expect 2 "--loss-scale-init tunes the dynamic loss scaler, but --loss-scale 1024 fixes the scale: drop --loss-scale-init" \
    "$DTRAIN" train $small --loss-scale 1024 --loss-scale-init 8
expect 2 "--loss-scale-init tunes the dynamic loss scaler, which --loss-scale none turns off" \
    "$DTRAIN" train $small --loss-scale-init 8 --loss-scale none
expect 2 "--max-overflow-fraction tunes the dynamic loss scaler, which --loss-scale none" \
    "$DTRAIN" train $small --loss-scale none --max-overflow-fraction 0.2
# bf16 and fp32 run no scaler unless told: its flags alone would change nothing.
expect 2 "--loss-scale-init tunes the dynamic loss scaler, which --precision bf16 does not run by default (only fp16 does)" \
    "$DTRAIN" train $small --precision bf16 --loss-scale-init 8
expect 2 "--loss-scale-interval tunes the dynamic loss scaler, which --precision fp32 does not run by default" \
    "$DTRAIN" train $small --loss-scale-interval 3
expect 0 "loss scale 8 at the end" "$DTRAIN" train $small --precision bf16 --loss-scale dynamic --loss-scale-init 8 \
    --loss-scale-interval 100
expect 2 "--momentum is a setting of --optim sgd, and this run uses --optim adamw: drop --momentum" \
    "$DTRAIN" train $small --optim adamw --momentum 0.5
expect 2 "--momentum is a setting of --optim sgd, and this run uses --optim adamw" \
    "$DTRAIN" train $small --momentum 0.5 --optim adamw
for f in beta1 beta2 eps; do
    expect 2 "--$f is a setting of --optim adamw, and this run uses --optim sgd" "$DTRAIN" train $small --optim sgd --$f 0.5
done
# The start line names each optimizer's own settings: momentum for SGD, betas and eps for AdamW.
expect 0 ", adamw lr 0.01 betas (0.9, 0.98) eps 1e-06 weight decay 0.1, seed 1" \
    "$DTRAIN" train $small --optim adamw --beta2 0.98 --eps 1e-6 --weight-decay 0.1
grep -q "momentum" "$tmp/out" && bad "an AdamW run printed a momentum: $(grep momentum "$tmp/out")" ||
    ok "an AdamW run prints no momentum"
expect 0 ", sgd lr 0.01 momentum 0.5 weight decay 0, seed 1" "$DTRAIN" train $small --momentum 0.5
expect 2 "--eval-every needs --data PATH" "$DTRAIN" train $small --eval-every 5
expect 2 "--cifar100-labels needs --data PATH" "$DTRAIN" train $small --cifar100-labels coarse
expect 2 "--holdout 0.2 keeps part of the training set aside and --eval-data $tmp/e names another held-out set" \
    "$DTRAIN" train $small --data "$tmp/d" --eval-data "$tmp/e" --holdout 0.2

# A standard descriptor the caller closed is held on /dev/null (read-only) from the start: no file
# the command opens becomes fd 1 and takes its printed lines, and output that cannot be written
# is still an error.
expect 1 "standard output is closed: run dtrain with it open (not >&-)" sh -c 'exec "$@" >&-' _ "$DTRAIN" version
"$DTRAIN" train --model fc:10 --input 4 --batch 2 --steps 100000000 --log-every 100000000 >&- 2>"$tmp/closed.err" &
closed=$!
# Once MPI and the threads are up (their descriptors open), fd 1 is what the run writes to. A
# second thread means the program's own code runs (the loader, single-threaded, opens and closes
# each library on the lowest free descriptor before the hold: sampled then, fd 1 read as a .so).
for _ in $(seq 100); do
    [ "$(ls "/proc/$closed/fd" 2>/dev/null | wc -l)" -gt 6 ] &&
        [ "$(sed -n 's/^Threads:[[:space:]]*//p' "/proc/$closed/status" 2>/dev/null)" -gt 1 ] 2>/dev/null && break
    sleep 0.1
done
held=$(readlink "/proc/$closed/fd/1" 2>/dev/null) mode=$(ls -l "/proc/$closed/fd/1" 2>/dev/null | cut -c1-3)
kill "$closed" 2>/dev/null; wait "$closed" 2>/dev/null
[ "$held" = /dev/null ] && [ "$mode" = lr- ] && ok "train >&-: fd 1 held on /dev/null, read-only" ||
    bad "train >&-: fd 1 is '$held' ($mode)"
finish
