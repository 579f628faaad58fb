#!/usr/bin/env bash
# dtrain train --trace: one Chrome trace merged from 2 ranks, with the spans the issue asks for
# (per-layer forward/backward, bucket allreduces on the comm track, optimizer, data wait, loader
# chunks, evaluations), times that go forward on every track, every file read by a strict reader
# (check_outputs.py), --trace-steps, a resumed run's trace beside the earlier one, and the refusals.
here=$(dirname "$0"); source "$here/lib.sh"
DTRAIN=$1 MPIRUN=$2
command -v python3 >/dev/null || { echo "SKIP: python3 is needed to read the trace back"; exit 77; }

run="--model mlp --steps 6 --batch 16 --dataset-size 2000 --blas-threads 1 --loader-threads 2"

# check_trace FILE STEPS: python3 reads the file and checks it; prints what it found. First the
# strict reader of check_outputs.py (what Perfetto and a JSON parser that refuses NaN require).
check_trace() {
    python3 "$here/check_outputs.py" trace "$1" | grep FAILED && return 1
    python3 - "$1" "$2" <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
steps = [int(s) for s in sys.argv[2].split(",")]
ev = d["traceEvents"]
x = [e for e in ev if e["ph"] == "X"]
meta = {(e["pid"], e["tid"], e["name"]): e["args"]["name"] for e in ev if e["ph"] == "M" and "name" in e["args"]}
errs = []
def need(cond, what):
    if not cond: errs.append(what)
need({e["pid"] for e in x} == {0, 1}, "events of both ranks (pids 0 and 1)")
for r in (0, 1):
    need(re.fullmatch(r"rank %d \(.+\)" % r, meta.get((r, 0, "process_name"), "")), "rank %d's process name" % r)
    need(meta.get((r, 0, "thread_name")) == "train" and meta.get((r, 1, "thread_name")) == "comm", "rank %d's track names" % r)
    mine = [e for e in x if e["pid"] == r]
    names = {e["name"] for e in mine}
    # The mlp model: fc, relu, fc, relu, fc (layers 0..4): every fc layer forward and backward;
    # the relus run inside them (forward in the fc below, backward in the fc above: no spans).
    for l in (0, 2, 4):
        need(any(n.startswith("fwd %d " % l) for n in names), "rank %d: forward of layer %d" % (r, l))
        need(any(n.startswith("bwd %d " % l) for n in names), "rank %d: backward of layer %d" % (r, l))
    for l in (1, 3):
        need(not any(re.match(r"(fwd|bwd) %d " % l, n) for n in names), "rank %d: no span of relu %d (fused)" % (r, l))
    ar = [e for e in mine if e["name"].startswith("allreduce b")]
    # Buckets in flight at once go to the comm track's lanes, "comm 2" (tid 901) and up.
    need(ar and all((e["tid"] == 1 or meta.get((r, e["tid"], "thread_name")) == "comm %d" % (e["tid"] - 899))
                    and e["dur"] > 0 and e["args"]["bytes"] > 0 for e in ar),
         "rank %d: bucket allreduces on the comm track or its lanes, each begin < end, with bytes" % r)
    need(any(e["name"] == "optimizer" for e in mine), "rank %d: optimizer" % r)
    need(any(e["name"] == "data wait" and e["tid"] == 0 for e in mine), "rank %d: data wait" % r)
    need(any(e["name"].startswith("batch ") and e["tid"] >= 2 for e in mine), "rank %d: loader chunks on a loader track" % r)
    got = sorted(e["args"]["n"] for e in mine if e["cat"] == "step")
    need(got == steps, "rank %d: steps %s, expected %s" % (r, got, steps))
    # Per step, the fc layers: 3 forward, 3 backward.
    need(sum(e["cat"] == "forward" for e in mine) == 3 * len(steps), "rank %d: 3 forward spans a step" % r)
    need(sum(e["cat"] == "backward" for e in mine) == 3 * len(steps), "rank %d: 3 backward spans a step" % r)
# The CPU backend has no device timeline: no GPU track (tid 1000 and up, docs/trace.md).
need(all(e["tid"] < 1000 for e in x), "no GPU tracks on the CPU")
# On every track, in file order, the begin times go forward and none is negative (after the offset).
tracks = {}
for e in x:
    tracks.setdefault((e["pid"], e["tid"]), []).append(e["ts"])
for k, ts in tracks.items():
    need(ts == sorted(ts) and ts[0] >= 0, "track %s: times go forward from 0" % (k,))
# On every track the spans nest or follow each other, as the format's complete events must (two
# buckets in flight at once on one track drew wrongly): the end of an open span is never passed by
# a span that began inside it. Times are microseconds with 3 decimals: 0.002 of rounding allowed.
spans = {}
for e in x:
    spans.setdefault((e["pid"], e["tid"]), []).append((e["ts"], -e["dur"], e["ts"] + e["dur"], e["name"]))
for k, sp in spans.items():
    open_ends = []
    for t0, _, t1, name in sorted(sp):
        while open_ends and open_ends[-1][0] <= t0 + 0.002:
            open_ends.pop()
        if open_ends and t1 > open_ends[-1][0] + 0.002:
            need(False, "track %s: %s [%.3f, %.3f] overlaps %s without nesting" % (k, name, t0, t1, open_ends[-1][1]))
            break
        open_ends.append((t1, name))
o = d["otherData"]
need(len(o["ranks"]) == 2 and o["ranks"][1]["rtt_us"] > 0 and o["dropped_events"] == 0,
     "otherData: 2 ranks, rank 1's round trip, no drops")
if errs:
    print("FAILED:", "; ".join(errs))
    sys.exit(1)
print("%d spans on %d tracks, rank 1 offset %.1f us (rtt %.1f us)" % (len(x), len(tracks), o["ranks"][1]["clock_offset_us"], o["ranks"][1]["rtt_us"]))
PY
}

