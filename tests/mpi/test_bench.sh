#!/usr/bin/env bash
# `dtrain bench allreduce`: the table has one row per size, every result is exact (#wrong 0 for
# the engine and for MPI), and bad sizes, factors, dtypes and benchmark names are refused.
here=$(dirname "$0"); source "$here/lib.sh"
DTRAIN=$1 MPIRUN=$2

# Rows of the table: lines that start with a size and a count.
rows() { grep -E '^ *[0-9]+ +[0-9]+ +(float|half|bf16) ' "$1"; }

# once NAME: the last expect's refusal was said in one line, without MPI_Abort's banner (ranks
# given other flags: every rank knows it and ends by itself).
once() {
    [ "$(grep -c "dtrain: error" "$tmp/out")" -eq 1 ] && ! grep -q "MPI_ABORT" "$tmp/out" &&
        ok "$1: said once, no MPI_Abort" || { bad "$1: not said once"; sed 's/^/    /' "$tmp/out"; }
}

# bench NAME EXPECTED_ROWS LAUNCH... : runs, then checks exit 0, row count and #wrong columns.
bench() {
    local name=$1 want=$2
    shift 2
    "$@" >"$tmp/out" 2>&1
    local rc=$?
    if [ "$rc" -ne 0 ]; then
        bad "$name: '$*' exited $rc"; sed 's/^/    /' "$tmp/out"; return
    fi
    local n
    n=$(rows "$tmp/out" | wc -l)
    if [ "$n" -ne "$want" ]; then
        bad "$name: $n table rows, expected $want"; sed 's/^/    /' "$tmp/out"; return
    fi
    # Columns: size count type time algbw busbw #wrong | time algbw busbw #wrong ratio | min-max
    # min-max: each side's fastest and slowest iteration, around its mean time (the slowest rank's);
    # "-" where an iteration is too short (under 10 us) to time one by one.
    local wrong
    wrong=$(rows "$tmp/out" | awk 'function around(mm, t) { if (mm == "-") return 1; split(mm, m, "-"); return m[2] != "" && m[1] <= t + 0.05 && t <= m[2] + 0.05 }
        NF != 14 || $7 != 0 || $11 != 0 || !around($13, $4) || !around($14, $8) { n++ } END { print n + 0 }')
    if [ "$wrong" -ne 0 ]; then
        bad "$name: $wrong row(s) with #wrong != 0, a mean outside its min-max (or malformed)"; sed 's/^/    /' "$tmp/out"; return
    fi
    grep -q '^# Avg bus bandwidth' "$tmp/out" || { bad "$name: no Avg bus bandwidth line"; sed 's/^/    /' "$tmp/out"; return; }
    ok "$name: $n rows, #wrong 0 for dtrain and MPI, each mean within its min-max"
}

# Number of sizes from $1 to $2 multiplying by $3.
nsizes() { local b=$1 n=0; while [ "$b" -le "$2" ]; do n=$((n + 1)); b=$((b * $3)); done; echo $n; }

common="--iters 5 --warmup 1"
bench "np2 8..1M x4" "$(nsizes 8 1048576 4)" "$MPIRUN" -np 2 "$DTRAIN" bench allreduce -b 8 -e 1M -f 4 $common
grep -q '^# dtrain bench allreduce: 2 ranks, engine ' "$tmp/out" && ok "np2: header names ranks and engine mode" ||
    bad "np2: no header line"
# 512 KiB takes far over 10 us an iteration on both sides: its row has both min-max ranges.
[ "$(rows "$tmp/out" | awk '$1 == 524288 && $13 ~ /^[0-9.]+-[0-9.]+$/ && $14 ~ /^[0-9.]+-[0-9.]+$/' | wc -l)" -eq 1 ] &&
    ok "np2: 512 KiB's row has dtrain's and MPI's min-max" || { bad "np2: no min-max at 512 KiB"; sed 's/^/    /' "$tmp/out"; }
bench "np4 4..64K x8" "$(nsizes 4 65536 8)" "$MPIRUN" -np 4 --oversubscribe "$DTRAIN" bench allreduce -b 4 -e 64K -f 8 $common
bench "np4 --op avg, long forms" "$(nsizes 100 100000 10)" "$MPIRUN" -np 4 --oversubscribe "$DTRAIN" bench allreduce \
    --minbytes 100 --maxbytes=100000 --stepfactor 10 --op avg $common
bench "np1 (no launcher)" "$(nsizes 8 4096 8)" "$DTRAIN" bench allreduce -b8 -e4K -f8 $common
grep -q 'busbw = algbw \* 2(n-1)/n is 0, and algbw is size over the time of a call that moves and adds nothing' \
    "$tmp/out" && ok "np1: says busbw is 0 on 1 rank, and algbw no bandwidth" || bad "np1: no note on busbw and algbw"

# --- Refusals (before MPI starts, so no launcher is needed): exit 2, naming the value.
expect 2 "'0' is not a size" "$DTRAIN" bench allreduce -b 0
expect 2 "'0' is not a size" "$DTRAIN" bench allreduce -e 0
expect 2 "'1X' is not a size" "$DTRAIN" bench allreduce -e 1X
expect 2 "'-5' is not a size" "$DTRAIN" bench allreduce -b -5
expect 2 "'5G' is not a size" "$DTRAIN" bench allreduce -e 5G
expect 2 "--minbytes 2M (2097152 bytes) is larger than -e/--maxbytes 1M (1048576 bytes)" "$DTRAIN" bench allreduce -b 2M -e 1M
expect 2 "--stepfactor '1' is out of range (expected an integer from 2" "$DTRAIN" bench allreduce -f 1
expect 2 "--stepfactor '1.5'" "$DTRAIN" bench allreduce -f 1.5
expect 2 "--iters '0'" "$DTRAIN" bench allreduce --iters 0
expect 2 "--op 'max' is not one of sum, avg" "$DTRAIN" bench allreduce --op max
expect 2 "--dtype 'fp64' is not one of fp32, fp16, bf16" "$DTRAIN" bench allreduce --dtype fp64
expect 2 "'64KB' is not a size" "$DTRAIN" bench allreduce -e 64KB
# The edges the flags allow: --warmup 0, one size (-b equal to -e), -b after --maxbytes=V, and an
# --op the header names; -b above the default -e alone measures that one size; after "--" nothing
# is a flag, not even a short form.
expect 0 ", op avg, fp32, sizes 8 to 8 x2, iters 1, warmup 0" "$DTRAIN" bench allreduce --maxbytes=8 -b 8 --iters 1 --warmup 0 --op avg
expect 0 ", sizes 65M to 65M x2," "$DTRAIN" bench allreduce -b 65M --iters 1 --warmup 0
expect 2 "unexpected argument '-b'" "$DTRAIN" bench allreduce -- -b 8
# 16-bit wire: the sums of small integers are exact in fp16 and bf16 too.
for dt in fp16 bf16; do
    bench "np2 --dtype $dt" "$(nsizes 8 1048576 16)" "$MPIRUN" -np 2 "$DTRAIN" bench allreduce -b 8 -e 1M -f 16 --dtype $dt $common
    bench "np4 --dtype $dt" "$(nsizes 8 65536 64)" "$MPIRUN" -np 4 --oversubscribe "$DTRAIN" bench allreduce -b 8 -e 64K -f 64 --dtype $dt $common
done
# In place, every iteration reduces the last one's result: a sum over 2 ranks doubles it, so fp16
# holds 8 iterations of this fill exactly (13 x 2^7 <= 2^11) and is inf after about 13. The buffer
# is filled afresh, untimed, every 8 iterations, and the last timed result is checked: 25 iterations
# pass exactly; a forced block of 25 (a test hook) puts inf in the timed data, and the check fails
# the run naming it.
bench "np2 fp16, 25 in-place sums" 2 "$MPIRUN" -np 2 "$DTRAIN" bench allreduce -b 8 -e 1K -f 128 --dtype fp16 \
    --iters 20 --warmup 5
grep -q "filled afresh (not timed, then a barrier) every 8 iterations of dtrain and 21 of MPI" "$tmp/out" &&
    ok "np2 fp16: refilled every 8 iterations (fp32's MPI every 21), the timed results exact" ||
    { bad "np2 fp16: no refill line"; sed 's/^/    /' "$tmp/out"; }
DTRAIN_TEST_BENCH_BLOCK=25 "$MPIRUN" -np 2 "$DTRAIN" bench allreduce -b 8 -e 1K -f 128 --dtype fp16 --iters 20 \
    --warmup 5 >"$tmp/out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "of them not finite: the allreduce is broken, or its in-place sums outgrew the type" "$tmp/out" &&
    [ "$(rows "$tmp/out" | awk '$7 > 0 && $11 == 0' | wc -l)" -eq 2 ] &&
    ok "np2 fp16 without refills: inf in the engine's timed result, the run fails naming it" ||
    { bad "np2 fp16 without refills (exit $rc)"; sed 's/^/    /' "$tmp/out"; }
# Ranks given other flags (an MPMD line, a wrapper computing one per rank) are refused at once:
# another --iters left rank 0 in an allreduce rank 1 never joined until the watchdog's deadline.
expect 2 "rank 1 was given '--iters 3' where rank 0 was given '--iters 2'" timeout 60 "$MPIRUN" \
    -np 1 "$DTRAIN" bench allreduce -b 8 -e 64 --iters 2 --timeout 20 : \
    -np 1 "$DTRAIN" bench allreduce -b 8 -e 64 --iters 3 --timeout 20
once "bench allreduce flags that differ between ranks"
expect 2 "unknown benchmark 'foo'" "$DTRAIN" bench foo
expect 2 "name a benchmark" "$DTRAIN" bench
expect 2 "benchmark name (allreduce, gemm, step, data, reducer), not '-b'" "$DTRAIN" bench -b 8
expect 2 "needs a value" "$DTRAIN" bench allreduce -e
expect 2 "unexpected argument 'extra'" "$DTRAIN" bench allreduce extra
expect 2 "unknown command 'bogus'; the commands are train, eval, bench" "$DTRAIN" bogus

# --- bench gemm: every size and type gets a row; the CPU fp32 results are checked against fp64
# and must pass; without a usable GPU the GPU columns say why they are empty.
"$DTRAIN" bench gemm --n 128,300 --dtype fp32,tf32,bf16,fp16 --iters 3 >"$tmp/g" 2>&1
rc=$?
rows=$(grep -cE '^ +(128|300) +(fp32|tf32|bf16|fp16) ' "$tmp/g")
if [ $rc -eq 0 ] && [ "$rows" -eq 8 ] && [ "$(grep -cE ' fp32 .* ok$' "$tmp/g")" -eq 2 ] && ! grep -q WRONG "$tmp/g"; then
    ok "bench gemm: 8 rows, CPU fp32 checked ok: $(grep -E '^ +300 +fp32' "$tmp/g" | tr -s ' ')"
else
    bad "bench gemm (exit $rc, $rows rows)"; cat "$tmp/g"
fi
# Each row says how many products it timed and, on the CPU, its fastest and slowest: the mean
# alone hid whether all were slow or a few descheduled (columns: n type CPU-ms CPU-TFLOP/s GPU-ms
# GPU-TFLOP/s GPU/CPU reps min-max reps err check).
grep -q '^# ms: the mean of one product over reps timed ones after 1 warm-up (--iters 3' "$tmp/g" &&
    grep -E '^ +300 +fp32 ' "$tmp/g" | awk '{ split($9, m, "-"); exit !(NF == 12 && $8 == 3 && m[1] + 0 > 0 &&
        m[1] <= $3 + 0.01 && $3 <= m[2] + 0.01) }' &&
    ok "bench gemm: reps and the CPU's min-max around its mean: $(grep -E '^ +300 +fp32' "$tmp/g" | tr -s ' ')" ||
    { bad "bench gemm: no reps or CPU min-max, or the mean outside it"; cat "$tmp/g"; }
