#!/usr/bin/env bash
# Installing, as packagers and users do it:
#   - `cmake --install` writes nothing into the build tree but its list of installed files: two
#     installs at once to different prefixes (a user's beside ctest's build.package) each get their
#     own files, and a build tree the installing user cannot write does not leave a partial install;
#   - `make build-deps` (run by `make install`) goes on where it cannot check or install the Debian
#     packages, without dpkg-query or as a user other than root, leaving the decision to CMake.
# Usage: test_install.sh BUILD_DIR SOURCE_DIR CMAKE_COMMAND
set -uo pipefail
build=$1 src=$2 cmake=$3
tmp=$(mktemp -d /tmp/dtrain-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

# ---------------------------------------------------------------- two installs at once
# Each prefix's dtrain.pc and sbatch templates must name that prefix. Then, deterministically: no
# file of the build tree is newer than the installs' start, their manifest aside.
touch "$tmp/start"
sleep 1 # mtimes have a one-second granularity on some file systems
for round in 1 2 3; do
    "$cmake" --install "$build" --prefix "$tmp/a" --component dtrain >"$tmp/a.log" 2>&1 &
    a=$!
    "$cmake" --install "$build" --prefix "$tmp/b" --component dtrain >"$tmp/b.log" 2>&1 &
    b=$!
    wait $a || { bad "round $round: cmake --install --prefix $tmp/a failed:"; tail -5 "$tmp/a.log"; }
    wait $b || { bad "round $round: cmake --install --prefix $tmp/b failed:"; tail -5 "$tmp/b.log"; }
    for p in a b; do
        pc=$(find "$tmp/$p" -name dtrain.pc | head -1)
        sb=$tmp/$p/share/dtrain/slurm/env.sbatch
        inc=$(PKG_CONFIG_PATH=$(dirname "${pc:-/nonexistent}") pkg-config --variable=includedir dtrain 2>/dev/null)
        if [ -n "$pc" ] && [ "$inc" -ef "$tmp/$p/include" ] && grep -qF "\${DTRAIN:-$tmp/$p/bin/dtrain}" "$sb"; then :; else
            bad "round $round: prefix $p got another install's files: dtrain.pc includedir '$inc', env.sbatch $(grep -o 'DTRAIN:-[^}]*' "$sb")"
        fi
    done
    rm -rf "$tmp/a" "$tmp/b"
done
written=$(find "$build" -newer "$tmp/start" -type f ! -name 'install_manifest*.txt' | head -5)
if [ -z "$written" ]; then
    ok "3 rounds of two installs at once: each prefix got its own files; nothing written to the build tree"
else
    bad "cmake --install wrote into the build tree (two installs at once share it; a user who cannot write it gets a partial install): $written"
fi

# ---------------------------------------------------------------- make build-deps without dpkg / root
# A PATH with what the Makefile's recipe runs, and no dpkg-query: it must say so and succeed.
mkdir -p "$tmp/bin"
for t in bash sh make grep cat env; do ln -s "$(command -v $t)" "$tmp/bin/$t"; done
if out=$(PATH=$tmp/bin make -C "$src" --no-print-directory build-deps BUILD="$tmp/nobuild" 2>&1) &&
   grep -q 'no dpkg-query' <<<"$out"; then
    ok "make build-deps without dpkg-query: $(grep 'no dpkg-query' <<<"$out")"
else
    bad "make build-deps without dpkg-query (RHEL, Spack) must go on and let CMake decide:"; echo "$out" | tail -5
fi
# A user other than root, on a Debian system where the packages look missing (they may come from
# elsewhere): a note naming the sudo command, and success.
printf '#!/bin/sh\nexit 1\n' >"$tmp/bin/dpkg-query"
printf '#!/bin/sh\necho 1000\n' >"$tmp/bin/id"
chmod +x "$tmp/bin/dpkg-query" "$tmp/bin/id"
if out=$(PATH=$tmp/bin make -C "$src" --no-print-directory build-deps BUILD="$tmp/nobuild" 2>&1) &&
   grep -q 'sudo apt-get install' <<<"$out"; then
    ok "make build-deps as a user with packages missing: a note, and on"
else
    bad "make build-deps as a user other than root must note the packages and go on:"; echo "$out" | tail -5
fi

[ "$fails" -eq 0 ] && { echo "PASS: installs at once stay apart; make build-deps goes on without dpkg or root"; exit 0; }
echo "$fails check(s) failed"; exit 1
