#!/usr/bin/env python3
"""Keeps the docs true to the code: every command in the ```sh blocks of README.md and docs/*.md is
checked against the built dtrain, so a renamed flag, command or make target fails CI.

- `dtrain ...` (as build/dtrain, dtrain, "$DTRAIN", or after mpirun/srun/apptainer exec/docker run):
  the command (and benchmark or data action) must have a help screen (`dtrain help CMD [SUB]`), and
  every flag must appear in that screen, in the screens it points to (`dtrain help train data`), or,
  for commands that take them, among the options of every command (`dtrain help`).
- `make X`: X is a target of the Makefile.
- repository paths, in commands and in `backticks` in the prose, and relative links: they exist.
  Links named with --pending (pages another branch is writing) are reported, not failed.
- a few commands run as written: `dtrain version`, every `dtrain help ...`, and the 1-rank
  trainings on synthetic data with an explicit --steps of at most 100 (no launcher, no --data, no --device cuda).

Usage: check_docs.py --dtrain BIN --src DIR [--pending a.md,b.md] [--no-run] [FILE.md ...]
Exit 0 when everything holds, 1 with one line per finding (FILE:LINE: what and the fix)."""
import argparse
import glob
import os
import re
import shlex
import subprocess
import sys

LAUNCHERS = {"mpirun", "mpiexec", "srun", "apptainer", "singularity", "docker", "timeout", "env", "nsenter"}
PLACEHOLDERS = {"NAME", "FILE", "DIR", "OUT", "PATH", "SRC", "DST"}
TOP_DIRS = ("base/", "kernels/", "collectives/", "runtime/", "launch/", "include/", "examples/", "tests/",
            "slurm/", "bench/", "cmake/", "docs/", "containers/", ".ci/")


def sh_blocks(path):
    """(line number, logical line) of every ```sh / ```bash block, continuations joined."""
    out, in_sh, fence, buf, start = [], False, False, "", 0
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            if line.startswith("```"):
                if not fence:
                    fence, in_sh = True, line.strip() in ("```sh", "```bash", "```shell")
                else:
                    fence, in_sh = False, False
                continue
            if not in_sh:
                continue
            if not buf:
                start = n
            if line.rstrip().endswith("\\"):
                buf += line.rstrip()[:-1] + " "
                continue
            buf += line
            out.append((start, buf))
            buf = ""
    return out


def tokens(line):
    """Shell words without comments; brackets of optional parts ([--a | --b]) kept as words."""
    lex = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lex.whitespace_split = True
    lex.commenters = "#"
    try:
        return list(lex)
    except ValueError:  # an unbalanced quote: fall back to whitespace
        return line.split("#", 1)[0].split()


def segments(words):
    """Simple commands: split at ; && || | outside [optional] parts."""
    segs, cur, depth = [], [], 0
    for w in words:
        depth += w.count("[") - w.count("]")
        if depth <= 0 and w in (";", "&&", "||", "|", "&"):
            segs.append(cur)
            cur, depth = [], 0
            continue
        cur.append(w)
    segs.append(cur)
    return [s for s in segs if s]


def is_dtrain(word):
    return word in ("dtrain", "$DTRAIN", "${DTRAIN}") or word.endswith("/dtrain")


def program(seg):
    """The first word that is not a VAR=value assignment."""
    for i, w in enumerate(seg):
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w):
            return i, w
    return len(seg), None


class Ran(set):
    """The commands run so far (each once), and how many invocations were checked."""
    checked = 0


class Dtrain:
    def __init__(self, binary):
        self.binary = binary
        self.screens = {}

    def help(self, topic):
        if topic not in self.screens:
            p = subprocess.run([self.binary, "help"] + topic.split(), capture_output=True, text=True, timeout=30)
            self.screens[topic] = p.stdout if p.returncode == 0 else None
        return self.screens[topic]

    def flags(self, topic):
        """The flags that the screens of this topic name."""
        text = self.help(topic) or ""
        seen, todo = set(), [topic]
        while todo:
            t = todo.pop()
            if t in seen:
                continue
            seen.add(t)
            screen = self.help(t) or ""
            text += screen
            cmd = topic.split()[0]
            for sub in re.findall(r"help %s ([\w-]+)" % re.escape(cmd), screen):
                if self.help("%s %s" % (cmd, sub)) is not None:
                    todo.append("%s %s" % (cmd, sub))
        if "options of every command" in text:
            text += self.help("") or ""
        return set(re.findall(r"(?<![\w-])(--[a-z0-9][a-z0-9-]*|-[a-zA-Z])\b", text))


def make_targets(src):
    targets = set()
    with open(os.path.join(src, "Makefile"), encoding="utf-8") as f:
        for line in f:
            m = re.match(r"^([A-Za-z0-9_.-]+(?:\s+[A-Za-z0-9_.-]+)*)\s*:(?!=)", line)
            if m:
                targets.update(m.group(1).split())
    return targets


def repo_path(word):
    w = word.strip("`'\",;:()[]")
    if not w.startswith(TOP_DIRS) or any(c in w for c in "*<>$%{}|") or "..." in w:
        return None
    if any(os.path.splitext(part)[0] in PLACEHOLDERS for part in w.split("/")):
        return None  # slurm/NAME.sbatch: a name the reader fills in
    return w.split("#")[0]


def runnable(seg, di, topic):
    """The documented commands cheap enough to run as written."""
    if di != 0 and not all(re.match(r"^[A-Za-z_]\w*=", w) for w in seg[:di]):
        return False
    if topic == "version" or seg[di + 1:di + 2] == ["help"] or "--help" in seg:
        return True
    if topic != "train":
        return False
    args = seg[di + 2:]
    if "--data" in args or "cuda" in args or "..." in args or any(a.startswith("[") for a in args):
        return False
    # Only an explicit small --steps: a model's default 100 steps can take minutes (fc:8192 on a CPU).
    steps = args[args.index("--steps") + 1] if "--steps" in args and args.index("--steps") + 1 < len(args) else ""
    return steps.isdigit() and int(steps) <= 100 and "--epochs" not in args


