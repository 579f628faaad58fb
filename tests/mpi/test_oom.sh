#!/usr/bin/env bash
# The out-of-memory summary of `dtrain train` and `dtrain bench step` (launch/oom_report.c), on the
# CPU backend acting as a small device (DTRAIN_TEST_MEM_LIMIT): a run that does not fit ends
# non-zero within the time limit, prints the plan's kinds, the biggest buffers, the device's
# memory and a fix; the --batch the fix names then trains under the same limit. A model that does
# not fit even at batch 1 gets the other advice. Under `ulimit -v` (6.) the same, and OpenBLAS's
# buffer fails with a message instead of a silent spin, with more than one BLAS thread too (7.).
here=$(dirname "$0"); source "$here/lib.sh"
DTRAIN=$1 MPIRUN=$2
LIMIT=67108864 # 64 MiB per rank
export OPENBLAS_NUM_THREADS=1

# run LIMIT ARGS...: 2 ranks under the limit, output in $tmp/out, exit code in $rc.
run() {
    local limit=$1
    shift
    DTRAIN_TEST_MEM_LIMIT=$limit timeout 120 "$MPIRUN" -np 2 -x DTRAIN_TEST_MEM_LIMIT "$DTRAIN" "$@" >"$tmp/out" 2>&1
    rc=$?
}

# says NAME 'text'...: every text is in $tmp/out.
says() {
    local name=$1 text
    shift
    for text in "$@"; do
        grep -qF -- "$text" "$tmp/out" || { bad "$name: no '$text'"; sed 's/^/    /' "$tmp/out" | tail -40; return 1; }
    done
    ok "$name says: $*"
}

# oom NAME ARGS...: the run fails (not a timeout) with the summary's lines.
oom() {
    local name=$1
    shift
    run $LIMIT "$@"
    if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]; then
        bad "$name: exit $rc, wanted a failure that ends the job"; sed 's/^/    /' "$tmp/out" | tail -20; return 1
    fi
    says "$name (exit $rc)" "dtrain: out of memory on rank" "what this rank needs at batch" "peak while setting up" \
        "the biggest buffers:" "device: 64.0 MiB free of 64.0 MiB (67108864 of 67108864 bytes)" "  fix: "
}

# fits NAME ARGS...: the run under the same limit exits 0.
fits() {
    local name=$1
    shift
    run $LIMIT "$@"
    [ "$rc" -eq 0 ] && ok "$name: '$*' exits 0 under the limit" ||
        { bad "$name: '$*' exited $rc under the limit"; sed 's/^/    /' "$tmp/out" | tail -20; }
}

# 1. train: the activations of batch 4096 do not fit; the batch the fix names does.
cnn=(--model cnn --input 3x32x32)
if oom "train batch 4096" train "${cnn[@]}" --batch 4096 --steps 2 &&
   says "train batch 4096" "while making the model: dtrain train --model cnn --input 3x32x32 --batch 4096" \
        "layer 0 (conv:32:3:1:1) output" "activations                    2.13 GiB (2283962368 bytes)"; then
    n=$(sed -n 's/^  fix: batch \([0-9]*\) fits .*: use --batch \([0-9]*\)$/\2/p' "$tmp/out" | head -1)
    accum=$(sed -n 's/^ *or \(--batch [0-9]* --accum-steps [0-9]*\) for .*/\1/p' "$tmp/out" | head -1)
    if [ -n "$n" ] && [ "$n" -ge 1 ] && [ "$n" -lt 4096 ]; then
        ok "the fix names --batch $n"
        fits "train --batch $n" train "${cnn[@]}" --batch "$n" --steps 2
        # The fix names the largest batch whose plan fits: twice it does not.
        run $LIMIT train "${cnn[@]}" --batch $((2 * n)) --steps 2
        if [ "$rc" -ne 0 ]; then
            says "train --batch $((2 * n))" "fix: batch $n fits" # says counts its own failure
        else
            bad "train --batch $((2 * n)) exited 0 under the limit: the fix's batch $n is not the largest"
        fi
    else
        bad "no --batch in the fix: '$n'"
    fi
    if [ -n "$accum" ]; then
        # shellcheck disable=SC2086 # the flags as the fix printed them
        fits "train $accum" train "${cnn[@]}" $accum --steps 1
    else
        bad "no --accum-steps advice in the fix"
    fi
fi

# 2. A 16-bit model whose set-up runs out after dt_model_create fitted (the 16-bit scratch of a
# wide fc layer outgrows the fp32 pool): the summary names dt_model_set_precision's step.
run 40000000 train --model fc:2048,relu,fc:10 --input 2048 --batch 64 --precision bf16 --steps 1
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] &&
    says "train bf16 (exit $rc)" "while setting the precision: dtrain train --model fc:2048,relu,fc:10 --input 2048" \
        "16-bit conversion scratch" "fix: even batch 1 needs" ||
    { bad "train bf16 under 40000000 bytes: exit $rc"; sed 's/^/    /' "$tmp/out" | tail -20; }

