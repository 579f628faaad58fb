#!/usr/bin/env bash
# The files a run writes at its end (--dump-params, --trace) and the tools' output files (dtrain
# plot's PNG, dtrain eval's --confusion-csv): a bad path is refused before any work, and no output
# destroys an input or another output. Also eval's --split/--holdout refusal, and its --holdout
# checked against the checkpoint's run record. And a checkpoint read by the layout its docs give.
here=$(dirname "$0"); source "$here/lib.sh"
DTRAIN=$1
MPIRUN=$2
cd "$tmp" || exit 1
run="--model fc:16,relu,fc:10 --input 32 --batch 8 --steps 3 --log-every 1"
# Whether a private mount namespace may mount a tmpfs (root, and no policy against it): the
# full-disk checks need both, and skip without.
can_mount_tmpfs() { mkdir -p mnt-probe && unshare -m sh -c 'mount -t tmpfs -o size=4k none mnt-probe' 2>/dev/null; }

# An unwritable --dump-params stops the run before its first step, on every rank, each ending on
# rank 0's verdict by itself: no abort, which could kill rank 0 before its message got out.
for p in "$tmp/no/such/dir/p.bin" "$tmp" ""; do
    expect 2 "--dump-params" "$MPIRUN" -np 2 "$DTRAIN" train $run --dump-params "$p" --checkpoint-dir ck0
    grep -q "^step" "$tmp/out" && bad "the run with --dump-params '$p' trained first" || ok "no step before refusing '$p'"
    grep -q "MPI_ABORT was invoked" "$tmp/out" && bad "the refusal of --dump-params '$p' aborted the job" ||
        ok "--dump-params '$p' refused without an abort"
done
expect 2 "--trace $tmp is a directory" "$DTRAIN" train $run --trace "$tmp"
# --metrics is written in place: an existing file this user may not write, in a directory it may
# (another user's file in a shared run directory), is refused before training, exit 2, naming the
# file's permissions, not the directory's. As nobody: root writes everything.
if [ "$(id -u)" = 0 ] && chmod 755 "$tmp" && setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$DTRAIN"; then
    mkdir -m 777 shared && echo '{"step": 1, "loss": 2.3}' >shared/m.jsonl && cp shared/m.jsonl m.orig
    expect 2 "--metrics shared/m.jsonl cannot be written: Permission denied: this user may not write the file" \
        setpriv --reuid=65534 --regid=65534 --clear-groups "$DTRAIN" train $run --metrics shared/m.jsonl
    expect 2 "--metrics shared/m.jsonl cannot be read and appended to: Permission denied" \
        setpriv --reuid=65534 --regid=65534 --clear-groups "$DTRAIN" train $run --metrics shared/m.jsonl \
        --checkpoint-dir shared/ck --resume auto
    cmp -s shared/m.jsonl m.orig && ok "the other user's --metrics file is as it was" || bad "shared/m.jsonl changed"
    # The newest checkpoint unreadable to this user (mode 000) is no damage: a resume that skipped it
    # would go on from an older one, and its save of that step would replace it (eval loads through
    # the same search).
    setpriv --reuid=65534 --regid=65534 --clear-groups "$DTRAIN" train $run --checkpoint-dir shared/ck2 \
        --checkpoint-every 1 >/dev/null 2>&1
    chmod 000 shared/ck2/ckpt-0000000003.dtc && cp -p shared/ck2/ckpt-0000000003.dtc ck2.orig
    expect 2 "checkpoint shared/ck2/ckpt-0000000003.dtc cannot be read: Permission denied: this user may not read it" \
        setpriv --reuid=65534 --regid=65534 --clear-groups "$DTRAIN" train $run --steps 4 --checkpoint-dir shared/ck2 \
        --resume auto
    grep -q "^step" "$tmp/out" && bad "the resume past an unreadable checkpoint trained" || ok "no step trained"
    cmp -s shared/ck2/ckpt-0000000003.dtc ck2.orig && ok "the unreadable checkpoint is as it was" ||
        bad "shared/ck2/ckpt-0000000003.dtc changed"
