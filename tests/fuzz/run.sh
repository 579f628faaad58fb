#!/usr/bin/env bash
# run.sh - builds the libFuzzer harnesses (tests/fuzz/fuzz_*.c) with clang + ASan + UBSan in their own
# build directory, incrementally, then for each harness:
#   1. runs every input of its seed corpus (tests/fuzz/corpus/<harness>/) once, at full length: the
#      regression inputs of crashes once found must stay harmless;
#   2. fuzzes it for FUZZ_SECONDS seconds from that corpus and prints libFuzzer's final
#      "#N DONE cov: X ft: Y" line.
# Any report (ASan, UBSan, a leak, a failed FUZZ_CHECK, more than 2 GiB of memory, an input slower than
# 25 s) fails the run; the input is kept under <build>/work/<harness>/ and the output says how to make it
# a corpus entry. Exit 0 all clean, 1 a report or a build failure, 77 no clang/libFuzzer here (SKIP).
#
#   tests/fuzz/run.sh [BUILD_DIR]     (default build-fuzz/ at the top of the tree)
#   FUZZ_SECONDS=60 (per harness)  FUZZ_JOBS=2 (build)  FUZZ_ONLY="fuzz_topo fuzz_parse" (a subset)
#   FUZZ_CC=clang  FUZZ_MAX_LEN=4096 (longest mutated input; seed inputs run at any length in step 1)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build-fuzz}
secs=${FUZZ_SECONDS:-60}
jobs=${FUZZ_JOBS:-2}
cc=${FUZZ_CC:-clang}
max_len=${FUZZ_MAX_LEN:-4096}
# The memory limits turn "expands to gigabytes" into a report instead of a machine brought down.
limits="-rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=25"

if ! command -v "$cc" >/dev/null 2>&1; then
    echo "SKIP: no $cc here, so no libFuzzer: apt-get install clang libclang-rt-14-dev (or make deps)"
    exit 77
fi
mkdir -p "$build" || exit 1
probe=$build/probe
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' >"$probe.c"
if ! "$cc" -fsanitize=fuzzer,address,undefined "$probe.c" -o "$probe" >"$probe.log" 2>&1; then
    echo "SKIP: $cc cannot link -fsanitize=fuzzer,address,undefined (libFuzzer missing:" \
         "apt-get install libclang-rt-14-dev, or make deps):"
    tail -3 "$probe.log"
    exit 77
fi

# Readable stack traces: the sanitizers look for llvm-symbolizer on PATH, which Debian's clang
# package alone does not put there.
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ] && ! command -v llvm-symbolizer >/dev/null 2>&1; then
    for s in /usr/lib/llvm-*/bin/llvm-symbolizer; do [ -x "$s" ] && export ASAN_SYMBOLIZER_PATH=$s; done
fi
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}

if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$here" -B "$build" -DCMAKE_C_COMPILER="$cc" >"$build/configure.log" 2>&1 ||
        { cat "$build/configure.log"; echo "fuzz: configure failed"; exit 1; }
fi
t0=$(date +%s)
if ! cmake --build "$build" -j "$jobs" >"$build/build.log" 2>&1; then
    grep -E "error|Error" "$build/build.log" | head -30
    echo "fuzz: the build failed (full log: $build/build.log)"
    exit 1
fi
echo "fuzz: built in $(( $(date +%s) - t0 )) s ($build)"

