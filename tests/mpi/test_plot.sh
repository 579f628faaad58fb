#!/usr/bin/env bash
# `dtrain plot`: a real --metrics file drawn as a PNG (its signature and IHDR size checked), strict
# refusals of damaged files by line number, usage errors, gnuplot missing or failing, atomic output.
# The checks that need gnuplot SKIP (77) when it is not installed (apt-get install gnuplot-nox).
here=$(dirname "$0"); source "$here/lib.sh"
DTRAIN=$1
MPIRUN=$2

# png_size FILE: "WIDTHxHEIGHT" from the IHDR chunk of a PNG, or "not a PNG".
png_size() {
    python3 - "$1" <<'PY'
import struct, sys
try:
    b = open(sys.argv[1], "rb").read(33)
except OSError:
    b = b""
if len(b) < 33 or b[:8] != b"\x89PNG\r\n\x1a\n" or b[12:16] != b"IHDR":
    print("not a PNG")
else:
    print("%dx%d" % struct.unpack(">II", b[16:24]))
PY
}
# The image height for N panels (cmd_plot.c: 50 + 170 per panel, 860 wide).
size_for() { echo "860x$((50 + 170 * $1))"; }

# A file of records the way train writes them, for the refusals.
rec() { # STEP LOSS [EXTRA]
    printf '{"time": "2026-01-31T12:00:00.000Z", "step": %s, "loss": %s, "accuracy": 0.5, "lr": 0.01%s}\n' \
        "$1" "$2" "${3:+, $3}"
}
{ rec 10 2.3; rec 20 2.1; } >"$tmp/good.jsonl"

# Usage errors: exit 2, nothing read.
expect 2 "no metrics file given" "$DTRAIN" plot
expect 2 "unexpected argument 'b.jsonl'" "$DTRAIN" plot "$tmp/good.jsonl" b.jsonl
expect 2 "-o needs a value" "$DTRAIN" plot "$tmp/good.jsonl" -o
expect 2 "unknown option '--frobnicate'" "$DTRAIN" plot "$tmp/good.jsonl" --frobnicate
# A slip gets the closest flag, in the words of every command (launch/cli.c).
expect 2 "unknown option '--outpt'; did you mean --output? (see dtrain help plot)" \
    "$DTRAIN" plot "$tmp/good.jsonl" --outpt x.png
expect 2 "-o is empty: name the PNG to write" "$DTRAIN" plot "$tmp/good.jsonl" -o ''
expect 2 "--output= is empty: name the PNG to write" "$DTRAIN" plot "$tmp/good.jsonl" --output=
expect 0 "usage: dtrain plot METRICS.jsonl" "$DTRAIN" plot --help
expect 2 "$tmp is a directory: give the file a run wrote with dtrain train --metrics FILE" "$DTRAIN" plot "$tmp"