else
    echo "skip: not root, or nobody cannot run $DTRAIN: the unwritable --metrics file checks do not run"
fi
# A --checkpoint-dir too long for the writer (over 4000 characters, under PATH_MAX: its parent
# exists and can be written) is refused before the first step, not at the first save after it.
long="$tmp"
while [ ${#long} -lt 3800 ]; do long="$long/$(printf 'd%.0s' $(seq 190))"; done
mkdir -p "$long" && long="$long/$(printf 'c%.0s' $(seq $((4009 - ${#long}))))"
expect 2 "--checkpoint-dir name is too long (4010 characters; at most 4000)" "$DTRAIN" train $run --checkpoint-dir "$long"
grep -q "^step" "$tmp/out" && bad "the run with a too-long --checkpoint-dir trained first" ||
    ok "no step before refusing a too-long --checkpoint-dir"
# A dump that fails at the end (a full disk: a 4 KiB tmpfs passes the path check, not the 44 KiB
# of parameters) still leaves the run's final checkpoint. Needs root's unshare -m; skipped elsewhere.
if can_mount_tmpfs; then
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
    echo "skip: no unshare -m with a tmpfs mount (not root, or denied): the full-disk --dump-params check did not run"
fi

# dtrain plot: -o never names the metrics file (by its name or another), whose bytes stay as they
# were; the checks come before gnuplot, so they hold with or without it installed.
printf '{"step": 1, "loss": 2.3}\n{"step": 2, "loss": 2.1}\n' >keep.jsonl
cp keep.jsonl keep.orig
ln -sf keep.jsonl link.jsonl
ln -f keep.jsonl hard.jsonl
mkdir -p sub
for o in keep.jsonl ./keep.jsonl sub/../keep.jsonl "$tmp/keep.jsonl" link.jsonl hard.jsonl; do
    expect 2 "is the input keep.jsonl itself" "$DTRAIN" plot keep.jsonl -o "$o"
    cmp -s keep.jsonl keep.orig && ok "plot -o $o left keep.jsonl as it was" || bad "plot -o $o changed keep.jsonl"
    cp keep.orig keep.jsonl # a failure above must not spoil the checks below
done
expect 2 "is the input keep.jsonl itself" "$DTRAIN" plot keep.jsonl --output=keep.jsonl
cp keep.orig keep.jsonl
# An -o that cannot be written is refused before gnuplot draws, and nothing reaches stdout (gnuplot,
# failing to open its output, draws the PNG to its stdout: it must not be dtrain's).
for o in "$tmp/no/such/o.png" "$tmp"; do
    "$DTRAIN" plot keep.jsonl -o "$o" >plot.stdout 2>plot.stderr
    rc=$?
    if [ "$rc" -eq 2 ] && grep -qF -- "-o $o" plot.stderr && [ ! -s plot.stdout ]; then
        ok "plot -o $o: exit 2, $(head -c 160 plot.stderr)"
    else
        bad "plot -o $o: exit $rc, $(wc -c <plot.stdout) bytes on stdout"; sed 's/^/    /' plot.stderr
    fi
done
# gnuplot's own stdout, whatever it writes there, is not dtrain's.
mkdir -p fakebin
printf '#!/bin/sh\ncat >/dev/null\nprintf "\\211PNG fake image"\necho "fake gnuplot: cannot open file" >&2\nexit 1\n' \
    >fakebin/gnuplot
chmod +x fakebin/gnuplot
PATH="$tmp/fakebin:$PATH" "$DTRAIN" plot keep.jsonl -o fake.png >plot.stdout 2>plot.stderr
rc=$?
if [ "$rc" -eq 1 ] && [ ! -s plot.stdout ] && grep -q "fake gnuplot: cannot open file" plot.stderr; then
    ok "a failing gnuplot's stdout stays off dtrain's stdout; its stderr is shown"
else
    bad "fake gnuplot: exit $rc, stdout: $(od -c plot.stdout | head -2)"; sed 's/^/    /' plot.stderr
fi

# gnuplot's strings cannot carry a control character: an -o (or a PNG named after the metrics
# file) holding one is refused before gnuplot runs, naming the byte, and nothing is left behind.
mkdir -p ctl
cp keep.jsonl "ctl/$(printf 'a\tb.jsonl')"
expect 2 "-o 'ctl/nl\\nname.png' holds a control character (byte 7)" "$DTRAIN" plot keep.jsonl -o "ctl/$(printf 'nl\nname.png')"
expect 2 "the PNG 'ctl/a\\tb.png' holds a control character (byte 6)" "$DTRAIN" plot "ctl/$(printf 'a\tb.jsonl')"
[ "$(ls ctl | wc -l)" -eq 1 ] && ok "no file left beside the metrics after the refusals" || bad "left in ctl: $(ls ctl | od -c)"
# An -o starting with '|' is a file of that name, never gnuplot's pipe to a command (which would
# run the rest as a shell command); needs gnuplot.
if command -v gnuplot >/dev/null; then
    mkdir -p pipe && cp keep.jsonl pipe/m.jsonl
    (cd pipe && "$DTRAIN" plot m.jsonl -o '|touch ran' >../plot.out 2>&1)
    [ -f 'pipe/|touch ran' ] && [ "$(ls pipe | wc -l)" -eq 2 ] && ok "plot -o '|touch ran': a file of that name, no command" ||
        { bad "plot -o '|touch ran': files $(ls pipe | tr '\n' ' ')"; cat plot.out; }
else
    echo "skip: no gnuplot: the -o '|...' check did not run"
fi

# dtrain eval --confusion-csv: a checkpoint of a short run on a small IDX set to evaluate.
python3 "$here/make_idx.py" idx 400 100 10 60
# A checkpoint as docs/checkpoint-format.md describes it, read by read_dtc.py without dtrain's code:
# every CRC and size, and the sections of a 2-rank fp16 AdamW run on bytes (--normalize standard).
"$MPIRUN" -np 2 "$DTRAIN" train --data idx --model fc:10 --steps 3 --batch 16 --loader-threads 0 --precision fp16 \
    --optim adamw --blas-threads 3 --checkpoint-dir fck --dump-params fck.bin >train.out 2>&1 || { bad "the fp16 run failed"; cat train.out; }
python3 "$here/read_dtc.py" fck/ckpt-0000000003.dtc fck.bin --bytes idx/train-images-idx3-ubyte 16 step=3 world=2 \
    nparams=650 optim_kind=1 window=3 data.epoch=0 data.offset=96 data.normalize=2 data.channels=1 run.precision=1 \
    run.samples=400 run.synthetic=0 run.world=2 run.batch=16 run.blas_threads=3 && ok "the checkpoint reads as its docs say" ||
    bad "the checkpoint differs from docs/checkpoint-format.md (above)"
"$DTRAIN" train --data idx --steps 3 --batch 16 --loader-threads 0 --checkpoint-dir eck >train.out 2>&1 ||
    { bad "the run to evaluate failed"; cat train.out; }
ev="eval --data idx --checkpoint-dir eck --loader-threads 0"
expect 0 "accuracy" "$DTRAIN" $ev --confusion-csv c.csv
[ "$(head -1 c.csv)" = 'true\predicted,0,1,2,3,4,5,6,7,8,9' ] && [ "$(wc -l <c.csv)" -eq 11 ] &&
    ok "--confusion-csv: a 10x10 matrix with its header" || { bad "c.csv:"; cat c.csv; }
# A path that cannot be written is refused before the evaluation, on every rank, with the reason.
for p in "$tmp/no/such/c.csv" "$tmp"; do
    expect 2 "--confusion-csv $p" "$MPIRUN" -np 2 "$DTRAIN" $ev --confusion-csv "$p"
    grep -q "^accuracy" "$tmp/out" && bad "--confusion-csv '$p': evaluated before refusing" ||
        ok "--confusion-csv '$p': refused before evaluating"
done
expect 2 "No such file or directory): its directory does not exist (or was removed): make it or use another --confusion-csv" "$DTRAIN" $ev --confusion-csv no/c.csv
# The CSV never replaces an input: the --data file, a dataset's part, a checkpoint.
ck=$(ls eck/ckpt-*.dtc | head -1)
cp "$ck" ck.orig
cp idx/t10k-labels-idx1-ubyte labels.orig
for p in "$ck" idx/t10k-labels-idx1-ubyte; do
    expect 2 "--confusion-csv $p is an input or among them" "$DTRAIN" $ev --confusion-csv "$p"
done
expect 2 "is an input or among them" "$DTRAIN" eval --data idx/t10k-images-idx3-ubyte --checkpoint-dir eck \
    --confusion-csv ./idx/t10k-images-idx3-ubyte
# A new file among the inputs is refused too, so a second run of the command is judged as the first.
expect 2 "--confusion-csv eck/new.csv is an input or among them" "$DTRAIN" $ev --confusion-csv eck/new.csv
[ -e eck/new.csv ] && bad "--confusion-csv eck/new.csv was written" || ok "no CSV written among the checkpoints"
cmp -s "$ck" ck.orig && cmp -s idx/t10k-labels-idx1-ubyte labels.orig && ok "the checkpoint and the dataset are as they were" ||
    bad "--confusion-csv changed an input"
cp ck.orig "$ck" && cp labels.orig idx/t10k-labels-idx1-ubyte # a failure above must not spoil the checks below
# A full disk (the path check passes, the write does not: the 81 KB matrix of a 200-class model
# on a 64 KiB tmpfs) leaves the previous CSV whole, and says why and what to do. Needs root's
# unshare -m; skipped elsewhere.
if can_mount_tmpfs; then
    mkdir -p fullc
    "$DTRAIN" train --data idx --model fc:16,relu,fc:200 --steps 1 --batch 16 --loader-threads 0 --checkpoint-dir eck2 \
        >train.out 2>&1 || { bad "the 200-class run to evaluate failed"; cat train.out; }
    timeout 120 unshare -m bash -c 'mount -t tmpfs -o size=64k none fullc || exit 3
        echo "the previous matrix" >fullc/c.csv
        "$@"; rc=$?
        cat fullc/c.csv >prev.after; ls fullc >ls.after; exit $rc' _ "$DTRAIN" eval --data idx --model fc:16,relu,fc:200 \
        --checkpoint-dir eck2 --loader-threads 0 --confusion-csv fullc/c.csv >out 2>&1
    rc=$?
    if [ "$rc" -eq 1 ] && grep -q "No space left on device: the file system is full: free space or use another --confusion-csv" out &&
        grep -q "fullc/c.csv is as it was" out &&
        [ "$(cat prev.after)" = "the previous matrix" ] && [ "$(cat ls.after)" = c.csv ]; then
        ok "a full disk under --confusion-csv: exit 1, the reason and the fix, the previous CSV whole, no temporary"
    else
        bad "full-disk --confusion-csv: exit $rc, c.csv now '$(cat prev.after)', files: $(cat ls.after)"; sed 's/^/    /' out
    fi
else
    echo "skip: no unshare -m with a tmpfs mount (not root, or denied): the full-disk --confusion-csv check did not run"
fi

# dtrain eval --holdout evaluates a part of the train split: with --split test it is refused, in
# either order, rather than evaluating another split than asked for.
expect 2 "--split test and --holdout 0.1 cannot go together" "$DTRAIN" $ev --split test --holdout 0.1
expect 2 "--split test and --holdout 0.1 cannot go together" "$DTRAIN" $ev --holdout 0.1 --split test
# The checkpoint's run record holds its training-set size, so eval knows the share training kept
# aside: eck's run kept none (all 400 samples trained on), so any --holdout is refused.
expect 2 "--holdout 0.1 sets 40 of the train split's 400 samples aside and leaves 360, but the checkpoint's run trained on 400: it had no --holdout" \
    "$DTRAIN" $ev --split train --holdout 0.1
# A run that kept 49 of 400 aside (--holdout 0.1234): another fraction is refused naming both
# counts and the shortest fraction that keeps 49, which is then accepted.
"$DTRAIN" train --data idx --holdout 0.1234 --steps 3 --batch 16 --loader-threads 0 --checkpoint-dir eckh >train.out 2>&1 ||
    { bad "the --holdout run to evaluate failed"; cat train.out; }
evh="eval --data idx --checkpoint-dir eckh --loader-threads 0"
expect 2 "--holdout 0.2 sets 80 of the train split's 400 samples aside and leaves 320, but the checkpoint's run trained on 351: training kept 49 of 400 samples aside (--holdout 0.122), and 31 of the 80 samples evaluated here were trained on. Evaluate with --holdout 0.122" \
    "$DTRAIN" $evh --holdout 0.2
expect 2 "training kept 49 of 400 samples aside (--holdout 0.122), and 9 more held-out samples would go unevaluated" \
    "$DTRAIN" $evh --holdout 0.1
# At 3 ranks the refusal is every rank's alike (rank 0's record, the same data): said once, and each
# rank ends by itself, with no abort's banner.
expect 2 "the fraction training used (invalid argument) (the same on all 3 ranks)" \
    "$MPIRUN" -np 3 "$DTRAIN" $evh --holdout 0.1
[ "$(grep -c "dtrain: error" "$tmp/out")" -eq 1 ] && ! grep -q "MPI_ABORT" "$tmp/out" &&
    ok "eval --holdout refused at 3 ranks: one line, no abort" || { bad "eval --holdout at 3 ranks"; cat "$tmp/out"; }
expect 0 "accuracy" "$DTRAIN" $evh --holdout 0.122
grep -q "(.* of 49 correct)" "$tmp/out" && ok "--holdout 0.122 evaluates the 49 samples training kept aside" ||
    bad "--holdout 0.122 did not evaluate 49 samples"
# Without --holdout, the whole train split mixes both: a note says so and names the --holdout.
expect 0 "note: the checkpoint's run kept 49 of the train split's 400 samples aside (--holdout 0.122) and never trained on them" \
    "$DTRAIN" $evh --split train
# A record that cannot be read (its CRC fails) leaves --holdout unchecked, said in one line.
cp -r eckh eckd
python3 - eckd/ckpt-0000000003.dtc <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], 'rb').read())
i = b.find(struct.pack('<IIQQ', 1, 1, 1, 351))  # version, shuffle, seed, samples
assert i >= 0, 'no run record'
b[i + 16] ^= 1
open(sys.argv[1], 'wb').write(b)
PY
expect 0 "has a run record that cannot be read" "$DTRAIN" eval --data idx --checkpoint-dir eckd --loader-threads 0 --holdout 0.2
grep -qF "whether --holdout 0.2 sets aside the samples training kept aside cannot be checked" "$tmp/out" &&
    ok "an unreadable record: --holdout unchecked, said" || bad "no 'cannot be checked' line"

