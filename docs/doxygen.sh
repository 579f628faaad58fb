#!/usr/bin/env bash
# Builds the API reference: Doxygen with DOXYFILE (the configured docs/Doxyfile.in) into OUT_DIR
# (html/, xml/, warnings.log), and fails when Doxygen warns, an undocumented function, field or
# enum value included, since the public header is the contract. Warnings about a header listed as
# PENDING (whose comments are not converted to /** */ yet) are printed but do not fail.
# Exit: 0 clean, 1 warnings or a Doxygen failure, 77 no doxygen installed.
# Usage: doxygen.sh DOXYFILE OUT_DIR [PENDING...]   (PENDING as included: dtrain/checkpoint.h)
# $DOXYGEN names the program (default: doxygen on PATH).
set -uo pipefail
doxyfile=$1 out=$2
shift 2
doxygen=${DOXYGEN:-doxygen}
if ! command -v "$doxygen" >/dev/null; then
    echo "doxygen is not installed: apt-get install doxygen (or make deps)"
    exit 77
fi
[ -f "$doxyfile" ] || { echo "FAIL: no Doxyfile at $doxyfile (configure the build first)"; exit 1; }
mkdir -p "$out" || exit 1
log=$out/warnings.log
# Later settings override earlier ones: the output directory and the log are this run's.
if ! { cat "$doxyfile"; echo "OUTPUT_DIRECTORY = \"$out\""; echo "WARN_LOGFILE = \"$log\""; } | "$doxygen" - >"$out/doxygen.out" 2>&1; then
    cat "$out/doxygen.out"; echo "FAIL: doxygen failed ($doxygen, $doxyfile)"; exit 1
fi
# One warning can span lines (a list of arguments follows it); count the lines that start one.
pending_re='^$'
for p in "$@"; do pending_re="$pending_re|/include/$p:"; done
warnings=$(grep -E ': (warning|error):' "$log" || true)
fatal=$(grep -vE "$pending_re" <<<"$warnings" | grep -c . || true)
tolerated=$(( $(grep -c . <<<"$warnings" || true) - fatal ))
if [ "$fatal" -gt 0 ]; then
    cat "$log"
    echo "FAIL: $fatal Doxygen warning(s) in the public headers (above); document what they name with /** */"
    exit 1
fi
[ "$tolerated" -gt 0 ] && echo "note: $tolerated warning(s) in headers still to convert ($*), not counted"
echo "ok: API reference in $out/html/index.html"