if grep -q "^# GPU: none\|^# GPU columns skipped" "$tmp/g"; then
    ok "bench gemm without a GPU says so: $(grep '^# GPU' "$tmp/g" | head -1)"
elif grep -qE ' bf16 .* ok$' "$tmp/g"; then
    ok "bench gemm ran on the GPU: $(grep '^# GPU' "$tmp/g" | head -1)"
else
    bad "bench gemm: neither a GPU result nor a reason"; cat "$tmp/g"
fi
# At 2 ranks a row is the slowest rank's, not rank 0's: rank 1's products are 300 ms slower (a
# test hook), so its mean and the row's slowest product must show them; the header says so.
DTRAIN_TEST_GEMM_SLOW=1:300 "$MPIRUN" -np 2 "$DTRAIN" bench gemm --n 64 --dtype fp32 --no-gpu --iters 2 \
    --blas-threads 1 >"$tmp/g" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q "^# all 2 ranks run every product, .* a row is the slowest rank's" "$tmp/g" &&
    grep -E '^ +64 +fp32 ' "$tmp/g" | awk '{ split($9, m, "-"); exit !(NF == 12 && $3 >= 300 && m[2] >= 300 &&
        m[1] < 300) }' &&
    ok "bench gemm at 2 ranks: the slowest rank's row: $(grep -E '^ +64 +fp32' "$tmp/g" | tr -s ' ')" ||
    { bad "bench gemm at 2 ranks: rank 1's slow products not in the row (exit $rc)"; cat "$tmp/g"; }
