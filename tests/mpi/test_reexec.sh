#!/usr/bin/env bash
# The OpenBLAS re-exec (launch/prologue.c) keeps the process's name: ps, top and pgrep show
# `dtrain`, not `exe` (the basename of /proc/self/exe, which the kernel would name it after).
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
finish