# A device is written in place (a rename would put a regular file in its place) and a link to a
# file replaces the file and stays a link. The device is a null device node of our own (mknod, as
# root): a wrong rename then replaces only it, never the system's /dev/null.
if mknod devnull c 1 3 2>/dev/null; then
    ln -s devnull nul
    touch real.bin
    ln -s real.bin link.bin
    if "$DTRAIN" train $run --dump-params nul --trace link.bin >/dev/null 2>&1 && [ -c devnull ] && [ -L nul ] &&
        [ -L link.bin ] && [ -s real.bin ]; then
        ok "--dump-params to a link to a null device and --trace to a link to a file: device and links kept"
    else
        bad "outputs through links: devnull $(ls -l devnull), link.bin $(ls -l link.bin), real.bin $(wc -c <real.bin) bytes"
    fi
    if [ -d eck ]; then
        "$DTRAIN" eval --data idx --checkpoint-dir eck --loader-threads 0 --confusion-csv devnull >/dev/null 2>&1 &&
            [ -c devnull ] && ok "--confusion-csv to a device: written in place" || bad "--confusion-csv devnull: $(ls -l devnull)"
    fi
    # gnuplot's PNG replaces its file: a device is refused before any work, and stays a device.
    "$DTRAIN" train $run --metrics dm.jsonl >/dev/null 2>&1
    expect 2 "-o devnull is not a regular file" "$DTRAIN" plot dm.jsonl -o devnull
    [ -c devnull ] && ok "plot -o a device: the device kept" || bad "plot -o devnull: $(ls -l devnull)"
