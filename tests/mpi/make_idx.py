#!/usr/bin/env python3
"""Writes a small learnable MNIST-layout IDX dataset: DIR/train-{images-idx3,labels-idx1}-ubyte and
t10k-*; class k of K is an 8x8 uint8 image with a bright 2x2 block at a position of its own plus noise.
Usage: make_idx.py DIR [TRAIN_N] [TEST_N] [K] [NOISE (0..NOISE-1 background; the block adds 80)]"""
import os, random, struct, sys

def write(path, magic_type, dims, data):
    with open(path, "wb") as f:
        f.write(struct.pack(">BBBB", 0, 0, magic_type, len(dims)))
        for d in dims:
            f.write(struct.pack(">I", d))
        f.write(bytes(data))

def make(n, k, rng, noise):
    imgs, labels = bytearray(), bytearray()
    for _ in range(n):
        y = rng.randrange(k)
        px = [rng.randrange(0, noise) for _ in range(64)]
        r, c = 2 * (y // 4), 2 * (y % 4)
        for dr in (0, 1):
            for dc in (0, 1):
                px[(r + dr) * 8 + c + dc] = min(255, px[(r + dr) * 8 + c + dc] + 80)
        imgs += bytes(px)
        labels.append(y)
    return imgs, labels

d = sys.argv[1]
ntrain = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
ntest = int(sys.argv[3]) if len(sys.argv) > 3 else 500
k = int(sys.argv[4]) if len(sys.argv) > 4 else 10
noise = int(sys.argv[5]) if len(sys.argv) > 5 else 60
os.makedirs(d, exist_ok=True)
rng = random.Random(42)
for prefix, n in (("train", ntrain), ("t10k", ntest)):
    imgs, labels = make(n, k, rng, noise)
    write(os.path.join(d, prefix + "-images-idx3-ubyte"), 0x08, (n, 8, 8), imgs)
    write(os.path.join(d, prefix + "-labels-idx1-ubyte"), 0x08, (n,), labels)
