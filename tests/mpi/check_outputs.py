#!/usr/bin/env python3
"""The machine-readable outputs of dtrain train, read as a strict consumer reads them.

  check_outputs.py trace FILE
  check_outputs.py metrics FILE --ranks N [--clip] [--steps S,S,...] [--evals S,S,...]

Both: UTF-8, JSON that parses with NaN and Infinity refused (python's json takes them; they are
not JSON, and jq, JSON.parse and Perfetto refuse the file). trace: the Trace Event Format as
docs/trace.md gives it (every span "X" with ts and dur in microseconds, not negative; integer pid
and tid; every track with a span named by a thread_name event, every rank by a process_name; the
documented categories; begin times that go forward and spans that nest on every track). metrics:
every record has the fields docs/training.md lists, of their types, and no other; steps that rise.
Prints what it found; exits 1 with the faults.
"""
import json
import re
import sys

CATS = {"step", "forward", "backward", "comm", "optimizer", "data", "checkpoint", "eval", "user"}
NUM = (int, float)


def strict_load(text):
    def refuse(c):
        raise ValueError("%s is not JSON" % c)
    return json.loads(text, parse_constant=refuse)


def read_text(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8")  # raises on bytes that are not UTF-8


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def check_trace(path, errs):
    d = strict_load(read_text(path))
    ev = d["traceEvents"]
    named = {(e["pid"], e["tid"]) for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    procs = {e["pid"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    tracks = {}
    for e in ev:
        if not (is_int(e.get("pid")) and is_int(e.get("tid"))):
            errs.append("pid/tid not integers: %r" % e)
            continue
        if e["ph"] != "X":
            continue
        key = (e["pid"], e["tid"])
        if not (isinstance(e.get("ts"), NUM) and e["ts"] >= 0 and isinstance(e.get("dur"), NUM) and e["dur"] >= 0):
            errs.append("ts/dur missing or negative: %r" % e)
        if key not in named:
            errs.append("track %s has spans but no thread_name" % (key,))
        if e["pid"] not in procs:
            errs.append("rank %d has spans but no process_name" % e["pid"])
        if e.get("cat") not in CATS:
            errs.append("category %r is not documented" % e.get("cat"))
        if not is_int(e.get("args", {}).get("n")):
            errs.append("span without an integer args.n: %r" % e)
        tracks.setdefault(key, []).append(e)
    for key, spans in tracks.items():
        if [e["ts"] for e in spans] != sorted(e["ts"] for e in spans):
            errs.append("track %s: begin times go back" % (key,))
        # Complete events on one track must nest: a span that begins inside another ends inside it
        # (3 decimals of microseconds: 0.002 of rounding allowed).
        open_ends = []
        for e in sorted(spans, key=lambda e: (e["ts"], -e["dur"])):
            t0, t1 = e["ts"], e["ts"] + e["dur"]
            while open_ends and open_ends[-1][0] <= t0 + 0.002:
                open_ends.pop()
            if open_ends and t1 > open_ends[-1][0] + 0.002:
                errs.append("track %s: %s crosses the end of %s" % (key, e["name"], open_ends[-1][1]))
                break
            open_ends.append((t1, e["name"]))
    n = sum(len(s) for s in tracks.values())
    return "%d spans on %d tracks of %d ranks" % (n, len(tracks), len(procs))


def check_metrics(path, opts, errs):
    fields = {"time": str, "step": "int", "epoch": NUM, "loss": NUM, "accuracy": NUM, "samples_per_s": NUM,
              "step_time_s": NUM, "comm_wait_s": NUM, "data_wait_s": NUM, "precision": str, "loss_scale": NUM,
              "skipped_steps": "int", "skipped_total": "int", "lr": NUM}
    if opts["ranks"] > 1:
        fields.update(slowest_rank="int", slowest_busy_s=NUM, median_busy_s=NUM, straggler=bool)
    if opts["clip"]:
        fields["grad_norm"] = NUM
    steps, evals, nulls = [], [], []
    for i, line in enumerate(read_text(path).splitlines(), 1):
        rec = strict_load(line)
        want = dict(fields)
        if rec.get("straggler") is True:
            want["straggler_phase"] = str
        if "eval_loss" in rec or "eval_accuracy" in rec:
            want.update(eval_loss=NUM, eval_accuracy=NUM)
            evals.append(rec.get("step"))
        if set(rec) != set(want):
            errs.append("record %d: fields not documented %s, missing %s" %
                        (i, sorted(set(rec) - set(want)), sorted(set(want) - set(rec))))
        for k, t in want.items():
            v = rec.get(k)
            if v is None:
                nulls.append("%s@%s" % (k, rec.get("step")))  # a figure that is not finite
            elif not (is_int(v) if t == "int" else isinstance(v, t) and not (t is NUM and isinstance(v, bool))):
                errs.append("record %d: %s is %r" % (i, k, v))
        if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", str(rec.get("time"))):
            errs.append("record %d: time %r is not ISO 8601 UTC with milliseconds" % (i, rec.get("time")))
        if steps and not rec["step"] > steps[-1]:
            errs.append("record %d: step %s after %s" % (i, rec["step"], steps[-1]))
        steps.append(rec["step"])
    for name, want in (("steps", opts["steps"]), ("evals", opts["evals"])):
        got = steps if name == "steps" else evals
        if want is not None and got != want:
            errs.append("%s %s, expected %s" % (name, got, want))
    return "%d records, steps %s, evaluations at %s%s" % (len(steps), steps, evals,
                                                          ", null: " + " ".join(nulls) if nulls else "")


def main(argv):
    kind, path, rest = argv[1], argv[2], argv[3:]
    errs = []
    if kind == "trace":
        said = check_trace(path, errs)
    else:
        opts = {"ranks": 1, "clip": False, "steps": None, "evals": None}
        while rest:
            a = rest.pop(0)
            if a == "--clip":
                opts["clip"] = True
            elif a == "--ranks":
                opts["ranks"] = int(rest.pop(0))
            else:
                opts[a[2:]] = [int(s) for s in rest.pop(0).split(",") if s]
        said = check_metrics(path, opts, errs)
    if errs:
        print("FAILED: " + "; ".join(errs[:10]))
        return 1
    print(said)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except (ValueError, KeyError, UnicodeDecodeError) as e:  # not JSON, not UTF-8, a key missing
        print("FAILED: %s: %s" % (sys.argv[2], e))
        sys.exit(1)
