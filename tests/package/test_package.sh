#!/usr/bin/env bash
# The installed package works for a project outside the tree: install this build into a temporary
# prefix (cmake --install BUILD --prefix T), check what landed there (the soname include/dtrain.h's
# version rule gives, the versions the CMake package accepts), then build examples/custom_loop.c
# against T both ways a user would, and run each under mpirun -np 2:
#   - CMake: find_package(dtrain) with dtrain::dtrain (libdtrain.so) and dtrain::dtrain_static;
#   - pkg-config: cc prog.c $(pkg-config --cflags --libs dtrain), and the static link exactly as
#     docs/library-guide.md gives it, then again with the prefix moved elsewhere;
# and checks that the library, the command and the static program load without the ld.so cache,
# that RUNPATH names CUDA's and NCCL's directories only, that a C++-only CMake project links both
# targets (tests/package/consumer_cxx), and that absolute install directories are written as they are.
# custom_loop exits 0 only when it learned and the ranks' parameters agree.
# Usage: test_package.sh BUILD_DIR SOURCE_DIR MPIEXEC CMAKE_COMMAND C_COMPILER
set -uo pipefail
build=$1 src=$2 mpiexec=$3 cmake=$4 cc=$5
command -v pkg-config >/dev/null || { echo "SKIP: pkg-config is not installed"; exit 77; }
command -v readelf >/dev/null || { echo "SKIP: readelf is not installed (binutils)"; exit 77; }

tmp=$(mktemp -d /tmp/dtrain-package.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
T=$tmp/prefix
fails=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
# Stop at a failure the later steps depend on, with the log that explains it.
die() { echo "FAIL: $1"; [ -f "${2:-}" ] && tail -40 "$2"; exit 1; }
# The program learned on 2 ranks: it prints "learned" and exits 0.
run2() {
    local name=$1; shift
    if "$mpiexec" --oversubscribe -np 2 "$@" >"$tmp/$name.out" 2>&1 && grep -q ': learned$' "$tmp/$name.out"; then
        ok "$name: $(grep ': learned$' "$tmp/$name.out")"
    else
        bad "$name under mpirun -np 2:"; tail -20 "$tmp/$name.out"
    fi
}

# ---------------------------------------------------------------- install
# --component dtrain (every file): its list of what it installed goes to install_manifest_dtrain.txt,
# not over the install_manifest.txt of the user's own install (cmake/install.cmake).
"$cmake" --install "$build" --prefix "$T" --component dtrain >"$tmp/install.log" 2>&1 ||
    die "cmake --install $build --prefix $T --component dtrain" "$tmp/install.log"
libdir=$(dirname "$(find "$T" -name libdtrain.a | head -1)")
[ -d "$libdir" ] && [ "$libdir" != . ] || die "no libdtrain.a under $T" "$tmp/install.log"
for f in include/dtrain.h bin/dtrain share/dtrain/slurm/env.sbatch; do
    [ -f "$T/$f" ] || bad "$T/$f was not installed"
done
for h in "$src"/include/dtrain/*.h; do
    [ -f "$T/include/dtrain/$(basename "$h")" ] || bad "include/dtrain/$(basename "$h") was not installed"
done
for f in "$libdir"/cmake/dtrain/dtrainConfig.cmake "$libdir"/cmake/dtrain/dtrainConfigVersion.cmake "$libdir"/pkgconfig/dtrain.pc; do
    [ -f "$f" ] || bad "${f#"$T"/} was not installed"
done
# The shared library under its versioned name, with the soname include/dtrain.h's rule gives
# (libdtrain.so.0.MINOR while the major is 0, libdtrain.so.MAJOR after) and the links to it.
major=$(sed -n 's/^#define DT_VERSION_MAJOR \([0-9]*\).*/\1/p' "$src/include/dtrain.h")
minor=$(sed -n 's/^#define DT_VERSION_MINOR \([0-9]*\).*/\1/p' "$src/include/dtrain.h")
[ "$major" = 0 ] && want_soname=libdtrain.so.0.$minor || want_soname=libdtrain.so.$major
real=$(find "$libdir" -maxdepth 1 -name 'libdtrain.so.*.*.*' | head -1)
soname=$(readelf -d "$real" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [ "$soname" = "$want_soname" ] && [ -L "$libdir/$soname" ] && [ -L "$libdir/libdtrain.so" ]; then
    ok "$(basename "$real"): soname $soname, with the links $soname and libdtrain.so"
else
    bad "shared library '${real:-none}': soname '$soname' (expected $want_soname) or its links are missing"
fi
# The CMake package accepts what the soname does: the same 0.MINOR while the major is 0 (a later
# patch, not an earlier one nor another minor), the same major after.
if [ "$major" = 0 ]; then
    accept="0.$minor 0.$minor.0" refuse="0.$((minor + 1)) 1.0"
    [ "$minor" -gt 0 ] && refuse="$refuse 0.$((minor - 1))"
else
    accept="$major.0 $major" refuse="$((major + 1)).0 $((major - 1)).0"
fi
compat_bad=0
cat >"$tmp/compat.cmake" <<CMK
string(REPLACE "." ";" parts "\${PACKAGE_FIND_VERSION}.0.0")
list(GET parts 0 PACKAGE_FIND_VERSION_MAJOR)
list(GET parts 1 PACKAGE_FIND_VERSION_MINOR)
list(GET parts 2 PACKAGE_FIND_VERSION_PATCH)
include("$libdir/cmake/dtrain/dtrainConfigVersion.cmake")
message("\${PACKAGE_VERSION_COMPATIBLE}")
CMK
for v in $accept $refuse; do
    got=$("$cmake" -DPACKAGE_FIND_VERSION="$v" -P "$tmp/compat.cmake" 2>&1)
    case " $accept " in *" $v "*) want=TRUE ;; *) want=FALSE ;; esac
    [ "$got" = "$want" ] ||
        { bad "dtrainConfigVersion.cmake: find_package(dtrain $v) gives compatible '$got', expected $want"; compat_bad=1; }
