#!/usr/bin/env bash
# coverage.sh - how much of the code under test the fuzz corpora reach. Builds the harnesses again
# with clang's source-based coverage (tests/fuzz/CMakeLists.txt, DT_FUZZ_COVERAGE=ON) in their own
# directory, replays each harness's seed corpus and the corpus a fuzzing run grew (run.sh keeps it in
# <fuzz build>/work/<harness>/corpus/) once, and prints per harness the line and branch coverage of
# the files it is there to test (the table of tests/fuzz/README.md), plus libFuzzer's own figures
# from that run's fuzz.log. Nothing is fuzzed here: run.sh first, with the FUZZ_SECONDS wanted.
#
#   tests/fuzz/coverage.sh [FUZZ_BUILD=build-fuzz] [COV_BUILD=build-fuzz-cov]
#   FUZZ_ONLY="fuzz_topo fuzz_parse" (a subset)
# Exit 0, 1 when a build or a replay fails, 77 without clang / llvm-cov.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
fuzz_build=${1:-$root/build-fuzz}
cov_build=${2:-$root/build-fuzz-cov}
cc=${FUZZ_CC:-clang}
for t in "$cc" llvm-profdata llvm-cov; do
    command -v "$t" >/dev/null 2>&1 || { echo "SKIP: no $t here (apt-get install clang llvm, or make deps)"; exit 77; }
done

# The files each harness is there to test (its row in README.md's table); launch/*.c files a
# harness #includes count under their own name.
declare -A under_test=(
    [fuzz_bucket_plan]="collectives/bucket.c"
    [fuzz_cgroup]="base/cgroup.c base/host_budget.c launch/doctor/node_facts.c"
    [fuzz_checkpoint]="runtime/checkpoint/ckpt_read.c runtime/checkpoint/ckpt_read4.c runtime/checkpoint/ckpt_load.c runtime/checkpoint/ckpt_apply.c runtime/checkpoint/ckpt_format.c"
    [fuzz_ckpt_sections]="runtime/checkpoint/ckpt_file.c runtime/checkpoint/ckpt_reader.c"
    [fuzz_ckpt_roundtrip]="runtime/checkpoint/ckpt_write.c runtime/checkpoint/ckpt_writer.c runtime/checkpoint/ckpt_write_file.c runtime/checkpoint/ckpt_read4.c runtime/checkpoint/ckpt_apply.c"
    [fuzz_cifar]="runtime/data/cifar.c"
    [fuzz_config]="runtime/placement/config.c base/log.c launch/train/fault_inject.c"
    [fuzz_cuda_parse]="launch/doctor/cuda_parse.c"
    [fuzz_dts]="runtime/data/dts_read.c"
    [fuzz_dts_roundtrip]="runtime/data/dts_write.c runtime/data/dts_payload.c runtime/data/dts_read.c"
    [fuzz_hostlist]="runtime/placement/hostlist.c"
    [fuzz_idx]="runtime/data/idx.c runtime/data/file_io.c"
    [fuzz_image]="runtime/data/image_decode.c"
    [fuzz_meminfo]="launch/doctor/memory_facts.c"
    [fuzz_metrics]="launch/plot/plot_data.c"
    [fuzz_model_spec]="runtime/model/model_spec.c"
    [fuzz_net_env]="launch/doctor/net_env.c"
    [fuzz_params]="launch/train/params_io.c"
    [fuzz_parse]="base/parse.c launch/cli_values.c runtime/placement/affinity.c launch/train/lr_schedule.c"
    [fuzz_perfmodel]="launch/perfmodel/perfmodel_input.c launch/perfmodel/model_source.c launch/perfmodel/perfmodel.c"
    [fuzz_topo]="runtime/placement/topo.c runtime/placement/device.c"
)

mkdir -p "$cov_build" || exit 1
if [ ! -f "$cov_build/CMakeCache.txt" ]; then
    cmake -S "$here" -B "$cov_build" -DCMAKE_C_COMPILER="$cc" -DDT_FUZZ_COVERAGE=ON >"$cov_build/configure.log" 2>&1 ||
        { cat "$cov_build/configure.log"; echo "coverage: configure failed"; exit 1; }
fi
cmake --build "$cov_build" -j "${FUZZ_JOBS:-2}" >"$cov_build/build.log" 2>&1 ||
    { grep -E "error" "$cov_build/build.log" | head -20; echo "coverage: the build failed ($cov_build/build.log)"; exit 1; }

printf '%-20s %9s %6s %10s %8s  %s\n' harness inputs lines branches "cov/ft" "files (lines covered/total)"
failed=0
for src in "$here"/fuzz_*.c; do
    name=$(basename "$src" .c)
    if [ -n "${FUZZ_ONLY:-}" ] && [[ " $FUZZ_ONLY " != *" $name "* ]]; then continue; fi
    bin=$cov_build/$name
    [ -x "$bin" ] || { echo "$name: not built in $cov_build"; failed=1; continue; }
    dirs=("$here/corpus/$name")
    [ -d "$fuzz_build/work/$name/corpus" ] && dirs+=("$fuzz_build/work/$name/corpus")
    inputs=$(find "${dirs[@]}" -type f 2>/dev/null | wc -l)
    prof=$cov_build/prof/$name
    rm -rf "$prof"; mkdir -p "$prof"
    # -runs=0: run every input of the corpora once, mutate nothing. The harness's stderr is closed:
    # refused inputs print their errors.
    if ! LLVM_PROFILE_FILE="$prof/%p.profraw" "$bin" -runs=0 -close_fd_mask=2 -rss_limit_mb=2048 -timeout=25 \
        "${dirs[@]}" >"$prof/replay.log" 2>&1; then
        echo "$name: the replay failed ($prof/replay.log)"; tail -5 "$prof/replay.log"; failed=1; continue
    fi
    llvm-profdata merge -sparse "$prof"/*.profraw -o "$prof/merged.profdata" || { failed=1; continue; }
    files=()
    for f in ${under_test[$name]:-}; do files+=("$root/$f"); done
    [ ${#files[@]} -gt 0 ] || { echo "$name: no files under test listed in coverage.sh"; failed=1; continue; }
    # llvm-cov's TOTAL row: regions, missed, %, functions, missed, %, lines, missed, %, branches, missed, %.
    report=$(llvm-cov report "$bin" -instr-profile="$prof/merged.profdata" "${files[@]}" 2>/dev/null)
    total=$(grep '^TOTAL' <<<"$report")
    lines=$(awk '{ print $10 }' <<<"$total") branches=$(awk '{ print $13 }' <<<"$total")
    per_file=$(grep -E '\.c ' <<<"$report" | awk -v r="$root/" '{ f = $1; sub(r, "", f); printf "%s %d/%d, ", f, $8 - $9, $8 }' | sed 's/, $//')
    done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$fuzz_build/work/$name/fuzz.log" 2>/dev/null | tail -1 |
        awk '{ for (i = 1; i <= NF; i++) { if ($i == "cov:") c = $(i + 1); if ($i == "ft:") f = $(i + 1) } print c "/" f }')
    printf '%-20s %9s %6s %10s %8s  %s\n' "$name" "$inputs" "${lines:-?}" "${branches:-?}" "${done_line:--}" "$per_file"
done
exit $failed
