#!/usr/bin/env bash
# libdtrain.so exports the public API of include/dtrain.h and nothing else: every defined dynamic
# symbol is a dt_* one (the linker version script runtime/libdtrain.map). Internal functions that
# leak (the target_clones resolvers of kernels/cpu, say) would let programs link against them and
# clash with a program's own symbols of the same name.
# Usage: test_symbols.sh path/to/libdtrain.so
lib=$1
command -v nm >/dev/null || { echo "SKIP: nm is not installed (binutils)"; exit 77; }
[ -f "$lib" ] || { echo "FAIL: $lib does not exist"; exit 1; }
syms=$(nm -D --defined-only "$lib") || { echo "FAIL: nm -D $lib failed"; exit 1; }
names=$(awk '{print $NF}' <<<"$syms" | sort -u)
others=$(grep -v '^dt_' <<<"$names")
count=$(grep -c '^dt_' <<<"$names")
if [ -n "$others" ]; then
    echo "FAIL: $lib exports symbols outside the dt_* API:"; sed 's/^/    /' <<<"$others"
    exit 1
fi
[ "$count" -gt 0 ] || { echo "FAIL: $lib exports no dt_* symbol at all"; exit 1; }
echo "ok: $lib exports $count symbols, all dt_*"
