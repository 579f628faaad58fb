#!/usr/bin/env bash
# Never a silent hang: a rank that stalls makes the job end within timeout + 10 s with the
# watchdog's message on a surviving rank; a rank that exits or is killed ends the job within 30 s,
# non-zero, with no rank left running. Faults come from DTRAIN_FAULT=KIND:RANK:STEP; mpi_opts
# (empty by default) adds options to mpirun. What is checked without a deadline (DTRAIN_FAULT's
# refusals, ranks given other flags, DTRAIN_LOG, a failed checkpoint write, SIGUSR1) is
# mpi.fault_specs (test_fault_specs.sh), which runs beside other tests.
here=$(dirname "$0"); source "$here/lib.sh"
DTRAIN=$1 MPIRUN=$2
TIMEOUT=3
host=$(hostname)   # the watchdog names a missing rank's node: this machine under mpirun
marker="--dataset-size 4$$"   # a unique argument, to find leftover processes of this test
# Jobs end here as users see them: with Open MPI's default grace between the survivors' SIGTERM and
# SIGKILL (the tests' environment sets 0 for speed). A watchdog case races two ranks' verdicts, and
# the grace lets the rank whose words are checked print after the other's MPI_Abort.
export OMPI_MCA_odls_base_sigkill_timeout=1

# The cases run four at a time: a stalled or hung job mostly sleeps and polls (the whole script,
# cases four at a time: 15 s of CPU over 91 s, every process of it counted by a cpuacct cgroup, on
# the 2-core machine beside a soak; /usr/bin/time, which counts only the children waited for, saw
# 6 s), and each case has its own output file and marker, so none sees another's.
# fault_case reports into $tmp/case.N; cases_done waits for the running ones and counts their
# verdicts in order.
n_case=0
# How many processes with this marker are left: a rank may take a moment to exit after mpirun, so
# leftovers are those still there after 1 s.
leftovers() {
    local left tries=0
    while left=$(pgrep -f -- "$1" | wc -l) && [ "$left" -gt 0 ] && [ $tries -lt 10 ]; do
        sleep 0.1
        tries=$((tries + 1))
    done
    echo "$left"
}
# late (optional): an extended regular expression for the output of a try that lost a race the
# machine's load decides, not dtrain; such a try is run again, up to 3 tries, and the last must
# say what is wanted.
fault_case() { # N, then fault's arguments
    local n=$1 spec=$2 np=$3 say=$4 limit=$5 late=${6-} t0 t1 rc var=DTRAIN_FAULT try took left
    local out=$tmp/out.$n case_marker
    case_marker="--seed 9$(printf %02d "$n")$$"   # unique to this case, to find its leftovers
    case $spec in hang=*) var=DTRAIN_TEST_HANG spec=${spec#hang=} ;; esac
    for try in 1 2 3; do
        t0=$(date +%s.%N)
        env "$var=$spec" timeout 120 "$MPIRUN" ${mpi_opts-} -np "$np" -x "$var" "$DTRAIN" train --timeout $TIMEOUT \
            --steps 40 --batch 4 --model fc:32,relu,fc:10 --input 16 --log-every 1 $marker $case_marker >"$out" 2>&1
        rc=$?
        t1=$(date +%s.%N)
        took=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
        left=$(leftovers "$case_marker")
        if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -qF -- "$say" "$out" &&
           awk -v t="$took" -v l="$limit" 'BEGIN { exit !(t <= l) }' && [ "$left" -eq 0 ]; then
            ok "$var=$spec ${mpi_opts-}on $np ranks: job ended in $took s (limit $limit), exit $rc, says '$say', no rank left${late:+ (try $try)}"
            return
        fi
        if [ -n "$late" ] && [ $try -lt 3 ] && [ "$rc" -ne 0 ] && [ "$left" -eq 0 ] && grep -qE -- "$late" "$out"; then
            echo "note: $var=$spec on $np ranks, try $try: no '$say', and the load decided the race; again"
            continue
        fi
        bad "$var=$spec ${mpi_opts-}on $np ranks: exit $rc after $took s (limit $limit), $left processes left, wanted '$say'"
        sed 's/^/    /' "$out" | tail -20
        pkill -9 -f -- "$case_marker"
        return
    done
}
# A case function, given its number N and then the arguments, run beside the others into $tmp/case.N.
run_case() {
    local fn=$1
    shift
    n_case=$((n_case + 1))
    while [ "$(jobs -rp | wc -l)" -ge 4 ]; do wait -n; done
    "$fn" "$n_case" "$@" >"$tmp/case.$n_case" 2>&1 &
    last_out=$tmp/out.$n_case
}
fault() { # kind:rank:step (or hang=LAYER:RANK:SEQ for DTRAIN_TEST_HANG), ranks, must-say, time limit
    run_case fault_case "$@"
}
# Rank 0 slow to poll (a loaded machine; here stopped with SIGSTOP inside collective #2, the first
# after the stall at step 0 (#0 and #1 compare the ranks' flags), before its
# deadline) while rank 2 of 3 never arrives: rank 1 times out first, and its verdict, from a rank
# that hears only from rank 0, blames rank 0. Rank 0, continued past its own deadline, still knows
# who never arrived: it says that itself instead of logging rank 1's verdict about rank 0 as its
# own. (mpirun's grace before SIGKILL, 3 s here, lets it print after rank 1's MPI_Abort.)
rank0_late_case() { # N
    local n=$1 out=$tmp/out.$1 pids=$tmp/pids.$1 job i rc left case_marker
    case_marker="--seed 9$(printf %02d "$n")$$"
    mkdir -p "$pids"
    env OMPI_MCA_odls_base_sigkill_timeout=3 DTRAIN_FAULT=stall:2:0 timeout 120 "$MPIRUN" -np 3 -x DTRAIN_FAULT \
        bash -c 'echo $$ >"$0/pid.$OMPI_COMM_WORLD_RANK"; exec "$@"' "$pids" "$DTRAIN" train --timeout $TIMEOUT \
        --steps 4 --batch 4 --model fc:32,relu,fc:10 --input 16 $marker $case_marker >"$out" 2>&1 &
    job=$!
    for i in $(seq 400); do [ -s "$pids/pid.0" ] && grep -q "fault injection" "$out" && break; sleep 0.05; done
    sleep 1.5
    kill -STOP "$(cat "$pids/pid.0")"
    for i in $(seq 1000); do grep -q "\[rank 1\] dtrain ERROR watchdog" "$out" && break; sleep 0.02; done
    kill -CONT "$(cat "$pids/pid.0")"
    wait $job
    rc=$?
    left=$(leftovers "$case_marker")
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$left" -eq 0 ] && ! grep -q "\[rank 0\] .*timed out first" "$out" &&
        grep -F "[rank 0] dtrain ERROR watchdog: collective #2 " "$out" |
        grep -qF "rank(s) 2 on $host have not reached it (no word from them)"; then
        ok "rank 0 slow past rank 1's verdict, rank 2 of 3 missing: rank 0 names rank 2 itself, exit $rc, no rank left"
    else
        bad "rank 0 slow past rank 1's verdict: exit $rc, $left processes left, wanted rank 0's own verdict naming rank 2"
        sed 's/^/    /' "$out" | tail -20
        pkill -9 -f -- "$case_marker"
    fi
}
counted=0
cases_done() {
    wait
    while [ "$counted" -lt "$n_case" ]; do
        counted=$((counted + 1))
        cat "$tmp/case.$counted"
        passes=$((passes + $(grep -c '^ok: ' "$tmp/case.$counted")))
        fails=$((fails + $(grep -c '^FAIL: ' "$tmp/case.$counted")))
    done
}

