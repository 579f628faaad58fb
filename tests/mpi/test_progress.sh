#!/usr/bin/env bash
# What `dtrain train` prints while it trains: the progress line redrawn in place (--progress), the
# plain lines that a pipe or a log gets instead, and --quiet.
here=$(dirname "$0"); source "$here/lib.sh"
DTRAIN=$1 MPIRUN=$2

# 120 steps of about 10 ms: a run of about a second, long enough for several throttled redraws.
run="--model mlp --batch 16 --steps 120 --log-every 30 --dataset-size 2000 --blas-threads 1"

# A terminal's view of a byte stream: "\r ESC[K" erases the line being written, "\n" ends it.
# Writes the lines that stay (the scrollback) to $2 and prints: the number of progress lines
# drawn, how many of them are malformed, and what is left on the last line at the end.
screen_of() {
    python3 - "$1" "$2" <<'PY'
import re, sys
data = open(sys.argv[1], encoding="utf-8", newline="").read()
line_re = re.compile(r"step \d+/\d+ \(\d+%\)  epoch \d+\.\d\d  \d+\.\d samples/s  ETA (\d+:\d\d:\d\d|-:--:--)  loss \d+\.\d{4}")
kept, cur, drawn, malformed = [], "", 0, 0
for i, piece in enumerate(data.split("\r\x1b[K")):
    if i > 0 and cur:  # the erase ends a progress line that was on the screen
        drawn += 1
        malformed += not line_re.fullmatch(cur)
        cur = ""
    parts = piece.split("\n")
    for p in parts[:-1]:
        kept.append(cur + p)
        cur = ""
    cur += parts[-1]
open(sys.argv[2], "w").write("".join(k + "\n" for k in kept))
print(drawn, malformed, repr(cur))
PY
}
# The lines with every number made N and blanks squeezed: two runs' lines differ in timings only.
shape() { sed -E 's/[0-9]+(\.[0-9]+)?(e[-+][0-9]+)?/N/g; s/ +/ /g' "$1"; }

# --progress always into a file: the redraws, then the same lines as --progress never.
"$DTRAIN" train $run --progress always >"$tmp/always" 2>&1 || bad "--progress always failed: $(cat "$tmp/always")"
"$DTRAIN" train $run --progress never >"$tmp/never" 2>&1 || bad "--progress never failed: $(cat "$tmp/never")"
read -r drawn malformed left < <(screen_of "$tmp/always" "$tmp/kept")
secs=$(sed -n 's/^done: .* in \([0-9.]*\) s,.*/\1/p' "$tmp/kept")
[ "$drawn" -ge 2 ] && [ "$malformed" -eq 0 ] && ok "--progress always: $drawn progress lines in $secs s, all well formed" ||
    { bad "--progress always: $drawn lines drawn, $malformed malformed:"; cat -v "$tmp/always" | head -30; }
# At most ~10 draws a second (+1: the first step draws at once, +1 for the clock's granularity).
awk -v d="$drawn" -v s="$secs" 'BEGIN { exit !(d <= 10 * s + 2) }' && ok "throttled: $drawn draws <= 10/s x $secs s" ||
    bad "not throttled: $drawn draws in $secs s"
[ "$left" = "''" ] && ok "the progress line is erased at the end" || bad "left on the screen at the end: $left"
# The last draw comes within the throttle's 0.1 s (and a step) of the end: the steps the run's
# fastest logged step time fits in 0.1 s, 1.5 times over for the steps' spread, and one more. A
# fixed bar ("step 90 or later") failed on a fast run whose last 40 steps took under 0.1 s.
last=$(grep -oE "step [0-9]+/120 \(" "$tmp/always" | sed -E 's/step ([0-9]+).*/\1/' | tail -1)
fastest=$(sed -nE 's/^step .* step +([0-9.]+) ms .*/\1/p' "$tmp/kept" | sort -g | head -1)
bar=$(awk -v ms="${fastest:-0}" 'BEGIN { n = ms > 0 ? int(1.5 * 100 / ms) + 2 : 120; print (n > 120 ? 0 : 120 - n) }')
[ -n "$last" ] && [ "$last" -ge "$bar" ] &&
    ok "the progress line counts up to the total: its last draw at step $last of 120 (>= $bar: 0.1 s of ${fastest} ms steps)" ||
    bad "no progress line near the end (last at step ${last:-none}, want >= $bar): $(cat -v "$tmp/always" | tail -c 600)"
if diff <(shape "$tmp/kept") <(shape "$tmp/never") >"$tmp/diff"; then
    ok "the lines that stay are --progress never's ($(wc -l <"$tmp/kept") lines, numbers aside)"