cd "$tmp" || exit 1
# t.json.tmp: another job's temp file for the same path, half written: left alone (the temp name
# carries the writer's pid).
echo other >t.json.tmp
if "$MPIRUN" -np 2 "$DTRAIN" train $run --trace t.json >out 2>&1; then
    [ -f t.json ] && ! ls t.json.tmp.* >/dev/null 2>&1 && grep -q "trace of 2 ranks in t.json" out && ok "train --trace wrote t.json" ||
        bad "train --trace: no t.json, a temp file left, or no line saying so: $(cat out)"
    [ "$(cat t.json.tmp 2>/dev/null)" = other ] && ok "another writer's t.json.tmp left as it was" ||
        bad "another writer's t.json.tmp was overwritten or renamed"
    msg=$(check_trace t.json 1,2,3,4,5,6) && ok "trace of all steps: $msg" || bad "trace of all steps: $msg"
else
    bad "train --trace failed: $(cat out)"
fi

if "$MPIRUN" -np 2 "$DTRAIN" train $run --trace t23.json --trace-steps 2:3 >out 2>&1; then
    msg=$(check_trace t23.json 2,3) && ok "--trace-steps 2:3: $msg" || bad "--trace-steps 2:3: $msg"
else
    bad "train --trace-steps 2:3 failed: $(cat out)"
fi

# Checkpoint saves are spans too: at step 3 (--checkpoint-every 3) and the final one.
if "$MPIRUN" -np 2 "$DTRAIN" train $run --checkpoint-dir ck --checkpoint-every 3 --trace tc.json >out 2>&1; then
    n=$(python3 -c 'import json,sys; print(sorted((e["pid"], e["args"]["n"]) for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("cat") == "checkpoint"))' tc.json)
    [ "$n" = "[(0, 3), (0, 6), (1, 3), (1, 6)]" ] && ok "checkpoint spans at steps 3 and 6 on both ranks" ||
        bad "checkpoint spans: $n, expected steps 3 and 6 on ranks 0 and 1"
else
    bad "train --checkpoint-dir --trace failed: $(cat out)"
fi

