#!/usr/bin/python3
"""Compare dtrain's CPU training throughput with PyTorch DistributedDataParallel (gloo, CPU).

For each model (mlp, cnn) and rank count (1, 2) this runs, on this machine, one after the other:
  * dtrain:  mpirun -np R build/dtrain train ... --metrics FILE: the samples of the logged intervals
             after the first (warm-up) one over their summed time (each interval's time is its
             samples over its samples_per_s), as PyTorch's side is total samples over total time;
  * PyTorch: DDP(backend=gloo) on CPU, same layers, batch, optimizer; R processes from
             torch.multiprocessing (spawn); wall time of S steps on rank 0 between two barriers,
             after warm-up steps, on pre-generated random tensors.
Then prints a markdown table, 2-rank scaling efficiencies and the targets.

Run with Debian's python:  /usr/bin/python3 bench/ddp_compare.py [--quick] [--json OUT]
"""

import argparse
import json
import os
import re
import platform
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "bench"))   # ddp_torch, also when loaded by file path
import ddp_torch                                   # noqa: E402  (the PyTorch side)

# Same layer-list language as `dtrain train --model`: fc:N, relu, conv:OUT:K:STRIDE:PAD,
# pool:K (max-pool, window K, stride K); a flatten is implied before the first fc.
MODELS = {
    "mlp": {"layers": "fc:1024,relu,fc:1024,relu,fc:10", "input": "784"},
    "cnn": {"layers": "conv:32:3:1:1,relu,pool:2,conv:64:3:1:1,relu,pool:2,fc:128,relu,fc:10",
            "input": "1x28x28"},
}
CLASSES = 10
BATCH = 128            # per rank
LR = 0.01
MOMENTUM = 0.9
# Default steps per run: each run takes roughly 10-20 s on a 2-core machine (measured with PyTorch;
# see bench/README.md). --steps overrides, --quick shrinks them for a smoke test.
DEFAULT_STEPS = {"mlp": 200, "cnn": 80}
QUICK_STEPS = 20

# Targets, checked when the runs they need are present.
TARGET_MLP_RATIO_2 = 2.0
TARGET_CNN_RATIO_2 = 1.2
TARGET_DTRAIN_MLP_SCALING = 0.85

MPI_ENV = {
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "OMPI_MCA_mpi_yield_when_idle": "1",
    "OPENBLAS_NUM_THREADS": "1",
}
TORCH_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


class BenchError(Exception):
    pass


def die(msg):
    print(f"ddp_compare: error: {msg}", file=sys.stderr)
    sys.exit(1)


# ----------------------------------------------------------------------------------------------
# machine

def machine_info():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        nproc = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
        nproc = int(nproc)
    except (OSError, ValueError):
        nproc = len(os.sched_getaffinity(0))
    try:
        with open("/proc/loadavg") as f:
            load = " ".join(f.read().split()[:3])
    except OSError:
        load = "unknown"
    return {"nproc": nproc, "cpu_model": cpu, "loadavg_at_start": load, "kernel": platform.release(),
            "python": sys.version.split()[0], "hostname": socket.gethostname()}


# ----------------------------------------------------------------------------------------------
# dtrain

