#!/usr/bin/python3
"""Compare dtrain's input pipeline with torchvision's on an image folder of JPEGs.

Makes (once, under --root) an ImageFolder tree of N JPEG photos-like images (smooth color fields
with noise and edges, 500x375 like ImageNet's median, quality 90, K classes), then for each loader
thread count T runs, one after the other on this machine:
  * dtrain:      build/dtrain bench data --data ROOT --input 3xSxS --threads T --augment flip
                 --normalize standard (libjpeg-turbo with DCT-domain downscaling, resize of the
                 shorter side, center crop, flip, per-channel normalization);
  * torchvision: ImageFolder(ROOT, Compose([Resize(S), CenterCrop(S), RandomHorizontalFlip(),
                 ToTensor(), Normalize(mean, std)])) + DataLoader(batch, num_workers=T,
                 shuffle=True), samples/s over the same number of batches after warm-up ones.
Both produce float32 CHW batches of the same size from the same files. Prints samples/s, samples/s
per loader thread (per core when T <= cores), and the dtrain / torchvision ratio per T.

Run with Debian's python:  /usr/bin/python3 bench/data_compare.py [--images N] [--threads 1,2]
(apt-get install python3-torchvision python3-pil).
"""

import argparse
import os
import re
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


WARMUP = 2  # untimed batches before the timed ones, on both sides


def sizes_problem(images, batch, batches):
    """Why the run would not time what it says, or None. torchvision's DataLoader (drop_last) ends
    its epoch after images // batch batches; a run past it restarts the iterator, and its workers'
    refill of the pipeline, inside torchvision's timed batches, which dtrain's loader never does."""
    per_epoch = images // batch
    if per_epoch >= WARMUP + batches:
        return None
    return ("--images %d at --batch %d makes %d full batch(es) an epoch, fewer than the %d warm-up + %d timed "
            "ones: torchvision would restart its epoch inside the timed batches; give --images %d or more, or "
            "--batches %d or fewer" % (images, batch, per_epoch, WARMUP, batches, batch * (WARMUP + batches),
                                        max(per_epoch - WARMUP, 0)))


def make_folder(root, n, classes, w, h):
    """An image folder of n JPEGs; kept when it already holds n images. One holding more is
    refused: both sides would read all of them, not the n the report names."""
    have = sum(len(fs) for _, _, fs in os.walk(root)) if os.path.isdir(root) else 0
    if have == n:
        return
    if have > n:
        raise ValueError("%s already holds %d files, more than --images %d, and both loaders would read them all: "
                         "give --images %d, or another --root" % (root, have, n, have))
    from PIL import Image, ImageDraw, ImageFilter
    import random
    rng = random.Random(7)
    for k in range(classes):
        os.makedirs(os.path.join(root, "class%02d" % k), exist_ok=True)
    for i in range(n):
        k = i % classes
        base = tuple(rng.randrange(256) for _ in range(3))
        img = Image.new("RGB", (w, h), base)
        d = ImageDraw.Draw(img)
        for _ in range(12):
            x0, y0 = rng.randrange(w), rng.randrange(h)
            d.ellipse([x0, y0, x0 + rng.randrange(20, 200), y0 + rng.randrange(20, 200)],
                      fill=tuple(rng.randrange(256) for _ in range(3)))
        img = img.filter(ImageFilter.GaussianBlur(2))
        noise = Image.effect_noise((w, h), 24).convert("RGB")
        img = Image.blend(img, noise, 0.15)
        img.save(os.path.join(root, "class%02d" % k, "img%05d.jpg" % i), quality=90)


def run_dtrain(dtrain, root, size, threads, batch, batches):
    cmd = [dtrain, "bench", "data", "--data", root, "--input", "3x%dx%d" % (size, size), "--threads",
           str(threads), "--batch", str(batch), "--batches", str(batches), "--warmup", str(WARMUP), "--augment", "flip",
           "--normalize", "standard"]
    # A failed run is reported with dtrain's own stderr (its error says what to fix), not as a traceback
    # that hides it.
    try:
        p = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        raise RuntimeError("cannot run %s (%s): build it (make build) or pass --dtrain PATH" % (dtrain, e))
    if p.returncode != 0:
        raise RuntimeError("%s exited %d:\n%s%s" % (" ".join(cmd), p.returncode, p.stdout, p.stderr))
    out = p.stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 5 and f[0] == str(threads) and re.match(r"^[0-9.]+$", f[1]):
            return float(f[1])
    raise RuntimeError("no result line in:\n" + out)


def run_torchvision(root, size, threads, batch, batches):
    import torch
    import torchvision
    from torchvision import transforms as T
    torch.set_num_threads(1)
    tf = T.Compose([T.Resize(size), T.CenterCrop(size), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    ds = torchvision.datasets.ImageFolder(root, transform=tf)
    dl = torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=threads,
                                     persistent_workers=threads > 0, drop_last=True)
    it = iter(dl)
    for _ in range(WARMUP):
        next(it)
    t0 = time.perf_counter()
    for _ in range(batches):
        try:
            next(it)
        except StopIteration:
            it = iter(dl)
            next(it)
    return batches * batch / (time.perf_counter() - t0)


def missing_modules():
    """None, or what to install and run with when torch, torchvision or PIL is missing for this
    interpreter. Checked before the folder is made and dtrain runs, which would otherwise end in an
    ImportError traceback after minutes of work (the python3 on PATH may not be Debian's)."""
    missing = []
    for module, package in (("PIL", "python3-pil"), ("torch", "python3-torch"), ("torchvision", "python3-torchvision")):
        try:
            __import__(module)
        except ImportError:
            missing.append((module, package))
    if not missing:
        return None
    return ("%s missing for %s; install Debian's packages (apt-get install %s) and run this script with "
            "/usr/bin/python3" % (", ".join(m for m, _ in missing), sys.executable, " ".join(p for _, p in missing)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default="/tmp/dtrain-jpeg-folder")
    ap.add_argument("--images", type=int, default=1200)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--batches", type=int, default=12)
    ap.add_argument("--dtrain", default=os.path.join(REPO, "build", "dtrain"))
    a = ap.parse_args()
    problem = sizes_problem(a.images, a.batch, a.batches)
    if problem:
        sys.exit("data_compare.py: error: " + problem)
    problem = missing_modules()
    if problem:
        sys.exit("data_compare.py: error: " + problem)
    try:
        make_folder(a.root, a.images, a.classes, 500, 375)
    except ValueError as e:
        sys.exit("data_compare.py: error: %s" % e)
    print("image folder %s: %d JPEGs of 500x375 in %d classes -> 3x%dx%d, batch %d, %d timed batches; %d cores"
          % (a.root, a.images, a.classes, a.size, a.size, a.batch, a.batches, os.cpu_count()))
    print("| threads | dtrain samples/s | per thread | torchvision samples/s | per thread | ratio |")
    print("|---|---|---|---|---|---|")
    for t in [int(x) for x in a.threads.split(",")]:
        try:
            d = run_dtrain(a.dtrain, a.root, a.size, t, a.batch, a.batches)
        except RuntimeError as e:
            sys.exit("data_compare.py: error: %s" % e)
        tv = run_torchvision(a.root, a.size, t, a.batch, a.batches)
        print("| %d | %.1f | %.1f | %.1f | %.1f | %.2fx |" % (t, d, d / max(t, 1), tv, tv / max(t, 1), d / tv))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
