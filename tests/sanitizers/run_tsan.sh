#!/usr/bin/env bash
# run_tsan.sh BUILD_DIR - ThreadSanitizer over the code that runs threads: the communication engine
# (collectives/engine.c: its thread against the training thread) through the collectives and the
# reducer at 2 and 3 ranks, the chain allreduce (test and training) at 3, the thread-stack, bucket and trace unit tests, and a 2-rank `dtrain train`
# with overlapped buckets and the background loader, also with --trace (the span recorder filled from
# every thread); the data's threads (an image folder's decoding loader with --augment, the statistics
# pass and the held-out evaluation, checkpoints with their fsync thread, dtrain eval, bench data, and
# the .dts writer and statistics threads of data convert, info and verify); and a stop signal
# handled on a loader thread; two engines at once and a second thread refused a collective; and the
# watchdogs of a rank stopped inside MPI_Allreduce (main thread) and inside the chain (communication
# thread, whose probe shares the board with the main thread), up to the abort guard and MPI_Abort. BUILD_DIR must be configured with -DDTRAIN_CUDA=OFF -DDTRAIN_SANITIZE=thread (`make test-tsan` does it). Fails on any report that
# tests/sanitizers/tsan.supp does not name (third-party code only) and on any failing run.
set -u
build=${1:?usage: run_tsan.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
export TSAN_OPTIONS="suppressions=$here/tsan.supp halt_on_error=0 exitcode=66 second_deadlock_stack=1"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
export OMPI_MCA_rmaps_base_oversubscribe=1 DTRAIN_DEVICE=cpu
logs=$build/tsan-logs; rm -rf "$logs"; mkdir -p "$logs"
fail=0
run() { # run NAME COMMAND...
    local name=$1; shift
    local t0=$SECONDS
    timeout 600 "$@" > "$logs/$name.log" 2>&1
    check "$name" $? 0 "$t0"
}
check() { # check NAME EXIT WANTED_EXIT T0: the run's verdict from its exit and its log's reports
    local name=$1 rc=$2 want=$3 t0=$4 reports
    reports=$(grep -c 'WARNING: ThreadSanitizer' "$logs/$name.log")
    if [ "$rc" -ne "$want" ] || [ "$reports" -ne 0 ]; then
        echo "FAIL $name: exit $rc (wanted $want), $reports ThreadSanitizer reports ($logs/$name.log)"
        grep -A14 'WARNING: ThreadSanitizer' "$logs/$name.log" | head -60
        fail=1
    else
        echo "ok   $name ($((SECONDS - t0)) s, no reports)"
    fi
}
mpirun=(mpirun -x TSAN_OPTIONS)
run unit.thread_stack "$build/tests/test_thread_stack"
run unit.bucket "$build/tests/test_bucket"
run unit.trace "$build/tests/test_trace" # the recorder with two writers at once
for np in 2 3; do
    run coll.np$np "${mpirun[@]}" -np $np "$build/tests/test_coll"
    run reducer.np$np "${mpirun[@]}" -np $np "$build/tests/test_reducer"
done
# The pipelined chain (engine_chain.c): its progress counter read by the thread's loop, its probe
# beside the training thread's answers (engine_expire.c chain_probe).
run engine_chain.np3 "${mpirun[@]}" -np 3 "$build/tests/test_engine_chain"
run train_chain.np3 env DTRAIN_ALLREDUCE=chain "${mpirun[@]}" -x DTRAIN_ALLREDUCE -np 3 "$build/dtrain" train --model mlp \
    --batch 16 --steps 10 --bucket-mb 0.5 --log-every 10
run accum_clip.np2 "${mpirun[@]}" -np 2 "$build/tests/test_accum_clip"
# Two BLAS threads a rank, as each of 2 ranks has on a machine of 4 cores or more (here 1).
run train.np2 "${mpirun[@]}" -np 2 "$build/dtrain" train --model mlp --batch 32 --steps 20 --bucket-mb 0.5 \
    --loader-threads 1 --log-every 10 --blas-threads 2
# The trace recorder filled by the training, communication and 2 loader threads at once, then merged.
run train_trace.np2 "${mpirun[@]}" -np 2 "$build/dtrain" train --model mlp --batch 32 --steps 20 --bucket-mb 0.5 \
    --loader-threads 2 --log-every 10 --trace "$logs/trace.json"
# The data's threads: an image folder (PNGs, one file that is no image) decoded by 3 loader threads
# with --augment, its statistics pass (--normalize standard, by default) and the held-out pass on
# as many, checkpoints (the writer's fsync thread beside the beat), the eval command's loader, bench
# data, and the .dts writer's and the statistics' threads in data convert, info and verify (images
# resized to 3x48x48 fp32: 28 KB a sample, 3 chunks of the writer's 1 MiB for 3 of its 4 threads).
python3 "$here/../mpi/make_images.py" "$logs/imgs" 30 3 > /dev/null
printf 'not an image' > "$logs/imgs/class1/bad.png"
img=(--data "$logs/imgs" --input 3x10x12 --model fc:32,relu,fc:3)
run train_images.np2 "${mpirun[@]}" -np 2 "$build/dtrain" train "${img[@]}" --batch 8 --steps 20 --loader-threads 3 \
    --augment crop:2,flip --bad-samples skip --holdout 0.2 --eval-every 10 --log-every 10 \
    --checkpoint-dir "$logs/ck" --checkpoint-every 5
run eval_images.np2 "${mpirun[@]}" -np 2 "$build/dtrain" eval "${img[@]}" --checkpoint-dir "$logs/ck" --holdout 0.2 \
    --bad-samples skip --loader-threads 3 --batch 7
rm "$logs/imgs/class1/bad.png"
run bench_data "$build/dtrain" bench data "${img[@]:0:4}" --threads 0,3 --batch 16 --batches 4 --augment crop:2,flip
run data_convert "$build/dtrain" data convert "$logs/imgs" "$logs/imgs.dts" --input 3x48x48 --dtype fp32 --threads 4
run data_info "$build/dtrain" data info "$logs/imgs.dts" --threads 3
run data_verify "$build/dtrain" data verify "$logs/imgs" --input 3x48x48 --threads 3
# Two engines at once, each with its thread (the replicas test's two models), and a second thread
# entering a collective of a context while the first is inside one (refused: ctx_enter's atomic).
run replicas.np2 "${mpirun[@]}" -np 2 "$build/tests/test_replicas"
run ctx_rules.np2 "${mpirun[@]}" -np 2 "$build/tests/test_ctx_rules"
# The watchdogs (collectives/engine.c): rank 1 stopped inside a 2-rank MPI_Allreduce, seen by the
# main thread (PHASE_MPI) with its probe; rank 2 of 3 frozen inside the pipelined chain, seen by the
# communication thread, whose probe shares the board with the main thread's listening; then the
# abort guard's thread and MPI_Abort. Exit 1, each naming the rank.
run_expect() { # NAME EXIT MUST_SAY COMMAND...: a run that must end with EXIT and say MUST_SAY
    local name=$1 want=$2 say=$3 t0=$SECONDS rc
    shift 3
    timeout 600 "$@" > "$logs/$name.log" 2>&1
    rc=$?
    grep -q "$say" "$logs/$name.log" || { echo "run_tsan.sh: the output does not say: $say" >> "$logs/$name.log"; rc=255; }
    check "$name" $rc "$want" "$t0"
}
hang=(train --model mlp --batch 8 --steps 20 --timeout 2 --log-every 10 --bucket-mb 0.5)
run_expect watchdog_mpi.np2 1 "rank 1 on .* reached it, yet MPI_Allreduce has not completed" env DTRAIN_TEST_HANG=engine:1:2 \
    "${mpirun[@]}" -x DTRAIN_TEST_HANG -np 2 "$build/dtrain" "${hang[@]}"
run_expect watchdog_chain.np3 1 "the chain has not completed, and rank(s) 2 on .* do not answer a probe" env \
    DTRAIN_ALLREDUCE=chain DTRAIN_TEST_HANG=engine:2:5 "${mpirun[@]}" -x DTRAIN_ALLREDUCE -x DTRAIN_TEST_HANG -np 3 \
    "$build/dtrain" "${hang[@]}"
# A stop signal handled on a loader thread rather than the main one (the kernel hands a process's
# signal to any thread that does not block it): the handler's flag, read by the main thread at the
# step's end, must be an atomic, and the handler must leave errno as it found it. Exit 75 with a
# checkpoint.
run_signal() { # NAME SIGNAL: a 1-rank train that gets SIGNAL on one of its loader threads
    local name=$1 sig=$2 t0=$SECONDS pid i
    "$build/dtrain" train --model mlp --batch 8 --steps 1000000 --loader-threads 2 --log-every 1 \
        --checkpoint-dir "$logs/ck-$name" > "$logs/$name.log" 2>&1 &
    pid=$!
    for i in $(seq 600); do grep -qs '^step ' "$logs/$name.log" && break; sleep 0.1; done
    python3 "$here/thread_kill.py" "$pid" "$sig" > /dev/null || echo "no thread of $pid takes SIG$sig" >> "$logs/$name.log"
    # Killed after 5 minutes (a stop never taken would train its million steps).
    for i in $(seq 3000); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2> /dev/null
    wait "$pid"
    check "$name" $? 75 "$t0"
}
run_signal stop_on_loader_thread USR1
exit $fail