def log_every_for(steps):
    return max(1, steps // 10)


def dtrain_command(dtrain, model, ranks, steps, metrics, nproc):
    k = log_every_for(steps)
    cmd = ["mpirun", "-np", str(ranks)]
    if ranks > nproc:
        cmd.append("--oversubscribe")
    cmd += ["-x", "OPENBLAS_NUM_THREADS=1",
            dtrain, "train",
            "--model", model, "--input", MODELS[model]["input"],
            "--batch", str(BATCH), "--steps", str(steps),
            "--optim", "sgd", "--momentum", str(MOMENTUM), "--lr", str(LR),
            "--log-every", str(k), "--metrics", metrics,
            "--device", "cpu", "--blas-threads", "1"]
    return cmd


def env_prefix(env):
    return " ".join(f"{k}={v}" for k, v in env.items())


def show_cmd(cmd, env):
    return env_prefix(env) + " " + " ".join(shlex.quote(c) for c in cmd)


def read_metrics(path):
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise BenchError(f"{path}:{n}: not JSON ({e}): {line[:200]}")
    rows = [r for r in rows if "samples_per_s" in r and "step" in r]
    rows.sort(key=lambda r: r["step"])
    return rows


def run_dtrain(dtrain, model, ranks, steps, nproc, timeout, verbose):
    with tempfile.TemporaryDirectory(prefix="ddp_compare.") as tmp:
        metrics = os.path.join(tmp, "metrics.jsonl")
        cmd = dtrain_command(dtrain, model, ranks, steps, metrics, nproc)
        env = dict(os.environ, **MPI_ENV)
        t0 = time.perf_counter()
        # Own process group, so a run past --timeout takes mpirun's ranks down with it.
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            raise BenchError(f"dtrain ran past --timeout {timeout} s: {show_cmd(cmd, MPI_ENV)}\n"
                             f"--- stderr ---\n{err.rstrip()}")
        wall = time.perf_counter() - t0
        if verbose and out:
            print(out, end="")
        if p.returncode != 0:
            raise BenchError(f"dtrain failed (exit {p.returncode}): {show_cmd(cmd, MPI_ENV)}\n"
                             f"--- stderr ---\n{err.rstrip()}\n--- stdout (tail) ---\n"
                             f"{out[-2000:].rstrip()}")
        if not os.path.exists(metrics):
            raise BenchError(f"dtrain wrote no metrics file ({metrics}): {show_cmd(cmd, MPI_ENV)}\n"
                             f"--- stderr ---\n{err.rstrip()}")
        rows = read_metrics(metrics)
    if len(rows) < 2:
        raise BenchError(f"dtrain logged {len(rows)} interval(s) for {model} at {ranks} ranks; "
                         f"need at least 2 (the first is dropped as warm-up): raise --steps")
    # Total samples over total time, as PyTorch's side: a mean of the intervals' rates would weigh a
    # fast interval as much as a slow one of the same samples, which took longer. An interval's
    # samples are its steps x R x BATCH, a factor that cancels: the steps are enough.
    kept = rows[1:]
    steps_sum = time_sum = 0.0
    for prev, r in zip(rows, kept):
        n, sps = r["step"] - prev["step"], r["samples_per_s"]
        if n <= 0 or not isinstance(sps, (int, float)) or not sps > 0:
            raise BenchError(f"dtrain's metrics for {model} at {ranks} ranks: the interval ending at step "
                             f"{r['step']} has {n} step(s) at samples_per_s {sps!r}: no rate to use")
        steps_sum += n
        time_sum += n / sps
    rate = steps_sum / time_sum
    last = rows[-1]
    return {"samples_per_s": rate, "intervals": len(kept), "dropped_steps": rows[0]["step"],
            "final_loss": last.get("loss"), "comm_wait_s": last.get("comm_wait_s"),
            "wall_s": wall, "command": show_cmd(cmd, MPI_ENV)}


def dtrain_env_report(dtrain, ranks, nproc):
    cmd = ["mpirun", "-np", str(ranks)] + (["--oversubscribe"] if ranks > nproc else []) + \
          ["-x", "OPENBLAS_NUM_THREADS=1", dtrain, "env", "--device", "cpu", "--blas-threads", "1"]
    p = subprocess.run(cmd, env=dict(os.environ, **MPI_ENV), capture_output=True, text=True,
                       timeout=120)
    if p.returncode != 0:
        return f"(dtrain env failed, exit {p.returncode}: {p.stderr.strip()[:500]})"
    return p.stdout.rstrip()


def dtrain_blas_core(dtrain):
    """The OpenBLAS kernel set dtrain runs (it re-executes itself with OPENBLAS_CORETYPE when
    OpenBLAS guessed below the CPU), so that PyTorch, which uses the same OpenBLAS, gets it too."""
    try:
        p = subprocess.run([dtrain, "env", "--device", "cpu"], env=dict(os.environ, **MPI_ENV),
                           capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"OpenBLAS kernels: (\S+)", p.stdout)
    return m.group(1) if m else None


def torch_cfg(model):
    return dict(MODELS[model], batch=BATCH, lr=LR, momentum=MOMENTUM, classes=CLASSES)


def run_torch(model, ranks, steps, warmup, pin, seed):
    try:
        return ddp_torch.run(torch_cfg(model), ranks, steps, warmup, pin, seed, TORCH_ENV)
    except RuntimeError as e:
        raise BenchError(str(e))


def torch_version():
    try:
        import torch
    except ImportError as e:
        die(f"PyTorch is missing for {sys.executable} ({e}); install Debian's package: "
            f"apt-get install python3-torch   (and run this script with /usr/bin/python3)")
    return torch.__version__


# ----------------------------------------------------------------------------------------------
# report

def fmt(x, nd=1):
    return "-" if x is None else f"{x:,.{nd}f}"


def summarize(results, models, ranks_list):
    def rate(fw, m, r):
        x = results.get(fw, {}).get(f"{m}/{r}")
        return x["samples_per_s"] if x else None

    rows = []
    for m in models:
        for r in ranks_list:
            d, t = rate("dtrain", m, r), rate("torch", m, r)
            rows.append({"model": m, "ranks": r, "dtrain": d, "torch": t,
                         "ratio": d / t if d and t else None})
    scaling = {}
    for fw in ("dtrain", "torch"):
        for m in models:
            one, two = rate(fw, m, 1), rate(fw, m, 2)
            scaling[f"{fw}/{m}"] = two / (2 * one) if one and two else None

    def ratio(m, r):
        for row in rows:
            if row["model"] == m and row["ranks"] == r:
                return row["ratio"]
        return None

    targets = []
    for name, val, goal in (
            ("mlp ratio dtrain/DDP at 2 ranks", ratio("mlp", 2), TARGET_MLP_RATIO_2),
            ("cnn ratio dtrain/DDP at 2 ranks", ratio("cnn", 2), TARGET_CNN_RATIO_2),
            ("dtrain mlp 2-rank scaling efficiency", scaling.get("dtrain/mlp"),
             TARGET_DTRAIN_MLP_SCALING)):
        targets.append({"target": name, "value": val, "goal": goal,
                        "status": "n/a" if val is None else ("met" if val >= goal else "not met")})
    return rows, scaling, targets


def print_report(rows, scaling, targets, models, commands, info, tv, env_reports, args):
    print()
    print("## dtrain vs PyTorch DDP (CPU)")
    print()
    print(f"machine: nproc={info['nproc']}, CPU: {info['cpu_model']}, kernel {info['kernel']}, "
          f"python {info['python']}, torch {tv}, load average at start {info['loadavg_at_start']}")
    print()
    print("| model | ranks | dtrain samples/s | PyTorch DDP samples/s | ratio (dtrain/DDP) |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['model']} | {r['ranks']} | {fmt(r['dtrain'])} | {fmt(r['torch'])} | "
              f"{fmt(r['ratio'], 2)} |")
    print()
    print("2-rank scaling efficiency (2-rank samples/s / (2 x 1-rank samples/s)):")
    print()
    print("| model | dtrain | PyTorch DDP |")
    print("|---|---:|---:|")
    for m in models:
        print(f"| {m} | {fmt(scaling.get(f'dtrain/{m}'), 2)} | {fmt(scaling.get(f'torch/{m}'), 2)} |")
    print()
    print("Targets:")
    print()
    for t in targets:
        print(f"- {t['target']} >= {t['goal']}: {fmt(t['value'], 2)} -> {t['status']}")
    print()
    print("Commands:")
    print()
    print(f"    {' '.join(shlex.quote(a) for a in [sys.executable] + sys.argv)}")
    for c in commands:
        print(f"    {c}")
    if env_reports:
        print()
        print("dtrain placement (`dtrain env` under the same mpirun):")
        for r, text in env_reports.items():
            print()
            print("\n".join("    " + line for line in text.splitlines()))


# ----------------------------------------------------------------------------------------------

def parse_steps(s, models):
    steps = {}
    if "=" in s:
        for part in s.split(","):
            k, _, v = part.partition("=")
            steps[k.strip()] = int(v)
    else:
        n = int(s)
        steps = {m: n for m in models}
    for m in models:
        if m not in steps:
            steps[m] = DEFAULT_STEPS[m]
        if steps[m] < 2:
            raise ValueError(f"--steps for {m} must be at least 2")
    return steps


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtrain", default=os.path.join(REPO, "build", "dtrain"),
                    help="the dtrain binary (default: build/dtrain in the repository)")
    ap.add_argument("--steps", default=None,
                    help="steps per run: N for every model, or mlp=N,cnn=M "
                         f"(default mlp={DEFAULT_STEPS['mlp']},cnn={DEFAULT_STEPS['cnn']})")
    ap.add_argument("--models", default="mlp,cnn", help="comma list from: mlp, cnn (default both)")
    ap.add_argument("--ranks", default="1,2", help="comma list of rank counts (default 1,2)")
    ap.add_argument("--quick", action="store_true",
                    help=f"smoke test: {QUICK_STEPS} steps per run (unless --steps)")
    ap.add_argument("--only", choices=("dtrain", "torch"), help="run one framework only")
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    ap.add_argument("--json", metavar="OUT", help="also write the results as JSON to OUT")
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs per configuration and framework; the median is reported (an even N: "
                         "the mean of the middle two) (default 1)")
    ap.add_argument("--torch-pin", action="store_true",
                    help="pin PyTorch rank r to core r (default: unpinned, as torch normally runs)")
    ap.add_argument("--torch-blas", choices=("same", "installed"), default="same",
                    help="same: PyTorch's OpenBLAS runs the kernels dtrain runs (the fair comparison, "
                         "default); installed: PyTorch as it comes, with whatever kernels OpenBLAS picks")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=900, help="seconds allowed per dtrain run")
    ap.add_argument("--verbose", action="store_true", help="show dtrain's stdout")
    args = ap.parse_args()

    models = [m.strip() for m in args.models.split(",") if m.strip()]
    for m in models:
        if m not in MODELS:
            ap.error(f"--models: unknown model '{m}' (choose from {', '.join(MODELS)})")
    try:
        ranks_list = [int(r) for r in args.ranks.split(",") if r.strip()]
        if not ranks_list or any(r < 1 for r in ranks_list):
            raise ValueError
    except ValueError:
        ap.error(f"--ranks: expected a comma list of positive integers, got '{args.ranks}'")
    try:
        steps = parse_steps(args.steps, models) if args.steps else \
            {m: (QUICK_STEPS if args.quick else DEFAULT_STEPS[m]) for m in models}
    except ValueError as e:
        ap.error(f"--steps: {e}")
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")

    do_dtrain = args.only in (None, "dtrain")
    do_torch = args.only in (None, "torch")
    info = machine_info()
    dtrain = os.path.abspath(args.dtrain)

    if args.dry_run:
        for m in models:
            for r in ranks_list:
                if do_dtrain:
                    print(show_cmd(dtrain_command(dtrain, m, r, steps[m], "<tmpdir>/metrics.jsonl",
                                                  info["nproc"]), MPI_ENV))
                if do_torch:
                    print(ddp_torch.describe(torch_cfg(m), r, steps[m], log_every_for(steps[m]),
                                             args.torch_pin, TORCH_ENV))
        return 0

    tv = torch_version() if do_torch else None
    if do_dtrain and not os.access(dtrain, os.X_OK):
        die(f"no dtrain binary at {dtrain}; build it (make build, or cmake -B build && "
            f"cmake --build build -j) or pass --dtrain PATH")

    # Same BLAS kernels for both: PyTorch's CPU GEMMs go through the same OpenBLAS.
    blas_core = os.environ.get("OPENBLAS_CORETYPE") or (dtrain_blas_core(dtrain) if os.access(dtrain, os.X_OK) else None)
    if blas_core and do_torch and args.torch_blas == "same":
        TORCH_ENV["OPENBLAS_CORETYPE"] = blas_core
        print(f"OpenBLAS kernels for both frameworks: {blas_core} (PyTorch runs with OPENBLAS_CORETYPE={blas_core})")
    info["openblas_core"] = blas_core
    info["torch_blas"] = args.torch_blas
    if do_torch and args.torch_blas == "installed":
        print("PyTorch runs as installed: OpenBLAS picks its kernels itself (--torch-blas installed)")

    results = {"dtrain": {}, "torch": {}}
    commands = []
    try:
        for m in models:
            for r in ranks_list:
                key = f"{m}/{r}"
                for fw, enabled in (("dtrain", do_dtrain), ("torch", do_torch)):
                    if not enabled:
                        continue
                    runs = []
                    for i in range(args.repeat):
                        print(f"[{fw}] {m}, {r} rank(s), {steps[m]} steps"
                              + (f" (run {i + 1}/{args.repeat})" if args.repeat > 1 else "")
                              + " ...", end="", flush=True)
                        if fw == "dtrain":
                            res = run_dtrain(dtrain, m, r, steps[m], info["nproc"], args.timeout,
                                             args.verbose)
                        else:
                            res = run_torch(m, r, steps[m], log_every_for(steps[m]),
                                            args.torch_pin, args.seed)
                        print(f" {res['samples_per_s']:,.1f} samples/s ({res['wall_s']:.1f} s)",
                              flush=True)
                        runs.append(res)
                    # The median run (an odd --repeat), or for an even one the lower of the two
                    # middle runs with samples/s the mean of both: the true median.
                    order = sorted(runs, key=lambda x: x["samples_per_s"])
                    mid = order[(len(order) - 1) // 2]
                    best = dict(mid, samples_per_s=statistics.median(x["samples_per_s"] for x in runs),
                                runs=[x["samples_per_s"] for x in runs])
                    results[fw][key] = best
                    if best["command"] not in commands:
                        commands.append(best["command"])
    except BenchError as e:
        print(file=sys.stderr)
        die(str(e))

    env_reports = {}
    if do_dtrain:
        for r in ranks_list:
            env_reports[r] = dtrain_env_report(dtrain, r, info["nproc"])

    rows, scaling, targets = summarize(results, models, ranks_list)
    print_report(rows, scaling, targets, models, commands, info, tv, env_reports, args)

    if args.json:
        doc = {"machine": info, "torch_version": tv, "steps": steps, "batch_per_rank": BATCH,
               "lr": LR, "momentum": MOMENTUM, "models": {m: MODELS[m] for m in models},
               "results": results, "table": rows, "scaling": scaling, "targets": targets,
               "dtrain_env": {str(k): v for k, v in env_reports.items()},
               "argv": [sys.executable] + sys.argv}
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