# An evaluation (--eval-every 2, and at the end) is one eval span in its step's span, holding the
# forward spans of its batches: outside it, every step has the same forward spans (the held-out
# batches' read as their step's own training forward before), and the file stays strict.
python3 "$here/make_idx.py" idx 400 100 10 60
if "$MPIRUN" -np 2 "$DTRAIN" train --data idx --model fc:32,relu,fc:10 --steps 4 --batch 16 --blas-threads 1 \
    --eval-every 2 --trace te.json >out 2>&1; then
    strict=$(python3 "$here/check_outputs.py" trace te.json) || bad "te.json read strictly: $strict"
    msg=$(python3 - te.json 2>&1 <<'PY'
import json, sys
x = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X" and e["tid"] == 0]
def inside(e, o): return o["ts"] <= e["ts"] and e["ts"] + e["dur"] <= o["ts"] + o["dur"] + 0.002
for r in (0, 1):
    mine = [e for e in x if e["pid"] == r]
    steps = {e["args"]["n"]: e for e in mine if e["cat"] == "step"}
    ev = [e for e in mine if e["cat"] == "eval"]
    at = sorted(s for e in ev for s, o in steps.items() if inside(e, o))
    assert at == [2, 4] and all(e["args"]["n"] == 100 for e in ev), (r, at, ev)
    fwd = [e for e in mine if e["cat"] == "forward"]
    own = [sum(inside(e, steps[s]) and not any(inside(e, v) for v in ev) for e in fwd) for s in sorted(steps)]
    assert len(set(own)) == 1 and len(fwd) > sum(own), (r, own, len(fwd))
print("eval spans at steps 2 and 4 on both ranks, %d forward spans a step outside them" % own[0])
PY
) && ok "$msg ($strict)" || bad "evaluation in the trace: $msg"
else
    bad "train --eval-every --trace failed: $(cat out)"
fi

# A run stopped by a signal (exit 143: no --checkpoint-dir) still writes the trace of the steps it did.
DTRAIN_FAULT=usr1:0:3 "$MPIRUN" -np 2 "$DTRAIN" train $run --trace ts.json >out 2>&1
rc=$?
if [ "$rc" -eq 143 ] && [ -f ts.json ]; then
    n=$(python3 -c 'import json,sys; print(sorted({e["args"]["n"] for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("cat") == "step"}))' ts.json)
    [ "$n" = "[1, 2, 3]" ] && ok "a stopped run's trace has its steps 1 to 3" || bad "stopped run: trace steps $n, expected [1, 2, 3]"
else
    bad "a run stopped at step 3 exited $rc (expected 143) or wrote no trace: $(cat out)"
fi

# A resumed run keeps the trace already at --trace (the stopped run's steps 2 and 3 of 2:5) and
# writes its own, steps 4 and 5, beside it; a second resume from the same checkpoint takes the next
# free name; one whose --trace-steps all lie at or before its first step writes nothing, and says so.
# (The resumed run used to replace the stopped run's trace.)
steps_of() { python3 -c 'import json,sys; print(sorted({e["args"]["n"] for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("cat") == "step"}))' "$1"; }
tr1="--model fc:16,relu,fc:10 --input 32 --batch 8 --steps 6 --blas-threads 1 --trace tr.json --trace-steps 2:5
     --checkpoint-dir ckr --resume auto"
DTRAIN_FAULT=term:0:3 "$DTRAIN" train $tr1 >out 2>&1
cp -r ckr ckr3 && cp tr.json tr.first
expect 0 "trace: tr.json holds an earlier run's trace, kept; this run, resumed after step 3, writes its own to tr.resumed-3.json" \
    "$DTRAIN" train $tr1
[ "$(steps_of tr.json)" = "[2, 3]" ] && cmp -s tr.json tr.first && [ "$(steps_of tr.resumed-3.json)" = "[4, 5]" ] &&
    grep -q "^trace of 1 rank in tr.resumed-3.json" "$tmp/out" &&
    ok "resumed at 3: tr.json kept with steps 2 and 3, tr.resumed-3.json holds steps 4 and 5" ||
    bad "resumed at 3: tr.json steps $(steps_of tr.json), tr.resumed-3.json steps $(steps_of tr.resumed-3.json 2>&1)"
expect 0 "writes its own to tr.resumed-3-2.json" "$DTRAIN" train ${tr1/ckr/ckr3}
[ "$(steps_of tr.resumed-3-2.json)" = "[4, 5]" ] && cmp -s tr.json tr.first && ok "a second resume at 3: tr.resumed-3-2.json" ||
    bad "a second resume at 3: $(ls tr.*)"
