#!/usr/bin/env python3
"""The rates bench/amp_compare.py and bench/ddp_compare.py report from dtrain's --metrics file.

Each runs `mpirun ... dtrain train ... --metrics FILE` and reads the intervals it logged. Here a
stand-in `mpirun` (first on PATH) writes a made-up file instead: after the warm-up interval, 10
steps at 1000 samples/s, then 5 steps at 250 (batch 128, one rank). The honest figure is the total
over the total: 15 steps x 128 samples in 1.28 + 2.56 s = 500 samples/s, 256 ms a step, a comm wait
of (10 x 10 + 5 x 40) / 15 = 20 ms a step; the mean of the intervals' figures (625 samples/s, 320 ms,
25 ms) weighs the short slow interval as much as the long fast one. A rate that is no number is
refused naming its interval. Then the refusals that keep a run from reporting what it did not do or
ending in a traceback: amp_compare's --ranks 0, data_compare's too-short epoch, too-full folder, failed
or missing dtrain, and a python3 without torchvision (stopped before any work, naming what to install).

Usage: test_bench_scripts.py (no GPU, no MPI, no dtrain binary needed)
"""
import importlib.util
import json
import os
import stat
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

FAKE_MPIRUN = r'''#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
path = args[args.index("--metrics") + 1]
with open(path, "w") as f:
    for row in json.loads(os.environ["FAKE_ROWS"]):
        f.write(json.dumps(row) + "\n")
print("memory per rank (batch 128): parameters 7.11 MiB, gradients 7.11 MiB, optimizer 7.11 MiB, "
      "activations 2.00 MiB, workspace 0.00 MiB, total 23.33 MiB")
'''

# step, samples/s, s a step, comm wait s a step; batch 128 at one rank: 128 samples a step.
INTERVALS = [(5, 50.0, 2.56, 0.5),      # warm-up: dropped
             (15, 1000.0, 0.128, 0.010),  # 10 steps in 1.28 s
             (20, 250.0, 0.512, 0.040)]   # 5 steps in 2.56 s
WANT_SPS, WANT_STEP_MS, WANT_COMM_MS = 500.0, 256.0, 20.0

fails = 0


def check(name, got, want):
    global fails
    if abs(got - want) <= 1e-9 * abs(want):
        print(f"ok: {name}: {got:g}")
    else:
        fails += 1
        print(f"FAIL: {name}: {got!r}, expected {want!r}")