else
    echo "skip: mknod not permitted (not root): the device-output checks did not run"
fi

# /dev/stdout redirected to a job's log is that log: the parameters are appended to it in place
# (a rename would unlink the log and everything written to it so far).
"$DTRAIN" train $run --dump-params /dev/stdout >run.log 2>&1
grep -q "^done: 3 steps" run.log && [ "$(wc -c <run.log)" -gt 2792 ] &&
    ok "--dump-params /dev/stdout into a log: the log keeps its lines ($(wc -c <run.log) bytes)" ||
    bad "--dump-params /dev/stdout > run.log: $(wc -c <run.log) bytes, done line $(grep -c '^done' run.log)"
# So are --metrics and --trace: written through stdout's own descriptor, not a second open of the
# log, whose offset of its own let the next lines overwrite the records (and --metrics' "w"
# emptied the log first): every line whole and in order, the records and the trace valid JSON.
"$DTRAIN" train $run --metrics /dev/stdout >mlog 2>&1
"$DTRAIN" train $run --trace /dev/stdout >tlog 2>&1
python3 - mlog tlog <<'PY' && ok "--metrics and --trace /dev/stdout into a log: lines whole, JSON valid" ||
import json, sys
m = open(sys.argv[1], "rb").read().decode().splitlines()
recs = [json.loads(l) for l in m if l.startswith("{")]
assert m[0].startswith("data: ") and m[-1].startswith("done: 3 steps"), (m[0], m[-1])
assert [r["step"] for r in recs] == [1, 2, 3], m
t = open(sys.argv[2], "rb").read().decode()
start, end = t.index('{"displayTimeUnit"'), t.index("\n]}\n") + 3
json.loads(t[start:end])
assert t[end + 1:].startswith("trace of 1 rank in /dev/stdout"), t[end:]
assert t[:start].rstrip("\n").splitlines()[-1].startswith("done: 3 steps"), t[:start]
PY
    { bad "--metrics or --trace /dev/stdout > log: the log is broken"; head -c 600 mlog | cat -A; head -c 400 tlog; }
