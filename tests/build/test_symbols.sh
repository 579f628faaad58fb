#!/usr/bin/env bash
# libdtrain.so and libdtrain.a define the public API of include/dtrain.h and nothing else: every
# defined global symbol is a dt_* one (for the .so the linker version script runtime/libdtrain.map;
# for the .a the prelink step of CMakeLists.txt, which makes every other symbol local). Internal
# functions that leak (parse_int, log_msg, the target_clones resolvers of kernels/cpu) would let
# programs link against them and clash with a program's own symbols of the same name. And the .so
# exports exactly the functions the public headers declare DT_API: an internal dt_* helper marked
# DT_API (exported, undocumented) or a declared function with no definition (a program's link
# error) fails.
# Usage: test_symbols.sh path/to/libdtrain.so [path/to/libdtrain.a [SOURCE_DIR]]
command -v nm >/dev/null || { echo "SKIP: nm is not installed (binutils)"; exit 77; }
check() { # check LIB NM-FLAGS...
    local lib=$1; shift
    [ -f "$lib" ] || { echo "FAIL: $lib does not exist"; exit 1; }
    local syms names others count
    syms=$(nm "$@" "$lib") || { echo "FAIL: nm $* $lib failed"; exit 1; }
    # Defined symbols only: "ADDRESS TYPE NAME" lines (archive member headers and blanks drop out).
    names=$(awk 'NF == 3 {print $3}' <<<"$syms" | sort -u)
    others=$(grep -v '^dt_' <<<"$names")
    count=$(grep -c '^dt_' <<<"$names")
    if [ -n "$others" ]; then
        echo "FAIL: $lib defines global symbols outside the dt_* API:"; sed 's/^/    /' <<<"$others" | head -40
        exit 1
    fi
    [ "$count" -gt 0 ] || { echo "FAIL: $lib defines no dt_* symbol at all"; exit 1; }
    echo "ok: $lib defines $count global symbols, all dt_*"
}
check "$1" -D --defined-only
[ -n "${2:-}" ] && check "$2" -g --defined-only
if [ -n "${3:-}" ]; then
    # The name before the first "(" of every DT_API declaration (the lines joined, #define DT_API left out).
    declared=$(cat "$3"/include/dtrain.h "$3"/include/dtrain/*.h | grep -v '^[[:space:]]*#' | tr '\n' ' ' | grep -oE 'DT_API[^;{]*\(' |
        grep -oE '[A-Za-z_][A-Za-z0-9_]* *\($' | tr -d ' (' | sort -u)
    exported=$(nm -D --defined-only "$1" | awk 'NF == 3 {print $3}' | sort -u)
    extra=$(comm -13 <(echo "$declared") <(echo "$exported"))
    missing=$(comm -23 <(echo "$declared") <(echo "$exported"))
    [ -z "$extra" ] || { echo "FAIL: $1 exports functions no public header declares DT_API:"; sed 's/^/    /' <<<"$extra"; exit 1; }
    [ -z "$missing" ] || { echo "FAIL: the public headers declare DT_API functions $1 does not define:"; sed 's/^/    /' <<<"$missing"; exit 1; }
    echo "ok: $1 exports the $(wc -l <<<"$declared") DT_API functions of the public headers, and only those"
fi
exit 0