done
[ $compat_bad = 0 ] && ok "dtrainConfigVersion.cmake accepts $accept and refuses $refuse"
# The library and the command load from the prefix alone: with the loader's cache ignored
# (--inhibit-cache), every library they need is in a default directory or in their RUNPATH, the CUDA
# toolkit and NCCL included, and none is found only through /etc/ld.so.conf. Their RUNPATH names
# the CUDA toolkit's and NCCL's directories and nothing else: a directory of another dependency
# (openmpi/lib, openblas-pthread/) would bypass the loader's choice, Debian's BLAS alternative.
interp=$(readelf -l "$T/bin/dtrain" 2>/dev/null | sed -n 's/.*Requesting program interpreter: \(.*\)\]/\1/p')
grep -q 'set(dtrain_HAVE_CUDA ON)' "$libdir/cmake/dtrain/dtrainConfig.cmake" && cuda=1 || cuda=0
loads_alone() { # FILE: loads without the ld.so cache, libcudart from a path where CUDA is built in
    local f=$1 out
    [ -x "$interp" ] || { echo "note: no program interpreter found in $T/bin/dtrain: the load check is left out"; return; }
    if out=$("$interp" --inhibit-cache --list "$f" 2>&1) && ! grep -q 'not found' <<<"$out" &&
       { [ $cuda = 0 ] || grep -q 'libcudart.*=> /' <<<"$out"; }; then
        ok "$(basename "$f") loads without the ld.so cache$([ $cuda = 1 ] && echo ", $(grep -o 'libcudart[^ ]* => [^ ]*' <<<"$out")")"
    else
        bad "$f does not load without the ld.so cache ($interp --inhibit-cache --list):"
        grep -E 'not found|error' <<<"$out"
    fi
}
runpath_only_cuda() { # FILE: every R(UN)PATH entry holds the CUDA runtime, cuBLAS or NCCL
    local f=$1 path dir extra=""
    path=$(readelf -d "$f" | sed -n 's/.*(R\(UN\)\{0,1\}PATH).*\[\(.*\)\]/\2/p')
    for dir in ${path//:/ }; do
        compgen -G "$dir/libcudart.so*" >/dev/null || compgen -G "$dir/libcublas.so*" >/dev/null ||
            compgen -G "$dir/libnccl.so*" >/dev/null || extra="$extra $dir"
    done
    [ -z "$extra" ] && ok "$(basename "$f") RUNPATH: '${path}' (CUDA and NCCL only)" ||
        bad "$f has RUNPATH directories other than CUDA's and NCCL's:$extra (readelf -d)"
}
for f in "$real" "$T/bin/dtrain"; do
    loads_alone "$f"
    runpath_only_cuda "$f"
done
# Nothing installed names the source or build tree: no text file (an internal include directory in
# the CMake or pkg-config files would), no run-time path of the library or the command.
srcdir=$(cd "$src" && pwd -P) builddir=$(cd "$build" && pwd -P)
leaks=$(grep -rlIF -e "$srcdir" -e "$builddir" "$T")
for f in "$real" "$T/bin/dtrain"; do
    readelf -d "$f" 2>/dev/null | grep -E 'R(UN)?PATH' | grep -qF -e "$srcdir" -e "$builddir" && leaks="$leaks $f"
done
[ -z "$leaks" ] && ok "nothing installed names the source or build tree" || bad "these name the source or build tree: $leaks"
# The sbatch templates run the installed command by default.
for t in "$src"/slurm/*.sbatch; do
    i=$T/share/dtrain/slurm/$(basename "$t")
    if grep -qF "\${DTRAIN:-$T/bin/dtrain}" "$i" 2>/dev/null && ! grep -q 'build/dtrain' "$i"; then :; else
        bad "$i does not default DTRAIN to $T/bin/dtrain"
    fi
done
# The installed command runs from the prefix alone.
if "$mpiexec" --oversubscribe -np 2 "$T/bin/dtrain" env >"$tmp/env.out" 2>&1 && grep -q '^1/2 ' "$tmp/env.out"; then
    ok "$T/bin/dtrain env ran on 2 ranks"
else
    bad "$T/bin/dtrain env under mpirun -np 2:"; cat "$tmp/env.out"
fi

# ---------------------------------------------------------------- find_package(dtrain)
# A clean environment for the search: nothing but the prefix, no package registry.
if "$cmake" -S "$src/tests/package/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$T" \
       -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DDTRAIN_PROGRAM="$src/examples/custom_loop.c" \
       -DDTRAIN_EXPECT_PREFIX="$T" -DCMAKE_C_COMPILER="$cc" >"$tmp/consumer.log" 2>&1 &&
   "$cmake" --build "$tmp/consumer" -j 2 >>"$tmp/consumer.log" 2>&1; then
    grep '^-- ok:' "$tmp/consumer.log" | sed 's/^-- //'
    needed=$(readelf -d "$tmp/consumer/custom_loop_shared" | sed -n 's/.*(NEEDED).*\[\(libdtrain[^]]*\)\]/\1/p')
    [ "$needed" = "$soname" ] && ok "custom_loop_shared needs $needed" || bad "custom_loop_shared needs '$needed', not $soname"
    readelf -d "$tmp/consumer/custom_loop_static" | grep -q 'libdtrain' && bad "custom_loop_static needs libdtrain.so"
    run2 cmake_shared "$tmp/consumer/custom_loop_shared"
    run2 cmake_static "$tmp/consumer/custom_loop_static"
else
    bad "the find_package(dtrain) project did not configure or build:"; tail -40 "$tmp/consumer.log"
fi

# A C++ project that enables no C links dtrain::dtrain and dtrain::dtrain_static, and its own
# find_package(PNG) results survive find_package(dtrain) (consumer_cxx checks both).
if ! command -v c++ >/dev/null && ! command -v g++ >/dev/null && ! command -v clang++ >/dev/null; then
    echo "note: no C++ compiler (c++, g++, clang++): the C++-only project is left out"
elif "$cmake" -S "$src/tests/package/consumer_cxx" -B "$tmp/consumer_cxx" -DCMAKE_PREFIX_PATH="$T" \
       -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF >"$tmp/consumer_cxx.log" 2>&1 &&
   "$cmake" --build "$tmp/consumer_cxx" -j 2 >>"$tmp/consumer_cxx.log" 2>&1; then
    grep '^-- ok:' "$tmp/consumer_cxx.log" | sed 's/^-- //'
    for p in cxx_shared cxx_static; do
        if "$tmp/consumer_cxx/$p" >"$tmp/$p.out" 2>&1 && grep -q '^dtrain [0-9]' "$tmp/$p.out"; then
            ok "$p (C++ only): $(head -1 "$tmp/$p.out")"
        else
            bad "$p (C++ only) did not run:"; cat "$tmp/$p.out"
        fi
    done
else
    bad "the C++-only find_package(dtrain) project did not configure or build:"; tail -40 "$tmp/consumer_cxx.log"
fi

# A project without C or C++ (CUDA only) cannot have dtrain::dtrain_static's MPI found: asking for
# it fails with the fix, enabling C (LANGUAGES NONE stands in for CUDA alone, without nvcc's time).
mkdir -p "$tmp/no_c"
printf 'cmake_minimum_required(VERSION 3.19)\nproject(no_c LANGUAGES NONE)\nfind_package(dtrain REQUIRED COMPONENTS static)\n' \
    >"$tmp/no_c/CMakeLists.txt"
if "$cmake" -S "$tmp/no_c" -B "$tmp/no_c/build" -DCMAKE_PREFIX_PATH="$T" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
       >"$tmp/no_c.log" 2>&1; then
    bad "find_package(dtrain COMPONENTS static) in a project without C or C++ succeeded"
elif tr -s ' \n' ' ' <"$tmp/no_c.log" | grep -q 'enable_language(C) before find_package(dtrain)'; then
    ok "a project without C asking for dtrain::dtrain_static is told to enable C"
else
    bad "find_package(dtrain COMPONENTS static) without C does not name the fix (enable_language(C)):"; tail -15 "$tmp/no_c.log"
fi

# ---------------------------------------------------------------- pkg-config
export PKG_CONFIG_PATH=$libdir/pkgconfig
if flags=$(pkg-config --cflags --libs dtrain 2>"$tmp/pc.err"); then
    echo "pkg-config --cflags --libs dtrain: $flags"
    # The run-time path is the user's choice (-rpath, LD_LIBRARY_PATH, ldconfig); here -rpath.
    # shellcheck disable=SC2086
    if "$cc" -o "$tmp/pc_shared" "$src/examples/custom_loop.c" $flags -lm -Wl,-rpath,"$(pkg-config --variable=libdir dtrain)" \
           >"$tmp/pc_shared.log" 2>&1; then
        run2 pkgconfig_shared "$tmp/pc_shared"
    else
        bad "cc ... \$(pkg-config --cflags --libs dtrain):"; cat "$tmp/pc_shared.log"
    fi
else
    bad "pkg-config --cflags --libs dtrain:"; cat "$tmp/pc.err"
fi
# Static, the command docs/library-guide.md gives: -Wl,-Bstatic makes -ldtrain take libdtrain.a,
# Libs.private switches back (-Wl,-Bdynamic) and carries libdtrain.so's RUNPATH for CUDA and NCCL.
if cflags=$(pkg-config --cflags dtrain) && libs=$(pkg-config --static --libs dtrain 2>"$tmp/pc.err"); then
    echo "pkg-config --static --libs dtrain: $libs"
    # shellcheck disable=SC2086
    if "$cc" -o "$tmp/pc_static" "$src/examples/custom_loop.c" $cflags -Wl,-Bstatic $libs -lm \
           >"$tmp/pc_static.log" 2>&1; then
        if readelf -d "$tmp/pc_static" | grep -q 'libdtrain'; then
            bad "pc_static (cc ... -Wl,-Bstatic \$(pkg-config --static --libs dtrain)) needs libdtrain.so"
        fi
        loads_alone "$tmp/pc_static"
        run2 pkgconfig_static "$tmp/pc_static"
    else
        bad "cc ... -Wl,-Bstatic \$(pkg-config --static --libs dtrain):"; cat "$tmp/pc_static.log"
    fi
else
    bad "pkg-config --static --libs dtrain:"; cat "$tmp/pc.err"
fi

# ---------------------------------------------------------------- a moved prefix
# The installed tree copied elsewhere and the original gone: dtrain.pc's prefix follows its own
# directory (${pcfiledir}), as the CMake package's does, so a program builds and runs against the
# new place. (The sbatch templates keep naming the command where it was installed.)
M=$tmp/moved
if mv "$T" "$M"; then
    mlib=$M/${libdir#"$T"/}
    # shellcheck disable=SC2046
    if "$cc" -o "$tmp/pc_moved" "$src/examples/custom_loop.c" $(PKG_CONFIG_PATH=$mlib/pkgconfig pkg-config --cflags --libs dtrain) \
           -lm -Wl,-rpath,"$mlib" >"$tmp/pc_moved.log" 2>&1; then
        run2 pkgconfig_moved_prefix "$tmp/pc_moved"
    else
        bad "cc ... \$(pkg-config --cflags --libs dtrain) against the moved prefix $M:"; cat "$tmp/pc_moved.log"
        PKG_CONFIG_PATH=$mlib/pkgconfig pkg-config --cflags --libs dtrain
    fi
    mv "$M" "$T"
else
    bad "could not move $T to $M"
fi

# ---------------------------------------------------------------- absolute install directories
# Configured with -DCMAKE_INSTALL_LIBDIR and BINDIR as absolute paths, the files written at install
# time name those directories as they are: dtrain.pc's libdir, the sbatch templates' command. A
# configure of its own (CPU only, nothing built) and the install script that writes those files.
abs=$tmp/abs
if "$cmake" -S "$src" -B "$tmp/absbuild" -DDTRAIN_CUDA=OFF -DCMAKE_C_COMPILER="$cc" \
       -DCMAKE_INSTALL_LIBDIR="$abs/lib64" -DCMAKE_INSTALL_BINDIR="$abs/bin" >"$tmp/abs.log" 2>&1 &&
   "$cmake" -DCMAKE_INSTALL_PREFIX="$tmp/absprefix" -P "$tmp/absbuild/install_prefixed.cmake" >>"$tmp/abs.log" 2>&1; then
    pcdir=$(PKG_CONFIG_PATH=$abs/lib64/pkgconfig pkg-config --variable=libdir dtrain 2>&1)
    incdir=$(PKG_CONFIG_PATH=$abs/lib64/pkgconfig pkg-config --variable=includedir dtrain 2>&1)
    if [ "$pcdir" = "$abs/lib64" ] && [ "$incdir" = "$tmp/absprefix/include" ]; then
        ok "absolute CMAKE_INSTALL_LIBDIR: dtrain.pc in $abs/lib64/pkgconfig, libdir $pcdir, includedir $incdir"
    else
        bad "absolute CMAKE_INSTALL_LIBDIR: dtrain.pc libdir '$pcdir' (expected $abs/lib64), includedir '$incdir'"
    fi
    if grep -qF "\${DTRAIN:-$abs/bin/dtrain}" "$tmp/absprefix/share/dtrain/slurm/env.sbatch" 2>/dev/null; then
        ok "absolute CMAKE_INSTALL_BINDIR: the sbatch templates run $abs/bin/dtrain"
    else
        bad "absolute CMAKE_INSTALL_BINDIR: $tmp/absprefix/share/dtrain/slurm/env.sbatch does not run $abs/bin/dtrain"
    fi
else
    bad "configuring with absolute install directories or running its install script:"; tail -20 "$tmp/abs.log"
fi

[ "$fails" -eq 0 ] && { echo "PASS: installed into $T, built and ran against it with CMake and pkg-config"; exit 0; }
echo "$fails check(s) failed"; exit 1
