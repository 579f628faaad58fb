#!/usr/bin/env bash
# Every C, CUDA and header file of the tree is as .clang-format writes it (`make format` applies it).
# The style is defined by clang-format 14 (Debian 12's): other versions break lines differently, so
# with another version, or none, the test is skipped, saying why.
# Usage: test_format.sh SOURCE_DIR
src=${1:?usage: test_format.sh SOURCE_DIR}
cd "$src" || exit 1
command -v clang-format >/dev/null || { echo "SKIP: clang-format is not installed (apt-get install clang-format)"; exit 77; }
version=$(clang-format --version | sed -n 's/.*version \([0-9]*\)\..*/\1/p')
[ "$version" = 14 ] || { echo "SKIP: clang-format $version; the house style is clang-format 14's"; exit 77; }
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    mapfile -t files < <(git ls-files '*.c' '*.h' '*.cu' '*.cuh')
else
    mapfile -t files < <(find base kernels collectives runtime launch include examples tests \
                          \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | sort)
fi
# One clang-format for every file (1 s of CPU; one process a file took 12 s, most of it starting
# them); only where it finds a difference are the files checked one by one, to name them.
clang-format --dry-run -Werror "${files[@]}" >/dev/null 2>&1 && { echo "ok: ${#files[@]} files as .clang-format writes them"; exit 0; }
bad=()
for f in "${files[@]}"; do
    clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
    echo "FAIL: ${#bad[@]} of ${#files[@]} files differ from .clang-format (run: make format):"
    printf '    %s\n' "${bad[@]}" | head -40
    clang-format --dry-run "${bad[0]}" 2>&1 | head -20
    exit 1
fi
echo "ok: ${#files[@]} files as .clang-format writes them"