# A GPU cell left empty says why under its row: a size that does not fit is not run (exit 0), a
# CUDA or cuBLAS error fails the command (a test hook stands in for the GPU's answers).
DTRAIN_TEST_GEMM_GPU=nomem "$DTRAIN" bench gemm --n 64 --dtype fp32,bf16 --iters 2 >"$tmp/g" 2>&1
rc=$?
[ $rc -eq 0 ] && [ "$(grep -A1 -E '^ +64 +(fp32|bf16) ' "$tmp/g" | grep -c '^#   GPU not run: 3 matrices of 64 x 64')" -eq 2 ] &&
    ok "bench gemm: a size the GPU has no memory for says so under each row, exit 0" ||
    { bad "bench gemm, no memory (exit $rc)"; cat "$tmp/g"; }
expect 1 "1 GPU product(s) failed with a CUDA or cuBLAS error" env DTRAIN_TEST_GEMM_GPU=error "$DTRAIN" bench gemm \
    --n 64 --dtype bf16 --iters 2
grep -A1 -E '^ +64 +bf16 ' "$tmp/out" | grep -q '^#   GPU FAILED: cublasGemmEx' &&
    ok "bench gemm: the failed call is named under its row" || { bad "bench gemm: no FAILED line"; cat "$tmp/out"; }
# Ranks given other flags are refused at the start: another --n on rank 1 merged its times of
# n 96 into rank 0's row of n 128 (the slowest rank's) without a word.
expect 2 "rank 1 was given '--n 64,96' where rank 0 was given '--n 64,128'" timeout 60 "$MPIRUN" \
    -np 1 "$DTRAIN" bench gemm --n 64,128 --no-gpu --iters 1 --timeout 20 : \
    -np 1 "$DTRAIN" bench gemm --n 64,96 --no-gpu --iters 1 --timeout 20
once "bench gemm flags that differ between ranks"
expect 2 "--n (a comma-separated list of sizes) '0'" "$DTRAIN" bench gemm --n 0
expect 2 "--n (a comma-separated list of sizes) 'x'" "$DTRAIN" bench gemm --n 64,x
expect 2 "--dtype 'fp8' is not one of fp32, tf32, bf16, fp16" "$DTRAIN" bench gemm --dtype fp8
expect 2 "unexpected argument 'more'" "$DTRAIN" bench gemm more
# --no-gpu: the CPU's fp32 row alone, not rows of dashes for the GPU's types (default --dtype).
"$DTRAIN" bench gemm --n 64 --no-gpu --iters 1 >"$tmp/g" 2>&1 && grep -qE '^ +64 +fp32 .* ok$' "$tmp/g" &&
    ! grep -qE '^ +64 +(tf32|bf16|fp16) ' "$tmp/g" && ok "bench gemm --no-gpu: the fp32 row alone" ||
    { bad "bench gemm --no-gpu: rows of the GPU's types"; cat "$tmp/g"; }
expect 2 "--no-cpu with --no-gpu leaves nothing to measure" "$DTRAIN" bench gemm --n 64 --no-cpu --no-gpu
expect 2 "--no-gpu with --dtype of tf32, bf16, fp16 alone leaves nothing to measure" "$DTRAIN" bench gemm --n 64 \
    --dtype bf16,tf32 --no-gpu
expect 0 "ok" "$DTRAIN" bench gemm --n 1 --no-gpu --iters 1 --warmup 0
# Matrices past the host budget (a faked MemAvailable of 64 MiB) are refused before any is made:
# malloc would overcommit them, and the product swap or be killed instead of being timed.
printf 'MemTotal: 1048576 kB\nMemAvailable: 65536 kB\n' >"$tmp/meminfo"
expect 2 "--n 4096 needs 192.0 MiB of host memory for its matrices, more than this rank's 64.0 MiB" \
    env DTRAIN_TEST_MEMINFO="$tmp/meminfo" "$DTRAIN" bench gemm --n 256,4096 --dtype fp32 --iters 1 --max-seconds 0.01
grep -q "use --n 2304 or less" "$tmp/out" && ! grep -qE '^ +256 +fp32' "$tmp/out" &&
    ok "bench gemm: the refusal names the n that fits, and comes before any row" ||
    { bad "bench gemm: no n that fits, or rows before the refusal"; cat "$tmp/out"; }
