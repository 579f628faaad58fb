#!/usr/bin/env bash
# The files a run writes at its end (--dump-params, --trace) and the tools' output files: a bad
# path is refused before any work, and no output destroys an input or another output.
here=$(dirname "$0"); source "$here/lib.sh"
DTRAIN=$1
MPIRUN=$2
cd "$tmp" || exit 1
run="--model fc:16,relu,fc:10 --input 32 --batch 8 --steps 3 --log-every 1"

# An unwritable --dump-params stops the run before its first step, on every rank.
for p in "$tmp/no/such/dir/p.bin" "$tmp" ""; do
    expect 2 "--dump-params" "$MPIRUN" -np 2 "$DTRAIN" train $run --dump-params "$p" --checkpoint-dir ck0
    grep -q "^step" "$tmp/out" && bad "the run with --dump-params '$p' trained first" || ok "no step before refusing '$p'"
done
expect 2 "--trace $tmp is a directory" "$DTRAIN" train $run --trace "$tmp"
# A dump that fails at the end (a full disk: a 4 KiB tmpfs passes the path check, not the 44 KiB
# of parameters) still leaves the run's final checkpoint. Needs root's unshare -m; skipped elsewhere.
if unshare -m true 2>/dev/null; then
    mkdir -p full
    timeout 120 unshare -m bash -c 'mount -t tmpfs -o size=4k none full || exit 3
        "$@"' _ "$DTRAIN" train --model fc:256,relu,fc:10 --input 32 --batch 8 --steps 3 --checkpoint-dir ck1 \
        --dump-params full/p.bin >out 2>&1
    rc=$?
    if [ "$rc" -eq 1 ] && grep -q "dump-params" out && [ -f ck1/ckpt-0000000003.dtc ]; then
        ok "a --dump-params that fails at the end exits 1 and keeps the final checkpoint"
    else
        bad "full-disk --dump-params: exit $rc, checkpoints: $(ls ck1 2>&1)"; sed 's/^/    /' out
    fi
else
    echo "skip: no unshare -m (not root): the full-disk --dump-params check did not run"
fi

finish