fault stall:1:5 2 "no data yet from rank(s) 1 on $host" $((TIMEOUT + 10))
fault stall:2:3 4 "no data yet from rank(s) 2 on $host" $((TIMEOUT + 10))
# One verdict per rank, its own or the first a peer told: a rank's two waiting threads (main and
# communication) once logged both, two lines a rank, 2048 at 1024 ranks.
fault stall:7:5 8 "no data yet from rank(s) 7 on $host" $((TIMEOUT + 10))
eight=$last_out
# The watchdog names the ranks it has not heard from, before the first broadcast too (rank 0
# hears from every rank, the others from rank 0), and says so when every rank came but the
# collective still does not finish (DTRAIN_TEST_HANG: a test hook, see collectives/coll.h).
fault stall:1:0 2 "rank(s) 1 on $host have not reached it (no word from them)" $((TIMEOUT + 10)) # before the broadcast
fault stall:0:0 2 "rank 0 on $host has not reached it (no word from it)" $((TIMEOUT + 10))
# ...and the other ranks, which hear only from rank 0, log rank 0's verdict as theirs (the board).
# Two races decide whether one does, and a loaded machine (load 10 on the 2 cores) can lose either:
# rank 0 must poll within the others' 2 s of grace past their deadline (ROLL_GRACE_S), else a
# rank times out on its own, saying that rank 0's verdict has not come (rank 0 then still names
# rank 2 itself: rank0_late_case); and the others must take rank 0's verdict and print it within
# the 0.5 s it travels and the launcher's grace after rank 0's MPI_Abort, else only rank 0's own
# verdict is there. The job's output then still names rank 2, so such a try is run again, and
# the board must carry rank 0's verdict in one of 3.
fault stall:2:0 4 "rank 0 on $host timed out first: rank(s) 2 on $host have not reached it (no word from them)" $((TIMEOUT + 10)) \
    "yet neither the collective nor rank 0's verdict has come|\[rank 0\] dtrain ERROR watchdog: .*rank\(s\) 2 on $host have not reached it"