def load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(REPO, "bench", name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def rows(intervals):
    return [{"step": s, "loss": 2.0, "accuracy": 0.5, "samples_per_s": sps, "step_time_s": st, "comm_wait_s": cw,
             "skipped_total": 0} for s, sps, st, cw in intervals]


def expect_refusal(call, err, must, ok_text, tail, took_text, vague_text):
    """1 when call() does not raise err naming must (printed as FAIL), else 0 (printed as ok with
    the message's last tail characters)."""
    try:
        call()
        print(f"FAIL: {took_text}")
        return 1
    except err as e:
        if must in str(e):
            print(f"ok: {ok_text}: {str(e)[-tail:]}")
            return 0
        print(f"FAIL: {vague_text}: {e}")
        return 1


def data_compare_checks():
    """bench/data_compare.py refuses a run that would not time what its report says: torchvision's
    epoch ending inside the timed batches, and a folder holding more images than --images."""
    bad = 0
    dc = load("data_compare")
    why = dc.sizes_problem(400, 64, 5)  # 6 full batches an epoch, 2 + 5 wanted
    if why and "makes 6 full batch(es) an epoch, fewer than the 2 warm-up + 5 timed" in why and "--images 448" in why:
        print(f"ok: data_compare refuses an epoch shorter than its batches: {why[:90]}")
    else:
        bad += 1
        print(f"FAIL: data_compare --images 400 --batches 5: {why!r}")
    if dc.sizes_problem(400, 64, 4) is not None:
        bad += 1
        print("FAIL: data_compare refuses --images 400 --batches 4, which fits an epoch")
    with tempfile.TemporaryDirectory(prefix="test_data_compare.") as root:
        os.makedirs(os.path.join(root, "class00"))
        for i in range(3):
            open(os.path.join(root, "class00", "img%05d.jpg" % i), "w").close()
        bad += expect_refusal(lambda: dc.make_folder(root, 2, 1, 8, 8), ValueError,
                              "already holds 3 files, more than --images 2",
                              "data_compare refuses a folder larger than --images", 70,
                              "data_compare took a folder of 3 images for --images 2",
                              "data_compare's refusal does not name the counts")
        # A dtrain that fails is reported with its stderr, not as a CalledProcessError traceback.
        fake = os.path.join(root, "dtrain")
        with open(fake, "w") as f:
            f.write("#!/bin/sh\necho 'dtrain: error: --data: no images under the folder' >&2\nexit 2\n")
        os.chmod(fake, 0o755)
        bad += expect_refusal(lambda: dc.run_dtrain(fake, root, 224, 1, 64, 4), RuntimeError,
                              "exited 2:\ndtrain: error: --data: no images under the folder",
                              "data_compare reports a failed dtrain with its stderr", 60,
                              "data_compare took a failed dtrain run",
                              "data_compare's failure does not show dtrain's stderr")
        bad += expect_refusal(lambda: dc.run_dtrain(os.path.join(root, "nodtrain"), root, 224, 1, 64, 4),
                              RuntimeError, "or pass --dtrain PATH", "data_compare names a missing dtrain", 60,
                              "data_compare ran a missing dtrain", "data_compare's error does not say what to do")
        # Without torchvision (as for a python3 that is not Debian's) it stops before making the folder
        # or running dtrain, saying what to install and which python to use; torchvision is hidden here
        # so that the check holds whether or not this interpreter has it.
        folder = os.path.join(root, "folder")
        run = subprocess.run([sys.executable, "-c", "import runpy, sys; sys.modules['torchvision'] = None; "
                              "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')",
                              os.path.join(REPO, "bench", "data_compare.py"), "--root", folder, "--images", "400",
                              "--batches", "4", "--dtrain", fake], capture_output=True, text=True, timeout=60)
        if (run.returncode == 1 and "python3-torchvision" in run.stderr and "/usr/bin/python3" in run.stderr
                and "Traceback" not in run.stderr and not os.path.exists(folder)):
            print(f"ok: data_compare without torchvision: {run.stderr.strip()[-90:]}")
        else:
            bad += 1
            print(f"FAIL: data_compare without torchvision: exit {run.returncode}, folder made "
                  f"{os.path.exists(folder)}, stderr: {run.stderr.strip()[-600:]}")
    return bad


def main():
    global fails
    with tempfile.TemporaryDirectory(prefix="test_bench_scripts.") as tmp:
        fake = os.path.join(tmp, "mpirun")
        with open(fake, "w") as f:
            f.write(FAKE_MPIRUN)
        os.chmod(fake, os.stat(fake).st_mode | stat.S_IXUSR)
        os.environ["PATH"] = tmp + os.pathsep + os.environ.get("PATH", "")
        os.environ["FAKE_ROWS"] = json.dumps(rows(INTERVALS))

        amp = load("amp_compare")
        res = amp.run_one("dtrain", "mlp", 1, "fp32", 20)
        check("amp_compare samples/s: total samples over total time", res["samples_per_s"], WANT_SPS)
        check("amp_compare step ms: total time over total steps", res["step_ms"], WANT_STEP_MS)
        check("amp_compare comm wait ms: total wait over total steps", res["comm_ms"], WANT_COMM_MS)

        # --ranks 0 is refused before anything runs: `mpirun -np 0` would start one rank a slot under a
        # row that says 0.
        run = subprocess.run([sys.executable, os.path.join(REPO, "bench", "amp_compare.py"), "--dtrain", fake,
                              "--models", "mlp", "--ranks", "0", "--precisions", "fp32", "--steps", "20"],
                             capture_output=True, text=True, timeout=60)
        if run.returncode == 1 and "--ranks '0'" in run.stderr and "samples/s" not in run.stdout:
            print(f"ok: amp_compare refuses --ranks 0: {run.stderr.strip()}")
        else:
            fails += 1
            print(f"FAIL: amp_compare --ranks 0: exit {run.returncode}, stdout {run.stdout[:300]!r}, "
                  f"stderr {run.stderr[-300:]!r}")

        # --steps needs N >= 20 in both its forms (the rates skip the first logged interval).
        for bad in ("5", "mlp=5"):
            try:
                amp.parse_steps(bad)
                fails += 1
                print(f"FAIL: amp_compare --steps {bad} taken")
            except SystemExit as e:
                if "N >= 20" in str(e):
                    print(f"ok: amp_compare refuses --steps {bad}")
                else:
                    fails += 1
                    print(f"FAIL: amp_compare --steps {bad}: {e}")

        ddp = load("ddp_compare")
        res = ddp.run_dtrain("dtrain", "mlp", 1, 20, 2, 60, False)
        check("ddp_compare samples/s: total samples over total time", res["samples_per_s"], WANT_SPS)

        # A null rate (dtrain writes null for a non-finite one) is refused, naming the interval.
        broken = INTERVALS[:2] + [(20, None, 0.512, 0.040)]
        os.environ["FAKE_ROWS"] = json.dumps(rows(broken))
        for name, call, err in [("amp_compare", lambda: amp.run_one("dtrain", "mlp", 1, "fp32", 20), RuntimeError),
                                ("ddp_compare", lambda: ddp.run_dtrain("dtrain", "mlp", 1, 20, 2, 60, False),
                                 ddp.BenchError)]:
            fails += expect_refusal(call, err, "the interval ending at step 20 has 5 step(s) at samples_per_s None",
                                    f"{name} refuses a null rate", 80, f"{name} took a null samples_per_s",
                                    f"{name}'s refusal does not name the interval")
    fails += data_compare_checks()
    print(f"{'FAILED' if fails else 'passed'}: {fails} failure(s)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
