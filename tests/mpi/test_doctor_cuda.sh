#!/usr/bin/env bash
# `dtrain doctor`'s CUDA rows on a machine that needs no GPU: a CPU job without a driver gets one
# SKIP row; the test hooks (DTRAIN_TEST_CUDA_DRIVER, DTRAIN_TEST_DEV_DIR) fake a driver and the
# device nodes, bad CUDA_VISIBLE_DEVICES values warn with the parser's text; in a mount namespace,
# real character nodes with no driver behind them (ENXIO) and unreadable ones (EACCES, as nobody)
# give their rows. The ranks run on the CPU, so what would FAIL a GPU rank WARNs here (exit 0).
here=$(dirname "$0"); source "$here/lib.sh"
DTRAIN=$1 MPIRUN=$2

# seen FILE NAME TEXT: a row NAME whose seen holds TEXT.
seen() {
    python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if any(c["name"] == sys.argv[2] and sys.argv[3] in c["seen"] for c in d["checks"]) else 1)' "$@"
}

# 1. A CPU job: no driver here means one SKIP row; where a driver is installed, its row instead.
"$MPIRUN" -np 2 "$DTRAIN" doctor --json --no-comm >"$tmp/j" 2>"$tmp/err"; rc=$?
[ $rc -eq 0 ] || bad "cpu job exited $rc: $(cat "$tmp/err")"
if ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then
    doctor_status "$tmp/j" cuda.driver=pass && ok "cpu job on a machine with a driver: cuda.driver pass" || bad "cuda.driver"
else
    doctor_status "$tmp/j" cuda.gpu=skip && seen "$tmp/j" cuda.gpu "no GPU in this job" &&
        ok "cpu job, no driver: one cuda.gpu SKIP row, exit 0" || bad "cpu job cuda.gpu skip"
fi

# 2. A faked 12.2 driver with no device nodes: driver passes, devices warn (the ranks are on the CPU).
mkdir -p "$tmp/dev"
env DTRAIN_TEST_CUDA_DRIVER=12020 DTRAIN_TEST_DEV_DIR="$tmp/dev" "$MPIRUN" -np 2 -x DTRAIN_TEST_CUDA_DRIVER \
    -x DTRAIN_TEST_DEV_DIR "$DTRAIN" doctor --json --no-comm >"$tmp/j" 2>"$tmp/err"; rc=$?
[ $rc -eq 0 ] && doctor_status "$tmp/j" cuda.driver=pass cuda.devices=warn cuda.nvml=skip &&
    seen "$tmp/j" cuda.driver "supports CUDA up to 12.2" && seen "$tmp/j" cuda.devices "$tmp/dev/nvidiactl missing" &&
    ok "faked driver, empty dev dir: driver pass, devices warn, exit 0" || bad "faked driver/empty dev: rc $rc $(cat "$tmp/j")"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); r=[c for c in d["checks"] if c["name"]=="cuda.devices"][0]
assert r["ranks"] == [0, 1] and "modprobe nvidia" in r["fix"], r' "$tmp/j" &&
    ok "the devices row merges both ranks and names the fix" || bad "devices row ranks/fix"

# 3. The nodes there and openable: devices pass.
: >"$tmp/dev/nvidiactl"; : >"$tmp/dev/nvidia-uvm"; : >"$tmp/dev/nvidia0"
env DTRAIN_TEST_CUDA_DRIVER=12020 DTRAIN_TEST_DEV_DIR="$tmp/dev" "$MPIRUN" -np 2 -x DTRAIN_TEST_CUDA_DRIVER \
    -x DTRAIN_TEST_DEV_DIR "$DTRAIN" doctor --json --no-comm >"$tmp/j" 2>"$tmp/err"; rc=$?
[ $rc -eq 0 ] && doctor_status "$tmp/j" cuda.devices=pass && seen "$tmp/j" cuda.devices "$tmp/dev/nvidia0 ok" &&
    ok "nodes present: devices pass" || bad "devices pass: rc $rc $(cat "$tmp/j")"

