#!/usr/bin/env bash
# The layers hold: base <- kernels <- collectives <- runtime <- launch. Four checks:
#   1. no source of a layer includes a header of a higher one (every internal include names its
#      layer: "base/status.h", "collectives/engine.h");
#   2. the build would refuse one: compiled with a layer's include root (build/layers/<layer>, see
#      cmake/layers.cmake), a header of the layer itself and of those below is found and one of the
#      layer above is not;
#   3. no object calls a function of a higher layer either (the include roots cannot see this:
#      every layer includes "dtrain.h", which declares the whole public API), the one exception
#      being collectives/ctx_comm.h's: collectives may call the context, the functions of
#      runtime/placement/ctx*.c, resolved at link time; and the folders of runtime/ (with its own
#      loose files as "runtime") call each other without a cycle;
#   4. docs/layout.md names every source file of the layers.
# Usage: test_layers.sh SOURCE_DIR BUILD_DIR C_COMPILER
src=$1 build=$2 cc=$3
layers=(base kernels collectives runtime launch)
rank() { local i; for i in "${!layers[@]}"; do [ "${layers[$i]}" = "$1" ] && { echo "$i"; return; }; done; echo -1; }
declare -A order # a layer's place, without a subshell per call of check 3
for i in "${!layers[@]}"; do order[${layers[$i]}]=$i; done
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

# 3. Upward calls, from the objects the build made: for every undefined symbol of an object, the
# object of this build that defines it. An object of layer L is in CMakeFiles/dtrain_L.dir (the
# command's in dtrain_cmd.dir), at the path of its source.
command -v nm >/dev/null || { echo "FAIL: nm is not installed (binutils)"; exit 1; }
objs=$(cd "$build" && find CMakeFiles/dtrain_{base,kernels,collectives,runtime,cmd}.dir -name '*.o' 2>/dev/null | sort)
if [ -z "$objs" ]; then
    echo "FAIL: no objects under $build/CMakeFiles/dtrain_<layer>.dir: build first"; fail=1
else
    # "D path symbol" for each defined global, "U path symbol" for each undefined one.
    syms=$(cd "$build" && for o in $objs; do
        p=${o#CMakeFiles/*.dir/}
        [ -f "$src/${p%.o}" ] || continue # left behind by a source since moved or removed
        nm -g --defined-only "$o" | awk -v p="${p%.o}" 'NF == 3 {print "D", p, $3}'
        nm -u "$o" | awk -v p="${p%.o}" '{print "U", p, $NF}'
    done)
    calls=$(sort -s -k1,1 <<<"$syms" | awk '$1 == "D" {def[$3] = $2; next} ($3 in def) && def[$3] != $2 {print $2, def[$3], $3}')
    while read -r from to sym; do
        [ -n "$from" ] || continue
        [ "${order[${to%%/*}]}" -gt "${order[${from%%/*}]}" ] || continue
        if [ "${from%%/*}" = collectives ] && [[ "$to" == runtime/placement/ctx* ]]; then continue; fi
        echo "FAIL: $from calls $sym of $to, a higher layer"; fail=1
    done <<<"$calls"
    # The runtime folders' calls, folder to folder, must sort (tsort says "loop" where they do not).
    folder() { local d; d=$(dirname "$1"); case $d in runtime/*) echo "${d#runtime/}" | cut -d/ -f1 | sed 's|^|runtime/|';; *) echo "$d";; esac; }
    edges=$(while read -r from to sym; do
        [[ "$from" == runtime/* && "$to" == runtime/* ]] || continue
        f=$(folder "$from") t=$(folder "$to")
        [ "$f" != "$t" ] && echo "$f $t"
    done <<<"$calls" | sort -u)
    if [ -n "$edges" ] && tsort <<<"$edges" 2>&1 >/dev/null | grep -q loop; then
        echo "FAIL: the folders of runtime/ call each other in a cycle (caller callee):"; sed 's/^/    /' <<<"$edges"; fail=1
    fi
fi

# 4. The map of the layers: docs/layout.md names every source (a header beside a .c of its name
# goes with it, as the page says).
while IFS= read -r f; do
    base=${f%.*}
    case $f in *.h) { [ -f "$src/$base.c" ] || [ -f "$src/$base.cu" ]; } && continue;; esac
    grep -qFw "$(basename "$f")" "$src/docs/layout.md" || { echo "FAIL: docs/layout.md does not name $f"; fail=1; }
done < <(cd "$src" && find base kernels collectives runtime launch -name '*.[ch]' -o -name '*.cu' -o -name '*.cuh' | sort)

[ "$fail" = 0 ] && echo "ok: no upward include or call in ${#layers[@]} layers, no cycle between runtime's folders; the include roots of base..runtime refuse the layer above; docs/layout.md names every source"
exit $fail
