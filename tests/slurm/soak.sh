#!/usr/bin/env bash
# The fault soak (issue 18): a 3-node x 2-rank training job on the local SLURM cluster, under a
# seeded chaos loop, until it has trained every step. Each fault is one of:
#   usr1   SIGUSR1 to every rank: the job checkpoints, exits 75, and is resubmitted with
#          --resume auto; it must resume at exactly the step it stopped after;
#   stop   SIGSTOP of one rank, SIGCONT after 1-3 s (under --timeout): the job must go on;
#   kill   SIGKILL of one rank: the job must end within --timeout + margin, the log naming the dead
#          rank (srun's "task R: Killed"), and resume from the newest sound checkpoint;
#   damage the job is preempted as for usr1, then its newest checkpoint is truncated or has a
#          byte flipped: the next run must skip it, naming it, and resume from the one before.
# At the end the parameters must equal those of an undisturbed run with the same seed and steps
# bit for bit (a step's batches follow from the seed and the step, so steps run again after a kill
# or a damaged checkpoint give the same result), no dtrain process and no /dev/shm segment of the
# job may be left (those of a start Open MPI crashed in MPI_Init aside: removed and counted), and a summary gives faults per kind, outcomes, seconds from fault to job end
# and the steps run again. Exit 77 (SKIP) where the cluster cannot start here.
#
# Its length does not follow the machine's speed (which swings 45-650 steps/s on the shared VM):
# - the faults come in ROUNDS, each a shuffled bag of all four kinds, and each fault comes after a
#   seeded number of trained steps (GAP_MIN..GAP_MAX), not seconds, so a slow machine gets the
#   same faults, only later; the job has just enough steps for them: 4 x ROUNDS x GAP_MAX + TAIL;
# - while faults are due the job is paced: rank 0 sleeps FAULT_SLOW_MS (20 ms) a step
#   (DTRAIN_FAULT=slow:0:1), and every step ends in an allreduce, so the whole job trains at most
#   50 steps/s, and a fast machine does not outrun the faults;
# - no fault is sent after SECONDS from the start; once the faults are all sent or SECONDS has
#   passed, a job still paced is preempted (the "finale" SIGUSR1) and the rest trains unpaced;
# - past LIMIT seconds (SOAK_LIMIT, default 2 x SECONDS + 120) the soak stops itself, fails and
#   cleans up, so a hung run never outlives ctest's TIMEOUT (which kills without a trap).
# Ctrl-C, SIGTERM or LIMIT: the job's processes, the cluster (down.sh) and the job's /dev/shm
# segments are taken down before exit (143 / 130).
# Usage: soak.sh SEED SECONDS [DTRAIN]   (SOAK_ROUNDS=N rounds, default SECONDS / 30, at least 1;
# SOAK_LOG=FILE keeps the whole story: every run's output and every fault)
here=$(dirname "$0")
source "$here/../mpi/lib.sh"
repo=$(cd "$here/../.." && pwd)
usage="usage: soak.sh SEED SECONDS [DTRAIN]  (env: SOAK_ROUNDS, SOAK_LIMIT, SOAK_LOG)"
SEED=${1:?$usage} SECONDS_WANTED=${2:?$usage}
DTRAIN=${3:-${DTRAIN:-$repo/build/dtrain}}
for v in "SEED=$SEED" "SECONDS=$SECONDS_WANTED" ${SOAK_ROUNDS:+"SOAK_ROUNDS=$SOAK_ROUNDS"} ${SOAK_LIMIT:+"SOAK_LIMIT=$SOAK_LIMIT"}; do
    case ${v#*=} in '' | *[!0-9]*) echo "soak.sh: $v must be a whole number ($usage)" >&2; exit 2 ;; esac
done
ROUNDS=$((10#${SOAK_ROUNDS:-$((SECONDS_WANTED / 30 > 1 ? SECONDS_WANTED / 30 : 1))}))
LIMIT=$((10#${SOAK_LIMIT:-$((2 * SECONDS_WANTED + 120))}))
[ "$ROUNDS" -ge 1 ] || { echo "soak.sh: SOAK_ROUNDS=$ROUNDS: at least 1 round (one fault of each kind) is needed" >&2; exit 2; }
[ "$LIMIT" -gt "$SECONDS_WANTED" ] || { echo "soak.sh: SOAK_LIMIT=$LIMIT must exceed SECONDS=$SECONDS_WANTED (the job trains on after the faults)" >&2; exit 2; }
[ -x "$DTRAIN" ] || { echo "soak.sh: no dtrain at '$DTRAIN': build it or pass its path as the third argument" >&2; exit 2; }
TIMEOUT=10 MARGIN=10 NODES=3 NP=6
# A fault every GAP_MIN..GAP_MAX trained steps (1-4 s at the paced 25-50 steps/s); TAIL steps
# past the last possible fault, so the faults never meet the job's end.
GAP_MIN=40 GAP_MAX=100 TAIL=100 PACE=slow:0:1
STEPS=$((4 * ROUNDS * GAP_MAX + TAIL))
cluster="$tmp/cluster" ck="$tmp/ck" story="$tmp/story"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1 DTRAIN_DEVICE=cpu

if [ "$(id -u)" -ne 0 ]; then echo "SKIP: the local SLURM cluster needs root (network namespaces)"; exit 77; fi
for b in slurmctld slurmd srun munged ip unshare nsenter; do
    command -v "$b" >/dev/null || { echo "SKIP: $b is not installed (make test installs it: see the Makefile)"; exit 77; }
done
say() { echo "$*"; echo "== $*" >>"$story"; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
elapsed() { secs "$tbegin" "$(now)" | cut -d. -f1; }
tbegin=$(now)

# Teardown, whatever the way out (the end, an error, Ctrl-C, SIGTERM, LIMIT): down.sh SIGKILLs
# the sruns, the steps and every process in the nodes' namespaces (the ranks with them) and stops
# the daemons; a SIGKILLed rank cannot remove its /dev/shm segments, so the new ones naming our
# nodes go too. Bash runs a trap only when the foreground command ends, so everything long (up.sh,
# the runs) runs in the background under `wait`, which a signal interrupts at once.
job="" watchdog=""
teardown() {
    trap '' INT TERM
    [ -n "$watchdog" ] && kill $(pgrep -P "$watchdog") "$watchdog" 2>/dev/null
    [ -n "$job" ] && kill -KILL "$job" 2>/dev/null
    [ -d "$cluster" ] && bash "$repo/slurm/cluster/down.sh" "$cluster" >/dev/null 2>&1
    local p c
    for p in /proc/[0-9]*; do   # ranks outside the namespaces, should there be any
        { read -r c <"$p/comm"; } 2>/dev/null && [ "$c" = dtrain ] &&
            tr '\0' '\n' <"$p/cmdline" 2>/dev/null | grep -qxF -- "$ck" && kill -KILL "${p#/proc/}" 2>/dev/null
    done
    [ -f "$tmp/shm.before" ] && ls /dev/shm 2>/dev/null | grep -vxF -f "$tmp/shm.before" | grep -E 'node[0-9]' |
        while read -r f; do rm -f "/dev/shm/$f"; done
    [ -n "${SOAK_LOG-}" ] && [ -f "$story" ] && cp "$story" "$SOAK_LOG"
    rm -rf "$tmp"
}
interrupted() {
    echo "soak.sh: $1: stopping the job and taking the cluster down" >&2
    [ -f "$story" ] && echo "== interrupted: $1 after $(elapsed) s" >>"$story"
    bad "interrupted ($1) after $(elapsed) s"; finish
    exit "$2"
}
trap teardown EXIT
trap 'interrupted SIGINT 130' INT
trap 'interrupted SIGTERM 143' TERM
trap 'interrupted "LIMIT ($LIMIT s, SOAK_LIMIT) passed" 124' USR2
( sleep "$LIMIT" && kill -USR2 $$ ) >/dev/null 2>&1 &
watchdog=$!
# bg_wait LOG CMD...: runs CMD in the background, its output to LOG, and waits for it (so that a
# signal is handled at once, and its message not sent to LOG); returns CMD's exit.
bg_wait() { "${@:2}" >"$1" 2>&1 & job=$!; wait "$job"; local rc=$?; job=""; return $rc; }

# Segments in /dev/shm before: whatever the job leaves there is new and names a node of ours.
ls /dev/shm >"$tmp/shm.before" 2>/dev/null
# A start that Open MPI crashed inside MPI_Init (ompi_init_crash) may leave the vader segments of
# its ranks in /dev/shm (seen once, at load 6-10): they die inside Open MPI's start-up, where no
# dtrain code runs that could remove them. shm_crashed SNAPSHOT removes the segments of our
# nodes that are new since SNAPSHOT (taken before that start) and counts them; segments left by a
# run that started training stay for the final check, which is dtrain's (its exits, a kill included).
shm_removed=0
shm_crashed() {
    local f n=0
    while read -r f; do rm -f "/dev/shm/$f" && n=$((n + 1)); done < <(ls /dev/shm 2>/dev/null | grep -vxF -f "$1" | grep -E 'node[0-9]')
    shm_removed=$((shm_removed + n))
    [ $n -eq 0 ] || say "  its $n /dev/shm segment(s) removed (Open MPI's, of ranks that died in MPI_Init)"
}
if ! bg_wait "$tmp/up.log" bash "$repo/slurm/cluster/up.sh" "$cluster" $NODES 2 0; then
    cat "$tmp/up.log"; bad "the local SLURM cluster did not start"; finish; exit 1
fi
source "$repo/slurm/cluster/env.sh" "$cluster"

model=(--model fc:64,relu,fc:10 --input 64 --batch 8 --lr 0.05 --seed "$SEED" --blas-threads 1)
train=(train "${model[@]}" --steps "$STEPS" --log-every 5 --timeout "$TIMEOUT")
say "soak: seed $SEED, $ROUNDS rounds of 4 faults, $STEPS steps, $NP ranks on $NODES nodes, --timeout $TIMEOUT, faults until $SECONDS_WANTED s, limit $LIMIT s; cluster up in $(elapsed) s"
# srun_job PACE ARGS...: one run; PACE is a DTRAIN_FAULT value, or "" for full speed.
srun_job() { DTRAIN_FAULT=$1 timeout -s KILL 600 srun -N $NODES -n $NP --mpi=pmix "$DTRAIN" "${train[@]}" "${@:2}"; }

# Open MPI 4.1.4's TCP BTL now and then crashes inside MPI_Init on this cluster (third-party code,
# before dtrain has a rank: docs/testing.md). Such a run trained nothing and is resubmitted,
# counted in the summary; more than 3 in one soak fail it.
ompi_crashes=0
# ompi_init_crash LOG: tests/mpi/lib.sh.

# The undisturbed run, at full speed (pacing changes no result, only the time).
t0=$(now)
ls /dev/shm >"$tmp/shm.run" 2>/dev/null
while ! bg_wait "$tmp/ref.log" srun_job "" --dump-params "$tmp/ref"; do
    if ompi_init_crash "$tmp/ref.log" && [ $ompi_crashes -lt 3 ]; then
        ompi_crashes=$((ompi_crashes + 1)); say "undisturbed run: Open MPI crashed in MPI_Init (third-party): resubmitted"
        shm_crashed "$tmp/shm.run"; ls /dev/shm >"$tmp/shm.run" 2>/dev/null; continue
    fi
    cat "$tmp/ref.log"; bad "the undisturbed run failed"; finish; exit 1
done
cat "$tmp/ref.log" >>"$story"
say "undisturbed run: $STEPS steps in $(secs "$t0" "$(now)") s"

# The job's ranks: "pid rank" a line (dtrain processes whose command line holds our checkpoint dir).
ranks() {
    local p c r
    for p in /proc/[0-9]*; do
        { read -r c <"$p/comm"; } 2>/dev/null || continue
        [ "$c" = dtrain ] || continue
        tr '\0' '\n' <"$p/cmdline" 2>/dev/null | grep -qxF -- "$ck" || continue
        r=$(tr '\0' '\n' <"$p/environ" 2>/dev/null | sed -n 's/^SLURM_PROCID=//p')
        echo "${p#/proc/} $r"
    done
}
# The step the newest sound checkpoint holds: the damaged files are those whose checksum is still
# the one recorded when they were damaged (a run that writes that step again repairs it).
declare -A damaged
sound_step() {
    local f best=0 s
    for f in "$ck"/ckpt-*.dtc; do
        [ -f "$f" ] || continue
        [ -n "${damaged[$f]-}" ] && [ "$(cksum <"$f")" = "${damaged[$f]}" ] && continue
        s=${f##*/ckpt-}; s=$((10#${s%.dtc}))
        [ "$s" -gt "$best" ] && best=$s
    done
    echo "$best"
}
last_step() { sed -n 's/^step *\([0-9]*\)\/.*/\1/p' "$1" | tail -1; }

# The seeded chaos: ROUNDS rounds, each a shuffled bag of all four kinds; the gaps (in trained
# steps), ranks and lengths from bash's RANDOM seeded with SEED.
RANDOM=$SEED
bag=() rounds_drawn=0
next_kind() {
    if [ ${#bag[@]} -eq 0 ]; then
        bag=(usr1 stop kill damage); rounds_drawn=$((rounds_drawn + 1))
        local i j t
        for ((i = 3; i > 0; i--)); do j=$((RANDOM % (i + 1))); t=${bag[i]}; bag[i]=${bag[j]}; bag[j]=$t; done
    fi
    kind=${bag[0]}; bag=("${bag[@]:1}")
}
next_gap() { echo $((GAP_MIN + RANDOM % (GAP_MAX - GAP_MIN + 1))); }
# Faults are due while rounds are left and SECONDS has not passed.
faults_due() { [ ${#bag[@]} -gt 0 ] || [ $rounds_drawn -lt "$ROUNDS" ] && [ "$(elapsed)" -lt "$SECONDS_WANTED" ]; }
# Notes, once, when the faults are over.
faults_over() {
    [ -n "$chaos_end" ] && return
    chaos_end=$(now)
    say "run $run: faults over after $(elapsed) s ($rounds_drawn rounds begun, $((${count[usr1]-0} + ${count[stop]-0} + ${count[kill]-0} + ${count[damage]-0})) faults sent) near step $1"
}
declare -A count outcome ends
redone_total=0 run=0 expect_skip="" resume_at=0 chaos_end="" unpaced_at=""
tsoak=$(now)
while :; do
    run=$((run + 1)); log="$tmp/run$run.log"
    # Paced while faults are due; the run after them at full speed.
    pace=""; faults_due && pace=$PACE
    [ -z "$pace" ] && [ -z "$unpaced_at" ] && unpaced_at=$resume_at && faults_over "$resume_at"
    ls /dev/shm >"$tmp/shm.run" 2>/dev/null
    srun_job "$pace" --checkpoint-dir "$ck" --resume auto --checkpoint-every 25 --dump-params "$tmp/soak" >"$log" 2>&1 &
    job=$!
    # What this run must have resumed from (checked once it has started training).
    checked=0 fault_at="" fault_kind="" gap=$(next_gap) base=0
    while kill -0 "$job" 2>/dev/null; do
        sleep 0.1
        grep -q '^step ' "$log" || continue
        if [ $checked = 0 ]; then
            checked=1
            if [ "$resume_at" -gt 0 ]; then
                grep -q "resumed from .*ckpt-$(printf %010d "$resume_at").dtc at step $resume_at" "$log" &&
                    ok "run $run resumed at step $resume_at, the newest sound checkpoint" ||
                    { bad "run $run did not resume at step $resume_at"; grep -E 'resumed|skipping|no checkpoint' "$log"; }
            else
                grep -q "no checkpoint in $ck: starting at step 0" "$log" && ok "run $run: no sound checkpoint yet, started at step 0" ||
                    { bad "run $run: no sound checkpoint, yet it did not say it starts at step 0"; grep -E 'resumed|skipping' "$log"; }
            fi
            if [ -n "$expect_skip" ]; then
                grep -q "skipping checkpoint: checkpoint $expect_skip" "$log" && ok "run $run skipped the damaged ${expect_skip##*/}: $(grep -m1 -o "skipping checkpoint: .*" "$log" | sed "s|$ck/||")" ||
                    { bad "run $run did not skip the damaged $expect_skip"; grep -E 'resumed|skipping' "$log"; }
                expect_skip=""
            fi
            base=$resume_at
        fi
        [ -n "$fault_kind" ] && continue
        [ -z "$pace" ] && continue
        at=$(last_step "$log"); at=${at:-0}
        if ! faults_due; then
            # The faults are over (all rounds sent, or SECONDS passed): the finale preempts the
            # paced run, unless it is nearly done, so that the rest trains at full speed.
            faults_over "$at"
            [ $((STEPS - at)) -gt 50 ] || continue
            mapfile -t rows < <(ranks)
            [ ${#rows[@]} -eq $NP ] || continue
            fault_kind=finale fault_at=$(now)
            for row in "${rows[@]}"; do kill -USR1 "${row% *}" 2>/dev/null; done
            say "run $run: finale: SIGUSR1 to every rank near step $at, to train the rest unpaced"
            continue
        fi
        [ "$at" -ge $((base + gap)) ] || continue
        mapfile -t rows < <(ranks)
        [ ${#rows[@]} -eq $NP ] || continue
        next_kind; fault_kind=$kind; count[$kind]=$((${count[$kind]-0} + 1))
        r=$((RANDOM % NP)); pid=$(printf '%s\n' "${rows[@]}" | awk -v r=$r '$2 == r { print $1 }')
        fault_at=$(now)
        case $kind in
        usr1 | damage)
            for row in "${rows[@]}"; do kill -USR1 "${row% *}" 2>/dev/null; done
            say "run $run: $kind: SIGUSR1 to every rank near step $at" ;;
        kill)
            kill -KILL "$pid" 2>/dev/null
            say "run $run: kill: SIGKILL to rank $r (pid $pid) near step $at" ;;
        stop)
            len=$((1 + RANDOM % 3))
            kill -STOP "$pid" 2>/dev/null
            say "run $run: stop: SIGSTOP to rank $r (pid $pid) near step $at for $len s"
            sleep "$len"; kill -CONT "$pid" 2>/dev/null
            # Surviving means training on: a later step logged within 2 s, or the job done.
            for _ in $(seq 20); do t=$(last_step "$log"); [ "${t:-0}" -gt "$at" ] && break; kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
            if [ "${t:-0}" -gt "$at" ] || { ! kill -0 "$job" 2>/dev/null && grep -q "^done: $STEPS steps" "$log"; }; then
                ok "run $run: rank $r stopped for $len s (under --timeout $TIMEOUT): the job went on (step $at -> $t after SIGCONT)"
                outcome[stop]="${outcome[stop]-}survived "
            else
                bad "run $run: the job did not survive rank $r stopped for $len s"
                outcome[stop]="${outcome[stop]-}ended "
            fi
            # Another fault may follow in the same run, a gap after this one.
            fault_kind="" base=${t:-$at} gap=$(next_gap) ;;
        esac
    done
    wait "$job"; rc=$?; job=""
    tend=$(now)
    { echo "== run $run: exit $rc"; cat "$log"; } >>"$story"
    # The furthest step this run is known to have trained: its last log line or its stop.
    reached=$(last_step "$log"); reached=${reached:-0}
    stopped=$(sed -n 's/^stopping after step \([0-9]*\) on a signal.*/\1/p' "$log" | head -1)
    [ -n "$stopped" ] && [ "$stopped" -gt "$reached" ] && reached=$stopped
    case $fault_kind in
    usr1 | damage | finale)
        if [ $rc -eq 75 ] && [ -n "$stopped" ] && [ -f "$ck/ckpt-$(printf %010d "$stopped").dtc" ]; then
            ok "run $run: SIGUSR1: stopped after step $stopped with a checkpoint, exit 75, $(secs "$fault_at" "$tend") s after the signal"
            outcome[$fault_kind]="${outcome[$fault_kind]-}exit75 "; ends[$fault_kind]="${ends[$fault_kind]-}$(secs "$fault_at" "$tend") "
        elif [ $rc -eq 0 ] && grep -q "^done: $STEPS steps" "$log"; then
            ok "run $run: SIGUSR1 came as the job finished: it ended 0"; outcome[$fault_kind]="${outcome[$fault_kind]-}finished "
        else
            bad "run $run: SIGUSR1: exit $rc, stopped after '$stopped'"; tail -20 "$log"
        fi
        if [ $fault_kind = damage ] && [ $rc -eq 75 ] && [ -n "$stopped" ]; then
            f="$ck/ckpt-$(printf %010d "$stopped").dtc"
            size=$(stat -c %s "$f")
            if [ $((RANDOM % 2)) -eq 0 ]; then
                truncate -s $((size / 3)) "$f"; how="truncated from $size to $((size / 3)) bytes"
            else
                off=$((size / 2)); b=$(od -An -tu1 -j$off -N1 "$f" | tr -d ' ')
                printf "\\$(printf %03o $(((b ^ 0x5a) & 255)))" | dd of="$f" bs=1 seek=$off conv=notrunc status=none
                how="byte $off flipped"
            fi
            damaged[$f]=$(cksum <"$f"); expect_skip=$f
            say "between runs: damaged ${f##*/} ($how)"
        fi ;;
    kill)
        took=$(secs "$fault_at" "$tend")
        # srun's first "task(s) LIST: Killed" line (LIST as 4 or 2-3) must hold the dead rank, or
        # dtrain's watchdog must name it.
        named=$(grep -m1 -E "error: node[0-9]+: tasks? [0-9,-]+: Killed" "$log")
        first_killed=$(sed -n 's/.*tasks\? \([0-9,-]*\): Killed.*/\1/p' <<<"$named")
        if [ $rc -ne 0 ] && [ $rc -ne 75 ] && awk -v t="$took" -v l=$((TIMEOUT + MARGIN)) 'BEGIN { exit !(t <= l) }' &&
           { expand_cpus "$first_killed" | grep -qx "$r" || named=$(grep -m1 "rank(s) $r \|rank $r " "$log"); }; then
            ok "run $run: rank $r killed: the job ended in $took s (limit $((TIMEOUT + MARGIN))), exit $rc, the log names rank $r: $named"
            outcome[kill]="${outcome[kill]-}ended "; ends[kill]="${ends[kill]-}$took "
        elif [ $rc -eq 0 ] && grep -q "^done: $STEPS steps" "$log"; then
            ok "run $run: the kill came as the job finished"; outcome[kill]="${outcome[kill]-}finished "
        else
            bad "run $run: rank $r killed: exit $rc after $took s, first killed task '$first_killed'"; tail -20 "$log"
        fi ;;
    esac
    left=$(ranks)
    [ -z "$left" ] || { bad "run $run ended with dtrain processes left: $(tr '\n' ' ' <<<"$left")"; while read -r p _; do kill -9 "$p"; done <<<"$left"; }
    if [ $rc -eq 0 ] && grep -q "^done: $STEPS steps" "$log"; then break; fi
    # Open MPI's crash in MPI_Init (ompi_init_crash): the run trained nothing; run it again.
    if [ $rc -ne 0 ] && [ $rc -ne 75 ] && ompi_init_crash "$log"; then
        ompi_crashes=$((ompi_crashes + 1))
        say "run $run: Open MPI's TCP BTL crashed in MPI_Init before training (exit $rc, third-party): resubmitted"
        shm_crashed "$tmp/shm.run"
        [ $ompi_crashes -le 3 ] || { bad "Open MPI crashed in MPI_Init $ompi_crashes times"; break; }
        resume_at=$(sound_step)
        continue
    fi
    if [ $rc -ne 75 ] && [ "$fault_kind" != kill ]; then bad "run $run ended with exit $rc without a fault that ends it"; tail -20 "$log"; break; fi
    [ $run -ge 200 ] && { bad "200 runs and not done"; break; }
    resume_at=$(sound_step)
    if [ "$reached" -gt "$resume_at" ]; then redone_total=$((redone_total + reached - resume_at)); fi
    [ "$reached" -gt "$resume_at" ] && say "run $run reached step $reached; the next resumes at $resume_at: $((reached - resume_at)) steps run again"
done
tdone=$(now)
say "soak: $run runs in $(secs "$tsoak" "$tdone") s, done $(secs "$tbegin" "$tdone") s after the start"

# A soak that the job outran proves nothing: at least one fault of each kind.
[ "${count[usr1]-0}" -ge 1 ] && [ "${count[stop]-0}" -ge 1 ] && [ "${count[kill]-0}" -ge 1 ] && [ "${count[damage]-0}" -ge 1 ] &&
    ok "faults of every kind were sent" || bad "not every kind of fault was sent: SECONDS=$SECONDS_WANTED passed first (raise it)"
if cmp -s "$tmp/soak" "$tmp/ref"; then ok "after $run runs the parameters equal the undisturbed run's bit for bit"
else bad "the soaked parameters differ from the undisturbed run's"; fi
left=$(ranks); [ -z "$left" ] && ok "no dtrain process left" || bad "dtrain processes left: $(tr '\n' ' ' <<<"$left")"
shm_new=$(ls /dev/shm 2>/dev/null | grep -vxF -f "$tmp/shm.before" | grep -E 'node[0-9]' | tr '\n' ' ')
[ -z "$shm_new" ] && ok "no /dev/shm segment of the job left" || bad "/dev/shm segments left: $shm_new"
tmps=$(cd "$ck" && ls | grep -v '^ckpt-[0-9]*\.dtc$' | tr '\n' ' ')

echo "--- soak summary (seed $SEED, $ROUNDS rounds asked, $rounds_drawn begun, $STEPS steps, $NP ranks on $NODES nodes, $run runs)"
over="the faults never ended (a run ended the job while they were due)"
[ -n "$chaos_end" ] && over="faults over at $(secs "$tbegin" "$chaos_end") s, then $(secs "$chaos_end" "$tdone") s and $((STEPS - ${unpaced_at:-$STEPS})) unpaced steps to the end"
echo "  wall time: $(secs "$tbegin" "$tdone") s (faults until ${SECONDS_WANTED} s); $over"
for k in usr1 stop kill damage finale; do
    [ $k = finale ] && [ -z "${outcome[finale]-}" ] && continue
    printf '  %-7s %2d faults; outcomes: %s; seconds from fault to job end: %s\n' "$k" "${count[$k]-$([ $k = finale ] && echo 1 || echo 0)}" \
        "$(tr ' ' '\n' <<<"${outcome[$k]-}" | grep . | sort | uniq -c | awk '{printf "%s %s, ", $1, $2}' | sed 's/, $//')" "${ends[$k]:--}"
done
echo "  steps run again after kills and damaged checkpoints (at least): $redone_total; data lost: $(cmp -s "$tmp/soak" "$tmp/ref" && echo none || echo 'the parameters differ')"
echo "  runs lost to Open MPI crashing in MPI_Init (third-party, resubmitted): $ompi_crashes; their /dev/shm segments removed: $shm_removed"
echo "  files in the checkpoint directory other than checkpoints (temporaries of writes cut by SIGKILL): ${tmps:-none}"
bash "$repo/slurm/cluster/down.sh" "$cluster" >"$tmp/down.log" 2>&1 && ok "cluster down" || { bad "down.sh: $(cat "$tmp/down.log")"; }
finish
