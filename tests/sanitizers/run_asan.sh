#!/usr/bin/env bash
# run_asan.sh BUILD_DIR [CTEST_REGEX] - the unit and multi-rank tests under AddressSanitizer,
# LeakSanitizer and UndefinedBehaviorSanitizer. BUILD_DIR must be configured with -DDTRAIN_CUDA=OFF
# -DDTRAIN_SANITIZE=address (`make test-asan` does it). CTEST_REGEX (default: every unit and mpi
# test) picks the ctest entries; ASAN_EXCLUDE (a ctest -E regex) leaves some out, by default
# mpi.train and mpi.amp: under ASan they take 10 minutes and more each on 2 cores (their dozens of
# full trainings compared bit for bit), while the code they run (the training loop, buckets, the
# reducer, 16-bit steps) is also run by mpi.progress, mpi.trace, mpi.custom_loop, mpi.accum_clip
# and mpi.reducer. ASAN_EXCLUDE= (empty) runs them too.
#
# Every report of every process goes to a file of its own under BUILD_DIR/asan-logs (log_path), not
# only to the test's output: a script test that runs `dtrain` expecting it to fail (exit 1 or 2)
# would otherwise take an ASan abort for the refusal it wanted. The run fails on any failing test
# and on any report file, whatever the test's verdict. Leaks inside Open MPI are suppressed
# (tests/sanitizers/lsan.supp names each library and why); nothing of dtrain's is.
#
# Not run here: the fuzz label (its harnesses are already clang + ASan + UBSan builds of their own,
# tests/fuzz), the slurm and build labels (no code of ours runs that the mpi label does not run).
set -u
build=${1:?usage: run_asan.sh BUILD_DIR [CTEST_REGEX]}
regex=${2:-'^(unit|mpi)\.'}
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$build" && pwd)
grep -q '^DTRAIN_SANITIZE:STRING=address$' "$build/CMakeCache.txt" 2>/dev/null || {
    echo "run_asan.sh: $build is not an ASan build: configure it with -DDTRAIN_CUDA=OFF -DDTRAIN_SANITIZE=address" >&2
    exit 2
}
logs=$build/asan-logs
rm -rf "$logs"
mkdir -p "$logs"
# exitcode=66: an ASan abort is not mistaken for one of dtrain's own exit codes (1 usage, 2 config).
# fast_unwind_on_malloc=0: Open MPI is built without frame pointers; the slow unwinder gets through
# it to our frames, which the suppressions need to see the library in the stack.
# use_sigaltstack=0: ASan would give every thread an alternate signal stack of its own, so dtrain's
# (base/thread_stack.c) would stand aside and go untested, and at thread exit ASan unmaps whatever
# stack is current as if it were its own. Off, threads start without one, as POSIX and production say.
export ASAN_OPTIONS="use_sigaltstack=0:detect_leaks=1:exitcode=66:fast_unwind_on_malloc=0:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:log_path=$logs/asan"
export LSAN_OPTIONS="suppressions=$here/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$logs/ubsan"
# Open MPI unloads its components at MPI_Finalize; their leaks would then have no module to match.
export OMPI_MCA_mca_base_component_disable_dlclose=1 PMIX_MCA_mca_base_component_disable_dlclose=1
t0=$SECONDS
exclude=${ASAN_EXCLUDE-'^mpi\.(train|amp)$'}
ctest --test-dir "$build" -R "$regex" ${exclude:+-E "$exclude"} --output-on-failure -j "${ASAN_JOBS:-1}"
rc=$?
reports=$(find "$logs" -type f | sort)
if [ -n "$reports" ]; then
    echo "run_asan.sh: sanitizer reports ($(echo "$reports" | wc -l) files):"
    while IFS= read -r f; do # one path a line: a build directory may have blanks in its name
        echo "== $f"
        head -40 "$f"
    done <<<"$reports"
    rc=1
fi
echo "run_asan.sh: $([ "$rc" -eq 0 ] && echo ok || echo FAILED) in $((SECONDS - t0)) s"
exit $rc
