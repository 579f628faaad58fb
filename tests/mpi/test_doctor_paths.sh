#!/usr/bin/env bash
# `dtrain doctor --checkpoint-dir/--data/--metrics`: the path.* rows (an unusable checkpoint dir,
# one whose lock another run holds, too little space, a tmpfs, a missing dataset); a lone process
# with stale torchrun variables reports; --device cuda without a usable GPU still reports; the
# pre-MPI net.env row warns about a btl list without a transport, a missing interface and
# NCCL_DEBUG=INFO.
here=$(dirname "$0"); source "$here/lib.sh"
DTRAIN=$1 MPIRUN=$2
unset OPENBLAS_CORETYPE
j="$tmp/j"

"$DTRAIN" doctor --no-comm --json --checkpoint-dir "$tmp/ck" --model cnn --metrics "$tmp/m.csv" >"$j" 2>&1
doctor_status "$j" path.checkpoint=pass path.checkpoint_space=pass path.metrics=pass && [ ! -e "$tmp/ck" ] &&
    ok "a good --checkpoint-dir passes and is not made" || bad "good paths: $(cat "$j")"

: >"$tmp/file"
"$DTRAIN" doctor --no-comm --json --checkpoint-dir "$tmp/file/ck" >"$j" 2>&1; rc=$?
[ $rc -eq 1 ] && doctor_status "$j" path.checkpoint=fail && ok "a checkpoint dir under a file: FAIL, exit 1" ||
    bad "ckpt under a file (rc $rc)"
"$DTRAIN" doctor --no-comm --json --checkpoint-dir "$tmp/none/ck" >"$j" 2>&1
doctor_status "$j" path.checkpoint=fail && grep -q "does not exist" "$j" && ok "a missing parent: FAIL" || bad "missing parent"
if [ "$(id -u)" != 0 ]; then
    mkdir "$tmp/ro" && chmod 555 "$tmp/ro"
    "$DTRAIN" doctor --no-comm --json --checkpoint-dir "$tmp/ro/ck" >"$j" 2>&1
    doctor_status "$j" path.checkpoint=fail && ok "a read-only parent: FAIL" || bad "read-only parent"
    expect 2 "cannot create checkpoint directory" "$DTRAIN" train --steps 1 --quiet --checkpoint-dir "$tmp/ro/ck"
    chmod 755 "$tmp/ro"
fi
# The directory's lock (ckpt_lock.c): asked, never taken or made; held by another process (here
# python's lockf, with train's line in the file), the row warns naming the holder.
mkdir "$tmp/held"
"$DTRAIN" doctor --no-comm --json --checkpoint-dir "$tmp/held" >"$j" 2>&1
doctor_status "$j" path.checkpoint=pass && grep -q "no run holds its lock" "$j" && [ ! -e "$tmp/held/.dtrain.lock" ] &&
    ok "an unlocked --checkpoint-dir passes, and doctor makes no lock file" || bad "unlocked: $(cat "$j")"
python3 - "$tmp/held/.dtrain.lock" "$tmp/locked" <<'PY' &
import fcntl, sys, time
f = open(sys.argv[1], "w")
fcntl.lockf(f, fcntl.LOCK_EX)
f.write("pid 4242 on node7 since 2030-01-02T03:04:05Z\n")
f.flush()
open(sys.argv[2], "w").close()
time.sleep(30)
PY
holder=$!
for _ in $(seq 50); do [ -e "$tmp/locked" ] && break; sleep 0.1; done
"$DTRAIN" doctor --no-comm --json --checkpoint-dir "$tmp/held" >"$j" 2>&1; rc=$?
kill "$holder"; wait "$holder" 2>/dev/null
[ $rc -eq 0 ] && doctor_status "$j" path.checkpoint=warn && grep -q "pid 4242 on node7 since 2030-01-02T03:04:05Z" "$j" &&
    grep -q "another --checkpoint-dir" "$j" && grep -q "on another node holds its lock now" "$j" &&
    grep -q "waits up to 120 s for the lock" "$j" && grep -q "if that node is down, remove the lock file" "$j" &&
    ok "a lock held on another node: WARN naming its holder, train's 120 s wait and the fixes" ||
    bad "held lock (rc $rc): $(cat "$j")"
"$DTRAIN" doctor --no-comm --json --checkpoint-dir "$tmp/held" >"$j" 2>&1
doctor_status "$j" path.checkpoint=pass && ok "its holder gone (the file left): PASS" || bad "released: $(cat "$j")"
mkdir "$tmp/linked" && ln -s "$tmp/elsewhere" "$tmp/linked/.dtrain.lock"
"$DTRAIN" doctor --no-comm --json --checkpoint-dir "$tmp/linked" >"$j" 2>&1
doctor_status "$j" path.checkpoint=fail && grep -q "is a symbolic link" "$j" && [ ! -e "$tmp/elsewhere" ] &&
    ok "a symbolic link for the lock file: FAIL, as train refuses it" || bad "linked lock: $(cat "$j")"
