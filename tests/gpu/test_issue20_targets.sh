#!/usr/bin/env bash
# test_issue20_targets.sh - issue20_targets.py judges outputs in bench gemm's and bench step's
# formats: made-up runs with figures on both sides of each bar, the earlier version's beside them,
# and a broken file, which must stop it (exit 1) rather than pass as a verdict. No GPU needed.
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../mpi/lib.sh" # tmp (removed at exit), ok, bad, finish
hdr="# precision    samples/s   step ms   data ms    ratio params MiB  grads MiB  optim MiB   activ. MiB   work MiB  skipped  zero sent MiB/step  overlap   graphs      data"
step() { # file, then rows "precision samples/s params_MiB grads_MiB activ_MiB"
    local f=$1; shift
    { echo "# dtrain bench step: made up"; echo "$hdr"
      for r in "$@"; do set -- $r
          printf "  %-9s %12.1f %9.2f %9.2f %8.2f %10.2f %10.2f %10.2f %12.2f %10.2f %8d %5d %13.2f %8s %8s %9s\n" \
              "$1" "$2" 1 0 1 "$3" "$4" "$4" "$5" 0 0 0 0 "auto>off" "auto>on" "auto>dev"
      done; } >"$f"
}
cat >"$tmp/gemm.txt" <<'G'
# dtrain bench gemm: made up
#       n   type     CPU ms CPU TFLOP/s     GPU ms GPU TFLOP/s  GPU/CPU    max err  check
     4096   bf16          -           -       0.20       690.0        -   1.00e-03     ok
     8192   bf16          -           -       1.38       800.0        -   1.00e-03     ok
G
# 142.7M parameters, as a GPU's bf16 row shows them: fp32 gradients 544.41 MiB, parameters 816.61
# MiB with their 16-bit copy (the count is the gradients' column over 4: the params column would
# say 214M). 6 x 142.7M x 600,000 = 513.7 TFLOP/s, 64.2% of 800.
step "$tmp/fc.txt" "bf16 600000 816.61 544.41 80"
step "$tmp/mlp.txt" "bf16 2500000 10.66 7.11 0.5" "fp32 1100000 7.11 7.11 1"
step "$tmp/old-mlp.txt" "bf16 1230000 10.66 7.11 0.5"
# The earlier version measures no GEMM peak of its own: judged against this run's (same GPU).
step "$tmp/old-fc.txt" "bf16 376000 816.61 544.41 80"
step "$tmp/cnn28.txt" "fp32 280000 1 1 417" "bf16 400000 1.5 1 227"
out=$(python3 "$here/issue20_targets.py" "$tmp" 2>&1); rc=$?
echo "$out"
[ $rc = 0 ] && ok "exit 0 with every target judged" || bad "exit $rc"
want() { grep -qF -- "$1" <<<"$out" && ok "says: $1" || bad "does not say: $1"; }
want "MET      fc:8192 x3 bf16, % of bf16 GEMM peak >= 60: 514 TFLOP/s of 800 = 64.2%   (earlier version: 322 TFLOP/s of 800 = 40.2%)"
want "MET      mlp batch 256 bf16 >= 2x 1.23M samples/s: 2,500,000 samples/s = 2.03x   (earlier version: 1,230,000 samples/s = 1.00x)"
want "not met  cnn 1x28x28 b1024 bf16/fp32 >= 1.5x: 1.43x"
want "MET      cnn 1x28x28 b1024 activation memory -40% or better: 417 -> 227 MiB (-46%)"
# Just below the bar: 59.9%.
step "$tmp/fc.txt" "bf16 560000 816.61 544.41 80"
out=$(python3 "$here/issue20_targets.py" "$tmp" 2>&1)
want "not met  fc:8192 x3 bf16, % of bf16 GEMM peak >= 60: 480 TFLOP/s of 800 = 59.9%"
# With the spare 16-bit copy of a step overlapped layer by layer (8 bytes a parameter): the same.
step "$tmp/fc.txt" "bf16 560000 1088.82 544.41 80"
out=$(python3 "$here/issue20_targets.py" "$tmp" 2>&1)
want "not met  fc:8192 x3 bf16, % of bf16 GEMM peak >= 60: 480 TFLOP/s of 800 = 59.9%"
# 16-bit gradients (2 bytes a parameter in the grads column): the count is unknown, no verdict.
step "$tmp/fc.txt" "bf16 560000 816.61 272.2 80"
out=$(python3 "$here/issue20_targets.py" "$tmp" 2>&1); rc=$?
[ $rc = 1 ] && grep -q "cannot judge: .*fc.txt: params 816.61 MiB and grads 272.2 MiB" <<<"$out" &&
    ! grep -q "fc:8192 x3 bf16, %" <<<"$out" && ok "gradients not in fp32: no fc verdict, exit 1" ||
    bad "gradients not in fp32: exit $rc: $out"
step "$tmp/fc.txt" "bf16 560000 816.61 544.41 80"
# A run that failed leaves no row: no verdict, exit 1.
echo "dtrain: error: cuda: out of memory" >"$tmp/cnn32.txt"
out=$(python3 "$here/issue20_targets.py" "$tmp" 2>&1); rc=$?
[ $rc = 1 ] && grep -q "cannot judge: .*cnn32.txt: no bench step row" <<<"$out" && ok "a failed run's file: exit 1, named" ||
    bad "a failed run's file: exit $rc: $out"
want "MET      mlp batch 256 bf16" # the other targets still judged
finish