ls tr.* >before
expect 0 "trace: --trace-steps 2:5 are all at or before step 6, after which this run resumed: it records nothing and writes no trace (tr.json is left as it is)" \
    "$DTRAIN" train ${tr1/--steps 6/--steps 8}
ls tr.* | cmp -s - before && cmp -s tr.json tr.first && ok "resumed at 6 past --trace-steps 2:5: no trace written, none replaced" ||
    bad "resumed at 6 past the trace steps: $(ls tr.*)"

for v in 3:2 0:2 2 a:b 2:3:4 ""; do
    expect 2 "--trace-steps '$v'" "$DTRAIN" train $run --trace t.json --trace-steps "$v"
done
expect 2 "needs --trace FILE.json" "$DTRAIN" train $run --trace-steps 2:3
# An unwritable path stops the run before its first step.
expect 2 "--trace $tmp/no/such/dir/t.json cannot be written" "$DTRAIN" train $run --trace "$tmp/no/such/dir/t.json"
grep -q "^step" "$tmp/out" && bad "the run with an unwritable --trace trained first" || ok "no step before the refusal"
# The directory of --trace and --metrics removed while 2 ranks train: the trace's failure speaks of
# --trace on every rank (not of the library call), and the removed metrics file is said once, at a
# checkpoint. The directory goes once a step line is out (slowed steps: 20 ms each on rank 0).
mkdir -p gone
DTRAIN_FAULT=slow:0:1 "$MPIRUN" -np 2 -x DTRAIN_FAULT "$DTRAIN" train $run --steps 100 --log-every 1 \
    --checkpoint-dir ckg --checkpoint-every 5 --trace gone/t.json --metrics gone/m.jsonl >gone.out 2>&1 &
pid=$!
for _ in $(seq 200); do grep -q "^step" gone.out 2>/dev/null && break; sleep 0.05; done
rm -rf gone
wait $pid
rc=$?
if [ "$rc" -ne 0 ] && grep -q "rank 0 cannot write the trace at --trace (its message says why)" gone.out &&
    grep -q -- "--trace gone/t.json cannot be written (.*No such file or directory): its directory does not exist" gone.out &&
    ! grep -q "call again with another path" gone.out &&
    [ "$(grep -c "warning: --metrics gone/m.jsonl was removed while this run writes it" gone.out)" -eq 1 ]; then
    ok "trace and metrics directory removed mid-run at 2 ranks: exit $rc, --trace named on every rank, metrics loss said once"
else
    bad "directory removed mid-run: exit $rc: $(grep -E "error|warning" gone.out | head -5)"
fi
# A full disk while rank 0 writes: every rank ends with the write's error (none waits in its
# send), and no half file is left. Needs root's unshare -m for a 4 KiB tmpfs; skipped elsewhere.
if unshare -m true 2>/dev/null; then
    mkdir -p "$tmp/full"
    timeout 120 unshare -m bash -c 'mount -t tmpfs -o size=4k none "$1" || exit 3
        "$2" -np 2 "$3" train --model mlp --steps 12 --batch 16 --dataset-size 200 --blas-threads 1 \
            --trace "$1/t.json" >"$4" 2>&1
        rc=$?; ls -A "$1" >"$4.left"; exit $rc' _ "$tmp/full" "$MPIRUN" "$DTRAIN" "$tmp/full.out"
    rc=$?
    if [ "$rc" -eq 3 ]; then
        echo "skip: no tmpfs mount in the namespace: the full-disk variant does not run"
    elif [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q "writing failed: No space left on device" "$tmp/full.out" &&
        [ ! -s "$tmp/full.out.left" ]; then
        ok "a full disk: exit $rc, the write's error, no file left"
    else
        bad "a full disk: exit $rc (124: a rank hung), left '$(cat "$tmp/full.out.left" 2>/dev/null)': $(tail -5 "$tmp/full.out")"
    fi
else
    echo "skip: unshare -m not permitted here: the full-disk variant does not run"
fi
finish
