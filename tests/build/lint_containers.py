#!/usr/bin/env python3
"""Rules for the container recipes (Dockerfile, containers/*.def) that hadolint would also raise and
that matter here: a pinned base tag (never `latest`, never untagged), apt-get with
--no-install-recommends and its lists removed in the same layer, a non-root USER in the image that
runs, and no ADD of a URL (unverified downloads). Runs without hadolint, so CI always checks them;
test_container_lint.sh also runs hadolint itself where it is installed.
Usage: lint_containers.py FILE...   (exit 1 on any finding, each printed as FILE:LINE: rule: text)"""
import re
import sys


def logical_lines(text):
    """Dockerfile lines with their backslash continuations joined, and the first line's number."""
    out, buf, start = [], "", 0
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not buf:
            start = n
            if line.lstrip().startswith("#"):
                continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        if buf.strip():
            out.append((start, buf.strip()))
        buf = ""
    if buf.strip():
        out.append((start, buf.strip()))
    return out


def check_image_ref(ref, args):
    """A base image named with a fixed tag: ${ARG} references are resolved from the ARG defaults."""
    ref = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m.group(1) or m.group(2), "?"), ref)
    if "?" in ref:
        return "base image %s uses an ARG without a default: pin it" % ref
    if "@sha256:" in ref:
        return None
    name = ref.rsplit("/", 1)[-1]
    if ":" not in name:
        return "base image %s has no tag: pin one (e.g. nvidia/cuda:13.0.1-devel-ubuntu24.04)" % ref
    if name.endswith(":latest"):
        return "base image %s uses latest: pin a release tag" % ref
    return None


def check_apt(cmd):
    """apt-get install with --no-install-recommends and -y, and the lists removed in the same layer."""
    found = []
    if re.search(r"apt-get\s+(-\S+\s+)*install", cmd):
        if "--no-install-recommends" not in cmd:
            found.append("apt-get install without --no-install-recommends (pulls in unwanted packages)")
        if not re.search(r"install\s+(.*\s)?(-y|--yes|-\S*y)\b", cmd):
            found.append("apt-get install without -y (waits for a prompt in a build)")
        if "rm -rf /var/lib/apt/lists" not in cmd:
            found.append("apt-get install without rm -rf /var/lib/apt/lists/* in the same step (keeps the lists in a layer)")
    if re.search(r"apt-get\s+(-\S+\s+)*(upgrade|dist-upgrade)", cmd):
        found.append("apt-get upgrade in an image: pin the base tag instead")
    return found


def lint_dockerfile(path, text):
    findings, args, last_user, stage_from = [], {}, None, None
    for n, line in logical_lines(text):
        word, _, rest = line.partition(" ")
        word = word.upper()
        if word == "ARG":
            key, _, val = rest.strip().partition("=")
            if val:
                args[key.strip()] = val.strip().strip('"')
        elif word == "FROM":
            ref = [w for w in rest.split() if not w.startswith("--")][0]
            problem = check_image_ref(ref, args)
            if problem and ref.split(":")[0] not in stage_names(text):
                findings.append((n, "pinned-base", problem))
            stage_from, last_user = n, None
        elif word == "USER":
            last_user = rest.strip()
        elif word == "ADD" and re.search(r"\bhttps?://", rest):
            findings.append((n, "no-add-url", "ADD of a URL: download with a checksum in RUN, or COPY a vetted file"))
        elif word == "RUN":
            for p in check_apt(rest):
                findings.append((n, "apt", p))
    if stage_from is None:
        findings.append((1, "from", "no FROM line"))
    elif last_user in (None, "root", "0", "0:0"):
        findings.append((stage_from, "non-root", "the final stage runs as root: add a USER that is not root"))
    return findings


def stage_names(text):
    return set(m.group(1) for m in re.finditer(r"(?im)^\s*FROM\s+\S+\s+AS\s+(\S+)", text))


def lint_def(path, text):
    """An Apptainer definition: the same base-image rule on From:, the apt rules on %post, which is
    one shell script (the list removal may come on a later line of it)."""
    findings, section, post = [], None, []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        m = re.match(r"(?i)from:\s*(\S+)", line)
        if section is None and m:
            problem = check_image_ref(m.group(1), {})
            if problem:
                findings.append((n, "pinned-base", problem))
        if line.startswith("%"):
            section = line.split()[0]
            continue
        if section == "%post":
            post.append((n, raw))
    script = "\n".join(r for _, r in post)
    joined = re.sub(r"\\\n", " ", script)
    for p in check_apt(joined):
        if "rm -rf /var/lib/apt/lists" in p and "rm -rf /var/lib/apt/lists" in script:
            continue
        findings.append((post[0][0] if post else 1, "apt", p))
    if not re.search(r"(?im)^\s*(bootstrap:)", text):
        findings.append((1, "bootstrap", "no Bootstrap: line"))
    return findings


def main(paths):
    bad = 0
    for path in paths:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        findings = lint_def(path, text) if path.endswith(".def") else lint_dockerfile(path, text)
        for n, rule, msg in findings:
            print("%s:%d: %s: %s" % (path, n, rule, msg))
        bad += len(findings)
    if bad:
        print("FAIL: %d finding(s)" % bad)
        return 1
    print("ok: %s" % ", ".join(paths))
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1:]))
