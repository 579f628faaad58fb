#!/usr/bin/env bash
# The public headers in the languages docs/library-guide.md promises: <dtrain.h> compiles cleanly
# as C99 and C11 with -pedantic-errors and as C++11 and C++17 with -pedantic -Werror; and a part
# header included on its own (include/dtrain/*.h) gives the one #error that says to include
# <dtrain.h>, not that error followed by a cascade of unknown types. The probe expands every public
# object-like DT_ macro (a macro's body is only checked where it is used), and the C++ builds add
# -Wold-style-cast, which C++ projects often hold to with -Werror.
# Usage: test_headers.sh SOURCE_DIR C_COMPILER [CXX_COMPILER]
set -uo pipefail
src=$1 cc=$2 cxx=${3:-}
inc=$src/include
fails=0
tmp=$(mktemp -d /tmp/dtrain-headers.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# Object-like macros only (a name then a space): DT_API is an attribute, not a value.
macros=$(sed -n 's/^#define \(DT_[A-Z0-9_]*\) .*/\1/p' "$inc"/dtrain.h "$inc"/dtrain/*.h | grep -vx 'DT_API' | sort -u)
if [ -z "$macros" ]; then echo "FAIL: no #define DT_ found in $inc"; exit 1; fi
{
    printf '#include <dtrain.h>\nunsigned long long dtrain_probe(void) { return DT_VERSION_CODE + sizeof(dt_config); }\n'
    printf 'unsigned long long dtrain_macros(void) {\n'
    printf '    unsigned long long s = 0;\n'
    printf '    s += %s;\n' $macros
    printf '    return s;\n}\n'
} >"$tmp/h.c"
cp "$tmp/h.c" "$tmp/h.cpp"
try() { # DESCRIPTION COMMAND...
    local what=$1; shift
    if out=$("$@" 2>&1); then echo "ok: $what"; else echo "FAIL: $what:"; head -20 <<<"$out"; fails=$((fails + 1)); fi
}
for std in c99 c11; do
    try "<dtrain.h> as $std -pedantic-errors" "$cc" -std=$std -pedantic-errors -Wall -Wextra -Werror -I"$inc" -c "$tmp/h.c" -o /dev/null
done
[ -z "$cxx" ] && cxx=$(command -v c++ || command -v g++ || command -v clang++)
if [ -n "$cxx" ]; then
    for std in c++11 c++17; do
        try "<dtrain.h> as $std -pedantic -Wold-style-cast -Werror" "$cxx" -std=$std -pedantic -Wall -Wextra \
            -Wold-style-cast -Werror -I"$inc" -c "$tmp/h.cpp" -o /dev/null
    done
else
    echo "note: no C++ compiler: the C++ checks are left out"
fi
for h in "$inc"/dtrain/*.h; do
    part=dtrain/$(basename "$h")
    printf '#include <%s>\n' "$part" >"$tmp/part.c"
    out=$("$cc" -std=c11 -I"$inc" -c "$tmp/part.c" -o /dev/null 2>&1)
    errors=$(grep -c 'error:' <<<"$out")
    if [ "$errors" = 1 ] && grep -q "#error \"include <dtrain.h>" <<<"$out"; then
        echo "ok: <$part> alone: the one #error"
    else
        echo "FAIL: <$part> alone gives $errors errors, not only its #error (wrap what follows it in #else):"
        grep 'error:' <<<"$out" | head -5
        fails=$((fails + 1))
    fi
done
[ "$fails" -eq 0 ] && exit 0
echo "$fails check(s) failed"; exit 1
