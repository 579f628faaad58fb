#!/usr/bin/env bash
# The OpenBLAS re-exec (launch/prologue.c) keeps the process's name: ps, top and pgrep show
# `dtrain`, not `exe` (the basename of /proc/self/exe, which the kernel would name it after); under
# a memory limit it starts OpenBLAS without its pool of threads, and gives OPENBLAS_NUM_THREADS back.
here=$(dirname "$0"); source "$here/lib.sh"
DTRAIN=$1 MPIRUN=$2

# Force the re-exec on any CPU: no user OPENBLAS_CORETYPE (this machine may export one, which
# turns the fix off), and the test hook that stands in for "OpenBLAS guessed low".
unset OPENBLAS_CORETYPE DTRAIN_BLAS_COREFIX
export DTRAIN_TEST_BLAS_ADVICE=Haswell

"$DTRAIN" train --model mlp --batch 16 --steps 1000000 --dataset-size 2000 --blas-threads 1 \
    --log-every 1000000 >"$tmp/train" 2>&1 &
pid=$!
# The re-exec is done once the new image's environment carries the fix's marker.
for _ in $(seq 100); do
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx DTRAIN_BLAS_COREFIX=0 && break
    sleep 0.1
done
if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx OPENBLAS_CORETYPE=Haswell; then
    ok "dtrain train re-executed itself with OPENBLAS_CORETYPE=Haswell"
else
    bad "no re-exec seen in /proc/$pid/environ: $(cat "$tmp/train")"
fi
# No memory limit here: OpenBLAS keeps the pool it started at load (only a limit restarts it so).
tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qE '^(DTRAIN_BLAS_POOL_FROM|OPENBLAS_NUM_THREADS)=' &&
    bad "without a memory limit, the restart set OpenBLAS's pool" || ok "without a memory limit, the pool is left alone"
comm=$(cat "/proc/$pid/comm" 2>/dev/null)
[ "$comm" = dtrain ] && ok "/proc/PID/comm after the re-exec is '$comm'" ||
    bad "/proc/PID/comm after the re-exec is '$comm', expected 'dtrain'"
# Other dtrain processes may run on the machine: pgrep must list this one among them.
pgrep -x dtrain | grep -qx "$pid" && ok "pgrep -x dtrain finds pid $pid" ||
    bad "pgrep -x dtrain does not find pid $pid (it lists: $(pgrep -x dtrain | tr '\n' ' '))"
kill -TERM "$pid" 2>/dev/null
wait "$pid" 2>/dev/null

# The new image runs the kernels it was re-executed for, and its result is the command's.
expect 0 "OpenBLAS kernels: Haswell" "$DTRAIN" env

# A user's own OPENBLAS_CORETYPE below the CPU (a machine image or module file may export one) is
# kept, not re-executed away, and the warning names it with both fixes.
unset DTRAIN_TEST_BLAS_ADVICE
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
    expect 0 "OPENBLAS_CORETYPE=Prescott in the environment keeps OpenBLAS on its Prescott kernels on a CPU" \
        env OPENBLAS_CORETYPE=Prescott "$DTRAIN" env
    grep -q "(GEMM up to 4x slower): unset it, or export OPENBLAS_CORETYPE=[A-Za-z]*$" "$tmp/out" &&
        ok "the warning names both fixes" || bad "the warning's fixes: $(grep WARN "$tmp/out")"
else
    ok "skipped: this CPU has no AVX2 and FMA, so no OpenBLAS kernels are below it"
fi
# Under a memory limit, OpenBLAS's pool of threads started at load would take its buffers whenever
# the scheduler first runs each (kernels/cpu/blas_reserve.c): dtrain restarts with
# OPENBLAS_NUM_THREADS=1, runs the count it was asked for all the same, and gives the user's own
# value back in the new image (doctor reads it).
unset OPENBLAS_NUM_THREADS OMP_NUM_THREADS DTRAIN_BLAS_POOL_FROM
export DTRAIN_BLAS_COREFIX=0 # this part is about the pool alone
under() { bash -c 'ulimit -v 4000000 && exec "$@"' _ "$@"; }
if [ -n "${ASAN_OPTIONS:-}" ]; then
    # AddressSanitizer reserves terabytes of shadow address space: no ulimit -v leaves it room.
    ok "skipped: ulimit -v under AddressSanitizer (its shadow memory needs the address space)"
elif [ "$(nproc)" -ge 2 ]; then
    # bash -c, not the function: $! must be dtrain's own pid, not a subshell's.
    bash -c 'ulimit -v 4000000 && exec "$@"' _ "$DTRAIN" train --model mlp --batch 16 --steps 1000000 \
        --dataset-size 2000 --log-every 1000000 >"$tmp/train" 2>&1 &
    pid=$!
    for _ in $(seq 100); do
        tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -q '^DTRAIN_BLAS_POOL_FROM=' && break
        sleep 0.1
    done
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx OPENBLAS_NUM_THREADS=1 &&
        ok "under ulimit -v, dtrain restarted itself with OPENBLAS_NUM_THREADS=1" ||
        bad "under ulimit -v, no restart with OPENBLAS_NUM_THREADS=1: $(cat "$tmp/train")"
    kill -TERM "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    expect 0 "" under "$DTRAIN" env --blas-threads 2
    awk '$1 == "0/1" && $10 == 2 { f = 1 } END { exit !f }' "$tmp/out" && ok "and runs the 2 BLAS threads asked" ||
        bad "under ulimit -v, --blas-threads 2: $(cat "$tmp/out")"
    under "$DTRAIN" doctor --json --no-comm >"$tmp/j" 2>&1
    doctor_status "$tmp/j" cpu.threads=pass && ! grep -q "OPENBLAS_NUM_THREADS" "$tmp/j" &&
        ok "doctor under ulimit -v: no OPENBLAS_NUM_THREADS of dtrain's own" || bad "doctor under ulimit -v: $(cat "$tmp/j")"
    OPENBLAS_NUM_THREADS=abc under "$DTRAIN" doctor --json --no-comm >"$tmp/j" 2>&1
    doctor_status "$tmp/j" cpu.threads=warn && grep -q "OPENBLAS_NUM_THREADS='abc'" "$tmp/j" &&
        ok "doctor under ulimit -v: the user's OPENBLAS_NUM_THREADS=abc given back" || bad "doctor, abc: $(cat "$tmp/j")"
else
    ok "skipped: one CPU, so OpenBLAS starts no pool to restart without"
fi
finish