# Damaged files: exit 1, the file, the line number and what is wrong; no PNG appears.
refuse() { # FILE-CONTENT EXPECTED-MESSAGE
    printf '%s' "$1" >"$tmp/bad.jsonl"
    expect 1 "$tmp/bad.jsonl: $2" "$DTRAIN" plot "$tmp/bad.jsonl"
    [ ! -e "$tmp/bad.png" ] || { bad "a refused file left $tmp/bad.png"; rm -f "$tmp/bad.png"; }
}
refuse "$(rec 10 2.3)
$(rec 20 2.1)
{\"step\": 30, \"loss\": 2.0 \"accuracy\": 0.5}
" "line 3: expected ',' or '}' after a value at column 26"
refuse "$(rec 10 2.3)
{\"loss\": 2.0}
" "line 2: a record without \"step\""
refuse "$(rec 20 2.3)
$(rec 10 2.1)
" "line 2: step 10 comes after step 20"
refuse "$(rec 20 2.3)
$(rec 19 2.1)
" "line 2: step 19 comes after step 20"
refuse "$(rec 10 '"low"')
" "line 1: \"loss\" is not a number at column 58"
refuse "$(rec 10 2.3 '"loss": 2.4')
" "line 1: \"loss\" given twice"
refuse "$(rec 10 2.3)

" "line 2: an empty line where a record should be"
refuse "$(rec 10 2.3) x
" "line 1: text after the object"
refuse "{\"step\": 1.5, \"loss\": 1}
" "line 1: \"step\" 1.5 is not a whole number >= 0"
refuse "{\"step\": 1, \"loss\": {\"a\": 1}}
" "line 1: \"loss\" is not a number"
refuse "{\"step\": 1, \"x\": [1]}
" "line 1: a nested object or array"
refuse "{\"step\": 1, \"loss\": 01}
" "line 1: \"loss\" is not a number at column 21"
refuse "$(rec 10 2.3)
$(rec 10 2.2)
" "line 2: step 10 has \"loss\" again"
refuse "{\"step\": 1, \"loss\": 2.0, \"tag\": \"a
" "line 1: a string not closed"
# A first line cut short is no record at all: refused, not drawn without (a torn last line is).
refuse "{\"step\": 1, \"lo" "line 1: a string not closed"
: >"$tmp/empty.jsonl"
expect 1 "$tmp/empty.jsonl holds no step records (0 lines)" "$DTRAIN" plot "$tmp/empty.jsonl"
# A file that is not there is the command's to fix: exit 2, as every command refuses a missing input.
expect 2 "cannot read $tmp/none.jsonl: No such file or directory: check the path" "$DTRAIN" plot "$tmp/none.jsonl"

# No gnuplot on PATH: the package to install, exit 1 (the file is read first: it was fine).
mkdir -p "$tmp/nobin"
expect 1 "gnuplot is not on PATH: install it (Debian/Ubuntu: apt-get install gnuplot-nox)" \
    env PATH="$tmp/nobin" "$DTRAIN" plot "$tmp/good.jsonl"
# A gnuplot that fails: its exit status, no PNG, no temporary file left.
mkdir -p "$tmp/fakebin"
printf '#!/bin/sh\ncat >/dev/null\necho "fake gnuplot: broken" >&2\nexit 3\n' >"$tmp/fakebin/gnuplot"
chmod +x "$tmp/fakebin/gnuplot"
expect 1 "failed with exit status 3" env PATH="$tmp/fakebin:$PATH" "$DTRAIN" plot "$tmp/good.jsonl"
# One that exits 0 but writes nothing is not taken for a plot.
printf '#!/bin/sh\ncat >/dev/null\nexit 0\n' >"$tmp/fakebin/gnuplot"
expect 1 "is not a PNG; not replacing $tmp/good.png" env PATH="$tmp/fakebin:$PATH" "$DTRAIN" plot "$tmp/good.jsonl"
ls "$tmp" | grep -q '\.tmp-' && bad "a temporary file was left: $(ls "$tmp")" || ok "no temporary file left behind"
[ ! -e "$tmp/good.png" ] && ok "failed plots wrote no good.png" || bad "a failed plot wrote good.png"
# A link planted under the temporary file's first name (out.tmp-PID: exec keeps the shell's pid) in
# a shared directory: gnuplot (a fake that writes a PNG where `set output` says) draws into a file
# of dtrain's own, never through the link into its target.
printf '#!/bin/sh\no=$(sed -n "s/^set output .\\(.*\\).$/\\1/p" | head -1)\nprintf "\\211PNG\\r\\n\\032\\n" >"$o"\n' \
    >"$tmp/fakebin/gnuplot"
printf 'mine' >"$tmp/victim"
expect 0 "plot: wrote $tmp/p.png" env PATH="$tmp/fakebin:$PATH" bash -c 'ln -s "$1" "$2.tmp-$$"; exec "$3" plot "$4" -o "$2"' \
    _ "$tmp/victim" "$tmp/p.png" "$DTRAIN" "$tmp/good.jsonl"
[ "$(cat "$tmp/victim")" = mine ] && [ -f "$tmp/p.png" ] && [ ! -L "$tmp/p.png" ] &&
    ok "a planted link at the temporary name: not followed, p.png is a file of its own" ||
    bad "planted link: victim now '$(cat "$tmp/victim")', $(ls -l "$tmp/p.png")"
rm -f "$tmp"/p.png*
# -o -: the PNG's bytes on stdout (the fake's 8-byte signature here), drawn in TMPDIR, the summary
# on stderr; no file named '-', no temporary file left. Onto a terminal: refused before any work.
mkdir -p "$tmp/td" "$tmp/cwd"
(cd "$tmp/cwd" && env PATH="$tmp/fakebin:$PATH" TMPDIR="$tmp/td" "$DTRAIN" plot "$tmp/good.jsonl" -o - \
    >"$tmp/stdout.png" 2>"$tmp/stderr")
rc=$?
[ "$rc" -eq 0 ] && [ "$(od -An -tx1 "$tmp/stdout.png" | tr -d ' \n')" = 89504e470d0a1a0a ] &&
    grep -q "^plot: wrote the PNG to standard output: 3 panels over 2 records" "$tmp/stderr" &&
    [ -z "$(ls -A "$tmp/cwd")$(ls -A "$tmp/td")" ] && ok "-o -: the PNG on stdout, the summary on stderr, no file left" ||
    bad "-o -: exit $rc, stdout $(od -c "$tmp/stdout.png" | head -2), stderr $(cat "$tmp/stderr"), left: $(ls -A "$tmp/cwd" "$tmp/td")"
# The PNG's name by default: the metrics file's, .jsonl replaced (however short the name).
cp "$tmp/good.jsonl" "$tmp/cwd/g.jsonl"
expect 0 "plot: wrote g.png:" env PATH="$tmp/fakebin:$PATH" bash -c 'cd "$1" && exec "$2" plot g.jsonl' _ "$tmp/cwd" "$DTRAIN"
if command -v script >/dev/null; then
    expect 2 "plot: -o - writes the PNG's bytes to standard output, which is a terminal: redirect it (dtrain plot $tmp/good.jsonl -o - > file.png)" \
        script -qec "env PATH=$tmp/fakebin:\$PATH $DTRAIN plot $tmp/good.jsonl -o -" /dev/null
else
    echo "script (util-linux) is not installed: the terminal check of -o - is not made"
fi

# Gaps in the steps (a run resumed from an older checkpoint: records to step 500, then from 1000)
# break the curves: an empty line in gnuplot's data before the first record after the gap, and
# nowhere else; the script is caught by a gnuplot that keeps its input.
printf '#!/bin/sh\ncat >"%s"\nexit 3\n' "$tmp/script.gp" >"$tmp/fakebin/gnuplot"
data_breaks() { # METRICS: the data rows either side of each empty line of the plot's data, "A|B ..."
    rm -f "$tmp/script.gp"
    env PATH="$tmp/fakebin:$PATH" "$DTRAIN" plot "$1" >/dev/null 2>&1
    sed -n '/^\$D << EOD$/,/^EOD$/p' "$tmp/script.gp" | awk 'NR > 1 && $0 == "" { b = prev; next }
        b != "" { printf "%s|%s ", b, $1; b = "" } { split($0, f, " "); prev = f[1] }'
}
python3 - >"$tmp/gap.jsonl" <<'PY'
for s in list(range(50, 501, 50)) + list(range(1000, 1501, 50)):
    ev = ', "eval_loss": 1.5, "eval_accuracy": 0.5' if s % 250 == 0 else ''
    print('{"step": %d, "loss": %.3f, "accuracy": 0.5, "lr": 0.01%s}' % (s, 2 - s / 1000, ev))
PY
got=$(data_breaks "$tmp/gap.jsonl")
[ "$got" = "500|1000 " ] && ok "a gap from step 500 to 1000 breaks the curves there" || bad "gap.jsonl: breaks '$got', not '500|1000 '"
# Eval records between the logged steps and a short last interval are no gaps.
{ for s in 10 20 25 30 40 50 55; do rec $s 2; done; } >"$tmp/nogap.jsonl"
got=$(data_breaks "$tmp/nogap.jsonl")
[ -z "$got" ] && ok "steps 10 20 25 30 40 50 55: no break" || bad "nogap.jsonl: breaks '$got'"
# A step of 3 intervals is no gap; one wider is (docs/training.md: "more than 3 logging intervals").
{ for s in 10 20 30 60; do rec $s 2; done; } >"$tmp/three.jsonl"
got=$(data_breaks "$tmp/three.jsonl")
[ -z "$got" ] && ok "steps 10 20 30 60: no break" || bad "three.jsonl: breaks '$got'"
{ for s in 10 20 30 61; do rec $s 2; done; } >"$tmp/over.jsonl"
got=$(data_breaks "$tmp/over.jsonl")
[ "$got" = "30|61 " ] && ok "steps 10 20 30 61: a break from 30 to 61" || bad "over.jsonl: breaks '$got', not '30|61 '"
# A file drawn from a subset keeps the records either side of a gap, though neither is the first,
# last, lowest or highest of its step range (steps 10001 to 10010 here, a constant loss).
python3 -c 'for s in [s for s in range(1, 20001) if not 10003 < s < 10007]: print("{\"step\": %d, \"loss\": 1}" % s)' \
    >"$tmp/longgap.jsonl"
got=$(data_breaks "$tmp/longgap.jsonl")
[ "$got" = "10003|10007 " ] && ok "19997 records: the gap from 10003 to 10007 breaks the curve" ||
    bad "longgap.jsonl: breaks '$got', not '10003|10007 '"
# 8000 records, the first file drawn from a subset: of 2000 ranges of 4 steps, the first and last
# of each, and in the middle of theirs a null (step 2002), the highest (4002) and the lowest (6003).
python3 -c 'for s in range(1, 8001): print("{\"step\": %d, \"loss\": %s}" % (s, {2002: "null", 4002: "9", 6003: "0.5"}.get(s, "1")))' \
    >"$tmp/subset.jsonl"
data_breaks "$tmp/subset.jsonl" >/dev/null
sed -n '/^\$D << EOD$/,/^EOD$/p' "$tmp/script.gp" | sed '1d;$d' | cut -d' ' -f1,2 >"$tmp/rows"
[ "$(wc -l <"$tmp/rows")" = 4003 ] && grep -qx '2002 ?' "$tmp/rows" && grep -qx '4002 9' "$tmp/rows" &&
    grep -qx '6003 0.5' "$tmp/rows" && ok "8000 records: 4003 drawn, the null, highest and lowest among them" ||
    bad "8000 records: $(wc -l <"$tmp/rows") drawn, $(grep -E '^(2002|4002|6003) ' "$tmp/rows" | paste -sd,)"

if ! command -v gnuplot >/dev/null; then
    echo "gnuplot is not installed (apt-get install gnuplot-nox): skipping the checks that draw"
    [ "$fails" -eq 0 ] || { finish; exit 1; }
    exit 77
fi

# A real run: 2 ranks, held-out data evaluated every 20 steps, fp16 (so a loss scale), a cosine lr.
python3 "$here/make_idx.py" "$tmp/idx" 1000 200 10 200
cd "$tmp" || exit 1
"$MPIRUN" -np 2 "$DTRAIN" train --data idx --steps 60 --batch 16 --log-every 5 --eval-every 20 --precision fp16 \
    --lr-schedule cosine --warmup-steps 10 --loader-threads 0 --metrics run.jsonl >train.out 2>&1 ||
    { bad "the training run failed"; cat train.out; }
grep -q '"eval_accuracy"' run.jsonl && ok "the run's metrics have eval records" || bad "no eval records in run.jsonl"
expect 0 "plot: wrote run.png: 5 panels over 12 records (steps 5 to 60)" "$DTRAIN" plot run.jsonl
[ "$(png_size run.png)" = "$(size_for 5)" ] && ok "run.png is a PNG of $(size_for 5)" ||
    bad "run.png: $(png_size run.png), expected $(size_for 5)"
# -o elsewhere; an fp32 run has no loss-scale panel.
"$DTRAIN" train --steps 20 --log-every 5 --metrics fp32.jsonl >train.out 2>&1 ||
    { bad "fp32 run failed"; cat train.out; }
expect 0 "plot: wrote $tmp/out dir.png: 4 panels over 4 records" "$DTRAIN" plot fp32.jsonl -o "$tmp/out dir.png"
[ "$(png_size "$tmp/out dir.png")" = "$(size_for 4)" ] && ok "-o: a PNG of $(size_for 4)" ||
    bad "out dir.png: $(png_size "$tmp/out dir.png")"
# --output=OUT, the form every getopt-based command takes.
expect 0 "plot: wrote o2.png: 4 panels over 4 records" "$DTRAIN" plot fp32.jsonl --output=o2.png
[ "$(png_size o2.png)" = "$(size_for 4)" ] && ok "--output=: a PNG of $(size_for 4)" || bad "o2.png: $(png_size o2.png)"
# -o -: a real PNG on stdout.
"$DTRAIN" plot fp32.jsonl -o - >stdout.png 2>/dev/null
[ "$(png_size stdout.png)" = "$(size_for 4)" ] && ok "-o -: a PNG of $(size_for 4) on stdout" ||
    bad "-o - stdout: $(png_size stdout.png)"
# A unique abbreviation, as every command takes (docs/launching.md).
expect 0 "plot: wrote o3.png: 4 panels over 4 records" "$DTRAIN" plot --out o3.png fp32.jsonl
# Replacing a plot is atomic: a refused file leaves the old PNG as it was.
cp run.png keep.png
printf '%s\n{"step": 1,\n' "$(rec 0 1)" >run.jsonl
expect 1 "run.jsonl: line 2:" "$DTRAIN" plot run.jsonl
cmp -s run.png keep.png && ok "a refused file left the old run.png as it was" || bad "run.png changed"

# Eval on lines of their own join their step; nan and inf are missing points, not errors; a
# file without a newline at the end is whole.
{
    rec 10 2.3
    echo '{"step": 10, "eval_loss": 2.4, "eval_accuracy": 0.4}'
    rec 20 nan
    rec 30 inf
    extra='"eval_accuracy": 0.6, "precision": "fp32", "flag": true, "note": "a\"\\u00e9", "x": null'
    printf '%s' "$(rec 40 1.9 "$extra")"
} >sep.jsonl
expect 0 "plot: wrote sep.png: 3 panels over 4 records (steps 10 to 40)" "$DTRAIN" plot sep.jsonl
# gnuplot has nothing to warn about (a constant lr, one step: ranges made by dtrain).
"$DTRAIN" plot sep.jsonl 2>&1 >/dev/null | grep . && bad "plot wrote to stderr (above)" || ok "plot: nothing on stderr"
echo '{"step": 3, "loss": 1, "lr": 0}' >one.jsonl
"$DTRAIN" plot one.jsonl 2>&1 >/dev/null | grep . && bad "plot of one step wrote to stderr (above)" ||
    ok "plot of one step, a zero lr: nothing on stderr"
[ "$(png_size sep.png)" = "$(size_for 3)" ] && ok "sep.png: $(size_for 3)" || bad "sep.png: $(png_size sep.png)"
# The gap drawn by gnuplot itself: said on the wrote line, nothing on stderr.
expect 0 "plot: wrote gap.png: 3 panels over 21 records (steps 50 to 1500); the curves break at 1 gap in the steps (from 500 to 1000)" \
    "$DTRAIN" plot "$tmp/gap.jsonl" -o gap.png
[ "$(grep -c . "$tmp/out")" = 1 ] && ok "gap.png: gnuplot had nothing to say" || bad "gap.png: $(cat "$tmp/out")"
# A file whose series are all nan has nothing to draw.
echo '{"step": 1, "loss": nan}' >nan.jsonl
expect 1 "nan.jsonl: no series has a finite value in its 1 step: nothing to draw" "$DTRAIN" plot nan.jsonl
# A last line cut short (no newline: a run killed in a write, a full disk, a run still writing) is
# drawn without, said in a warning; the same line with its newline is damage, refused above.
{ rec 10 2.3; rec 20 2.1; printf '{"time": "2026-01-31T12:00:00.000Z", "step": 30, "lo'; } >torn.jsonl
expect 0 "warning: torn.jsonl: line 3, the last, is cut short (a string not closed at column 53" \
    "$DTRAIN" plot torn.jsonl
grep -q "plot: wrote torn.png: 3 panels over 2 records (steps 10 to 20)" "$tmp/out" &&
    [ "$(png_size torn.png)" = "$(size_for 3)" ] && ok "torn.png: the 2 whole records" ||
    { bad "torn.jsonl's plot"; cat "$tmp/out"; }
# A long run's file: every record is read, a subset that keeps each curve's envelope is drawn
# (200000 records drew in 28 s, all of them); a null among them is a gap, as anywhere.
python3 - >long.jsonl <<'PY'
import math
for s in range(1, 30001):
    loss = "null" if s == 12345 else "%.6f" % (2 / math.sqrt(s) + 0.1 * ((s * 7919) % 13) / 13)
    print('{"step": %d, "loss": %s, "accuracy": %.4f, "lr": 0.01, "samples_per_s": %d}' % (s, loss, 1 - 1 / s, 900 + s % 97))
PY
expect 0 "plot: wrote long.png: 4 panels over 30000 records (steps 1 to 30000); " "$DTRAIN" plot long.jsonl
drawn=$(sed -n 's/.*; \([0-9]*\) of them drawn: the first, last, lowest and highest of each series in each of 2000 step ranges$/\1/p' "$tmp/out")
[ -n "$drawn" ] && [ "$drawn" -ge 4000 ] && [ "$drawn" -le 16000 ] && [ "$(png_size long.png)" = "$(size_for 4)" ] &&
    ok "long.jsonl: $drawn of 30000 records drawn, a PNG of $(size_for 4)" || { bad "long.jsonl: drawn '$drawn'"; cat "$tmp/out"; }
ls "$tmp" | grep -q '\.tmp-' && bad "a temporary file was left: $(ls "$tmp")" || ok "no temporary file left behind"
finish