# Just past the budget is refused as well, and the n offered may fill it exactly: 512 x 512 x 12
# bytes (A, B and C in fp32) is the 3 MiB here.
printf 'MemTotal: 1048576 kB\nMemAvailable: 3072 kB\n' >"$tmp/meminfo3"
expect 2 "--n 600 needs 4.1 MiB of host memory for its matrices, more than this rank's 3.0 MiB of MemAvailable 3.0 MiB: use --n 512 or less" \
    env DTRAIN_TEST_MEMINFO="$tmp/meminfo3" "$DTRAIN" bench gemm --n 600 --dtype fp32
# At 3 ranks of one node each rank's share is alike: said once, and each rank ends by itself.
expect 2 "more than this rank's 21.3 MiB of MemAvailable 64.0 MiB, shared by 3 ranks: use --n 1280 or less (the same on all 3 ranks)" \
    env DTRAIN_TEST_MEMINFO="$tmp/meminfo" "$MPIRUN" -np 3 -x DTRAIN_TEST_MEMINFO "$DTRAIN" bench gemm --n 4096 --dtype fp32
[ "$(grep -c "dtrain: error" "$tmp/out")" -eq 1 ] && ! grep -q "MPI_ABORT" "$tmp/out" &&
    ok "bench gemm's refusal at 3 ranks: one line, no abort" || { bad "bench gemm's refusal at 3 ranks"; cat "$tmp/out"; }

# --- bench step: one row per precision, side by side, with samples/s and the memory summary;
# 16-bit rows hold fewer gradient and activation bytes than fp32's.
"$MPIRUN" -np 2 "$DTRAIN" bench step --model cnn --batch 8 --steps 3 --warmup 1 --precision fp32,bf16,fp16 --blas-threads 1 >"$tmp/s" 2>&1
rc=$?
rows=$(grep -cE '^  (fp32|bf16|fp16) +[0-9.]+ +[0-9.]+ ' "$tmp/s")
g32=$(awk '$1 == "fp32" { print $7 }' "$tmp/s") g16=$(awk '$1 == "bf16" { print $7 }' "$tmp/s")
a32=$(awk '$1 == "fp32" { print $9 }' "$tmp/s") a16=$(awk '$1 == "bf16" { print $9 }' "$tmp/s")
if [ $rc -eq 0 ] && [ "$rows" -eq 3 ] && grep -q "2 ranks x batch 8" "$tmp/s" &&
   awk -v a="$g32" -v b="$g16" -v c="$a32" -v d="$a16" 'BEGIN { exit !(b < a && d < c) }'; then
    ok "bench step: fp32/bf16/fp16 rows, 16-bit gradients $g16 < $g32 MiB, activations $a16 < $a32 MiB"
else
    bad "bench step (exit $rc, $rows rows)"; cat "$tmp/s"
fi
# Ranks given other flags are refused at the start: another --batch on rank 1 was timed under
# rank 0's "2 ranks x batch 8" without a word (--loader-threads, the rank's own, may differ).
expect 2 "rank 1 was given '--batch 4' where rank 0 was given '--batch 8'" timeout 60 "$MPIRUN" \
    -np 1 "$DTRAIN" bench step --model mlp --batch 8 --steps 1 --warmup 0 --precision fp32 --timeout 20 : \
    -np 1 "$DTRAIN" bench step --model mlp --batch 4 --steps 1 --warmup 0 --precision fp32 --timeout 20 --loader-threads 2