# A FIFO that nobody reads: said, not waited on for ever.
mkfifo nofifo
expect 1 "it is a FIFO that no process reads" timeout 60 "$DTRAIN" train $run --dump-params nofifo
# An eval CSV through a link into the checkpoint directory would replace the checkpoint.
if [ -d eck ]; then
    ln -s "$(ls eck/ckpt-*.dtc | head -1)" ck.csv
    expect 2 "is an input or among them" "$DTRAIN" eval --data idx --checkpoint-dir eck --confusion-csv ck.csv
fi

# --metrics is JSON, one object a line, even for an fp16 run whose gradients overflow at every step
# (grad_norm inf: null, as JSON has no infinity), and the loss scale is exact (2^23, not 8.38861e+06).
"$DTRAIN" train --batch 16 --steps 3 --log-every 1 --precision fp16 --clip-grad-norm 1 --loss-scale-init 16777216 \
    --metrics inf.jsonl >/dev/null 2>&1
if python3 - inf.jsonl <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 3 and rows[0]["grad_norm"] is None and rows[0]["loss_scale"] == 8388608, rows[0]
PY
then
    ok "fp16 overflow metrics: valid JSON, grad_norm null, loss_scale 8388608"
else
    bad "fp16 overflow metrics are not valid JSON or lost the scale's digits: $(head -1 inf.jsonl)"