# 3. Even batch 1 does not fit: 12.6 M parameters, their gradients and momentum are 144 MiB.
oom "train fc:4096" train --model fc:4096,relu,fc:10 --input 3x32x32 --batch 64 --steps 1 &&
    says "train fc:4096" "fix: even batch 1 needs 144.6 MiB at its peak, more than the 64.0 MiB free" \
        "--precision bf16 does not help" "More ranks won't help: data parallel" "parameters (fp32)"
grep -q 'use --batch' "$tmp/out" && bad "train fc:4096: a --batch advice for a model that fits at no batch"

# 4. bench step: one batch for every precision it runs.
if oom "bench step batch 4096" bench step "${cnn[@]}" --batch 4096 --precision fp32,bf16 --steps 2 --warmup 0 &&
   says "bench step batch 4096" "dtrain bench step --model cnn --input 3x32x32 --batch 4096 --precision fp32" \
        "the largest batch that fits, by precision: fp32 "; then
    n=$(sed -n 's/^  fix: batch \([0-9]*\) fits .*: use --batch \([0-9]*\)$/\2/p' "$tmp/out" | head -1)
    if [ -n "$n" ]; then
        fits "bench step --batch $n" bench step "${cnn[@]}" --batch "$n" --precision fp32,bf16 --steps 2 --warmup 0
    else
        bad "bench step: no --batch in the fix"
    fi
fi

# 5. Only rank 1 is short of memory (MPMD: the limit for its process alone): it prints the
# summary, rank 0 does not, and the job still ends, non-zero, instead of rank 0 waiting for it.
timeout 120 "$MPIRUN" -np 1 "$DTRAIN" train "${cnn[@]}" --batch 512 --steps 2 : \
    -np 1 env DTRAIN_TEST_MEM_LIMIT=$LIMIT "$DTRAIN" train "${cnn[@]}" --batch 512 --steps 2 >"$tmp/out" 2>&1
rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && says "one rank short (exit $rc)" "dtrain: out of memory on rank 1 of 2"; then
    grep -qF "out of memory on rank 0" "$tmp/out" && bad "one rank short: rank 0, which fitted, printed a summary"
else
    bad "one rank short: exit $rc, wanted a failure that ends the job"; sed 's/^/    /' "$tmp/out" | tail -20
fi

# 6. Under `ulimit -v` (host memory, one process): OpenBLAS retries a failed map of its 128 MiB GEMM
# buffer for ever, so a limit that leaves the model room but not the buffer used to spin at 100%
# CPU in the first step, silently. Where that lies depends on the build (the CUDA libraries map
# more) and moves with the limit itself (under a tight one Open MPI loads fewer components: the
# address space in use at the probe was 1125680 KiB under 1256000 and 1256752 under 1264000), so it
# is measured, not assumed: the smallest limit that trains is found first, then limits 16 MiB apart
# below it, each of which must end at once (trained, or dtrain's own out-of-memory message), until
# one names OpenBLAS's buffer and the limit. One BLAS thread (--blas-threads 1; dtrain's own count,
# one per core, overrides OPENBLAS_NUM_THREADS): a second thread's buffer is mapped by its worker
# whenever the scheduler first runs it, a race of its own (checked in 7.).
# ulim KIB ARGS...: dtrain ARGS under ulimit -v KIB, output in $tmp/out, exit code in $rc.
ulim() {
    local kib=$1
    shift
    timeout -k 5 30 bash -c 'ulimit -v "$1" && shift && exec "$@"' _ "$kib" "$DTRAIN" "$@" >"$tmp/out" 2>&1
    rc=$?
}
# ended RC: the run failed and was not ended by timeout (a hang).
ended() { [ "$1" -ne 0 ] && [ "$1" -ne 124 ] && [ "$1" -ne 137 ]; }
one=(train --model mlp --blas-threads 1)
lo=200000 hi=4000000 # KiB: MPI_Init alone needs more than lo; hi trains in any build
if [ -n "${ASAN_OPTIONS:-}" ]; then
    # AddressSanitizer reserves terabytes of shadow address space: no ulimit -v leaves it room.
    echo "skip: 6. ulimit -v under AddressSanitizer (its shadow memory needs the address space)"
elif ulim $hi "${one[@]}" --steps 1 --quiet && [ "$rc" -ne 0 ]; then
    bad "ulimit -v $hi: train exited $rc"; sed 's/^/    /' "$tmp/out" | tail -10