def check_file(path, src, dt, targets, pending, run, findings, ran):
    rel = os.path.relpath(path, src)
    for n, line in sh_blocks(path):
        where = "%s:%d" % (rel, n)
        for seg in segments(tokens(line)):
            pi, prog = program(seg)
            if prog is None:
                continue
            for w in seg:
                p = repo_path(w)
                if p and not os.path.exists(os.path.join(src, p)):
                    findings.append("%s: %s does not exist in the repository" % (where, p))
            if prog == "make":
                for t in seg[pi + 1:]:
                    if t.startswith("-") or "=" in t:
                        continue
                    if t not in targets:
                        findings.append("%s: make %s: no such target in the Makefile (targets: %s)"
                                        % (where, t, ", ".join(sorted(targets))))
                continue
            if is_dtrain(prog):
                di = pi
            elif prog == "docker" and seg[pi + 1:pi + 2] != ["run"]:
                continue  # docker build -t dtrain: the image's name, not the command
            elif prog in LAUNCHERS:
                di = next((i for i in range(pi + 1, len(seg)) if is_dtrain(seg[i])), None)
                if di is None:
                    continue
            else:
                continue
            check_dtrain(where, seg, di, dt, run, findings, ran)
            ran.checked += 1


def check_dtrain(where, seg, di, dt, run, findings, ran):
    args = seg[di + 1:]
    if not args or args[0].startswith("-"):
        if args and args[0] not in ("--help", "-h"):
            findings.append("%s: dtrain %s: dtrain takes a command first (dtrain help)" % (where, args[0]))
        return
    cmd = args[0]
    if dt.help(cmd) is None:
        findings.append("%s: dtrain %s: no such command (dtrain help lists them)" % (where, cmd))
        return
    topic = cmd
    if cmd == "help":
        topic = " ".join(a for a in args[1:] if not a.startswith("-"))
        if dt.help(topic) is None:
            findings.append("%s: dtrain help %s: no such help screen" % (where, topic))
        rest = []
    else:
        if len(args) > 1 and not args[1].startswith("-") and dt.help("%s %s" % (cmd, args[1])) is not None:
            topic = "%s %s" % (cmd, args[1])
        rest = args[1:]
    known = dt.flags(topic) if cmd != "help" else set()
    for a in rest:
        for alt in a.strip("[]").split("|"):
            flag = alt.split("=", 1)[0]
            if not re.match(r"^--?[A-Za-z]", flag) or flag in ("--help", "-h"):
                continue
            if flag not in known:
                findings.append("%s: dtrain %s %s: not a flag of dtrain %s (see dtrain help %s)"
                                % (where, topic, flag, topic, topic))
    if run and runnable(seg, di, topic):
        argv = [dt.binary] + [a for a in args]
        env = dict(os.environ, DTRAIN_DEVICE="cpu")
        for w in seg[:di]:
            k, _, v = w.partition("=")
            env[k] = v
        key = " ".join(argv)
        if key in ran:
            return
        ran.add(key)
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
        except subprocess.TimeoutExpired:
            findings.append("%s: %s: ran past 300 s" % (where, " ".join(args)))
            return
        if p.returncode != 0:
            tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
            findings.append("%s: dtrain %s exited %d: %s" % (where, " ".join(args), p.returncode, " / ".join(tail)))
        else:
            print("ran: dtrain %s" % " ".join(args))


def check_prose(path, src, pending, findings):
    """Backticked repository paths and relative links of the page exist."""
    rel = os.path.relpath(path, src)
    fence = False
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.startswith("```"):
                fence = not fence
                continue
            if fence:
                continue
            for code in re.findall(r"`([^`]+)`", line):
                for w in code.split():
                    p = repo_path(w)
                    if p and not os.path.exists(os.path.join(src, p)):
                        findings.append("%s:%d: %s does not exist in the repository" % (rel, n, p))
            for target in re.findall(r"\]\(([^)\s]+)\)", line):
                if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                    continue
                file = target.split("#")[0]
                full = os.path.normpath(os.path.join(os.path.dirname(path), file))
                if os.path.exists(full):
                    continue
                if os.path.basename(file) in pending:
                    print("note: %s:%d links %s, which another branch is writing (pending)" % (rel, n, file))
                    continue
                findings.append("%s:%d: link to %s: no such file" % (rel, n, file))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtrain", required=True)
    ap.add_argument("--src", required=True)
    ap.add_argument("--pending", default="")
    ap.add_argument("--no-run", action="store_true")
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    src = os.path.abspath(a.src)
    files = a.files or [os.path.join(src, "README.md")] + sorted(glob.glob(os.path.join(src, "docs", "*.md")))
    pending = set(p for p in a.pending.replace(";", ",").split(",") if p)
    dt, targets, findings, ran = Dtrain(os.path.abspath(a.dtrain)), make_targets(src), [], Ran()
    if dt.help("") is None:
        print("FAIL: %s help did not run" % a.dtrain)
        return 1
    for path in files:
        check_file(path, src, dt, targets, pending, not a.no_run, findings, ran)
        check_prose(path, src, pending, findings)
    for f in findings:
        print("FAIL: " + f)
    if findings:
        print("%d finding(s) in the docs: fix the doc, or the code it describes" % len(findings))
        return 1
    print("ok: %d dtrain command(s) with every flag, and every make target, path and link in %d file(s)"
          " checked; %d command(s) ran" % (ran.checked, len(files), len(ran)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
