#!/usr/bin/env bash
# GPU spans of `dtrain train --trace` (docs/trace.md): on one GPU, the "gpu compute" track has a
# forward and a backward span for every fc layer of the mlp in every step (its relus run inside
# them), each longer than 0, none
# before the host queued it (the reference-event clock), each inside a step's host span give or
# take 5 ms; with DTRAIN_COMM_WORLD1=1 (the reducer's NCCL bucket path at one rank) and, when the
# machine has two GPUs, at two ranks, the "gpu nccl" track has the buckets' allreduces, with
# bytes, each longer than 0 at two ranks (at one, NCCL queues no work for an in-place sum, so a
# span may measure 0). Exit 77 (SKIP) with the reason when no GPU can be used.
here=$(dirname "$0"); source "$here/../mpi/lib.sh"
DTRAIN=$1 MPIRUN=$2
command -v python3 >/dev/null || { echo "SKIP: python3 is needed to read the trace back"; exit 77; }
if ! "$DTRAIN" env --device cuda >"$tmp/env" 2>&1; then
    echo "SKIP: no usable GPU: $(grep -m1 -i 'error' "$tmp/env" || head -1 "$tmp/env")"
    exit 77
fi

# check FILE RANKS NCCL(0/1): python3 reads the trace back and prints what it found.
check() {
    python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ranks, nccl = int(sys.argv[2]), sys.argv[3] == "1"
ev = d["traceEvents"]
x = [e for e in ev if e["ph"] == "X"]
meta = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
GPU, TOL = 1000, 5000.0  # the first GPU track (base/trace.h); 5 ms in us
errs = []
def need(cond, what):
    if not cond: errs.append(what)
for r in range(ranks):
    mine = [e for e in x if e["pid"] == r]
    steps = [e for e in mine if e["cat"] == "step"]
    need(len(steps) == 4, "rank %d: 4 step spans, got %d" % (r, len(steps)))
    def in_a_step(e):
        return any(s["ts"] - TOL <= e["ts"] and e["ts"] + e["dur"] <= s["ts"] + s["dur"] + TOL for s in steps)
    need(meta.get((r, GPU)) == "gpu compute", "rank %d: the gpu compute track is named" % r)
    gc = [e for e in mine if e["tid"] == GPU]
    host = [e for e in mine if e["tid"] == 0 and e["cat"] in ("forward", "backward")]
    for l in (0, 2, 4):  # mlp: fc relu fc relu fc, the relus inside the fc layers
        for kind in ("fwd", "bwd"):
            g = [e for e in gc if e["name"].startswith("%s %d " % (kind, l))]
            h = [e for e in host if e["name"].startswith("%s %d " % (kind, l))]
            need(len(g) == 4, "rank %d: %s of layer %d on the GPU in each of 4 steps, got %d" % (r, kind, l, len(g)))
            need(all(e["dur"] > 0 for e in g), "rank %d: %s %d: every GPU span longer than 0" % (r, kind, l))
            # The k-th run on the device cannot begin before the host began queueing it (1 ms for
            # the reference's error).
            need(all(a["ts"] >= b["ts"] - 1000.0 for a, b in zip(sorted(g, key=lambda e: e["ts"]), sorted(h, key=lambda e: e["ts"]))),
                 "rank %d: %s %d: a GPU span begins before its host span" % (r, kind, l))
    need(all(in_a_step(e) for e in gc), "rank %d: every gpu compute span inside a step (+-5 ms)" % r)
    nc = [e for e in mine if e["tid"] == GPU + 1]
    if nccl:
        need(meta.get((r, GPU + 1)) == "gpu nccl", "rank %d: the gpu nccl track is named" % r)
        # At one rank NCCL queues nothing for an in-place sum: the span's events are back to back.
        need(len(nc) >= 4 and all(e["name"].startswith("allreduce b") and (e["dur"] > 0 or ranks == 1 and e["dur"] >= 0)
                                  and e["args"]["bytes"] > 0 for e in nc),
             "rank %d: bucket allreduces on the gpu nccl track (>= 1 a step, each longer than 0 at 2+ ranks, with bytes): %d"
             % (r, len(nc)))
        need(all(in_a_step(e) for e in nc), "rank %d: every gpu nccl span inside a step (+-5 ms)" % r)
    else:
        need(not nc, "rank %d: no gpu nccl spans without NCCL buckets" % r)
need(d["otherData"]["dropped_events"] == 0, "no dropped events")
if errs:
    print("FAILED:", "; ".join(errs))
    sys.exit(1)
g = [e for e in x if e["tid"] >= GPU]
print("%d GPU spans, %.1f us of device time, longest %s" % (len(g), sum(e["dur"] for e in g),
      max(g, key=lambda e: e["dur"])["name"] if g else "-"))
PY
}

cd "$tmp" || exit 1
run="--device cuda --model mlp --steps 4 --batch 32 --seed 3"
if "$MPIRUN" -np 1 "$DTRAIN" train $run --trace t1.json >out 2>&1; then
    msg=$(check t1.json 1 0) && ok "1 GPU: $msg" || bad "1 GPU: $msg"
else
    bad "train --device cuda --trace failed: $(cat out)"
fi
if "$DTRAIN" version 2>&1 | grep -q '^NCCL: -'; then
    echo "no NCCL in this build: the gpu nccl track is not checked"
else
    if DTRAIN_COMM_WORLD1=1 "$MPIRUN" -np 1 "$DTRAIN" train $run --trace tn.json >out 2>&1; then
        msg=$(check tn.json 1 1) && ok "1 GPU, NCCL buckets (DTRAIN_COMM_WORLD1=1): $msg" || bad "1 GPU, NCCL buckets: $msg"
    else
        bad "train --trace with DTRAIN_COMM_WORLD1=1 failed: $(cat out)"
    fi
    if [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -ge 2 ]; then
        if "$MPIRUN" -np 2 "$DTRAIN" train $run --trace t2.json >out 2>&1; then
            msg=$(check t2.json 2 1) && ok "2 GPUs: $msg" || bad "2 GPUs: $msg"
        else
            bad "train -np 2 --device cuda --trace failed: $(cat out)"
        fi
    else
        echo "one GPU: the 2-rank NCCL run is not made"
    fi
fi
finish