once "bench step flags that differ between ranks"
# The spread: each row ends with its fastest and slowest window's step time, around the mean.
spread=$(awk '$1 ~ /^(fp32|bf16|fp16)$/ { n++; if (NF == 18 && $17 > 0 && $17 <= $3 + 0.01 && $18 >= $3 - 0.01) k++ }
              END { print k + 0 "/" n + 0 }' "$tmp/s")
[ "$spread" = 3/3 ] && ok "bench step: every row's step ms lies within its fastest and slowest window's" ||
    { bad "bench step: min/max ms columns ($spread rows hold)"; cat "$tmp/s"; }
# On the CPU the rate is OpenBLAS's threads': the header records them and the cores.
grep -q "^# cpu: fp16 and bf16 are stored in 16 bits but computed in fp32" "$tmp/s" &&
    ok "bench step: the CPU's 16-bit rows are said to be computed in fp32" || { bad "bench step: no note on the CPU's 16-bit rows"; cat "$tmp/s"; }
grep -qE "^# dtrain bench step: .*, device cpu \(OpenBLAS, 1 thread on cores [0-9]" "$tmp/s" &&
    ok "bench step: the header records --blas-threads 1 and the cores" || { bad "bench step: no BLAS threads in the header"; cat "$tmp/s"; }
# --clip-grad-norm times the clipped step: a limit below every norm clips every timed step.
"$MPIRUN" -np 2 "$DTRAIN" bench step --model mlp --batch 8 --steps 3 --warmup 1 --precision fp32,bf16 --clip-grad-norm 1e-6 --blas-threads 1 >"$tmp/s" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q "SGD momentum 0.9, clipping at norm 1e-06, device" "$tmp/s" &&
   [ "$(grep -cE '^    clipping: 3 of 3 stepped timed steps over norm 1e-06 \(norms [0-9.e+-]+ to [0-9.e+-]+ before clipping\)$' "$tmp/s")" -eq 2 ]; then
    ok "bench step --clip-grad-norm: every timed step clipped, in both precisions"
else
    bad "bench step --clip-grad-norm (exit $rc)"; cat "$tmp/s"
fi
expect 2 "--clip-grad-norm (the largest global gradient norm, 0 = off, inf = the norm reported, not clipped) '-1'" \
    "$DTRAIN" bench step --clip-grad-norm -1
# --step-overlap: a row per setting, side by side, the 14th column the setting and
# what it came to: auto leaves the mlp (1.9M parameters) alone, and fp16's loss scaler keeps the step after
# backward.
"$DTRAIN" bench step --model mlp --batch 8 --steps 2 --warmup 1 --precision fp32,fp16 --step-overlap 1,0,auto >"$tmp/s" 2>&1
got=$(awk '$1 == "fp32" || $1 == "fp16" { printf "%s ", $14 }' "$tmp/s")
if [ "$got" = "1>on 0>off auto>off 1>off 0>off auto>off " ] && grep -q " overlap  *graphs  *data  *min ms  *max ms$" "$tmp/s"; then
    ok "bench step --step-overlap 1,0,auto: the rows side by side, each with what its setting came to: $got"
else
    bad "bench step --step-overlap"; cat "$tmp/s"
fi
expect 2 "--step-overlap 'x' is not one of auto, 1, 0" "$DTRAIN" bench step --step-overlap 1,x
# --graphs: the 15th column; the CPU records nothing, so every setting comes to off (and a step
# overlap list times graphs lists gives a row for each pair).
"$DTRAIN" bench step --model mlp --batch 8 --steps 2 --warmup 1 --precision fp32 --step-overlap 0,1 --graphs 1,0,auto >"$tmp/s" 2>&1
got=$(awk '$1 == "fp32" { printf "%s/%s ", $14, $15 }' "$tmp/s")
if [ "$got" = "0>off/1>off 0>off/0>off 0>off/auto>off 1>on/1>off 1>on/0>off 1>on/auto>off " ]; then
    ok "bench step --graphs 1,0,auto with --step-overlap 0,1: a row for each pair: $got"
else
    bad "bench step --graphs ($got)"; cat "$tmp/s"
fi
expect 2 "--graphs 'on' is not one of auto, 1, 0" "$DTRAIN" bench step --graphs on
# A model that cannot be built: refused before the header, so no table begins without rows.
expect 2 "--model: model 'fc:xx': layer 1 'fc:xx' must be fc:OUT" "$DTRAIN" bench step --model fc:xx --input 8
! grep -q "^# dtrain bench step" "$tmp/out" && ok "bench step --model fc:xx: no header before the refusal" ||
    { bad "bench step --model fc:xx printed its header first"; cat "$tmp/out"; }
# At 2 ranks every rank refuses the same flags: one line for both, and each ends by itself.
expect 2 "layer 1 'fc:xx' must be fc:OUT" "$MPIRUN" -np 2 "$DTRAIN" bench step --model fc:xx --input 8
[ "$(grep -c "dtrain: error" "$tmp/out")" -eq 1 ] && grep -q "(the same on all 2 ranks)$" "$tmp/out" &&
    ! grep -q "MPI_ABORT" "$tmp/out" && ok "bench step --model fc:xx at 2 ranks: one line, no MPI_Abort" ||
    { bad "bench step --model fc:xx at 2 ranks"; cat "$tmp/out"; }
expect 2 "--graphs '2' is not one of auto, 1, 0" "$DTRAIN" train --graphs 2
# --synthetic-on: the 16th column, where the batches were made. On the CPU auto makes them on the
# host and device is refused naming why; with the CPU standing in for a device (a test hook), auto
# makes them there, and every row trains on the same data.
"$DTRAIN" bench step --model mlp --batch 8 --steps 2 --warmup 1 --precision fp32 --synthetic-on host,auto >"$tmp/s" 2>&1
got=$(awk '$1 == "fp32" { printf "%s ", $16 }' "$tmp/s")
[ "$got" = "host auto>host " ] && ok "bench step --synthetic-on host,auto on the CPU: $got" ||
    { bad "bench step --synthetic-on on the CPU ($got)"; cat "$tmp/s"; }
DTRAIN_TEST_SYNTH_DEVICE=1 "$DTRAIN" bench step --model mlp --batch 8 --steps 2 --warmup 1 --precision fp32 \
    --synthetic-on host,auto,device >"$tmp/s" 2>&1
got=$(awk '$1 == "fp32" { printf "%s ", $16 }' "$tmp/s")
[ "$got" = "host auto>dev device " ] && ok "bench step --synthetic-on host,auto,device on a stand-in device: $got" ||
    { bad "bench step --synthetic-on on a stand-in device ($got)"; cat "$tmp/s"; }
expect 2 "synthetic batches cannot be made on the device: the run is placed on the CPU" \
    "$DTRAIN" bench step --steps 1 --warmup 0 --precision fp32 --synthetic-on device
expect 2 "--synthetic-on 'gpu' is not one of auto, host, device" "$DTRAIN" bench step --synthetic-on host,gpu
expect 2 "--synthetic-on 'x' is not one of auto, host, device" "$DTRAIN" train --synthetic-on x
expect 2 "synthetic batches cannot be made on the device: the run is placed on the CPU" \
    "$DTRAIN" train --steps 1 --synthetic-on device
# At several ranks every rank of a CPU job meets it alike: said once, before the header or the
# first step, and each rank ends by itself, with no abort's banner.
for cmd in "bench step --steps 1 --warmup 0 --precision fp32 --synthetic-on host,device" "train --steps 1 --synthetic-on device"; do
    expect 2 "the run is placed on the CPU (make them on the host: --synthetic-on host or auto) (the same on all 3 ranks)" \
        "$MPIRUN" -np 3 "$DTRAIN" $cmd
    [ "$(grep -c "dtrain: error" "$tmp/out")" -eq 1 ] && ! grep -q "MPI_ABORT" "$tmp/out" && ! grep -q "^# precision" "$tmp/out" &&
        ok "$cmd at 3 ranks: one line, no abort" || { bad "$cmd at 3 ranks"; cat "$tmp/out"; }
done
# --defer-verdict 0: every fp16 step waits for its verdict (the header says so); 1, the default,
# skips no more steps than waiting does (the CPU's fp16 at the default scale skips none).
for d in 1 0; do
    "$DTRAIN" bench step --model mlp --batch 8 --steps 3 --warmup 1 --precision fp16 --defer-verdict $d >"$tmp/v$d" 2>&1
done
if ! grep -q "waiting for its verdict" "$tmp/v1" && grep -q "each fp16 step waiting for its verdict" "$tmp/v0" &&
    [ "$(awk '$1 == "fp16" { print $11 }' "$tmp/v1")" = "$(awk '$1 == "fp16" { print $11 }' "$tmp/v0")" ]; then
    ok "bench step --defer-verdict 1 and 0: the same skipped count, the header names waiting"
else
    bad "bench step --defer-verdict"; cat "$tmp/v1" "$tmp/v0"
fi
# The skipped column counts the timed steps alone: at batch 1 this model's second fp16 step
# overflows the initial scale; it is a timed step at --warmup 0 (1 skipped), a warm-up one at
# --warmup 2 (0 skipped, though the scaler skipped 1 over the run), and the profiled steps after
# (one untimed, then the 2 reported) count neither.
skips=""
for w in 0 2; do
    "$DTRAIN" bench step --model fc:256,fc:10 --input 784 --batch 1 --steps 2 --warmup $w --precision fp16 \
        --profile 2 >"$tmp/k$w" 2>&1
    skips="$skips$(awk '$1 == "fp16" { print $11 }' "$tmp/k$w") "
done
if [ "$skips" = "1 0 " ] && grep -q "profile, ms per step over 2 steps" "$tmp/k2"; then
    ok "bench step: skipped counts the timed steps only (--warmup 0: 1, --warmup 2: 0), the profile 2 steps"
else
    bad "bench step skipped column ($skips)"; cat "$tmp/k0" "$tmp/k2"
fi
expect 2 "--defer-verdict (1: queue the next step before the last's verdict, 0: wait) '2' is out of range" \
    "$DTRAIN" bench step --defer-verdict 2
# --fused-relu 0: every relu layer a kernel of its own (the header says so); the rows run either way.
"$DTRAIN" bench step --model cnn --batch 4 --steps 2 --warmup 1 --precision fp32,bf16 --fused-relu 0 >"$tmp/r0" 2>&1
if grep -q "every relu layer a kernel of its own" "$tmp/r0" && [ "$(grep -c '^  \(fp32\|bf16\) ' "$tmp/r0")" = 2 ]; then
    ok "bench step --fused-relu 0: both rows, the header names it"
else
    bad "bench step --fused-relu 0"; cat "$tmp/r0"
fi
expect 2 "--fused-relu (1: relu layers run inside their neighbours, 0: on their own) '2' is out of range" \
    "$DTRAIN" bench step --fused-relu 2
expect 2 "--precision 'fp8' is not one of fp32, fp16, bf16" "$DTRAIN" bench step --precision fp8
expect 2 "--steps '0'" "$DTRAIN" bench step --steps 0
expect 2 "fc:0" "$DTRAIN" bench step --model fc:0 --input 4
# --optim and --zero as given (and --profile 0, the default, said): the header names the optimizer, the
# row's zero column (the 12th) the stage.
expect 0 "AdamW, device cpu" "$DTRAIN" bench step --model fc:10 --input 4 --batch 2 --steps 1 --warmup 0 --precision fp32 \
    --optim adamw --zero 1 --profile 0
expect 0 "zero 1" bash -c '"$0" bench step --model fc:10 --input 4 --batch 2 --steps 1 --warmup 0 --precision fp32 --zero 1 |
    awk "\$1 == \"fp32\" { print \"zero \" \$12 }"' "$DTRAIN"
# bench data: the input pipeline per thread count, on an IDX set this test writes.
python3 "$(dirname "$0")/make_idx.py" "$tmp/idx" 600 10 10 60
"$DTRAIN" bench data --data "$tmp/idx" --threads 0,2 --batch 64 --batches 3 >"$tmp/out" 2>&1
if grep -q "dtrain bench data: $tmp/idx (idx), 600 samples of 1x8x8; batch 64" "$tmp/out" &&
    grep -qE "^ +0 +[0-9.]+ +[0-9.]+ +[0-9.]+ +1.00x +[0-9.]+ +[0-9.]+$" "$tmp/out" &&
    grep -qE "^ +2 +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+x +[0-9.]+ +[0-9.]+$" "$tmp/out" &&
    awk '$1 ~ /^[02]$/ && $6 > 0 && $6 <= $2 * 1.0001 && $7 >= $2 * 0.9999 { n++ } END { exit n != 2 }' "$tmp/out"; then
    ok "bench data: samples/s for 0 and 2 loader threads, each within its slowest and fastest window's"
else
    bad "bench data output"; cat "$tmp/out"
fi
# Figures given as dtrain train takes them: no pass over the data computes them; one per channel.
expect 0 "; normalize standard (figures given)" "$DTRAIN" bench data --data "$tmp/idx" --threads 0 --batch 64 --batches 2 \
    --normalize standard:0.5:0.25
expect 2 "--normalize standard: 2 figures of mean and std for data of 1 channel ($tmp/idx" \
    "$DTRAIN" bench data --data "$tmp/idx" --threads 0 --normalize standard:0.5,0.5:0.25,0.25
expect 2 "needs --data PATH" "$DTRAIN" bench data
# --augment's parts: an empty one or one given twice is a typo to name, not nothing or the last.
expect 2 "--augment 'flip,' has an empty part" "$DTRAIN" bench data --data synthetic --augment flip,
expect 2 "--augment ',' has an empty part" "$DTRAIN" bench data --data synthetic --augment ,
expect 2 "--augment 'crop:4,crop:8' gives crop twice" "$DTRAIN" bench data --data synthetic --augment crop:4,crop:8
expect 2 "--data $tmp/nothing: dataset $tmp/nothing does not exist" "$DTRAIN" bench data --data "$tmp/nothing"
# --input by the model's rules: sscanf's "%dx%dx%d" took trailing text and wrapped 2^32 + 3 to 3.
expect 2 "--input: input shape '3x8x8junk' is not N (features) or CxHxW" \
    "$DTRAIN" bench data --data synthetic --input 3x8x8junk
expect 2 "input shape '4294967299x8x8': every size must be from 1 to 268435456" \
    "$DTRAIN" bench data --data synthetic --input 4294967299x8x8
expect 2 "--input '784' is one size (features); bench data needs CxHxW" "$DTRAIN" bench data --data synthetic --input 784
# A shape the data does not have would be measured as the data's own, without a word.
expect 2 "--input 3x32x32: $tmp/idx (idx) holds samples of 1x8x8, which --input does not change" \
    "$DTRAIN" bench data --data "$tmp/idx" --input 3x32x32 --threads 0 --batches 1
expect 0 "600 samples of 1x8x8" "$DTRAIN" bench data --data "$tmp/idx" --input 1x8x8 --threads 0 --batch 64 --batches 1
# --normalize standard:M,..:S,..: one figure per channel, 1 to 64 of each, none empty or past 127 characters.
expect 2 "--normalize standard: 1 figure of mean and std for data of 3 channels (synthetic" \
    "$DTRAIN" bench data --data synthetic --normalize standard:0.5:0.25
expect 2 "--normalize standard: 64 figures of mean and std for data of 1 channel" "$DTRAIN" bench data --data "$tmp/idx" \
    --normalize "standard:$(printf '0.5,%.0s' {1..63})0.5:$(printf '0.25,%.0s' {1..63})0.25"
expect 2 "more than 64 mean figures" "$DTRAIN" bench data --data "$tmp/idx" --normalize "standard:$(printf '0.5,%.0s' {1..65})0.5:0.25"
expect 2 "the mean list '0.5,' has an empty figure" "$DTRAIN" bench data --data "$tmp/idx" --normalize standard:0.5,:0.25
expect 2 "has an overlong figure" "$DTRAIN" bench data --data "$tmp/idx" --normalize "standard:0.$(printf '5%.0s' {1..126}):0.25"
# One process measures the pipeline: two under mpirun would each time loaders on the other's cores
# and print two tables; refused (by each rank: mpirun may kill the other once one exits).
expect 2 "dtrain bench data runs in one process, and OMPI_COMM_WORLD_SIZE says 2 were started: each would time its loaders" \
    "$MPIRUN" -np 2 "$DTRAIN" bench data --data synthetic --threads 1 --batch 64 --batches 2
! grep -q "samples/s" "$tmp/out" && ok "bench data under mpirun -np 2: refused, no table" || { bad "bench data under mpirun -np 2"; cat "$tmp/out"; }
# So are the other one-process commands (a line of a batch script under srun): data convert's
# copies raced for one file (one wrote it, the other failed on "exists"), the others repeated
# their whole work and output.
expect 2 "dtrain data convert runs in one process, and OMPI_COMM_WORLD_SIZE says 2 were started: each would write the same" \
    "$MPIRUN" -np 2 "$DTRAIN" data convert "$tmp/idx" "$tmp/one.dts"
[ ! -e "$tmp/one.dts" ] && ok "data convert under mpirun -np 2: nothing written" || bad "data convert under mpirun -np 2 wrote $tmp/one.dts"
expect 2 "dtrain data info runs in one process" "$MPIRUN" -np 2 "$DTRAIN" data info "$tmp/idx"
expect 2 "dtrain model-perf runs in one process" "$MPIRUN" -np 2 "$DTRAIN" model-perf --synthetic m:10:5:3
expect 2 "dtrain plot runs in one process" "$MPIRUN" -np 2 "$DTRAIN" plot "$tmp/none.jsonl" -o "$tmp/none.png"
expect 0 "600 samples" "$MPIRUN" -np 1 "$DTRAIN" data info "$tmp/idx"
# The built-in synthetic data (what sizes the loader threads a GPU step needs), 3x32x32 by default.
"$DTRAIN" bench data --data synthetic --threads 1 --batch 64 --batches 2 >"$tmp/out" 2>&1
if grep -q "dtrain bench data: synthetic (synthetic), 60000 samples of 3x32x32; batch 64, 2 timed batches after 2 warmup (and the first thread count once untimed before the rows); normalize none" "$tmp/out" &&
    grep -qE "^ +1 +[0-9.]+ +[0-9.]+ +[0-9.]+ +1.00x +[0-9.]+ +[0-9.]+$" "$tmp/out"; then
    ok "bench data --data synthetic: samples/s of the built-in data"
else
    bad "bench data --data synthetic output"; cat "$tmp/out"
fi

# --- bench reducer: a row per variant (A reducer, B blocking allreduce, C compute, D allreduce,
# E reducer without overlap), the summary with A/B, D/B and the hidden fraction, A/E, and the
# reducer's gradients equal to the others' bit for bit (at 2 ranks); with a 16-bit wire too. A few seconds.
reducer_run() { # name, then flags
    local name=$1; shift
    "$MPIRUN" -np 2 "$DTRAIN" bench reducer --layers 3 --width 96 --batch 4 --steps 3 --warmup 1 "$@" >"$tmp/r" 2>&1
    local rc=$? rows
    rows=$(grep -cE '^  [ABCDE] .* +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3} *$' "$tmp/r")
    if [ $rc -eq 0 ] && [ "$rows" -eq 5 ] && grep -qE '^overlap alone: A/E [0-9.]+, hidden \(E-A\)/\(E-C\) [0-9.]+.*; B/E [0-9.]+ ' "$tmp/r" &&
       grep -qE '^summary: A/B [0-9.]+, D/B [0-9.]+, hidden \(B-A\)/D [0-9.]+.*, A and B gradients of the last step equal bit for bit$' "$tmp/r" &&
       grep -q "^# dtrain bench reducer: 2 ranks, 3 fc layers of 96x96 (+bias), batch 4 per rank, 27936 parameters" "$tmp/r"; then
        ok "bench reducer $name: 5 rows, $(grep '^summary' "$tmp/r")"
    else
        bad "bench reducer $name (exit $rc, $rows rows)"; sed 's/^/    /' "$tmp/r"
    fi
}
reducer_run "np2 defaults caps"
grep -q '^# A, E: 1 bucket (caps 25 / first 1 MiB), wire fp32; B, D: dt_allreduce' "$tmp/r" && ok "bench reducer: header names A's plan" ||
    { bad "bench reducer: no plan line"; sed 's/^/    /' "$tmp/r"; }
reducer_run "np2 one bucket per layer, bf16 wire" --bucket-mb 0.02 --first-bucket-mb 0.02 --wire bf16
grep -q '^# A, E: 3 buckets (caps 0.02 / first 0.02 MiB), wire bf16; B, D: a one-bucket reducer' "$tmp/r" &&
    ok "bench reducer --wire bf16: 3 buckets, B and D on a one-bucket reducer" || { bad "bench reducer bf16 plan"; sed 's/^/    /' "$tmp/r"; }
# From 4 ranks Open MPI's MPI_Allreduce (B) may add in another order than the engine (A, E): B
# within 1e-5 of the largest gradient passes, said as such (it failed the run as a broken reducer).
"$MPIRUN" -np 4 "$DTRAIN" bench reducer --layers 3 --width 96 --batch 4 --steps 2 --warmup 0 >"$tmp/r" 2>&1 &&
    grep -qE '^summary: .*, A and B gradients of the last step (equal bit for bit|within 1e-5: [0-9]+ element\(s\) differ, by at most [0-9.e+-]+ of the largest \(MPI adds in another order\))$' "$tmp/r" &&
    ok "bench reducer np4: $(sed -n 's/^summary: .*, A and B gradients/A and B gradients/p' "$tmp/r")" ||
    { bad "bench reducer np4"; sed 's/^/    /' "$tmp/r"; }
"$DTRAIN" bench reducer --layers 2 --width 32 --batch 2 --steps 2 --warmup 0 >"$tmp/r" 2>&1 &&
    grep -q "^note: 1 rank: nothing is communicated" "$tmp/r" && ok "bench reducer np1: runs, says nothing is communicated" ||
    { bad "bench reducer np1"; sed 's/^/    /' "$tmp/r"; }
# A net past the memory limit fails on every rank alike: said once, each rank ending by itself,
# with no abort's banner. ulimit -v inside each rank (none under AddressSanitizer, whose shadow
# memory needs the address space); the allocations fail before any page is touched.
if [ -z "${ASAN_OPTIONS:-}" ]; then
    expect 1 "out of memory for 251719680 parameters (x 5 buffers): lower --layers or --width (out of memory) (the same on all 2 ranks)" \
        "$MPIRUN" -np 2 bash -c "ulimit -S -v 4000000 && exec $DTRAIN bench reducer --layers 15 --width 4096 --steps 1 --warmup 0"
    [ "$(grep -c "dtrain: error" "$tmp/out")" -eq 1 ] && ! grep -q "MPI_ABORT" "$tmp/out" &&
        ok "bench reducer out of memory at 2 ranks: one line, no MPI_Abort" || { bad "bench reducer out of memory at 2 ranks"; cat "$tmp/out"; }
fi
# Ranks that give the reducer other caps: every rank words the same verdict, said once with no
# abort (it was said by every rank, then MPI_Abort).
expect 2 "rank 1 gave bucket_mb 25 where rank 0 gave 0.02 (and other ranks differ too)" "$MPIRUN" \
    -np 1 "$DTRAIN" bench reducer --layers 2 --width 32 --batch 2 --steps 2 --warmup 0 --bucket-mb 0.02 \
    --first-bucket-mb 0.02 : -np 2 "$DTRAIN" bench reducer --layers 2 --width 32 --batch 2 --steps 2 --warmup 0
[ "$(grep -c "dtrain: error" "$tmp/out")" -eq 1 ] && grep -q "(the same on all 3 ranks)$" "$tmp/out" &&
    ! grep -q "MPI_ABORT" "$tmp/out" && ok "bench reducer, other caps per rank: one line, no MPI_Abort" ||
    { bad "bench reducer, other caps per rank"; cat "$tmp/out"; }
# Other flags the reducer does not compare are refused at the start: another --steps left rank 0
# waiting in a round rank 1 never joined until the watchdog's deadline.
expect 2 "rank 1 was given '--steps 3' where rank 0 was given '--steps 2'" timeout 60 "$MPIRUN" \
    -np 1 "$DTRAIN" bench reducer --layers 2 --width 32 --batch 2 --steps 2 --warmup 0 --timeout 20 : \
    -np 1 "$DTRAIN" bench reducer --layers 2 --width 32 --batch 2 --steps 3 --warmup 0 --timeout 20
once "bench reducer flags that differ between ranks"
expect 2 "--layers '0' is out of range" "$DTRAIN" bench reducer --layers 0
expect 2 "--width '1' is out of range" "$DTRAIN" bench reducer --width 1
expect 2 "--batch 'x' is not" "$DTRAIN" bench reducer --batch x
expect 2 "--bucket-mb '-1' is out of range" "$DTRAIN" bench reducer --bucket-mb -1
expect 2 "--wire 'fp8' is not one of fp32, fp16, bf16" "$DTRAIN" bench reducer --wire fp8
expect 2 "--layers 4096 x --width 65536 is 17592454479872 parameters, more than 2^28" "$DTRAIN" bench reducer --layers 4096 --width 65536
expect 2 "measures host-memory buffers only" "$DTRAIN" bench reducer --device cuda
expect 2 "did you mean --layers?" "$DTRAIN" bench reducer --laeyrs 3
finish