# 4. CUDA_VISIBLE_DEVICES that hides every GPU, or is cut at a bad entry: the parser's words.
for v in "0,0:name the same GPU" "0,x:entry 2 'x' is not a device index" "NoDevFiles:CUDA sees no GPU"; do
    env CUDA_VISIBLE_DEVICES="${v%%:*}" DTRAIN_TEST_CUDA_DRIVER=12020 DTRAIN_TEST_DEV_DIR="$tmp/dev" \
        "$MPIRUN" -np 2 -x CUDA_VISIBLE_DEVICES -x DTRAIN_TEST_CUDA_DRIVER -x DTRAIN_TEST_DEV_DIR \
        "$DTRAIN" doctor --json --no-comm >"$tmp/j" 2>"$tmp/err"; rc=$?
    [ $rc -eq 0 ] && doctor_status "$tmp/j" cuda.visible=warn && seen "$tmp/j" cuda.visible "${v#*:}" &&
        ok "CUDA_VISIBLE_DEVICES=${v%%:*}: visible warn" || bad "CUDA_VISIBLE_DEVICES=${v%%:*}: rc $rc $(cat "$tmp/j")"
done
env CUDA_VISIBLE_DEVICES=0,1 DTRAIN_TEST_CUDA_DRIVER=12020 "$MPIRUN" -np 2 -x CUDA_VISIBLE_DEVICES \
    -x DTRAIN_TEST_CUDA_DRIVER "$DTRAIN" doctor --json --no-comm >"$tmp/j" 2>"$tmp/err"; rc=$?
[ $rc -eq 0 ] && doctor_status "$tmp/j" cuda.visible=pass && seen "$tmp/j" cuda.visible "2 GPUs visible" &&
    ok "CUDA_VISIBLE_DEVICES=0,1: visible pass, exit 0" || bad "CUDA_VISIBLE_DEVICES=0,1: rc $rc $(cat "$tmp/err")"

# 5. Real character nodes in a mount namespace: no driver behind them (ENXIO), then unreadable
# by the user (EACCES). Needs root's unshare and mknod; a container without them skips this part.
if ! unshare -m true 2>/dev/null; then
    echo "skip: unshare -m not permitted here: the namespace variant does not run"
else
    ns="$tmp/ns"; mkdir -p "$ns"; chmod 755 "$tmp"
    unshare -m bash -c '
        mount -t tmpfs -o mode=755 none "$1" || exit 3
        mknod "$1/nvidiactl" c 195 255 && mknod "$1/nvidia-uvm" c 509 0 && mknod -m 666 "$1/nvidia0" c 195 0 || exit 3
        DTRAIN_TEST_CUDA_DRIVER=12020 DTRAIN_TEST_DEV_DIR="$1" "$2" doctor --json --no-comm >"$3/enxio.json" 2>/dev/null
        chmod 000 "$1/nvidia0"; mkdir -m 777 "$3/home"
        TMPDIR="$3/home" HOME="$3/home" DTRAIN_TEST_CUDA_DRIVER=12020 DTRAIN_TEST_DEV_DIR="$1" \
            setpriv --reuid=65534 --regid=65534 --clear-groups "$2" doctor --json --no-comm >"$3/eacces.json" 2>/dev/null
        exit 0' _ "$ns" "$DTRAIN" "$tmp"
    rc=$?
    if [ $rc -ne 0 ]; then
        echo "skip: mount/mknod in the namespace failed (rc $rc): the namespace variant does not run"
    else
        seen "$tmp/enxio.json" cuda.devices "$ns/nvidia0 no driver behind it" &&
            ok "namespace: char node without a driver -> ENXIO row" || bad "ENXIO: $(cat "$tmp/enxio.json")"
        if [ -x "$DTRAIN" ] && setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$DTRAIN"; then
            seen "$tmp/eacces.json" cuda.devices "$ns/nvidia0 permission denied" &&
                python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
f=[c["fix"] for c in d["checks"] if c["name"]=="cuda.devices"][0]; assert "usermod -aG video" in f and "chmod 7" not in f, f' \
                    "$tmp/eacces.json" && ok "namespace: node unreadable by nobody -> EACCES row, group fix" ||
                bad "EACCES: $(cat "$tmp/eacces.json")"
        else
            echo "skip: nobody cannot run $DTRAIN here: the EACCES variant does not run"
        fi
    fi
fi
finish
