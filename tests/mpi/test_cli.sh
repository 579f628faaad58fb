#!/usr/bin/env bash
# The command line: commands, flags and their values, exit codes.
here=$(dirname "$0"); source "$here/lib.sh"
DTRAIN=$1

expect 2 "usage: dtrain" "$DTRAIN"
expect 2 "unknown command 'bogus'" "$DTRAIN" bogus
expect 0 "usage: dtrain" "$DTRAIN" help
expect 0 "dtrain 0.1.0" "$DTRAIN" version
expect 0 "MPI: Open MPI" "$DTRAIN" version
expect 0 "CUDA-aware)" "$DTRAIN" version
expect 2 "device 'gpu' is not one of auto, cpu, cuda" "$DTRAIN" env --device gpu
expect 2 "pin mode 'always'" "$DTRAIN" env --pin always
expect 2 "--timeout 'x'" "$DTRAIN" env --timeout x
expect 2 "--timeout '-5'" "$DTRAIN" env --timeout -5
expect 2 "--blas-threads '1.5'" "$DTRAIN" env --blas-threads 1.5
expect 2 "needs a value" "$DTRAIN" env --device
expect 2 "unknown option '--frobnicate'" "$DTRAIN" env --frobnicate
expect 2 "unexpected argument 'extra'" "$DTRAIN" env extra
expect 0 "0/1" "$DTRAIN" env --device cpu --pin none --timeout 5 --blas-threads 1
finish