# Every rank arrived, one stopped inside: rank 0's probe finds the one that does not answer. The
# collective must be one rank 0 cannot finish alone: #5 is dt_model_create's allreduce comparing
# the ranks' models (#0 and #1 compare the ranks' flags, rank 0's text broadcast and the verdict's
# allreduce, #2 train's check of the planned model against each rank's memory budget, #3 the
# allreduce of dt_model_create's verdict on each rank's arguments, #4 the broadcast of rank 0's
# fingerprint, which its root completes without the others).
fault hang=mpi:1:5 2 "every rank reached it, yet it has not completed, and rank(s) 1 on $host do not answer a probe" $((TIMEOUT + 10))
fault hang=mpi:0:3 2 "rank 0 on $host reached it" $((TIMEOUT + 10))
fault hang=engine:1:2 2 "rank 1 on $host reached it, yet MPI_Allreduce has not completed" $((TIMEOUT + 10))
run_case rank0_late_case
cases_done
twice=$(grep -o '\[rank [0-9]*\] dtrain ERROR watchdog' "$eight" | sort | uniq -d | tr '\n' ' ')
[ -z "$twice" ] && ok "stall at 8 ranks: each rank logs one watchdog verdict" ||
    bad "stall at 8 ranks: these ranks logged two watchdog verdicts: $twice"
# A rank stopped (SIGSTOP) while it waits in a gradient allreduce: at 2 ranks MPI_Allreduce carries
# the bucket, and the rank whose deadline passes probes the other (rank 0 is paced, so rank 1 waits
# in the allreduce, arrived, when it stops; in the step's flag allreduce rank 0's roll-call probe
# names it the same way).
# The stop lands where rank 1 happens to be: nearly always waiting in the bucket's allreduce (rank 0
# sleeps 20 ms a step), but now and then in the short host work before the step's flag allreduce,
# where "no data yet from rank(s) 1" (or, before a small collective, "rank(s) 1 ... have not reached
# it") is the right verdict too. Up to 3 tries to see the probe's.
stopped_in_allreduce() {
    rm -f "$tmp/pid.0" "$tmp/pid.1"
    DTRAIN_FAULT=slow:0:1 timeout 120 "$MPIRUN" -np 2 -x DTRAIN_FAULT bash -c \
        'echo $$ >"'"$tmp"'/pid.$OMPI_COMM_WORLD_RANK"; exec "$0" "$@"' "$DTRAIN" train --timeout $TIMEOUT \
        --steps 4000 --batch 4 --model fc:32,relu,fc:10 --input 16 --log-every 1000 $marker >"$tmp/out" 2>&1 &
    local job=$! rc i
    for i in $(seq 200); do [ -s "$tmp/pid.1" ] && grep -q "fault injection" "$tmp/out" && break; sleep 0.1; done
    sleep 0.5
    kill -STOP "$(cat "$tmp/pid.1")"
    wait $job
    rc=$?
    kill -CONT "$(cat "$tmp/pid.1")" 2>/dev/null
    kill -9 "$(cat "$tmp/pid.0")" "$(cat "$tmp/pid.1")" 2>/dev/null
    [ $rc -ne 0 ] && grep -qE "\[rank 0\] dtrain ERROR watchdog: .*1 on $host[^;]* not answer a probe within" "$tmp/out" && return 0
    # Stopped before it arrived (in the host work between collectives): named as not there.
    [ $rc -ne 0 ] && grep -qE "dtrain ERROR watchdog: .*(no data yet from rank\(s\) 1 on $host|rank\(s\) 1 on $host have not reached it)" "$tmp/out" && return 2
    return 1
}
for try in 1 2 3; do
    stopped_in_allreduce
    verdict=$?
    [ $verdict -eq 2 ] && [ $try -lt 3 ] && { echo "note: try $try stopped rank 1 before it arrived (named so); again"; continue; }
    break
done
if [ $verdict -eq 0 ]; then
    ok "rank 1 stopped inside the allreduce at 2 ranks: rank 0's probe names it (try $try)"