# run_harness LOG BIN ARGS...: one run of a harness, output to LOG, its exit status returned. A
# harness's scratch files are named after its process id (/tmp/fuzz-WHAT-PID, fuzz_common.h); it
# removes them when it exits, but libFuzzer ends a run that found a report with _Exit, which runs no
# atexit handler, so what is left is removed here. A run that ended well and left some is a fault of
# the harness (a scratch directory not made by fuzz_scratch_dir): said on LOG and failed.
run_harness() {
    local log=$1
    shift
    local pid rc f left=()
    # Only what this run made: an older run's left-over with a pid that happens to be this one's
    # (pids are reused; earlier builds of the harnesses left their directories) is not this one's:
    # the pid file is written as the harness starts, so anything of this run is not older.
    # In the foreground, so that ^C stops it; the subshell's pid is the harness's once it execs.
    (echo "$BASHPID" >"$log.pid" && exec "$@") >"$log" 2>&1
    rc=$?
    pid=$(cat "$log.pid")
    for f in /tmp/fuzz-*-"$pid" /tmp/fuzz-*-"$pid".* /dev/shm/fuzz-*-"$pid"; do
        [ -e "$f" ] && [ ! "$f" -ot "$log.pid" ] && left+=("$f")
    done
    if [ ${#left[@]} -gt 0 ]; then
        rm -rf "${left[@]}"
        if [ "$rc" -eq 0 ]; then
            echo "fuzz check failed: the harness exited 0 and left its scratch files: ${left[*]}" \
                 "(make them with fuzz_scratch_dir or fuzz_scratch_remove_at_exit, tests/fuzz/fuzz_common.h)" >>"$log"
            rc=1
        fi
    fi
    return "$rc"
}

# One harness: its seeds, then fuzzing; its lines on stdout, its verdict as the exit status.
fuzz_one() {
    local name=$1
    local bin=$build/$name seeds=$here/corpus/$name work=$build/work/$name
    mkdir -p "$work/corpus" "$seeds"
    local dict=()
    [ -f "$here/$name.dict" ] && dict=(-dict="$here/$name.dict")

    # 1. the seed corpus, each input once and whole.
    local files
    mapfile -t files < <(find "$seeds" -type f | sort)
    if [ ${#files[@]} -gt 0 ]; then
        if ! run_harness "$work/regression.log" "$bin" $limits -artifact_prefix="$work/" "${files[@]}"; then
            local last
            last=$(grep -E '^Running: ' "$work/regression.log" | tail -1 | sed 's/^Running: //')
            echo "FAIL $name: seed input ${last#$root/} reports:"
            grep -vE "^(Running: |Executed |INFO: )" "$work/regression.log" | tail -40
            return 1
        fi
    fi

    # 2. fuzzing; new inputs go to the build directory's corpus, never into the source tree. The
    # harnesses' own stderr is closed (-close_fd_mask=2): refused inputs print an error message each,
    # gigabytes in a few minutes; libFuzzer's lines, the sanitizers' reports and FUZZ_CHECK's message
    # still come out. Reproducing the kept input shows everything.
    local t0 rc done_line artifact
    t0=$(date +%s)
    run_harness "$work/fuzz.log" "$bin" $limits -close_fd_mask=2 -max_len="$max_len" -max_total_time="$secs" \
        -print_final_stats=1 "${dict[@]}" -artifact_prefix="$work/" "$work/corpus" "$seeds"
    rc=$?
    done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$work/fuzz.log" | tail -1 | tr -s '[:space:]' ' ')
    if [ $rc -ne 0 ]; then
        artifact=$(grep -oE "Test unit written to [^ ]+" "$work/fuzz.log" | tail -1 | sed 's/Test unit written to //')
        echo "FAIL $name after $(( $(date +%s) - t0 )) s:"
        grep -vE '^(#[0-9]+|INFO:|Dictionary:|MS:)' "$work/fuzz.log" | tail -40
        if [ -n "$artifact" ]; then
            echo "  the input: $artifact (reproduce: $bin $artifact)"
            echo "  once fixed, keep it: cp $artifact tests/fuzz/corpus/$name/crash-<what>"
        fi
        return 1
    fi
    echo "ok   $name: ${#files[@]} seed inputs, then ${secs} s: ${done_line:-no DONE line (see $work/fuzz.log)}"
}

# The harnesses FUZZ_JOBS at a time (each fuzzes on one core), their lines printed in order.
names=()
for src in "$here"/fuzz_*.c; do
    name=$(basename "$src" .c)
    if [ -n "${FUZZ_ONLY:-}" ] && [[ " $FUZZ_ONLY " != *" $name "* ]]; then continue; fi
    names+=("$name")
    mkdir -p "$build/work"
    rm -f "$build/work/$name.rc"
    { fuzz_one "$name"; echo $? >"$build/work/$name.rc"; } >"$build/work/$name.out" 2>&1 &
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
done
wait
failed=""
for name in "${names[@]}"; do
    cat "$build/work/$name.out"
    [ "$(cat "$build/work/$name.rc" 2>/dev/null)" = 0 ] || failed="$failed $name"
done

if [ -n "$failed" ]; then
    echo "fuzz: reports from:$failed"
    exit 1
fi
echo "fuzz: no reports"
