#!/usr/bin/env python3
"""Reads a dtrain checkpoint (.dtc, version 4) as docs/checkpoint-format.md describes it, with none of
dtrain's code: the header and its CRC, the section table and its CRC, each section's name, size and
CRC, the file's size, and dt_model's sections with their sizes and values. Then checks the
parameters against a --dump-params file of the same step, and the decoded fields given as
NAME=VALUE (step, world, nparams, optim_kind, optim_t, window, data.epoch, data.offset,
data.normalize, data.channels, run.precision, run.samples, ...). With --bytes FILE SKIP, the data
section's mean and std must be the population figures of FILE's bytes after SKIP, in byte units.
Usage: read_dtc.py CKPT.dtc PARAMS.bin [--bytes FILE SKIP] [NAME=VALUE ...]; exit 1 naming the first
thing that differs from the docs."""
import math, re, struct, sys, zlib

RUN = "version shuffle seed samples synthetic precision world batch accum drop_last blas_threads".split()


def fail(msg):
    sys.exit("read_dtc.py: %s: %s" % (sys.argv[1], msg))


def floats(b):
    return struct.unpack("<%df" % (len(b) // 4), b)


def read(path):
    b = open(path, "rb").read()
    if b[:8] != b"DTCKPT1\n": fail("magic %r" % b[:8])
    version, header_crc, step, world, nsec, table_crc, reserved = struct.unpack_from("<IIqIIII", b, 8)
    if version != 4: fail("version %d" % version)
    if zlib.crc32(b[:12] + b"\0" * 4 + b[16:40]) != header_crc: fail("header CRC")
    name = re.search(r"ckpt-(\d{10,})\.dtc$", path)
    if not name or int(name.group(1)) != step or name.group(1) != "%010d" % step: fail("step %d" % step)
    if reserved or not 1 <= world <= 1 << 24 or nsec > 65536: fail("header fields")
    table = b[40:40 + 88 * nsec]
    if zlib.crc32(table) != table_crc: fail("table CRC")
    f = {"step": step, "world": world}
    sec, off = {}, 40 + 88 * nsec
    for i in range(nsec):
        raw, size, crc, ranks, res = struct.unpack_from("<64sQIIQ", table, 88 * i)
        nm = raw.rstrip(b"\0")
        if not re.fullmatch(rb"[A-Za-z0-9._-]{1,63}", nm) or raw != nm.ljust(64, b"\0"): fail("name %r" % raw)
        if res or ranks not in (0, world) or nm.decode() in sec: fail("entry %s" % nm)
        data = b[off:off + size]
        if len(data) != size or zlib.crc32(data) != crc: fail("section %s: size or CRC" % nm)
        sec[nm.decode()] = data
        off += size
    if off != len(b): fail("%d bytes, the table describes %d" % (len(b), off))
    if list(sec)[:1] != ["dtrain.model"]: fail("dtrain.model is not first")
    fp, n, f["optim_kind"], f["optim_t"], res = struct.unpack("<QQIiQ", sec["dtrain.model"])
    f["nparams"] = n
    for k in ("params", "optim.m", "optim.v"):
        if k in sec:
            if len(sec[k]) != 4 * n: fail("%s: %d bytes for %d parameters" % (k, len(sec[k]), n))
            if not all(map(math.isfinite, floats(sec[k]))): fail(k + " not finite")
    if "optim.v" in sec and min(floats(sec["optim.v"])) < 0: fail("optim.v < 0")
    if "scaler" in sec:
        f["scale"], f["good_steps"], _, f["updates"], f["skipped"] = struct.unpack("<diiqq", sec["scaler"])
    if "scaler.window" in sec:
        w = sec["scaler.window"]
        f["window"] = struct.unpack_from("<I", w)[0]
        if len(w) != 4 + f["window"] or set(w[4:]) - {0, 1}: fail("scaler.window")
        if f["window"] > f.get("updates", 0) or sum(w[4:]) > f.get("skipped", 0): fail("window past the scaler's counts")
    if "data" in sec:
        d = sec["data"]
        f["data.epoch"], f["data.offset"], f["data.normalize"], ch = struct.unpack_from("<qqII", d)
        f["data.channels"] = ch
        if len(d) != 24 + 8 * ch: fail("data: %d bytes for %d channels" % (len(d), ch))
        f["data.mean"], f["data.std"] = floats(d[24:24 + 4 * ch]), floats(d[24 + 4 * ch:])
    if "dtrain.run" in sec:
        r = struct.unpack("<IIQQIIIIIIIIQ", sec["dtrain.run"])
        if r[0] != 1 or r[11:] != (0, 0): fail("dtrain.run version or reserved")
        f.update(("run." + k, v) for k, v in zip(RUN, r))
    return f, sec


def main():
    f, sec = read(sys.argv[1])
    if sec["params"] != open(sys.argv[2], "rb").read(): fail("params differ from " + sys.argv[2])
    args = sys.argv[3:]
    if args[:1] == ["--bytes"]:
        v = open(args[1], "rb").read()[int(args[2]):]
        mean = sum(v) / len(v)
        std = math.sqrt(sum((x - mean) ** 2 for x in v) / len(v))
        got = (f["data.mean"][0], f["data.std"][0])
        if abs(got[0] - mean) > 1e-4 * mean or abs(got[1] - std) > 1e-4 * std:
            fail("data mean/std %s, the bytes' %s" % (got, (mean, std)))
        args = args[3:]
    for kv in args:
        k, want = kv.split("=")
        if str(f.get(k)) != want: fail("%s is %s, expected %s" % (k, f.get(k), want))
    print("%s: layout, CRCs and dt_model sections as documented; %s" % (sys.argv[1], " ".join(args)))


main()
