#!/usr/bin/env bash
# run_valgrind.sh BUILD_DIR - valgrind memcheck over every unit test binary (the ctest `unit` label)
# and a short 2-rank `dtrain train` (one log per rank), then three refused fp16 runs (the loss scaler
# freed; refusal.*). BUILD_DIR is a plain CPU build with -O1 -g
# (`make test-valgrind` configures it): no sanitizer, since valgrind checks the real allocator.
# Fails on any memcheck error, any definitely-lost block and any failing run; the only suppressions
# are tests/sanitizers/valgrind.supp's, each a documented third-party report (Open MPI, PMIx and
# the Omni-Path libraries Open MPI loads). Logs: BUILD_DIR/valgrind-logs/NAME.PID.vg.log per process
# (train.np2.rankR.vg.log per rank), the program's own output in NAME.out.
# VALGRIND_ONLY=REGEX runs only the runs whose names match (unit.test_parse, train.np2).
set -u
build=${1:?usage: run_valgrind.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
command -v valgrind > /dev/null || {
    echo "run_valgrind.sh: valgrind not found: apt-get install valgrind (or make deps)" >&2
    exit 1
}
[ -x "$build/dtrain" ] || {
    echo "run_valgrind.sh: no $build/dtrain: build BUILD_DIR first (make test-valgrind does)" >&2
    exit 1
}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
export OMPI_MCA_rmaps_base_oversubscribe=1 DTRAIN_DEVICE=cpu
# One OpenBLAS thread: memcheck runs one thread at a time, so BLAS's pool only adds time (test_amp
# 53 s with 1, 71 s with 2) and no dtrain code; OPENBLAS_NUM_THREADS=2 also gave 0 errors.
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
# No OpenBLAS kernel fix (launch/prologue.c): memcheck runs the program on its own virtual CPU, and a
# restart would only start the rank's log file again, losing what came before the exec.
export DTRAIN_BLAS_COREFIX=0
build=$(cd "$build" && pwd) # absolute: the unit tests run in $build/tests
logs=$build/valgrind-logs
rm -rf "$logs"
mkdir -p "$logs"
# --trace-children: the unit tests fork and exec, and their children stay under memcheck; system
# programs they run (bash, python3 for a test's check) do not: their leaks are not ours.
# --keep-debuginfo: Open MPI unloads its components (dlclose) in MPI_Finalize, which would leave
# their frames as ??? in the leak reports, and the suppressions could not name them. Leaks: definite
# ones are errors; the rest (blocks libraries keep until exit) are counted in the log only.
# --vgdb=no: memcheck's default gdbserver makes three FIFOs /tmp/vgdb-pipe-*-PID-* per process and
# only a process that exits removes them; the children test_ckpt_files kills with SIGKILL left theirs
# in /tmp at every run. Nothing here attaches gdb.
vg=(valgrind --vgdb=no --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite
    --show-leak-kinds=definite --trace-children=yes --child-silent-after-fork=no --num-callers=30 --keep-debuginfo=yes
    --suppressions="$here/valgrind.supp" --gen-suppressions=all
    --trace-children-skip='/usr/*,/bin/*,/sbin/*,*/.pyenv/*,*python*')
# Not under memcheck, because what they test is a deliberate memory error: test_crash_report's
# children jump to address 0 and abort on purpose (memcheck reports the jump, rightly), and the
# report reads the word at the crashed stack pointer, which may be uninitialised, as a guess at the
# caller; test_thread_stack probes unmapped pages with msync(2) (a reported bad syscall argument),
# and its stack-overflow check fails under memcheck, which manages the client's thread stacks and
# signal delivery itself. ctest runs both natively. issue20_targets runs no program of ours (a
# bash script feeding made-up benchmark text to a Python judge), nor does bench_scripts (the bench/
# comparison scripts against a stand-in mpirun), nor device_check (tests/gpu/device_check.sh's time
# budget against a shell stand-in for dtrain and cmake): nothing for memcheck to watch.
skip_units='test_crash_report test_thread_stack issue20_targets bench_scripts device_check'

fail=0
only=${VALGRIND_ONLY:-.}

# ctest_command NAME - the command ctest runs for test NAME, one argument a line.
ctest_command() {
    ctest --test-dir "$build" --show-only=json-v1 | python3 -c '
import json, sys
for t in json.load(sys.stdin)["tests"]:
    if t["name"] == sys.argv[1]:
        print("\n".join(t.get("command", [])))' "$1"
}

# check NAME RC LOG... - a run passes when it exited 0, every log's ERROR SUMMARY says 0 and no
# process of a log named by its pid (NAME.PID.vg.log) left a file of valgrind's in the temporary
# directory (its gdbserver FIFOs, which --vgdb=no keeps from being made).
check() {
    local name=$1 rc=$2 t=$3
    shift 3
    local errors=0 n pid f left=()
    [ -e "$1" ] || rc="$rc (no memcheck log)"
    for log in "$@"; do
        [ -e "$log" ] || continue
        n=$(grep -o 'ERROR SUMMARY: [0-9]*' "$log" | awk '{s += $3} END {print s + 0}')
        errors=$((errors + n))
        pid=${log%.vg.log}
        pid=${pid##*.}
        [[ $pid =~ ^[0-9]+$ ]] || continue
        for f in "${TMPDIR:-/tmp}"/vgdb-pipe-*-"$pid"-by-*; do [ -e "$f" ] && left+=("$f"); done
    done
    if [ ${#left[@]} -gt 0 ]; then
        echo "FAIL $name: its processes left ${left[*]} (valgrind without --vgdb=no)"
        rm -f "${left[@]}"
        fail=1
    elif [ "$rc" != 0 ] || [ "$errors" -ne 0 ]; then
        echo "FAIL $name: exit $rc, $errors memcheck errors (logs: $logs/$name.*)"
        grep -l 'ERROR SUMMARY: [1-9]' "$@" 2>/dev/null | sed 's/^/  errors in /' 
        for log in "$@"; do grep -B2 -A20 -m3 -E '^==[0-9]+== (Invalid|Conditional|Use of|Syscall|Mismatched|[0-9,]+ bytes in [0-9,]+ blocks are definitely)' "$log" 2>/dev/null; done | head -80
        fail=1
    else
        echo "ok   $name ($t s, 0 errors)"
    fi
}

# The unit tests as ctest knows them (name unit.X, binary tests/X), so a new one is checked too.
units=$(ctest --test-dir "$build" -N -L '^unit$' | sed -n 's/^ *Test *#[0-9]*: unit\.\(.*\)$/\1/p')
[ -n "$units" ] || {
    echo "run_valgrind.sh: ctest lists no unit tests in $build (cmocka missing?)" >&2
    exit 1
}
for t in $units; do
    name=unit.$t
    [[ $name =~ $only ]] || continue
    if [[ " $skip_units " == *" $t "* ]]; then
        echo "skip $name (cannot run under memcheck: run_valgrind.sh says why)"
        continue
    fi
    t0=$SECONDS
    if [ -x "$build/tests/$t" ]; then
        # Each process (the test and any child it forks) writes its own log: %p is the pid.
        (cd "$build/tests" && timeout 900 "${vg[@]}" --log-file="$logs/$name.%p.vg.log" "./$t") \
            > "$logs/$name.out" 2>&1
    else
        # A test driven by a Python script (unit.hostlist_prop): the script runs natively and puts
        # memcheck before the C program it checks (DT_TEST_WRAPPER); its command is ctest's own.
        mapfile -t cmd < <(ctest_command "$name")
        if [ "${#cmd[@]}" -lt 2 ] || [[ ${cmd[0]} != *python* ]]; then
            echo "FAIL $name: no binary $build/tests/$t and ctest's command (${cmd[*]:-none}) is not a Python" \
                 "driver: teach run_valgrind.sh how to run it under memcheck, or add it to skip_units with why"
            fail=1
            continue
        fi
        (cd "$build/tests" && DT_TEST_WRAPPER="$(printf "%q " "${vg[@]}")--log-file=$logs/$name.%p.vg.log" \
             timeout 900 "${cmd[@]}") > "$logs/$name.out" 2>&1
    fi
    check "$name" $? $((SECONDS - t0)) "$logs/$name".*.vg.log
done

# Two ranks on the CPU path: MPI, the reducer's buckets, the background loader and a checkpoint.
# Small batch and 3 steps: under memcheck each step is ~50x slower.
if [[ train.np2 =~ $only ]]; then
    t0=$SECONDS
    timeout 1200 mpirun -np 2 -x OPENBLAS_NUM_THREADS -x DTRAIN_BLAS_COREFIX "${vg[@]}" \
        --log-file="$logs/train.np2.rank%q{OMPI_COMM_WORLD_RANK}.vg.log" \
        "$build/dtrain" train --model mlp --batch 16 --steps 3 --log-every 1 --loader-threads 1 \
        --checkpoint-dir "$logs/ckpt" --checkpoint-every 3 > "$logs/train.np2.out" 2>&1
    check train.np2 $? $((SECONDS - t0)) "$logs"/train.np2.rank*.vg.log
fi
# Refused training runs free what they made before the refusal: the loss scaler of an fp16 run is
# made first, so no block of dt_scaler_create's may be left at exit (of any leak kind), whether the
# refusal comes before MPI starts (DTRAIN_FAULT), right after it (--dataset-size) or once the model
# exists (--lr-schedule); each must still exit 2 with its message. (tests/mpi/test_refusals.sh
# checks the messages in `make test`.) Open MPI's own blocks are not looked at.
refusal() { # name, message, then the arguments of `dtrain train` (an environment goes before the call)
    local name=refusal.$1 text=$2 rc t0=$SECONDS
    shift 2
    [[ $name =~ $only ]] || return 0
    timeout 300 valgrind --vgdb=no --leak-check=full --show-leak-kinds=all --num-callers=40 \
        --log-file="$logs/$name.vg.log" "$build/dtrain" train --precision fp16 "$@" > "$logs/$name.out" 2>&1
    rc=$?
    if [ "$rc" -eq 2 ] && grep -qF -- "$text" "$logs/$name.out" && grep -q "LEAK SUMMARY\|no leaks are possible" \
        "$logs/$name.vg.log" && ! grep -q dt_scaler_create "$logs/$name.vg.log"; then
        echo "ok   $name ($((SECONDS - t0)) s: exit 2, says '$text', frees its loss scaler)"
    else
        echo "FAIL $name: exit $rc (wanted 2 and '$text'), or dt_scaler_create's blocks left (log: $logs/$name.vg.log)"
        grep -B2 -A8 "dt_scaler_create" "$logs/$name.vg.log" | head -30 | sed 's/^/    /'
        fail=1
    fi
}
DTRAIN_FAULT=bogus:0:1 refusal fault "KIND 'bogus' is not a fault" --steps 2
refusal dataset "--dataset-size 2 is smaller than one global batch" --dataset-size 2 --batch 4
refusal schedule "--lr-schedule bogus" --lr-schedule bogus --steps 2 --batch 4 --model fc:8,relu,fc:10 --input 8
exit $fail
