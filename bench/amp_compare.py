#!/usr/bin/python3
"""fp32 against fp16 and bf16 training in dtrain, side by side in one run.

For each model (mlp, cnn), rank count (1, 2) and precision (fp32, fp16, bf16) this runs
    mpirun -np R build/dtrain train --model M --batch 128 --precision P ... --metrics FILE
one after the other on this machine and reports: samples/s (the samples of the logged intervals after
the first, which is warm-up, over their summed time), step time and the exposed gradient-communication
wait per step over those intervals, the gradient bytes
each rank sends per step, the memory summary dtrain prints at start (parameters, gradients,
optimizer state, activations, workspace), the accuracy of the last interval, steps skipped by loss
scaling, and the ratio of each 16-bit run's samples/s to fp32's at the same model and rank count.

Run:  /usr/bin/python3 bench/amp_compare.py [--repeat 3] [--steps mlp=200,cnn=60] [--json OUT]
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ["mlp", "cnn"]
PRECISIONS = ["fp32", "fp16", "bf16"]
DEFAULT_STEPS = {"mlp": 200, "cnn": 60}
BATCH = 128
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_mpi_yield_when_idle": "1", "OMPI_MCA_rmaps_base_oversubscribe": "1",
           "OPENBLAS_NUM_THREADS": "1"}


def parse_steps(text):
    steps = dict(DEFAULT_STEPS)
    if not text:
        return steps
    # At least 20 steps, in either form: the rates come from the logged intervals after the first
    # (warm-up) one, at a log every steps/10, so fewer leave intervals of one or two steps.
    usage = f"amp_compare: error: --steps '{text}': use N or mlp=N,cnn=M with N >= 20"
    if text.isdigit():
        if int(text) < 20:
            sys.exit(usage)
        return {m: int(text) for m in steps}
    for part in text.split(","):
        name, _, n = part.partition("=")
        if name not in steps or not n.isdigit() or int(n) < 20:
            sys.exit(usage)
        steps[name] = int(n)
    return steps


def timed_totals(rows, cmd):
    """samples/s, step ms and comm wait ms over the intervals after the first (warm-up): their
    samples over their summed time, their time and wait over their steps. A mean of the intervals'
    own rates would weigh a fast interval as much as a slow one of the same samples, which took
    longer (and a short last interval as much as a full one). An interval's time is its steps over
    its samples_per_s times the samples of a step, a factor that cancels in the rate, so the steps
    are enough (as bench/ddp_compare.py)."""
    steps_sum = rate_time = step_time = comm_time = 0.0
    for prev, r in zip(rows, rows[1:]):
        n, sps = r["step"] - prev["step"], r.get("samples_per_s")
        if n <= 0 or not isinstance(sps, (int, float)) or not sps > 0:
            raise RuntimeError(f"{cmd}: the interval ending at step {r['step']} has {n} step(s) at samples_per_s "
                               f"{sps!r}: no rate to use")
        steps_sum += n
        rate_time += n / sps
        step_time += n * r["step_time_s"]
        comm_time += n * r["comm_wait_s"]
    return {"samples_per_s": steps_sum / rate_time, "step_ms": 1e3 * step_time / steps_sum,
            "comm_ms": 1e3 * comm_time / steps_sum}


def run_one(dtrain, model, ranks, precision, steps):
    env = dict(os.environ, **MPI_ENV)
    with tempfile.TemporaryDirectory(prefix="amp_compare.") as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        cmd = ["mpirun", "-np", str(ranks), dtrain, "train", "--model", model, "--batch", str(BATCH),
               "--steps", str(steps), "--lr", "0.01", "--momentum", "0.9", "--precision", precision,
               "--log-every", str(max(1, steps // 10)), "--metrics", metrics, "--device", "cpu",
               "--blas-threads", "1"]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
        rows = [json.loads(line) for line in open(metrics) if line.strip()]
    rows = sorted((r for r in rows if "samples_per_s" in r and "step" in r), key=lambda r: r["step"])
    # The first interval is warm-up and never timed: with only it logged there is nothing to report.
    if len(rows) < 2:
        raise RuntimeError(f"{' '.join(cmd)} logged {len(rows)} interval(s); the first is warm-up and left out, "
                           "so at least 2 are needed: raise --steps")
    totals = timed_totals(rows, " ".join(cmd))
    mem = re.search(r"parameters ([0-9.]+) MiB, gradients ([0-9.]+) MiB, optimizer ([0-9.]+) MiB, "
                    r"activations ([0-9.]+) MiB, workspace ([0-9.]+) MiB, total ([0-9.]+) MiB", p.stdout)
    sent = re.search(r"gradient bytes sent per rank per step: ([0-9]+)", p.stdout)
    return {
        **totals,
        "accuracy": rows[-1]["accuracy"],
        "skipped": rows[-1].get("skipped_total", 0),
        "sent_bytes": int(sent.group(1)) if sent else None,
        "mem_mib": dict(zip(["params", "grads", "optimizer", "activations", "workspace", "total"],
                            map(float, mem.groups()))) if mem else None,
        "command": " ".join(cmd),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtrain", default=os.path.join(REPO, "build", "dtrain"))
    ap.add_argument("--models", default="mlp,cnn")
    ap.add_argument("--ranks", default="1,2")
    ap.add_argument("--precisions", default="fp32,fp16,bf16")
    ap.add_argument("--steps", default="")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each configuration; the median is reported (an even N: the mean of the middle two)")
    ap.add_argument("--json", help="write every run's numbers there")
    a = ap.parse_args()
    if not os.access(a.dtrain, os.X_OK):
        sys.exit(f"amp_compare: error: {a.dtrain} is not an executable: run `make build` first")
    models = a.models.split(",")
    precisions = a.precisions.split(",")
    for m in models:
        if m not in MODELS:
            sys.exit(f"amp_compare: error: --models: '{m}' is not one of {', '.join(MODELS)}")
    for p in precisions:
        if p not in PRECISIONS:
            sys.exit(f"amp_compare: error: --precisions: '{p}' is not one of {', '.join(PRECISIONS)}")
    # A rank count below 1 is refused: `mpirun -np 0` starts one rank a slot, so the row would name
    # ranks that did not run.
    try:
        ranks = [int(r) for r in a.ranks.split(",")]
        if any(r < 1 for r in ranks):
            raise ValueError
    except ValueError:
        sys.exit(f"amp_compare: error: --ranks '{a.ranks}' is not a list of positive numbers")
    if a.repeat < 1:
        sys.exit("amp_compare: error: --repeat must be at least 1")
    steps = parse_steps(a.steps)

    results = {}
    # Interleave the precisions within each repeat so slow phases of the machine hit all of them.
    for rep in range(a.repeat):
        for m in models:
            for r in ranks:
                for p in precisions:
                    print(f"[{rep + 1}/{a.repeat}] {m}, {r} rank(s), {p}, {steps[m]} steps ...", end=" ", flush=True)
                    try:
                        res = run_one(a.dtrain, m, r, p, steps[m])
                    except RuntimeError as e:
                        print("failed")
                        sys.exit(f"amp_compare: error: {e}")
                    print(f"{res['samples_per_s']:,.1f} samples/s")
                    results.setdefault((m, r, p), []).append(res)

    def med(key, m, r, p):
        return statistics.median(x[key] for x in results[(m, r, p)])

    print("\n## dtrain: fp32 vs fp16 vs bf16 (CPU)\n")
    print(f"batch {BATCH} per rank, SGD momentum 0.9; median of {a.repeat} run(s) (an even count: the mean of the "
          "middle two); samples/s, step and comm wait over the logged intervals after the first (their samples over "
          "their time); accuracy and skipped of the last run\n")
    print("| model | ranks | precision | samples/s | vs fp32 | step ms | comm wait ms | bytes sent/rank/step "
          "| params MiB | grads MiB | optim MiB | activations MiB | workspace MiB | total MiB | accuracy | skipped |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for m in models:
        for r in ranks:
            base = med("samples_per_s", m, r, "fp32") if (m, r, "fp32") in results else None
            for p in precisions:
                runs = results[(m, r, p)]
                sps = med("samples_per_s", m, r, p)
                mem = runs[0]["mem_mib"] or {}
                print(f"| {m} | {r} | {p} | {sps:,.0f} | {sps / base:.2f} |" if base else f"| {m} | {r} | {p} | {sps:,.0f} | - |",
                      f"{med('step_ms', m, r, p):.2f} | {med('comm_ms', m, r, p):.2f} | {runs[0]['sent_bytes'] or 0:,} |",
                      " | ".join(f"{mem.get(k, 0):.2f}" for k in ["params", "grads", "optimizer", "activations",
                                                                    "workspace", "total"]),
                      f"| {runs[-1]['accuracy']:.3f} | {runs[-1]['skipped']} |")
    print("\nCommands (one per configuration):\n")
    for key in results:
        print("    OPENBLAS_NUM_THREADS=1 " + re.sub(r"--metrics \S+", "--metrics FILE", results[key][0]["command"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({f"{m}/{r}/{p}": v for (m, r, p), v in results.items()}, f, indent=1)


if __name__ == "__main__":
    main()