else
    bad "rank 1 stopped at 2 ranks: no probe verdict naming it in $try tries"; sed 's/^/    /' "$tmp/out" | tail -8
fi
# The same through the chain allreduce (forced: here every rank is on one node): a rank stalled
# before it is named by the arrival words, one frozen inside it (after its arrival) by the probe,
# on every rank although the others only wait for their neighbours' data.
export DTRAIN_ALLREDUCE=chain
mpi_opts="-x DTRAIN_ALLREDUCE "
fault stall:2:3 4 "no data yet from rank(s) 2 on $host" $((TIMEOUT + 10))
fault hang=engine:2:5 4 "yet the chain has not completed, and rank(s) 2 on $host do not answer a probe" $((TIMEOUT + 10))
unset DTRAIN_ALLREDUCE
mpi_opts=
# kill -9: mpirun ends the job itself (above), while srun by default lets the survivors wait, as
# mpirun does with orte_abort_on_non_zero_status 0: their watchdog names the dead rank.
mpi_opts="--mca orte_abort_on_non_zero_status 0 "
fault kill:1:0 2 "rank(s) 1 on $host have not reached it (no word from them)" $((TIMEOUT + 10))
fault kill:0:0 2 "rank 0 on $host has not reached it (no word from it)" $((TIMEOUT + 10))
fault kill:0:4 2 "no data yet from rank(s) 0 on $host" $((TIMEOUT + 10))
mpi_opts=
fault exit:1:5 2 "rank 1 exits at step 5" 30
fault kill:0:4 2 "rank 0 is killed at step 4" 30
# A call through a NULL function pointer leaves nothing for a backtrace to unwind: the crash
# report names the rank and the caller, as FILE+0xOFFSET that addr2line turns into the function.
fault segv:1:3 2 "rank 1 on $(hostname) crashed: SIGSEGV (address not mapped), fault address" 30
segv_out=$last_out
cases_done
caller=$(sed -n 's/.*return address on the stack.* = \(.*\)+\(0x[0-9a-f]*\)$/\1 \2/p' "$segv_out" | head -1)
fn=$(addr2line -f -e ${caller% *} ${caller#* } 2>/dev/null | head -1) # binutils: there with gcc
[ "$fn" = fault_segv ] && ok "the crash report's caller ${caller% *}+${caller#* } is fault_segv (addr2line)" ||
    { bad "crash report: caller '$caller' -> '$fn', wanted fault_segv"; tail -12 "$segv_out"; }
# A rank that never reaches dt_init (its node could not start dtrain: srun without
# --kill-on-bad-exit leaves the others running) ends the job within --timeout: the others waited in
# dt_init's first collective, the world's MPI_Comm_dup, until the job's time limit.
t0=$(date +%s)
# (how long past the deadline the waiting rank notices depends on the machine's load: not checked)
expect 1 "dt_init's MPI_Comm_dup(MPI_COMM_WORLD) has waited " env DTRAIN_TEST_INIT_STALL=1 timeout -s KILL 60 \
    "$MPIRUN" -np 2 -x DTRAIN_TEST_INIT_STALL "$DTRAIN" train --steps 2 --timeout 3
[ $(( $(date +%s) - t0 )) -le 20 ] && grep -q "s, past the 3.0 s timeout: a rank has not reached dt_init" "$tmp/out" &&
    ok "a rank that never reaches dt_init: the job ends in $(( $(date +%s) - t0 )) s, naming the likely causes" ||
    { bad "a rank that never reaches dt_init: $(( $(date +%s) - t0 )) s"; cat "$tmp/out"; }
# A slow file system: rank 0 takes 4 s, twice the 2 s timeout, to write the final checkpoint, and
# to read it at the resume, while the others wait for its verdict; it tells them it is alive.
slow="train --batch 2 --model fc:8,relu,fc:10 --input 8 --log-every 2 --timeout 2"
expect 0 "parameters identical on all 2 ranks" env DTRAIN_TEST_SLOW_CKPT=4 timeout -s KILL 60 "$MPIRUN" -np 2 \
    -x DTRAIN_TEST_SLOW_CKPT "$DTRAIN" $slow --steps 2 --checkpoint-dir "$tmp/ck-slow"
expect 0 "ckpt-0000000002.dtc at step 2" env DTRAIN_TEST_SLOW_CKPT=4 timeout -s KILL 60 "$MPIRUN" -np 2 \
    -x DTRAIN_TEST_SLOW_CKPT "$DTRAIN" $slow --steps 4 --checkpoint-dir "$tmp/ck-slow" --resume auto
finish