fi
expect 0 "plot: wrote inf.png: 5 panels over 3 records" "$DTRAIN" plot inf.jsonl
# A loss that diverges ends the run, and the interval it did so in is the file's last record, its
# loss null: the file shows where the run went wrong, not only the intervals before.
expect 1 "the loss became" "$DTRAIN" train --model fc:64,relu,fc:10 --input 32 --steps 40 --lr 900 --log-every 10 \
    --metrics nan.jsonl
nan_step=$(sed -n 's/.*the loss became .* at step \([0-9]*\):.*/\1/p' "$tmp/out")
if python3 - nan.jsonl "$nan_step" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert rows[-1]["step"] == int(sys.argv[2]) and rows[-1]["loss"] is None, rows[-1]
assert all(r["loss"] is not None for r in rows[:-1]), rows
PY
then
    ok "a diverged run's metrics end with its last interval, loss null (step $nan_step)"
else
    bad "a diverged run's metrics do not end with the step the loss became NaN ($nan_step): $(tail -1 nan.jsonl)"
fi
# At several ranks every rank has the same mean loss (one allreduce): rank 0 says it once, and every
# rank ends on it without MPI_Abort (each once printed it, 1024 lines at 1024 ranks, then aborted).
expect 1 "the loss became" timeout 120 "$MPIRUN" -np 4 "$DTRAIN" train --model fc:64,relu,fc:10 --input 32 --steps 40 \
    --lr 900 --log-every 10
