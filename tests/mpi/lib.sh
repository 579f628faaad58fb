# lib.sh - helpers for the shell-driven tests: expect an exit code and a message, parse `dtrain env`.
# Usage in a test: source lib.sh; DTRAIN=$1; MPIRUN=$2.
set -u
fails=0
passes=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ok() { passes=$((passes + 1)); echo "ok: $*"; }
bad() { fails=$((fails + 1)); echo "FAIL: $*"; }

# expect CODE 'text that must appear in stdout+stderr' command...
expect() {
    local code=$1 text=$2
    shift 2
    "$@" >"$tmp/out" 2>&1
    local rc=$?
    if [ "$rc" -ne "$code" ]; then
        bad "'$*' exited $rc, expected $code"; sed 's/^/    /' "$tmp/out"; return
    fi
    if [ -n "$text" ] && ! grep -qF -- "$text" "$tmp/out"; then
        bad "'$*' did not say '$text'"; sed 's/^/    /' "$tmp/out"; return
    fi
    ok "$* -> $rc${text:+, says '$text'}"
}

# Rows of `dtrain env` (lines that start with rank/world), one per rank.
env_rows() { grep -E '^[0-9]+/[0-9]+ ' "$1"; }

# Expands a cpulist "0-2,5" into one number per line.
expand_cpus() {
    local IFS=,
    for part in $1; do
        case $part in
        *-*) seq "${part%-*}" "${part#*-}" ;;
        *) echo "$part" ;;
        esac
    done
}

# doctor_status FILE NAME=STATUS ...: every named check has that status on some row of the
# `dtrain doctor --json` report in FILE (prints what it got otherwise).
doctor_status() {
    python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
got = {}
for c in d["checks"]:
    got.setdefault(c["name"], set()).add(c["status"])
bad = [kv for kv in sys.argv[2:] if kv.split("=")[1] not in got.get(kv.split("=")[0], set())]
if bad: print("missing:", bad, "got:", got); sys.exit(1)
PY
}

# zero_same NP TOLERANCE FLAGS...: the script's train() (ranks, then train flags) run with --zero 0
# and with --zero 1, their --dump-params compared by $CMP at TOLERANCE (exact, or a relative bound).
# ZERO_WHERE prefixes the verdicts (e.g. "GPU, ").
zero_same() {
    local np=$1 tol=$2 out; shift 2
    train "$np" "$@" --zero 0 --dump-params "$tmp/z0" || { bad "${ZERO_WHERE:-}--zero 0 $* at $np failed"; return; }
    train "$np" "$@" --zero 1 --dump-params "$tmp/z1" || { bad "${ZERO_WHERE:-}--zero 1 $* at $np failed"; return; }
    out=$("$CMP" "$tmp/z1" "$tmp/z0" "$tol") && ok "${ZERO_WHERE:-}$np rank(s), $*: --zero 1 == --zero 0 ($tol): $out" ||
        bad "${ZERO_WHERE:-}$np rank(s), $*: --zero 1 != --zero 0 ($tol): $out"
}

finish() {
    echo "$passes passed, $fails failed"
    [ "$fails" -eq 0 ]
}

# ompi_init_crash FILE...: the job's output in FILEs shows Open MPI 4.1.4's TCP BTL crashing inside
# MPI_Init (third-party, before dtrain has a rank: the crash report names mca_btl_tcp.so) and no
# step trained. The SLURM cluster tests run such a start once more, saying so (docs/testing.md).
ompi_init_crash() {
    ! grep -q '^step ' "$@" 2>/dev/null &&
        grep -q "(its rank not known yet: dtrain was starting) .* crashed: SIGSEGV" "$@" 2>/dev/null &&
        grep -q "return address on the stack .*/openmpi/.*mca_btl_tcp\.so+" "$@" 2>/dev/null
}

# once_more OUT ERR CMD...: runs CMD with stdout in OUT and stderr in ERR (the same file: both in
# it); when it fails with ompi_init_crash, runs it once more, saying so, the first try's files kept
# as FILE.crash. CMD's exit code.
once_more() {
    local out=$1 err=$2 rc try
    shift 2
    for try in 1 2; do
        if [ "$out" = "$err" ]; then "$@" >"$out" 2>&1; else "$@" >"$out" 2>"$err"; fi
        rc=$?
        [ "$rc" -ne 0 ] && [ "$try" -eq 1 ] && ompi_init_crash "$err" || break
        cp "$out" "$out.crash" && { [ "$out" = "$err" ] || cp "$err" "$err.crash"; }
        echo "    Open MPI's TCP BTL crashed inside MPI_Init (exit $rc, third-party: docs/testing.md): run again"
    done
    return "$rc"
}

# can_trace: strace is here and may trace (ptrace is refused in some containers).
can_trace() { command -v strace >/dev/null && strace -f -qq -o /dev/null true 2>/dev/null; }

# traced STRACE_ARGS... -- CMD...: CMD under strace -f -qq with STRACE_ARGS (which calls to fail,
# and how), its trace discarded. LeakSanitizer cannot run under ptrace (it ends the process with
# its own error code at exit), so an ASan build's leak check is off for traced runs alone (make
# test-asan).
traced() {
    local args=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do args+=("$1"); shift; done
    shift
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" strace -f -qq -o /dev/null "${args[@]}" "$@"
}
