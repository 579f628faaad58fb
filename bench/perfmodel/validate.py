#!/usr/bin/env python3
"""validate.py DIR... [--dtrain build/dtrain]: the step-time model's error table.

Every `step-*` file measure_local.sh / measure_cluster.sh left in DIR is predicted by `dtrain
model-perf` from its own profile (the compute) and the `bench allreduce` run of the same setting and
repetition (the fitted link); the prediction is compared with the step that run measured. Rows
group the repetitions: the medians of load, measured and predicted step, the median of the
per-run errors (paired: each prediction against its own run) and their range.
"""
import argparse, glob, os, re, statistics, subprocess, sys


def predict(dtrain, step, allreduce, world, per_node, extra):
    cmd = [dtrain, "model-perf", "--profile", step, "--world", str(world), "--gpus-per-node", str(per_node)] + extra
    if allreduce:
        cmd += ["--allreduce", allreduce]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError("%s: %s" % (" ".join(cmd), out.stderr.strip()))
    row = [l for l in out.stdout.splitlines() if re.match(r"^\s+%d\s+\d+\s" % world, l)][0]
    cols = row.split()
    m = re.search(r"\|\s+([0-9.]+)\s+[-+][0-9.]+%$", row)
    return float(cols[2]), float(m.group(1)) if m else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--dtrain", default="build/dtrain")
    ap.add_argument("--no-overlap", action="store_true", help="predict with --no-overlap")
    a = ap.parse_args()
    extra = ["--no-overlap"] if a.no_overlap else []
    groups = {}
    for d in a.dirs:
        for step in sorted(glob.glob(os.path.join(d, "step-*.txt"))):
            name = os.path.basename(step)
            m = re.match(r"step-(\w+)-w(\d+)-r(\d+)\.txt$", name)
            if m:
                model, w, rep = m.group(1), int(m.group(2)), m.group(3)
                setting, per_node = "1 node", w
                ar = os.path.join(d, "allreduce-w%d-r%s.txt" % (w, rep)) if w > 1 else None
            else:
                m = re.match(r"step-(\w+)-(\w+)-n(\d+)-r(\d+)\.txt$", name)
                if not m:
                    continue
                model, rate, w, rep = m.group(1), m.group(2), int(m.group(3)), m.group(4)
                setting, per_node = "%d nodes, %s" % (w, rate), 1
                ar = os.path.join(d, "allreduce-%s-n%d-r%s.txt" % (rate, w, rep))
            try:
                pred, meas = predict(a.dtrain, step, ar, w, per_node, extra)
            except (RuntimeError, IndexError) as e:
                print("skipped %s: %s" % (step, e), file=sys.stderr)
                continue
            load = float(open(step + ".load").read().split()[0]) if os.path.exists(step + ".load") else float("nan")
            groups.setdefault((setting, model, w), []).append((load, meas, pred, (pred - meas) / meas))
    print("| setting | model | ranks | runs | load | measured ms | predicted ms | error (median) | error range |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    within = total = 0
    for (setting, model, w), rows in sorted(groups.items(), key=lambda kv: (kv[0][0] != "1 node", kv[0])):
        med = lambda i: statistics.median(r[i] for r in rows)
        err = med(3)
        total += 1
        within += abs(err) <= 0.15
        print("| %s | %s | %d | %d | %.1f | %.1f | %.1f | %+.0f%% | %+.0f%% .. %+.0f%% |" % (
            setting, model, w, len(rows), med(0), med(1), med(2), 100 * err, 100 * min(r[3] for r in rows),
            100 * max(r[3] for r in rows)))
    print("\n%d of %d rows within 15%% (median paired error)." % (within, total))


if __name__ == "__main__":
    main()
