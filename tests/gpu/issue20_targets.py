#!/usr/bin/env python3
"""issue20_targets.py - issue 20's targets, judged from the outputs device_check.sh PART=targets
leaves in one folder, so that a lent GPU's few minutes end in a verdict rather than raw tables.

Reads, from DIR (each the stdout of one command; an OLD run's files carry the prefix old-):
  gemm.txt   dtrain bench gemm --n 8192 --dtype bf16   (the measured bf16 peak)
  fc.txt     dtrain bench step of fc:8192,relu x3,fc:10 on 1024 inputs, batch 1024, bf16
  mlp.txt    dtrain bench step --model mlp --batch 256, bf16 (and others)
  cnn28.txt  dtrain bench step --model cnn --input 1x28x28 --batch 1024 --precision fp32,bf16
  cnn32.txt  dtrain bench step --model cnn --input 3x32x32 --batch 512 --precision fp32,bf16
and prints one line per target: what was measured, the bar, met or not, and the earlier
version's figure beside it when its files are there. Model FLOPs are 6 per parameter per sample
(forward 2, backward 4: the convention of bench/GPU-PREDICTIONS.md's roofline and of MFU figures; it
counts the first layer's data gradient, which no step computes: 2% of fc:8192 x3's). The parameter
count is the gradients' column over 4 bytes (the CUDA backend keeps fp32 gradients); the params
column is no measure of it on a GPU, where it adds the 16-bit copy of a 16-bit run (6 bytes a
parameter; 8 with the spare copy of a step overlapped layer by layer), and a row whose two columns
agree with none of these layouts is not judged.
Exit status 0 when it could judge every target whose files exist (met or not), 1 when a file it
found could not be read (a failed run, a changed table: named on stderr, the other targets still
judged) or there was nothing to judge.
"""
import os
import re
import sys

MLP_BF16_BEFORE = 1.23e6  # the "today" (bench/GPU-NOTES.md, run of 234ce2a)


class Unreadable(Exception):
    pass


def rows(path):
    """bench step's rows: precision -> (samples/s, params MiB, activations MiB, grads MiB), first row
    of each."""
    out = {}
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) >= 10 and p[0] in ("fp32", "bf16", "fp16") and not line.startswith("#"):
                try:
                    out.setdefault(p[0], (float(p[1]), float(p[5]), float(p[8]), float(p[6])))
                except ValueError as e:
                    raise Unreadable(f"{path}: row {line.strip()!r}: {e}")
    if not out:
        raise Unreadable(f"{path}: no bench step row (precision, samples/s, ...) in it")
    return out


def row(path, precision):
    """rows(path)[precision], or Unreadable naming the file and the precision."""
    r = rows(path)
    if precision not in r:
        raise Unreadable(f"{path}: no {precision} row")
    return r[precision]


def gemm_peak(path):
    """The GPU TFLOP/s of the bf16 row at the largest n."""
    best = None
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) >= 6 and p[1] == "bf16" and p[0].isdigit() and p[5] != "-":
                n, tf = int(p[0]), float(p[5])
                if best is None or n >= best[0]:
                    best = (n, tf)
    if best is None:
        raise Unreadable(f"{path}: no bf16 row with a GPU TFLOP/s figure")
    return best[1]


def judge(d, prefix="", errors=None, peak=None):
    """{target: (measured text, value, bar, met)} for the files of one version; a file that cannot
    be read leaves its targets out and its reason in errors. peak: the bf16 GEMM peak to use when
    this version measured none of its own (the earlier version runs on the same GPU)."""
    f = lambda name: os.path.join(d, prefix + name)
    res = {}
    errors = [] if errors is None else errors
    if os.path.exists(f("gemm.txt")):
        try:
            peak = gemm_peak(f("gemm.txt"))
        except Unreadable as e:
            errors.append(str(e))
    for part in (fc_target, mlp_target, cnn_targets):
        try:
            part(f, peak, res)
        except Unreadable as e:
            errors.append(str(e))
    return res


def fc_target(f, peak, res):
    if os.path.exists(f("fc.txt")):
        sps, params_mib, _, grads_mib = row(f("fc.txt"), "bf16")
        params = grads_mib * 1048576 / 4
        # fp32 parameters alone (4 bytes a parameter), with the 16-bit copy (6), or with the spare
        # copy a step overlapped layer by layer writes too (8): anything else
        # means the gradients are not fp32 and the count would be wrong.
        per = params_mib / grads_mib * 4 if grads_mib > 0 else 0.0
        if not any(abs(per - b) < 0.05 for b in (4, 6, 8)):
            raise Unreadable(f"{f('fc.txt')}: params {params_mib} MiB and grads {grads_mib} MiB: not fp32 "
                             "gradients beside fp32 parameters (and their 16-bit copies); the parameter count is unknown")
        tflops = 6 * params * sps / 1e12
        if peak:
            frac = tflops / peak
            res["fc:8192 x3 bf16, % of bf16 GEMM peak >= 60"] = (
                f"{tflops:.0f} TFLOP/s of {peak:.0f} = {100 * frac:.1f}%", frac, 0.60, frac >= 0.60)
        else:
            res["fc:8192 x3 bf16, % of bf16 GEMM peak >= 60"] = (
                f"{tflops:.0f} TFLOP/s (no bf16 GEMM peak measured)", tflops, None, None)


def mlp_target(f, peak, res):
    if os.path.exists(f("mlp.txt")):
        sps = row(f("mlp.txt"), "bf16")[0]
        res["mlp batch 256 bf16 >= 2x 1.23M samples/s"] = (
            f"{sps:,.0f} samples/s = {sps / MLP_BF16_BEFORE:.2f}x", sps, 2 * MLP_BF16_BEFORE,
            sps >= 2 * MLP_BF16_BEFORE)


def cnn_targets(f, peak, res):
    for name, label in (("cnn28.txt", "cnn 1x28x28 b1024"), ("cnn32.txt", "cnn 3x32x32 b512")):
        if not os.path.exists(f(name)):
            continue
        r = {p: row(f(name), p) for p in ("fp32", "bf16")}
        ratio = r["bf16"][0] / r["fp32"][0]
        cut = 1 - r["bf16"][2] / r["fp32"][2] if r["fp32"][2] > 0 else 0.0
        res[f"{label} bf16/fp32 >= 1.5x"] = (f"{ratio:.2f}x", ratio, 1.5, ratio >= 1.5)
        res[f"{label} activation memory -40% or better"] = (
            f"{r['fp32'][2]:.0f} -> {r['bf16'][2]:.0f} MiB ({-100 * cut:.0f}%)", cut, 0.40, cut >= 0.40)


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print("usage: issue20_targets.py DIR (the folder of device_check.sh PART=targets)", file=sys.stderr)
        return 2
    d, errors = argv[1], []
    new = judge(d, "", errors)
    peak = None
    if os.path.exists(os.path.join(d, "gemm.txt")):
        try:
            peak = gemm_peak(os.path.join(d, "gemm.txt"))
        except Unreadable:
            pass  # already named by judge
    old = judge(d, "old-", errors, peak)
    for k, (text, _, _, met) in new.items():
        verdict = "n/a" if met is None else "MET" if met else "not met"
        before = f"   (earlier version: {old[k][0]})" if k in old else ""
        print(f"{verdict:8s} {k}: {text}{before}")
    for e in errors:
        print(f"issue20_targets: cannot judge: {e}", file=sys.stderr)
    if not new and not errors:
        print(f"issue20_targets: no outputs in {d}", file=sys.stderr)
    return 1 if errors or not new else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