else
    bad "--progress always's lines differ from --progress never's:"; cat "$tmp/diff"
fi
grep -q $'[\r\e]' "$tmp/never" && bad "--progress never wrote a CR or an escape" || ok "--progress never: plain lines"
[ "$(grep -c '^step ' "$tmp/never")" -eq 4 ] && tail -1 "$tmp/never" | grep -q "^done: 120 steps" &&
    ok "--progress never: 4 step lines, then done:" || { bad "--progress never's lines:"; cat "$tmp/never"; }

# The default in a pipe, alone and under mpirun (whose ranks' stdout is a pseudo-terminal even
# when mpirun's own is a pipe): plain lines.
"$DTRAIN" train $run | cat >"$tmp/pipe"
grep -q $'[\r\e]' "$tmp/pipe" && bad "the default wrote a CR or an escape into a pipe" || ok "default in a pipe: plain lines"
"$MPIRUN" -np 2 "$DTRAIN" train $run --batch 8 | cat >"$tmp/mpipe"
grep -q $'[\r\e]' "$tmp/mpipe" && bad "the default under mpirun wrote a CR or an escape into a pipe" ||
    ok "default under mpirun in a pipe: plain lines"
grep -q "^done: 120 steps" "$tmp/mpipe" || bad "mpirun run did not finish: $(cat "$tmp/mpipe")"
# --progress always under mpirun: rank 0 alone draws (the other rank's line would interleave).
"$MPIRUN" -np 2 "$DTRAIN" train $run --batch 8 --progress always >"$tmp/m2" 2>&1 || bad "mpirun --progress always failed"
read -r drawn malformed left < <(screen_of "$tmp/m2" "$tmp/kept2")
[ "$drawn" -ge 1 ] && [ "$malformed" -eq 0 ] && [ "$(grep -c '^done: ' "$tmp/kept2")" -eq 1 ] &&
    ok "2 ranks, --progress always: $drawn well-formed lines from rank 0 alone" ||
    { bad "2 ranks, --progress always: $drawn drawn, $malformed malformed"; cat -v "$tmp/m2" | head -30; }

# auto on a terminal (script(1) gives the run a pseudo-terminal): drawn, unless TERM=dumb.
if command -v script >/dev/null && script -qec true /dev/null >/dev/null 2>&1; then
    TERM=xterm script -qec "'$DTRAIN' train $run" /dev/null >"$tmp/tty" 2>&1 </dev/null
    grep -q $'\e\\[Kstep [0-9]*/120 ' "$tmp/tty" && ok "--progress auto on a terminal draws the line" ||
        { bad "no progress line on a terminal"; cat -v "$tmp/tty" | tail -5; }
    TERM=dumb script -qec "'$DTRAIN' train $run" /dev/null >"$tmp/dumb" 2>&1 </dev/null
    grep -q $'\e' "$tmp/dumb" && bad "TERM=dumb got escapes" || ok "TERM=dumb: plain lines on a terminal"
    grep -q "^done: 120 steps" "$tmp/dumb" || bad "TERM=dumb run did not finish: $(cat -v "$tmp/dumb")"
else
    echo "skip: no script(1) to give a run a terminal; --progress auto on a TTY not checked"
fi

# --quiet: the summary alone on stdout, the --metrics records still written.
"$DTRAIN" train $run --quiet --metrics "$tmp/m.jsonl" >"$tmp/quiet" 2>"$tmp/quiet.err" ||
    bad "--quiet failed: $(cat "$tmp/quiet" "$tmp/quiet.err")"
[ "$(wc -l <"$tmp/quiet")" -eq 1 ] && grep -q "^done: 120 steps in .* over 4 log intervals" "$tmp/quiet" &&
    ok "--quiet: one line, $(cat "$tmp/quiet")" || { bad "--quiet printed more than the summary:"; cat "$tmp/quiet"; }
[ "$(grep -c '"step"' "$tmp/m.jsonl")" -eq 4 ] && ok "--quiet still writes the 4 --metrics records" ||
    bad "--quiet --metrics: $(wc -l <"$tmp/m.jsonl") records"
TERM=xterm script -qec "'$DTRAIN' train $run --quiet" /dev/null >"$tmp/qtty" 2>&1 </dev/null
grep -q $'\e' "$tmp/qtty" && bad "--quiet drew a progress line on a terminal" || ok "--quiet on a terminal: no progress line"
expect 2 "--quiet prints no progress line and --progress always asks for one" "$DTRAIN" train --quiet --progress always
expect 2 "--progress 'yes' is not one of auto (on a terminal), always, never" "$DTRAIN" train --progress yes
finish
