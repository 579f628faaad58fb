#!/usr/bin/env bash
# `dtrain model-perf --engine-curve`: the engine's host model over the scales. The output's shape
# (a table per size, a row per scale, the nodes of each), the engine's choice against the rules
# it mirrors and its busbw against the column of the algorithm it names, the shaped cluster's
# 2 x 2 chain near its link, the PNG, and the refusals with the value and the fix. No MPI.
here=$(dirname "$0"); source "$here/lib.sh"
DTRAIN=$1

expect 0 "# defaults (a CPU cluster;" "$DTRAIN" model-perf --engine-curve 1M,16M
cp "$tmp/out" "$tmp/curve.txt"
# Two tables of 2..512 ranks, 8 a node; the engine's busbw is its algorithm's, the ratio its over
# the ring's; mpi at 2 ranks, direct on one node, at 16 MiB the chain from 2 nodes until its fill
# (2 (W-1) segments of 64000 bytes) passes 16 MiB at 256 ranks, and never at 1 MiB.
python3 - "$tmp/curve.txt" <<'PY' && ok "two tables of 9 scales; the engine's choice and busbw as the rules say" || bad "the curve's tables (above)"
import sys
tables, cur = {}, None
for line in open(sys.argv[1]):
    if line.startswith("# ") and "bytes): modelled busbw" in line:
        cur = tables.setdefault(line.split()[1] + " " + line.split()[2], [])
    elif cur is not None and line.strip() and not line.startswith("#"):
        f = line.replace("|", " ").split()
        cur.append(dict(ranks=int(f[0]), nodes=int(f[1]), ring=float(f[2]), direct=float(f[3]),
                        chain=float(f[4]), pick=f[5], busbw=float(f[6]), ratio=float(f[7])))
errs = []
if sorted(tables) != ["1 MiB", "16 MiB"]: errs.append("tables %s" % sorted(tables))
for name, rows in tables.items():
    if [r["ranks"] for r in rows] != [2 ** k for k in range(1, 10)]: errs.append(name + ": ranks")
    for r in rows:
        w = r["ranks"]
        if r["nodes"] != (w + 7) // 8: errs.append("%s %d: nodes %d" % (name, w, r["nodes"]))
        want = "mpi" if w == 2 else "direct" if w <= 8 or name == "1 MiB" or w >= 256 else "chain"
        if r["pick"] != want: errs.append("%s %d: picked %s, not %s" % (name, w, r["pick"], want))
        col = r["ring"] if r["pick"] == "mpi" else r[r["pick"]]
        if abs(r["busbw"] - col) > 1e-3 * col: errs.append("%s %d: busbw %g, its column %g" % (name, w, r["busbw"], col))
        if abs(r["ratio"] - r["busbw"] / r["ring"]) > 2e-3 * r["ratio"]: errs.append("%s %d: ratio" % (name, w))
if errs: print("\n".join(errs))
sys.exit(1 if errs else 0)
PY

# The shaped cluster's 2 x 2 at 16 MiB: the chain moves the bucket once over each link, algbw near
# the link's 24 MB/s (busbw 1.5 x that), direct twice (half of it).
shaped=(--gpus-per-node 2 --net-gbs 0.024 --net-alpha-us 200 --busbw-gbs 2 --alpha-us 5 --msg-us 10)
expect 0 "# engine curve: 2 ranks a node; between nodes 0.024 GB/s" "$DTRAIN" model-perf --engine-curve 16M \
    --world 4 "${shaped[@]}"
row=$(grep -E '^ +4 +2 ' "$tmp/out")
echo "$row" | awk '{exit !($7 == "chain" && $5 > 0.034 && $5 < 0.036 && $4 > 0.0175 && $4 < 0.0181)}' &&
    ok "2 x 2, 16 MiB: chain busbw near 0.036 GB/s, direct near 0.018: '$row'" || bad "2 x 2 shaped row: '$row'"
expect 0 "#  ranks" "$DTRAIN" model-perf --engine-curve 16M --world 3 "${shaped[@]}" --gpus-per-node 1
grep -qE '^ +3 +3 .*\| direct ' "$tmp/out" && ok "3 x 1: direct" || bad "3 x 1 did not pick direct: $(cat "$tmp/out")"
# --scales replaces the default 2..512.
expect 0 "" "$DTRAIN" model-perf --engine-curve 64K --scales 4,24
[ "$(grep -cE '^ +[0-9]+ +[0-9]+ ' "$tmp/out")" = 2 ] && grep -qE '^ +24 +3 ' "$tmp/out" &&
    ok "--scales 4,24: two rows, 24 ranks on 3 nodes" || bad "--scales 4,24: $(cat "$tmp/out")"

# Refusals: the value and the fix.
expect 2 "--engine-curve '16Q' is not a size from 1 byte to 64G" "$DTRAIN" model-perf --engine-curve 1M,16Q
expect 2 "--engine-curve '0' is not a size" "$DTRAIN" model-perf --engine-curve 0
expect 2 "--engine-curve '1,2,3,4,5,6,7,8,9': at most 8 items" "$DTRAIN" model-perf --engine-curve 1,2,3,4,5,6,7,8,9
expect 2 "--synthetic does not apply (drop it" "$DTRAIN" model-perf --engine-curve 1M --synthetic a:1:4:10
expect 2 "--bucket-mb does not apply" "$DTRAIN" model-perf --bucket-mb 4 --engine-curve 1M
expect 2 "--net-gbs 0: the engine's model divides by this bandwidth" "$DTRAIN" model-perf --engine-curve 1M --net-gbs 0
expect 2 "--segment-bytes 'x' is not a size" "$DTRAIN" model-perf --engine-curve 1M --segment-bytes x
expect 2 "--msg-us belongs to --engine-curve" "$DTRAIN" model-perf --synthetic a:1:4:10 --msg-us 2
# Both help screens fit 24 x 80 (as tests/mpi/test_cli.sh checks for every command's).
for topic in model-perf "model-perf engine-curve"; do
    "$DTRAIN" help $topic >"$tmp/help" 2>&1
    size=$(awk '{ if (length($0) > m) m = length($0) } END { print NR, m }' "$tmp/help")
    grep -qF -- "--engine-curve SIZES" "$tmp/help" && [ "${size% *}" -le 24 ] && [ "${size#* }" -le 80 ] &&
        ok "dtrain help $topic: names --engine-curve, $size (lines, columns)" || bad "dtrain help $topic: $size"
done

if command -v gnuplot >/dev/null; then
    expect 0 "model-perf: wrote $tmp/c.png" "$DTRAIN" model-perf --engine-curve 1M,16M --plot "$tmp/c.png"
    head -c 8 "$tmp/c.png" | od -An -c | grep -q 'P   N   G' && ok "the curve's plot is a PNG" || bad "$tmp/c.png is not a PNG"
    # One scale alone is given its range by dtrain (gnuplot would print "empty x range" on stderr).
    "$DTRAIN" model-perf --engine-curve 1M --world 4 --plot "$tmp/c.png" 2>&1 >/dev/null | grep . &&
        bad "model-perf --engine-curve --world 4 --plot wrote to stderr (above)" ||
        ok "model-perf --engine-curve --world 4 --plot: nothing on stderr"
else
    echo "gnuplot not installed: the --plot check is skipped"
fi
finish
