#!/usr/bin/env bash
# test_device_check.sh - device_check.sh's time budget and its stop without a GPU, with no GPU:
# a copy of the script in a scratch tree whose build-gpu/dtrain is a stand-in (bench gemm says
# which GPU it sees; every other run hangs until its timeout) and whose cmake does nothing.
#  - a GPU that hangs every run: a call of several parts ends within its LIMIT (each run gets
#    what is left of it), names the runs it did not start, and leaves no file for a target not run;
#  - no GPU visible: the call stops after the build with the reason, and runs nothing else.
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../mpi/lib.sh" # tmp (removed at exit), ok, bad, finish
mkdir -p "$tmp/root/tests/gpu" "$tmp/root/build-gpu" "$tmp/bin"
cp "$here/device_check.sh" "$here/issue20_targets.py" "$tmp/root/tests/gpu/"
printf '#!/bin/sh\nexit 0\n' >"$tmp/bin/cmake"
cat >"$tmp/root/build-gpu/dtrain" <<'F'
#!/bin/sh
if [ "$1 $2" = "bench gemm" ]; then
    if [ -n "${FAKE_NO_GPU:-}" ]; then echo "# GPU: none visible (no CUDA device)"; else echo "# GPU: FakeGPU (device 0)"; fi
    case "$*" in *"--n 256"*) exit 0 ;; esac
fi
echo "$*" >>"$FAKE_LOG"
exec sleep 300
F
chmod +x "$tmp/bin/cmake" "$tmp/root/build-gpu/dtrain"
run() { # result folder, then environment assignments
    local res=$1
    shift
    # The script's own limit is under test: 90 s here turns an overrun into a failure, not a hang.
    (cd "$tmp/root" && env PATH="$tmp/bin:$PATH" WORK="$tmp/work" FAKE_LOG="$tmp/runs.txt" "$@" \
        timeout 90 bash tests/gpu/device_check.sh "$res" >"$res.out" 2>&1)
}

# LIMIT 40: the first run gets 20 s (40 less the 20 kept for the summary), and then nothing is left.
t0=$(date +%s)
run "$tmp/hang" PART=targets,bench QUICK=1 LIMIT=40
took=$(( $(date +%s) - t0 ))
[ "$took" -le 40 ] && ok "a call of two parts with every run hanging took $took s of LIMIT=40" ||
    bad "a call of two parts took $took s, past LIMIT=40"
started=$(wc -l <"$tmp/runs.txt" 2>/dev/null || echo 0)
[ "$started" = 1 ] && ok "one run started" || bad "$started runs started (want 1: the first, cut by the budget)"
grep -q "fc.txt: not run" "$tmp/hang/summary.txt" && ok "the summary names a target not run" ||
    bad "no 'fc.txt: not run' in the summary"
grep -q "not run (.* s left of LIMIT=40): build-gpu/dtrain bench step" "$tmp/hang/summary.txt" &&
    ok "the summary names a bench row not run" || bad "no bench row named as not run"
[ ! -e "$tmp/work/targets-bench/targets/fc.txt" ] && ok "no file for a target not run" ||
    bad "a target not run left a file for the judge"
grep -q "^== done" "$tmp/hang/summary.txt" && ok "the call ended with its summary" || bad "no '== done' in the summary"

: >"$tmp/runs.txt"
t0=$(date +%s)
run "$tmp/nogpu" PART=all LIMIT=60 FAKE_NO_GPU=1
rc=$?
took=$(( $(date +%s) - t0 ))
[ "$rc" = 1 ] && [ "$took" -le 10 ] && ok "no GPU: exit 1 after $took s" || bad "no GPU: exit $rc after $took s"
grep -q "no GPU that dtrain can use: # GPU: none visible (no CUDA device)" "$tmp/nogpu/summary.txt" &&
    ok "no GPU: the summary says why" || bad "no GPU: the summary does not say why"
[ ! -s "$tmp/runs.txt" ] && ok "no GPU: nothing else ran" || bad "no GPU: $(wc -l <"$tmp/runs.txt") runs started"
finish