said=$(grep -c "the loss became" "$tmp/out")
[ "$said" -eq 1 ] && ! grep -q MPI_ABORT "$tmp/out" && ok "a diverged run at 4 ranks: said once, no abort" ||
    bad "a diverged run at 4 ranks: said $said times$(grep -q MPI_ABORT "$tmp/out" && echo ', MPI_Abort')"
# A checkpoint's save (slowed to 1 s by the test hook) is no step's time: not in the record after it.
DTRAIN_TEST_SLOW_CKPT=1 "$DTRAIN" train $run --steps 4 --checkpoint-dir ckt --checkpoint-every 2 --metrics ckt.jsonl \
    >/dev/null 2>&1
if python3 - ckt.jsonl <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["step"] for r in rows] == [1, 2, 3, 4] and max(r["step_time_s"] for r in rows) < 0.5, rows
PY
then
    ok "a 1 s checkpoint save is in no record's step time"
else
    bad "step times around a slow save: $(python3 -c 'import json,sys; print([json.loads(l)["step_time_s"] for l in open(sys.argv[1])])' ckt.jsonl)"
fi

# Output that cannot be written is an error (exit 1 and the cause), not a silent loss with exit 0;
# at 2 ranks each rank's own stdout on /dev/full (under mpirun alone, mpirun writes the job's
# output). A reader that stops early (| head -1) is no error, even with SIGPIPE ignored.
for c in "version" "help train" "doctor --json --no-comm" "train $run"; do
    expect 1 "dtrain: error: writing standard output failed" sh -c 'exec "$@" >/dev/full' _ "$DTRAIN" $c
done
expect 1 "No space left on device: the file system is full" sh -c 'exec "$@" >/dev/full' _ "$DTRAIN" version
timeout 120 "$MPIRUN" -np 2 sh -c 'exec "$0" doctor --json >/dev/full' "$DTRAIN" >out 2>&1
rc=$?
[ "$rc" -ne 0 ] && [ "$(grep -c "writing standard output failed" out)" -ge 1 ] &&
    ok "doctor --json at 2 ranks on /dev/full: exit $rc, the error said" ||
    { bad "doctor --json at 2 ranks on /dev/full: exit $rc"; sed 's/^/    /' out; }
