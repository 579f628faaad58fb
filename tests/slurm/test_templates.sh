#!/usr/bin/env bash
# The sbatch templates' own logic, without SLURM: on preemption or scancel SLURM sends SIGTERM to
# the whole batch step's process group, the batch shell included. The shell must outlive it, take
# srun's exit code (75: stopped with a checkpoint) and run `scontrol requeue`, but only while the
# job is still RUNNING (a plain scancel ends it) and when the run saved a newer checkpoint (else a
# run that never trains would requeue forever). Stand-ins for srun (traps TERM, exits 75 as dtrain
# does) and scontrol (answers `show job`, records the rest) run in their place.
# Also: mpirun-in-allocation.sbatch gives each rank its --cpus-per-task cores, not one.
here=$(dirname "$0"); source "$here/../mpi/lib.sh"
repo=$(cd "$here/../.." && pwd)

mkdir -p "$tmp/bin"
# srun: `dtrain train` until SIGTERM, then (STUB_PROGRESS=1) a newer checkpoint in its
# --checkpoint-dir, as a run that trained writes, and exit 75.
cat >"$tmp/bin/srun" <<'STUB'
#!/bin/bash
case " $* " in *" train "*) ;; *" version "*) exit 0 ;; *) exit "${STUB_ENV_RC:-0}" ;; esac # `dtrain env` steps
printf '%s\n' "$@" >"$STUB_DIR/args"
dir=""; while [ $# -gt 0 ]; do [ "$1" = --checkpoint-dir ] && dir=$2; shift; done
trap '[ "$STUB_PROGRESS" = 1 ] && : >"$dir/ckpt-0000000009.dtc"; exit 75' TERM
mkdir -p "$dir"
: >"$STUB_DIR/started"
while :; do sleep 0.1; done
STUB
# scontrol: `show job` answers with the job's state (STUB_STATE), anything else is recorded.
cat >"$tmp/bin/scontrol" <<'STUB'
#!/bin/bash
[ "$1 $2" = "show job" ] && { echo "JobId=$3 JobName=t JobState=$STUB_STATE Reason=$STUB_REASON Dependency=(null)"; echo "   Requeue=1 Restarts=${STUB_RESTARTS:-0} BatchFlag=1"; exit 0; }
echo "$*" >>"$STUB_DIR/scontrol.log"
STUB
chmod +x "$tmp/bin/srun" "$tmp/bin/scontrol"

# run_template T STATE[/REASON] PROGRESS [OLD_CKPT]: the template in its own process group (setsid), as
# slurmstepd starts the batch shell, SIGTERMed as a whole once srun runs; sets rc.
run_template() {
    rm -rf "$tmp/started" "$tmp/scontrol.log" "$tmp/ckpt-42"
    if [ -n "${4:-}" ]; then mkdir -p "$tmp/ckpt-42" && : >"$tmp/ckpt-42/$4"; fi
    (cd "$tmp" && PATH="$tmp/bin:$PATH" STUB_DIR=$tmp STUB_STATE=${2%/*} STUB_REASON=${2#*/} STUB_PROGRESS=$3 SLURM_JOB_ID=42 SLURM_JOB_NUM_NODES=1 \
        SLURM_SUBMIT_DIR=$tmp DTRAIN=dtrain exec setsid bash "$repo/slurm/$1" >"$tmp/out" 2>&1) &
    local pid=$!
    for _ in $(seq 100); do [ -e "$tmp/started" ] && break; sleep 0.1; done
    # --signal=B:USR1@N: SLURM signals the batch shell alone.
    if [ -n "${PRE_USR1:-}" ]; then kill -USR1 "$pid" && sleep 0.3; fi
    kill -TERM -- "-$pid" 2>/dev/null # the whole group, as SLURM signals the batch step
    wait "$pid"
    rc=$?
}
for t in train-multi-node.sbatch train-single-node.sbatch; do
    # Preemption (or the USR1 lead, or scancel --signal=TERM): the job still RUNNING, a checkpoint
    # newer than the run started from -> requeue.
    run_template "$t" RUNNING/None 1 ckpt-0000000004.dtc
    if [ $rc -eq 75 ] && grep -qx "requeue 42" "$tmp/scontrol.log" 2>/dev/null; then
        ok "$t: SIGTERM to the batch step's group, job RUNNING, new checkpoint -> exit 75 and scontrol requeue 42"
    else
        bad "$t: SIGTERM to the batch step's group -> exit $rc, scontrol: '$(cat "$tmp/scontrol.log" 2>/dev/null)'"
        sed 's/^/    /' "$tmp/out"
    fi
    # `dtrain env` failing (Open MPI's start-up race) does not end the job: it trains and requeues.
    STUB_ENV_RC=1 run_template "$t" RUNNING/None 1
    if [ $rc -eq 75 ] && grep -qx "requeue 42" "$tmp/scontrol.log" 2>/dev/null && grep -q "dtrain env failed (exit 1)" "$tmp/out"; then
        ok "$t: the dtrain env step failing -> says so, trains, exit 75 and requeue"
    else
        bad "$t: the dtrain env step failing -> exit $rc, scontrol: '$(cat "$tmp/scontrol.log" 2>/dev/null)'"
        sed 's/^/    /' "$tmp/out"
    fi
    # --signal=B:USR1@N reaches the batch shell alone: it must not end it (the ranks never hear it);
    # the time limit's SIGTERM then stops them and the job is requeued.
    PRE_USR1=1 run_template "$t" COMPLETING/TimeLimit 1
    if [ $rc -eq 75 ] && grep -qx "requeue 42" "$tmp/scontrol.log" 2>/dev/null; then
        ok "$t: SIGUSR1 to the batch shell alone (B:USR1) -> it lives on; the limit's SIGTERM -> 75 and requeue"
    else
        bad "$t: SIGUSR1 to the batch shell alone -> exit $rc, scontrol: '$(cat "$tmp/scontrol.log" 2>/dev/null)'"
        sed 's/^/    /' "$tmp/out"
    fi
    # A plain `scancel JOB`: SLURM has ended the job (COMPLETING) -> it stays ended, saying how to
    # continue; a requeue would bring a cancelled job back.
    run_template "$t" COMPLETING/None 1
    if [ $rc -eq 75 ] && [ ! -e "$tmp/scontrol.log" ] &&
       grep -q "not requeued: job 42 is COMPLETING .*CKPT_DIR=ckpt-42" "$tmp/out"; then
        ok "$t: scancel (job COMPLETING) -> exit 75, not requeued, says CKPT_DIR=ckpt-42"
    else
        bad "$t: scancel (job COMPLETING) -> exit $rc, scontrol: '$(cat "$tmp/scontrol.log" 2>/dev/null)'"
        sed 's/^/    /' "$tmp/out"
    fi
    # `scontrol requeue JOB` by hand: COMPLETING as after a scancel, but SLURM has counted the
    # restart (Restarts=1, this run's SLURM_RESTART_COUNT unset): the job comes back by itself, so
    # no second requeue and no advice to submit another job on the same CKPT_DIR.
    STUB_RESTARTS=1 run_template "$t" COMPLETING/None 1
    if [ $rc -eq 75 ] && [ ! -e "$tmp/scontrol.log" ] && grep -q "requeued already (Restarts=1" "$tmp/out" &&
       ! grep -q "sbatch" "$tmp/out"; then
        ok "$t: scontrol requeue by hand (COMPLETING, Restarts=1) -> exit 75, says it is requeued already, no resubmit advice"
    else
        bad "$t: scontrol requeue by hand -> exit $rc, scontrol: '$(cat "$tmp/scontrol.log" 2>/dev/null)'"
        sed 's/^/    /' "$tmp/out"
    fi
    # The time limit itself (its SIGTERM, the --signal lead too short): saved, so back in the queue.
    run_template "$t" COMPLETING/TimeLimit 1
    if [ $rc -eq 75 ] && grep -qx "requeue 42" "$tmp/scontrol.log" 2>/dev/null; then
        ok "$t: time limit reached (COMPLETING, Reason=TimeLimit), new checkpoint -> exit 75 and scontrol requeue 42"
    else
        bad "$t: time limit reached -> exit $rc, scontrol: '$(cat "$tmp/scontrol.log" 2>/dev/null)'"
        sed 's/^/    /' "$tmp/out"
    fi
    # A resumed run stopped before its first step (no newer checkpoint): requeuing it would loop.
    run_template "$t" RUNNING/None 0 ckpt-0000000004.dtc
    if [ $rc -eq 75 ] && [ ! -e "$tmp/scontrol.log" ] && grep -q "not requeued: no step trained since" "$tmp/out"; then
        ok "$t: stopped before its first step (no new checkpoint) -> exit 75, not requeued"
    else
        bad "$t: stopped before its first step -> exit $rc, scontrol: '$(cat "$tmp/scontrol.log" 2>/dev/null)'"
        sed 's/^/    /' "$tmp/out"
    fi
done

# TRAIN_ARGS with a quoted path that holds spaces reaches dtrain as one word (a dataset in
# "/data/my set"); an unmatched quote is refused, exit 2, rather than training on half the flags.
for t in train-multi-node.sbatch train-single-node.sbatch; do
    TRAIN_ARGS="--steps 5 --data '/data/my set' --lr 0.1" run_template "$t" RUNNING/None 1
    if grep -qx "/data/my set" "$tmp/args" 2>/dev/null && grep -qx -- "--lr" "$tmp/args"; then
        ok "$t: TRAIN_ARGS=\"--data '/data/my set'\" -> dtrain gets '/data/my set' as one argument"
    else
        bad "$t: TRAIN_ARGS with a quoted path -> dtrain's arguments: $(tr '\n' '|' <"$tmp/args" 2>/dev/null)"
    fi
    (cd "$tmp" && PATH="$tmp/bin:$PATH" TRAIN_ARGS="--data '/data/my set" SLURM_JOB_ID=42 SLURM_JOB_NUM_NODES=1 \
        SLURM_SUBMIT_DIR=$tmp DTRAIN=dtrain STUB_DIR=$tmp timeout 20 bash "$repo/slurm/$t" >"$tmp/out" 2>&1)
    rc=$?
    if [ $rc -eq 2 ] && grep -q "TRAIN_ARGS has an unmatched quote" "$tmp/out"; then
        ok "$t: TRAIN_ARGS with an unmatched quote -> exit 2, saying so"
    else
        bad "$t: TRAIN_ARGS with an unmatched quote -> exit $rc"; sed 's/^/    /' "$tmp/out"
    fi
done

# Every template that trains with checkpoints also saves periodically: a node that dies without
# warning (SLURM requeues the job by itself) must not send it back to step 0.
for t in "$repo"/slurm/*.sbatch; do
    line=$(sed -e :a -e '/\\$/N; s/\\\n//; ta' "$t" | grep -E '^(srun|mpirun) .* train .*--checkpoint-dir')
    [ -n "$line" ] || continue
    case $line in
    *--checkpoint-every*) ok "$(basename "$t"): trains with --checkpoint-dir and --checkpoint-every" ;;
    *) bad "$(basename "$t"): trains with --checkpoint-dir but without --checkpoint-every: a node failure restarts it from step 0" ;;
    esac
done

# mpirun binds each rank to --cpus-per-task cores (PE=), so BLAS gets them all.
t="$repo/slurm/mpirun-in-allocation.sbatch"
if grep -E "^mpirun " "$t" | grep -v -q 'PE="${SLURM_CPUS_PER_TASK:-1}"'; then
    bad "mpirun-in-allocation.sbatch: an mpirun line without --map-by ppr:N:node:PE=\"\${SLURM_CPUS_PER_TASK:-1}\""
else
    ok "mpirun-in-allocation.sbatch: every mpirun maps PE=\$SLURM_CPUS_PER_TASK cores per rank"
fi
finish
