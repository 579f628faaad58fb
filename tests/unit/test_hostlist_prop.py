#!/usr/bin/env python3
"""Property check of hostlist_parse against an independent expander.

Generates host lists with a fixed seed (mostly valid ones: prefixes, padded numbers, ranges, several
groups per element, suffixes; some broken on purpose: empty elements, unbalanced or nested brackets,
descending or empty ranges, letters in brackets, blanks, numbers of 19 digits), expands each here
from the grammar in hostlist.h, and compares with what the C parser (hostlist_expand, one list a
line) answers: the same names in the same order, or a refusal on both sides whose message names
the variable.

Usage: test_hostlist_prop.py HOSTLIST_EXPAND [COUNT] [SEED]
DT_TEST_WRAPPER, when set, is a command put before HOSTLIST_EXPAND (tests/sanitizers/run_valgrind.sh
runs the C parser under memcheck this way, and this script natively).
"""
import os
import random
import re
import shlex
import subprocess
import sys

MAX_DIGITS = 18


class Refused(Exception):
    pass


def expand_group(body):
    """The numbers of one bracket group's body ("01-03,7") as strings, in order."""
    out = []
    for item in body.split(","):
        m = re.fullmatch(r"([0-9]+)(?:-([0-9]+))?", item)
        if not m:
            raise Refused("bad range %r" % item)
        lo_s, hi_s = m.group(1), m.group(2) or m.group(1)
        if len(lo_s) > MAX_DIGITS or len(hi_s) > MAX_DIGITS:
            raise Refused("too many digits")
        lo, hi = int(lo_s), int(hi_s)
        if hi < lo:
            raise Refused("descending")
        out += [str(v).zfill(len(lo_s)) for v in range(lo, hi + 1)]
    return out


def expand_element(el):
    if not el:
        raise Refused("empty element")
    names, i = [""], 0
    while i < len(el):
        c = el[i]
        if c == "[":
            j = el.find("]", i + 1)
            if j < 0 or "[" in el[i + 1 : j]:
                raise Refused("unbalanced or nested")
            nums = expand_group(el[i + 1 : j])
            names = [n + v for n in names for v in nums]
            i = j + 1
        elif c == "]":
            raise Refused("unmatched ]")
        elif ord(c) <= 0x20 or ord(c) == 0x7F:
            raise Refused("blank or control")
        else:
            names = [n + c for n in names]
            i += 1
    return names


def split_top(s):
    """Splits at the commas outside brackets; None when brackets do not balance there."""
    parts, depth, cur = [], 0, ""
    for c in s:
        if c == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        if c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
        cur += c
    parts.append(cur)
    return parts


def expand(s):
    """The names of s, or None when the grammar refuses it."""
    try:
        if not s:
            raise Refused("empty")
        out = []
        for el in split_top(s):
            out += expand_element(el)
        return out
    except Refused:
        return None


# ---------------------------------------------------------------- generation

NAME_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789-_."


def gen_number(rng):
    v = rng.choice([rng.randrange(10), rng.randrange(100), rng.randrange(1000)])
    width = rng.choice([0, 0, 0, 2, 3, 4])
    return v, str(v).zfill(width)


def gen_group(rng):
    items = []
    for _ in range(rng.randint(1, 3)):
        lo, lo_s = gen_number(rng)
        if rng.random() < 0.6:
            hi = lo + rng.randrange(6)
            hi_s = str(hi).zfill(rng.choice([0, len(lo_s)]))
            items.append(lo_s + "-" + hi_s)
        else:
            items.append(lo_s)
    return "[" + ",".join(items) + "]"


def gen_text(rng, lo=1, hi=6):
    return "".join(rng.choice(NAME_CHARS) for _ in range(rng.randint(lo, hi)))


def gen_element(rng):
    parts = []
    for k in range(rng.choice([0, 1, 1, 1, 2, 3])):
        if k > 0 or rng.random() < 0.9:
            parts.append(gen_text(rng))
        parts.append(gen_group(rng))
    if not parts or rng.random() < 0.3:
        parts.append(gen_text(rng))
    return "".join(parts)


BREAKS = [
    lambda s, r: s + ",",  # empty element at the end
    lambda s, r: "," + s,
    lambda s, r: s.replace(",", ",,", 1) if "," in s else s + ",,x",
    lambda s, r: s.replace("]", "", 1) if "]" in s else s + "]",
    lambda s, r: s.replace("[", "", 1) if "[" in s else s + "[1",
    lambda s, r: s.replace("[", "[[", 1) if "[" in s else "a[[1]]",
    lambda s, r: s + "x[5-3]",  # descending
    lambda s, r: s + "x[]",
    lambda s, r: s + "x[1-]",
    lambda s, r: s + "x[-1]",
    lambda s, r: s + "x[1-2-3]",
    lambda s, r: s + "x[1a]",
    lambda s, r: s + "x[" + "9" * 19 + "]",
    lambda s, r: s + "x[" + "0" * 18 + "-" + "0" * 17 + "1]",  # 18 digits: fine
    lambda s, r: s[: len(s) // 2] + " " + s[len(s) // 2 :],
    lambda s, r: s + "\t",
    lambda s, r: "",
]


def gen_list(rng):
    s = ",".join(gen_element(rng) for _ in range(rng.randint(1, 4)))
    if rng.random() < 0.25:
        s = rng.choice(BREAKS)(s, rng)
    return s


def main():
    prog = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 4000
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 18
    rng = random.Random(seed)
    lists = [gen_list(rng) for _ in range(count)]
    inp = "".join(s + "\n" for s in lists)
    wrapper = shlex.split(os.environ.get("DT_TEST_WRAPPER", ""))
    res = subprocess.run(wrapper + [prog], input=inp, capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        print("FAIL: %s exited %d: %s" % (prog, res.returncode, res.stderr))
        return 1
    got = res.stdout.split("\n")[:-1]
    if len(got) != len(lists):
        print("FAIL: %d answers for %d lists" % (len(got), len(lists)))
        return 1
    fails = accepted = 0
    for s, line in zip(lists, got):
        want = expand(s)
        kind, _, rest = line.partition("\t")
        if want is None:
            ok = kind == "ERR" and "SLURM_JOB_NODELIST=" in rest
        else:
            ok = kind == "OK" and rest.split(" ") == want
            accepted += ok
        if not ok:
            fails += 1
            if fails <= 10:
                print("FAIL: %r: parser says %s, expander says %s" % (s, line[:300], repr(want)[:300]))
    print("%d lists (seed %d): %d accepted, %d refused, %d disagreements"
          % (len(lists), seed, accepted, len(lists) - accepted - fails, fails))
    # A generator that stopped producing one kind would check nothing of it.
    if accepted < count // 2 or accepted > count - count // 10:
        print("FAIL: %d accepted of %d: the generator lost its mix" % (accepted, count))
        return 1
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
