#!/usr/bin/env python3
"""The binary interface of include/dtrain.h, written out and compared with the committed manifest.

While DT_VERSION_MAJOR is 0 every change of the public interface raises DT_VERSION_MINOR, and the
soname (libdtrain.so.0.MINOR) and the package version files follow it (include/dtrain.h, "Version").
This holds the headers to that rule: it lists every public struct (size, alignment, each field's
offset and size), every enum value and every function's signature, and compares the list with
tests/package/abi-MAJOR.MINOR.txt. A difference under the same version fails with what to do.

The declarations come from clang's AST of <dtrain.h> (so a new struct or field cannot be missed);
sizes and offsets from a probe program built with the project's C compiler and run (the layout a
program built with it sees). The manifest is for one data model (LP64: x86_64, aarch64 Linux); on
another the check is skipped.

  abi_manifest.py SOURCE_DIR CC            compare (exit 0 same, 1 different, 77 skipped)
  abi_manifest.py SOURCE_DIR CC --write    write the manifest of the current version
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = 77


def version(src):
    text = open(os.path.join(src, "include", "dtrain.h")).read()
    parts = [re.search(r"^#define DT_VERSION_%s (\d+)" % p, text, re.M) for p in ("MAJOR", "MINOR", "PATCH")]
    if not all(parts):
        sys.exit("FAIL: include/dtrain.h: a DT_VERSION_MAJOR/MINOR/PATCH line is missing")
    return tuple(int(m.group(1)) for m in parts)


def declarations(src, clang):
    """The structs (name -> field names), enum constants and function signatures the headers
    declare, in the order they appear."""
    inc = os.path.realpath(os.path.join(src, "include"))
    out = subprocess.run([clang, "-std=c11", "-fsyntax-only", "-Xclang", "-ast-dump=json", "-I", inc, "-x", "c", "-"],
                         input="#include <dtrain.h>\n", capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("FAIL: clang could not parse <dtrain.h>:\n" + out.stderr)
    structs, enums, funcs = [], [], []
    cur = None  # the AST names a node's file only where it changes from the previous node's
    for node in json.loads(out.stdout)["inner"]:
        loc = node.get("loc", {})
        f = loc.get("file") or loc.get("spellingLoc", {}).get("file") or loc.get("expansionLoc", {}).get("file")
        cur = f or cur
        if not cur or not os.path.realpath(cur).startswith(inc + os.sep):
            continue
        kind, name = node["kind"], node.get("name")
        if kind == "RecordDecl" and node.get("completeDefinition"):
            fields = [c for c in node.get("inner", []) if c["kind"] == "FieldDecl"]
            if any(not c.get("name") or c.get("isBitfield") for c in fields):
                sys.exit("FAIL: struct %s has an unnamed or bit-field member: extend %s to probe it" % (name, __file__))
            structs.append((name, [c["name"] for c in fields]))
        elif kind == "EnumDecl":
            enums += [c["name"] for c in node.get("inner", []) if c["kind"] == "EnumConstantDecl"]
        elif kind == "FunctionDecl":
            funcs.append("func %s %s" % (name, node["type"]["qualType"]))
    return structs, enums, funcs


def layout(src, cc, structs, enums):
    """Runs a probe built with CC: the data model line, then each struct's and enum's lines."""
    lines = ['printf("data model: long %zu, pointer %zu, double align %zu, long long align %zu\\n", '
             "sizeof(long), sizeof(void *), _Alignof(double), _Alignof(long long));"]
    for name, fields in structs:
        t = "struct " + name
        lines.append('printf("struct %s size %%zu align %%zu\\n", sizeof(%s), _Alignof(%s));' % (name, t, t))
        for f in fields:
            lines.append('printf("  %s offset %%zu size %%zu\\n", offsetof(%s, %s), sizeof(((%s *)0)->%s));'
                         % (f, t, f, t, f))
    for e in enums:
        lines.append('printf("enum %s %%lld\\n", (long long)%s);' % (e, e))
    probe = "#include <stddef.h>\n#include <stdio.h>\n#include <dtrain.h>\nint main(void)\n{\n    %s\n    return 0;\n}\n" \
        % "\n    ".join(lines)
    with tempfile.TemporaryDirectory() as tmp:
        c, exe = os.path.join(tmp, "probe.c"), os.path.join(tmp, "probe")
        open(c, "w").write(probe)
        out = subprocess.run([cc, "-std=c11", "-I", os.path.join(src, "include"), "-o", exe, c],
                             capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit("FAIL: the layout probe did not compile with %s:\n%s" % (cc, out.stderr))
        return subprocess.run([exe], capture_output=True, text=True, check=True).stdout.splitlines()


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    src, cc, write = sys.argv[1], sys.argv[2], "--write" in sys.argv[3:]
    clang = shutil.which("clang")
    if not clang:
        print("SKIP: clang is not installed (it lists the headers' declarations): apt-get install clang")
        return SKIP
    major, minor, patch = version(src)
    rel = "tests/package/abi-%d.%d.txt" % (major, minor)
    path = os.path.join(src, rel)
    structs, enums, funcs = declarations(src, clang)
    probed = layout(src, cc, structs, enums)
    got = ["# The binary interface of include/dtrain.h %d.%d (tests/build/abi_manifest.py writes it)." % (major, minor),
           probed[0]] + probed[1:] + funcs
    regen = "python3 tests/build/abi_manifest.py . %s --write" % os.path.basename(cc)
    if write:
        open(path, "w").write("\n".join(got) + "\n")
        print("wrote %s: %d structs, %d enum values, %d functions" % (rel, len(structs), len(enums), len(funcs)))
        return 0
    if not os.path.exists(path):
        print("FAIL: include/dtrain.h says %d.%d.%d but there is no %s: write it from the headers with\n"
              "    %s\n(and git rm the manifest of the previous minor)" % (major, minor, patch, rel, regen))
        return 1
    want = open(path).read().splitlines()
    if want[1:2] != got[1:2]:
        print("SKIP: %s is for another data model (%s); this compiler's is '%s'" % (rel, want[1:2], got[1]))
        return SKIP
    if want == got:
        print("ok: %s matches the headers: %d structs, %d enum values, %d functions"
              % (rel, len(structs), len(enums), len(funcs)))
        return 0
    import difflib
    print("FAIL: the public interface differs from %s, under the same version %d.%d.%d:"
          % (rel, major, minor, patch))
    for line in difflib.unified_diff(want, got, rel, "the headers now", n=1, lineterm=""):
        print("    " + line)
    if major == 0:
        fix = "raise DT_VERSION_MINOR in include/dtrain.h to %d (DT_VERSION_PATCH to 0): any interface change does " \
              "while the major is 0, and the soname becomes libdtrain.so.0.%d" % (minor + 1, minor + 1)
    else:
        fix = "raise DT_VERSION_MAJOR in include/dtrain.h if a layout or signature changed or something was removed " \
              "(MINOR to 0), else DT_VERSION_MINOR (an addition)"
    print("Fix: %s; then write the new manifest from the source directory with\n    %s\nand git rm %s."
          % (fix, regen, rel))
    return 1


if __name__ == "__main__":
    sys.exit(main())
