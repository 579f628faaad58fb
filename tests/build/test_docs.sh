#!/usr/bin/env bash
# The guide's commands are checked against the built dtrain (check_docs.py, below). The API reference builds without a Doxygen warning (an undocumented function, field or value in a
# public header fails, as `make docs` does), and it documents every dt_* / DT_* name the examples
# use, so that the reference alone is enough to write them. Names declared only in a header still
# to convert (PENDING, as in cmake/docs.cmake) are reported, not failed. SKIP without doxygen.
# Usage: test_docs.sh DOXYFILE SOURCE_DIR DOXYGEN [PENDING...]
set -uo pipefail
doxyfile=$1 src=$2 doxygen=$3
shift 3
tmp=$(mktemp -d /tmp/dtrain-docs.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# First the guide: every command in README.md and docs/*.md against the built dtrain
# (tests/build/check_docs.py; DTRAIN_DOCS_BIN is the command, set by ctest). The checker is shown to
# fail on a made-up flag, command, make target and path before it is trusted with the real pages.
if [ -n "${DTRAIN_DOCS_BIN:-}" ]; then
    check=(python3 "$src/tests/build/check_docs.py" --dtrain "$DTRAIN_DOCS_BIN" --src "$src")
    printf '```sh\nbuild/dtrain train --model mlp --made-up-flag 3\nbuild/dtrain frobnicate\nmake no-such-target\nls tests/no/such/file.sh\n```\n' >"$tmp/bad.md"
    out=$("${check[@]}" --no-run "$tmp/bad.md")
    for want in "--made-up-flag: not a flag" "frobnicate: no such command" "make no-such-target" "tests/no/such/file.sh does not exist"; do
        grep -qF -- "$want" <<<"$out" || { echo "FAIL: the docs checker missed '$want':"; echo "$out"; exit 1; }
    done
    echo "ok: the docs checker fails on a made-up flag, command, make target and path"
    "${check[@]}" --pending "${DTRAIN_DOCS_PENDING_PAGES:-}" || exit 1
else
    echo "note: DTRAIN_DOCS_BIN unset: the commands of the guide were not checked (ctest sets it)"
fi

command -v "$doxygen" >/dev/null || { echo "SKIP: doxygen is not installed (apt-get install doxygen, or make deps)"; exit 77; }

DOXYGEN=$doxygen bash "$src/docs/doxygen.sh" "$doxyfile" "$tmp" "$@"
rc=$?
[ "$rc" -eq 0 ] || exit 1
index=$tmp/xml/index.xml
[ -f "$index" ] || { echo "FAIL: doxygen wrote no $index"; exit 1; }

fails=0 checked=0
for ex in "$src"/examples/*.c "$src"/examples/*.cu; do
    [ -f "$ex" ] || continue
    for name in $(grep -oE '\b(dt|DT)_[A-Za-z0-9_]+' "$ex" | sort -u); do
        checked=$((checked + 1))
        grep -q "<name>$name</name>" "$index" && continue
        where=$(grep -lw "$name" "$src"/include/dtrain.h "$src"/include/dtrain/*.h 2>/dev/null | sed "s|^$src/include/||")
        pending=0
        for p in "$@"; do [ "$where" = "$p" ] && pending=1; done
        if [ "$pending" -eq 1 ]; then
            echo "note: $(basename "$ex") uses $name, of $where (still to convert): not in the reference yet"
        else
            echo "FAIL: $(basename "$ex") uses $name, which the reference does not document (declared in: ${where:-no public header})"
            fails=$((fails + 1))
        fi
    done
done
[ "$fails" -eq 0 ] || exit 1
echo "ok: no Doxygen warning; all $checked dtrain names the examples use (per example) are in the reference"
