#!/usr/bin/env python3
"""Writes a small image folder of PNGs with the standard library alone (zlib): ROOT/<class>/<i>.png,
RGB 12x10, class k a bright square at a position of its own on noise, so a model can learn it.
Usage: make_images.py ROOT [PER_CLASS] [CLASSES]"""
import os, random, struct, sys, zlib

def png(path, w, h, rows):
    def chunk(kind, data):
        c = struct.pack(">I", len(data)) + kind + data
        return c + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
    raw = b"".join(b"\x00" + bytes(r) for r in rows)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))

root = sys.argv[1]
per = int(sys.argv[2]) if len(sys.argv) > 2 else 20
k = int(sys.argv[3]) if len(sys.argv) > 3 else 3
rng = random.Random(5)
w, h = 12, 10
for c in range(k):
    d = os.path.join(root, "class%d" % c)
    os.makedirs(d, exist_ok=True)
    for i in range(per):
        rows = []
        for y in range(h):
            row = []
            for x in range(w):
                v = rng.randrange(0, 80)
                if 3 * c <= x < 3 * c + 4 and 3 <= y < 7:
                    v = 230
                row += [v, v, v]
            rows.append(row)
        png(os.path.join(d, "%03d.png" % i), w, h, rows)
