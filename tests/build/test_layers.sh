#!/usr/bin/env bash
# The layers hold: base <- kernels <- collectives <- runtime <- launch. Two checks:
#   1. no source of a layer includes a header of a higher one (every internal include names its
#      layer: "base/status.h", "collectives/engine.h");
#   2. the build would refuse one: compiled with a layer's include root (build/layers/<layer>, see
#      cmake/layers.cmake), a header of the layer itself and of those below is found and one of the
#      layer above is not.
# Usage: test_layers.sh SOURCE_DIR BUILD_DIR C_COMPILER
src=$1 build=$2 cc=$3
layers=(base kernels collectives runtime launch)
rank() { local i; for i in "${!layers[@]}"; do [ "${layers[$i]}" = "$1" ] && { echo "$i"; return; }; done; echo -1; }
fail=0

# 1. Upward includes in the sources.
while IFS= read -r f; do
    own=$(rank "${f%%/*}")
    while IFS= read -r inc; do
        r=$(rank "${inc%%/*}")
        if [ "$r" -gt "$own" ]; then echo "FAIL: $f includes \"$inc\", a header of a higher layer"; fail=1; fi
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$src/$f")
done < <(cd "$src" && find base kernels collectives runtime launch -name '*.[ch]' -o -name '*.cu' -o -name '*.cuh' | sort)

# 2. The include roots. One header per layer that every build has.
probe=(base/status.h kernels/ops.h collectives/coll.h runtime/model/model.h launch/cli.h)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for i in 0 1 2 3; do
    layer=${layers[$i]} root=$build/layers/${layers[$i]}
    [ -d "$root" ] || { echo "FAIL: $root does not exist (cmake/layers.cmake)"; fail=1; continue; }
    printf '#include "%s"\n' "${probe[$i]}" > "$tmp/own.c"
    printf '#include "%s"\n' "${probe[$((i + 1))]}" > "$tmp/up.c"
    if ! "$cc" -fsyntax-only -D_GNU_SOURCE -I"$src/include" -I"$root" $(pkg-config --cflags-only-I ompi-c 2>/dev/null) \
            "$tmp/own.c" 2> "$tmp/own.err"; then
        echo "FAIL: with the include root of $layer, \"${probe[$i]}\" does not compile:"; sed 's/^/    /' "$tmp/own.err"; fail=1
    fi
    if "$cc" -fsyntax-only -D_GNU_SOURCE -I"$src/include" -I"$root" "$tmp/up.c" 2>/dev/null; then
        echo "FAIL: with the include root of $layer, \"${probe[$((i + 1))]}\" (the layer above) compiles"; fail=1
    fi
done
[ "$fail" = 0 ] && echo "ok: no upward include in ${#layers[@]} layers; the include roots of base..runtime refuse the layer above"
exit $fail