DTRAIN_TEST_DTS_FREE=1000 "$DTRAIN" doctor --no-comm --json --checkpoint-dir "$tmp" --model cnn --keep-checkpoints 2 >"$j" 2>&1
doctor_status "$j" path.checkpoint_space=fail && grep -q "x 2 kept" "$j" && ok "too little space: FAIL" || bad "space"
if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ]; then
    "$DTRAIN" doctor --no-comm --json --checkpoint-dir /dev/shm/dtrain-doctor-test-$$ >"$j" 2>&1
    doctor_status "$j" path.checkpoint_fs=warn && ok "tmpfs: WARN" || bad "tmpfs"
fi
"$DTRAIN" doctor --no-comm --json --data "$tmp/nodata" >"$j" 2>&1
doctor_status "$j" path.data=fail && grep -q "does not exist" "$j" && ok "a missing --data: FAIL" || bad "data"
# --data that only some ranks can open (a node-local disk on one node of a job; here two ranks are
# given a path that is not there): every rank opens it, as every rank reads it in training, and the
# row fails for those ranks alone, naming their host, where rank 0's view alone would pass.
python3 "$here/make_idx.py" "$tmp/idx" 200 50 10 60
timeout 120 "$MPIRUN" -np 1 "$DTRAIN" doctor --no-comm --json --data "$tmp/idx" : \
    -np 2 "$DTRAIN" doctor --no-comm --json --data "$tmp/nodata" >"$j" 2>"$tmp/err"; rc=$?
if [ $rc -eq 1 ] && python3 - "$j" "$tmp/nodata" "$(hostname)" <<'PY'; then
import json, sys
rows = [c for c in json.load(open(sys.argv[1]))["checks"] if c["name"] == "path.data"]
want = "dataset %s does not exist (on %s)" % (sys.argv[2], sys.argv[3])
assert len(rows) == 1 and rows[0]["status"] == "fail" and rows[0]["ranks"] == [1, 2] and want in rows[0]["seen"], rows
PY
    ok "--data missing on ranks 1-2 only: path.data FAIL for ranks 1-2, naming the host, exit 1"
else
    bad "--data missing on some ranks (rc $rc): $(cat "$j" "$tmp/err")"
fi

# A lone process with a non-zero torchrun RANK reports (table and JSON), with train's text.
expect 1 "WORLD_SIZE=2 but MPI sees a world of 1" env RANK=1 WORLD_SIZE=2 "$DTRAIN" doctor --no-comm
grep -q "^launch.identity  *FAIL" "$tmp/out" && ok "RANK=1 alone: the table" || bad "RANK=1 table"
env RANK=1 WORLD_SIZE=2 "$DTRAIN" doctor --no-comm --json >"$j" 2>/dev/null
doctor_status "$j" launch.identity=fail && ok "RANK=1 alone: --json" || bad "RANK=1 json"

# --device cuda where dt_init refuses it: the report, with cuda.gpu FAIL (skipped on a GPU node).
if ! "$DTRAIN" train --device cuda --steps 1 --quiet >/dev/null 2>&1; then
    "$DTRAIN" doctor --no-comm --json --device cuda >"$j" 2>/dev/null; rc=$?
    [ $rc -eq 1 ] && doctor_status "$j" cuda.gpu=fail && ok "--device cuda, no GPU: report, cuda.gpu FAIL" ||
        bad "--device cuda (rc $rc): $(cat "$j")"
fi

# The pre-MPI row, printed before MPI_Init and in the table.
expect 0 "before MPI_Init" env OMPI_MCA_btl_tcp_if_include=dtnoif0 NCCL_DEBUG=INFO "$DTRAIN" doctor --no-comm
grep -q "names dtnoif0, not an interface" "$tmp/out" && grep -q "NCCL_DEBUG=INFO prints" "$tmp/out" &&
    ok "missing interface, NCCL_DEBUG=INFO: WARN" || bad "net.env"
env OMPI_MCA_btl=self "$DTRAIN" doctor --no-comm --json >"$j" 2>/dev/null
doctor_status "$j" net.env=warn && ok "OMPI_MCA_btl=self: WARN" || bad "btl=self"
"$DTRAIN" doctor --no-comm --json >"$j" 2>/dev/null
doctor_status "$j" net.env=pass && ok "no transport variable: PASS" || bad "net.env pass"
finish