for ign in "" "trap '' PIPE;"; do
    bash -c "$ign"' "$0" help 2>"$1" | head -1 >/dev/null; exit ${PIPESTATUS[0]}' "$DTRAIN" "$tmp/se1"
    rc=$?
    bash -c "$ign"' "$0" train '"$run"' --steps 50 2>"$1" | head -1 >/dev/null; exit ${PIPESTATUS[0]}' "$DTRAIN" "$tmp/se2"
    rc2=$? # 141 (SIGPIPE) unless ignored
    if [ "$rc" -eq 0 ] && [ ! -s "$tmp/se1" ] && [ ! -s "$tmp/se2" ] && { [ "$rc2" -eq 0 ] || [ -z "$ign" ]; }; then
        ok "help | head -1 and train | head -1 ${ign:+($ign) }quiet, help exit 0, train exit $rc2"
    else
        bad "a reader that stops early ${ign:+($ign)}: help exit $rc, train exit $rc2"
        cat "$tmp/se1" "$tmp/se2"
    fi
done
# A --metrics write that fails (a full disk) costs the records, never the training: rank 0 warns
# once, naming the file, why and the step from which records are missing, the run goes on to its
# checkpoint and exit 0, and the end repeats that the file is incomplete. /dev/full fails every
# write; at 2 ranks it used to end the job (MPI_Abort) with no checkpoint.
if [ -w /dev/full ]; then
    expect 0 "warning: writing --metrics /dev/full failed: No space left on device; training goes on without it: the records from step 1 on are missing" \
        timeout -s KILL 60 "$MPIRUN" -np 2 "$DTRAIN" train $run --steps 4 --metrics /dev/full --checkpoint-dir ckm
    [ "$(grep -c "writing --metrics" out)" = 1 ] && grep -q "^done: 4 steps" out && [ -f ckm/ckpt-0000000004.dtc ] &&
        grep -q "warning: --metrics /dev/full is incomplete: it has no records from step 1 on (No space left on device)" out &&
        ok "--metrics /dev/full at 2 ranks: warned once, trained to the end, checkpoint of step 4, incomplete said at the end" ||
        { bad "--metrics /dev/full at 2 ranks"; sed 's/^/    /' out; }
else
    echo "skip: no writable /dev/full: the failing --metrics check did not run"
fi
# The same mid-run on a full tmpfs: the records before the failure stay, whole, and the record
# the disk cut short is taken back (the file ends with a whole line), so plot and --resume read it.
if can_mount_tmpfs; then
    mkdir -p fullm
    timeout 120 unshare -m bash -c 'mount -t tmpfs -o size=4k none fullm || exit 3
        "$@"; rc=$?; cp fullm/m.jsonl m.after; exit $rc' _ "$DTRAIN" train $run --steps 40 --metrics fullm/m.jsonl \
        --checkpoint-dir ckm2 >out 2>&1
    rc=$? lost=$(sed -n 's/.*the records from step \([0-9]*\) on are missing.*/\1/p' out)
    last=$(grep '}$' m.after | tail -1 | sed -n 's/.*"step": \([0-9]*\),.*/\1/p')
    whole=$(python3 -c 'import json, sys; b = open(sys.argv[1]).read(); [json.loads(l) for l in b.splitlines()]
print(int(b.endswith("}\n")))' m.after 2>&1)
    if [ "$rc" -eq 0 ] && [ -n "$lost" ] && [ "$lost" -gt 1 ] && [ "$last" = $((lost - 1)) ] && [ -f ckm2/ckpt-0000000040.dtc ] &&
        [ "$whole" = 1 ] &&
        grep -q "^done: 40 steps" out && grep -q "is incomplete: it has no records from step $lost on" out; then
        ok "--metrics on a full 4k tmpfs: records 1 to $last kept, missing from $lost on (warned), the run trained to step 40"
    else
        bad "--metrics on a full tmpfs: exit $rc, missing from '$lost', last record '$last', whole lines '$whole'"
        sed 's/^/    /' out; tail -c 200 m.after; echo
    fi
else
    echo "skip: no unshare -m with a tmpfs mount (not root, or denied): the full-disk --metrics check did not run"
fi

finish