else
    hung=""
    while [ $((hi - lo)) -gt 8000 ]; do
        mid=$(((lo + hi) / 2))
        ulim $mid "${one[@]}" --steps 1 --quiet
        [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && hung="$hung $mid"
        [ "$rc" -eq 0 ] && hi=$mid || lo=$mid
    done
    [ -z "$hung" ] || bad "ulimit -v:$hung KiB: train did not end within 30 s (a spin, not an error)"
    v=$hi named="" broke=""
    while [ -z "$named$broke" ] && [ $v -gt $((hi - 12 * 16384)) ]; do
        v=$((v - 16384))
        ulim $v "${one[@]}" --steps 2
        [ "$rc" -eq 0 ] && continue
        if ! ended "$rc" || ! grep -q "out of memory" "$tmp/out"; then
            broke=1; bad "ulimit -v $v ($hi trains): exit $rc, wanted training or an out-of-memory message, not a hang"
            sed 's/^/    /' "$tmp/out" | tail -10
        fi
        grep -qF "out of memory for OpenBLAS's GEMM buffers" "$tmp/out" && named=$v
    done
    if [ -n "$named" ]; then
        says "ulimit -v $v, $hi trains, $(((hi - v) / 1024)) MiB less (exit $rc)" "out of memory for OpenBLAS's GEMM buffers" \
            "under ulimit -v $v KiB (RLIMIT_AS" "OPENBLAS_NUM_THREADS=1"
    elif [ -z "$broke" ]; then
        bad "no limit from $hi KiB down to $v KiB named OpenBLAS's GEMM buffer"
    fi
    # A --batch too big for the limit: the summary names the limit and a batch that fits.
    ulim $hi "${one[@]}" --batch 16384 --dataset-size 16384 --steps 1
    ended "$rc" &&
        says "ulimit -v $hi --batch 16384 (exit $rc)" "dtrain: out of memory on rank 0 of 1" \
            "device: host memory under ulimit -v $hi KiB (RLIMIT_AS)" "  fix: batch " ||
        { bad "ulimit -v $hi --batch 16384: exit $rc"; sed 's/^/    /' "$tmp/out" | tail -10; }
    # A model too big at any batch: the advice is the model or the limit, not the batch.
    ulim $hi train --model fc:8192,relu,fc:10 --input 8192 --blas-threads 1 --steps 1
    if ended "$rc" && says "ulimit -v $hi, 67 M parameters (exit $rc)" "under ulimit -v $hi KiB" \
        "fix: even batch 1 needs" "or a larger ulimit -v"; then
        grep -q 'use --batch' "$tmp/out" && bad "ulimit -v $hi, 67 M parameters: a --batch advice"
    else
        bad "ulimit -v $hi, 67 M parameters: exit $rc"; sed 's/^/    /' "$tmp/out" | tail -10
    fi
    # 7. More than one BLAS thread: each worker OpenBLAS starts maps its buffer when the scheduler
    # first runs it, which on one core was inside the model's first GEMM, after the model took the
    # room: `taskset -c 0`, --blas-threads 2 and a limit up to a buffer above the one-thread minimum
    # spun for ever (at 5 or 6 of the 8 limits 16 MiB apart below; kernels/cpu/blas_reserve.c).
    # Now the workers get their buffers at placement, or the count stays 1 with a warning: every
    # limit ends at once, and with room for the workers' buffers the count is 2.
    # OPENBLAS_NUM_THREADS as users leave it (unset), and 10 s per run (each takes under 1 s) so
    # that a spin fails the check instead of the test's time limit.
    if command -v taskset >/dev/null; then
        hung=""
        for v in $(seq $((hi + 16384)) 16384 $((hi + 8 * 16384))); do
            timeout -k 5 10 env -u OPENBLAS_NUM_THREADS taskset -c 0 bash -c 'ulimit -v "$1" && shift && exec "$@"' \
                _ "$v" "$DTRAIN" train --model mlp --blas-threads 2 --steps 2 >"$tmp/out" 2>&1
            rc=$?
            if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
                hung="$hung $v"
            elif [ "$rc" -ne 0 ] && ! grep -q "out of memory" "$tmp/out"; then
                bad "taskset -c 0, --blas-threads 2, ulimit -v $v: exit $rc without an out-of-memory message"
                sed 's/^/    /' "$tmp/out" | tail -10
            fi
        done
        [ -z "$hung" ] && ok "taskset -c 0, --blas-threads 2: ulimit -v $((hi + 16384))..$v KiB each ended at once" ||
            bad "taskset -c 0, --blas-threads 2, ulimit -v:$hung KiB: train did not end within 10 s (a spin)"
        v=$((hi + 320 * 1024))
        timeout -k 5 10 env -u OPENBLAS_NUM_THREADS taskset -c 0 bash -c 'ulimit -v "$1" && shift && exec "$@"' \
            _ "$v" "$DTRAIN" env --blas-threads 2 >"$tmp/out" 2>&1
        rc=$?
        if [ "$rc" -eq 0 ] && awk '$1 == "0/1" && $10 == 2 { found = 1 } END { exit !found }' "$tmp/out" &&
            ! grep -q "keeping" "$tmp/out"; then
            ok "ulimit -v $v (320 MiB above the one-thread minimum): 2 BLAS threads, no warning"
        else
            bad "ulimit -v $v, --blas-threads 2: exit $rc, wanted 2 BLAS threads"; sed 's/^/    /' "$tmp/out" | tail -10
        fi
    else
        echo "skip: 7. no taskset"
    fi
fi

finish
