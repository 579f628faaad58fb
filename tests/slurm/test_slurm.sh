#!/usr/bin/env bash
# dtrain under a real SLURM: a local cluster of two nodes (network namespaces) brought up for
# this test and torn down after it. srun -N 2 -n 4 places ranks on two nodes; srun without PMI is
# refused with the fix; fake GPUs reach each rank; an sbatch job trains; mpirun inside an
# allocation is recognized as openmpi despite stale SLURM_PROCID. Exit 77 (SKIP) where the
# cluster cannot start here (not root, no slurmctld installed), saying why.
here=$(dirname "$0"); source "$here/../mpi/lib.sh"
DTRAIN=$1
repo=$(cd "$here/../.." && pwd)
cluster="$tmp/cluster"

if [ "$(id -u)" -ne 0 ]; then echo "SKIP: the local SLURM cluster needs root (network namespaces)"; exit 77; fi
for b in slurmctld slurmd srun munged ip unshare nsenter; do
    command -v "$b" >/dev/null || { echo "SKIP: $b is not installed (make test installs it: see the Makefile)"; exit 77; }
done

t0=$(date +%s.%N)
if ! bash "$repo/slurm/cluster/up.sh" "$cluster" 2 2 4 >"$tmp/up.log" 2>&1; then
    cat "$tmp/up.log"; bash "$repo/slurm/cluster/down.sh" "$cluster" >/dev/null 2>&1
    bad "the local SLURM cluster did not start"; finish; exit 1
fi
trap 'bash "$repo/slurm/cluster/down.sh" "$cluster" >/dev/null 2>&1; rm -rf "$tmp"' EXIT
source "$repo/slurm/cluster/env.sh" "$cluster"
t1=$(date +%s.%N)
ok "cluster of 2 nodes up in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s"

# --- srun -N 2 -n 4: ranks 0-3, local ranks 0-1 per node, nodes 0 and 1, two hostnames.
if timeout 120 srun -N 2 -n 4 --mpi=pmix "$DTRAIN" env >"$tmp/env" 2>&1; then
    cat "$tmp/env"
    env_rows "$tmp/env" >"$tmp/rows"
    [ "$(awk '{print $1}' "$tmp/rows" | sort | tr '\n' ' ')" = "0/4 1/4 2/4 3/4 " ] && ok "ranks 0-3 of 4" || bad "ranks not 0-3"
    [ "$(awk '{print $2}' "$tmp/rows" | sort | uniq -c | awk '{print $1 "x" $2}' | tr '\n' ' ')" = "2x0/2 2x1/2 " ] &&
        ok "local ranks 0-1 on each node" || bad "local ranks are not 0-1 per node"
    [ "$(awk '{print $3}' "$tmp/rows" | sort -u | tr '\n' ' ')" = "0 1 " ] && ok "node indices 0 and 1" || bad "node indices"
    [ "$(awk '{print $4}' "$tmp/rows" | sort -u | wc -l)" -eq 2 ] && ok "two hostnames" || bad "not two hostnames"
    [ "$(awk '{print $5}' "$tmp/rows" | sort -u)" = "slurm" ] && ok "launcher slurm" || bad "launcher not slurm"
    # The node names dtrain parsed from SLURM's node list are the hosts the ranks ran on.
    names=$(sed -n 's/^node [0-9]*: //p' "$tmp/env" | sort | tr '\n' ' ')
    hosts=$(awk '{print $4}' "$tmp/rows" | sort -u | tr '\n' ' ')
    [ "$names" = "$hosts" ] && ok "parsed node list ($names) = the ranks' hosts" || bad "node list '$names' vs hosts '$hosts'"
else
    cat "$tmp/env"; bad "srun -N 2 -n 4 dtrain env failed"
fi

# --- srun without PMI: refused with what to add, also for one task (where Open MPI would abort
# inside MPI_Init without naming the fix); plain srun under MpiDefault=pmix is not refused.
expect 1 "srun --mpi=pmix" timeout 60 srun -N 1 -n 2 --mpi=none "$DTRAIN" env
expect 1 "srun --mpi=pmix" timeout 60 srun -N 1 -n 1 --mpi=none "$DTRAIN" env
expect 0 "LAUNCHER" timeout 60 srun -N 1 -n 1 "$DTRAIN" env

# --- Fake GPUs: `dtrain env` shows the GPU each rank would take, never two ranks of a node on one.
gpu_check() { # name, srun args...
    local name=$1; shift
    if timeout 60 srun --mpi=pmix "$@" "$DTRAIN" env >"$tmp/genv" 2>&1; then
        env_rows "$tmp/genv" >"$tmp/grows"
        local dups bad_rows
        dups=$(awk '{print $3, $7}' "$tmp/grows" | sort | uniq -d | wc -l)
        bad_rows=$(awk '$7 !~ /^[0-9]+$/' "$tmp/grows" | wc -l)
        if [ "$dups" -eq 0 ] && [ "$bad_rows" -eq 0 ] && grep -q "the GPU column shows the device each rank would take" "$tmp/genv"; then
            ok "$name: GPUs per rank (node gpu): $(awk '{print $3 ":" $7}' "$tmp/grows" | tr '\n' ' ')"
        else
            bad "$name: GPU column wrong"; cat "$tmp/genv"
        fi
    else
        bad "$name: srun failed"; cat "$tmp/genv"
    fi
}
gpu_check "--gres=gpu:2, 2 tasks" -N 1 -n 2 --gres=gpu:2
gpu_check "--gpus-per-task=1, 2 nodes x 2 tasks" -N 2 -n 4 --gpus-per-task=1
gpu_check "--gres=gpu:4, 2 nodes x 2 tasks" -N 2 -n 4 --gres=gpu:4

# --- The variables srun sets for fake GPUs.
timeout 60 srun -N 1 -n 2 --gres=gpu:2 --mpi=pmix bash -c 'echo "rank $SLURM_PROCID sees CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"' >"$tmp/g1" 2>&1
grep -q "rank 0 sees CUDA_VISIBLE_DEVICES=0,1" "$tmp/g1" && ok "--gres=gpu:2: every task sees 0,1 (dtrain maps local rank r to GPU r)" || { bad "--gres=gpu:2"; cat "$tmp/g1"; }
timeout 60 srun -N 1 -n 2 --gpus-per-task=1 --mpi=pmix bash -c 'echo "rank $SLURM_PROCID sees CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"' >"$tmp/g2" 2>&1
[ "$(sed -n 's/.*CUDA_VISIBLE_DEVICES=//p' "$tmp/g2" | sort -u | wc -l)" -eq 2 ] && ok "--gpus-per-task=1: each task sees its own GPU" || { bad "--gpus-per-task=1"; cat "$tmp/g2"; }

# After a failed job: the functions behind a crash report's FILE+0xOFFSET lines (crash.c), and
# the tails of the nodes' slurmd logs.
explain_failure() {
    # crash.c's "= /file+0xOFF" and glibc's "/file(+0xOFF)"
    grep -oE '/[^ ()]+\(?\+0x[0-9a-f]+' "$1" 2>/dev/null | tr -d '(' | sort -u | while read -r at; do
        echo "  $at: $(addr2line -f -e "${at%+*}" "${at##*+}" 2>/dev/null | head -1)"
    done
    for f in "$cluster"/log/slurmd.node*.log; do echo "--- tail of $f"; tail -15 "$f"; done
}

# --- sbatch of the multi-node template, made small (CPU, a few steps): completes, loss falls, exit 0.
wait_job() { # jobid -> sets state
    for _ in $(seq 240); do
        state=$(scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
        case $state in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) return ;; esac
        sleep 0.5
    done
}
jid=$(cd "$tmp" && DTRAIN=$DTRAIN TRAIN_ARGS="--model mlp --batch 16 --steps 60 --lr 0.05 --log-every 20 --blas-threads 1" \
      sbatch --parsable --nodes=2 --ntasks-per-node=2 --cpus-per-task=1 --gres=gpu:2 --time=5 \
      --output="$tmp/job.out" "$repo/slurm/train-multi-node.sbatch" 2>&1)
wait_job "$jid"
code=$(scontrol show job "$jid" 2>/dev/null | sed -n 's/.* ExitCode=\([0-9]*:[0-9]*\).*/\1/p')
first=$(grep -m1 '^step' "$tmp/job.out" 2>/dev/null | sed 's/.*loss \([0-9.]*\).*/\1/')
last=$(grep '^step' "$tmp/job.out" 2>/dev/null | tail -1 | sed 's/.*loss \([0-9.]*\).*/\1/')
if [ "$state" = COMPLETED ] && [ "$code" = "0:0" ] && awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' &&
   [ "$(env_rows "$tmp/job.out" | wc -l)" -eq 4 ]; then
    ok "sbatch slurm/train-multi-node.sbatch (2 nodes x 2, small): COMPLETED, exit 0:0, 4 ranks placed, loss $first -> $last"
else
    bad "template job $jid: state '$state', exit '$code', loss '$first' -> '$last'"; cat "$tmp/job.out" 2>/dev/null
    explain_failure "$tmp/job.out"
fi

# --- The mpirun template inside an allocation.
jid=$(cd "$tmp" && DTRAIN=$DTRAIN TRAIN_ARGS="--model mlp --batch 16 --steps 20 --lr 0.05 --log-every 10 --blas-threads 1" \
      sbatch --parsable --nodes=1 --ntasks-per-node=2 --cpus-per-task=1 --gres=gpu:2 --time=5 \
      --output="$tmp/mt.out" "$repo/slurm/mpirun-in-allocation.sbatch" 2>&1)
wait_job "$jid"
if [ "$state" = COMPLETED ] && [ "$(env_rows "$tmp/mt.out" | awk '{print $5}' | sort -u)" = "openmpi" ] &&
   grep -q '^done: 20 steps' "$tmp/mt.out"; then
    ok "sbatch slurm/mpirun-in-allocation.sbatch: COMPLETED, ranks launched by openmpi, trained"
else
    bad "mpirun template job $jid: state '$state'"; cat "$tmp/mt.out" 2>/dev/null; explain_failure "$tmp/mt.out"
fi

# --- mpirun inside an allocation: openmpi, not the batch step's stale SLURM_PROCID.
cat >"$tmp/mpi.sbatch" <<JOB
#!/bin/bash
#SBATCH --nodes=1
#SBATCH --ntasks=2
#SBATCH --output=$tmp/mpi.out
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
echo "batch step SLURM_PROCID=\$SLURM_PROCID"
mpirun -np 2 $DTRAIN env
JOB
jid=$(sbatch --parsable "$tmp/mpi.sbatch" 2>&1)
for _ in $(seq 120); do
    state=$(scontrol show job "$jid" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
    case $state in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) break ;; esac
    sleep 0.5
done
if [ "$state" = COMPLETED ] && grep -q "batch step SLURM_PROCID=0" "$tmp/mpi.out" &&
   [ "$(env_rows "$tmp/mpi.out" | awk '{print $5}' | sort -u)" = "openmpi" ] &&
   [ "$(env_rows "$tmp/mpi.out" | awk '{print $1}' | sort | tr '\n' ' ')" = "0/2 1/2 " ]; then
    ok "mpirun inside an sbatch allocation: ranks 0/2 and 1/2, launcher openmpi (stale SLURM_PROCID ignored)"
else
    bad "mpirun in allocation: state '$state'"; cat "$tmp/mpi.out" 2>/dev/null; explain_failure "$tmp/mpi.out"
fi

# --- Preemption: an sbatch job with --requeue is signalled mid-run, stops at an agreed step with a
# checkpoint (exit 75), requeues itself, resumes, finishes: its parameters equal an uninterrupted
# run's bit for bit.
tr_common="--model cnn --batch 8 --steps 150 --lr 0.05 --seed 6 --log-every 5 --blas-threads 1"
timeout 300 srun -N 2 -n 2 --mpi=pmix "$DTRAIN" train $tr_common --dump-params "$tmp/ref" >"$tmp/ref.log" 2>&1 ||
    { cat "$tmp/ref.log"; bad "uninterrupted srun training failed"; }
cat >"$tmp/req.sbatch" <<JOB
#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=$tmp/req.out
echo "run \${SLURM_RESTART_COUNT:-0} of job \$SLURM_JOB_ID"
srun --mpi=pmix $DTRAIN train $tr_common --checkpoint-dir $tmp/req-ck --resume auto --dump-params $tmp/req.params
rc=\$?
# 75: stopped on a signal with a checkpoint; put the job back in the queue to resume.
if [ \$rc -eq 75 ]; then scontrol requeue \$SLURM_JOB_ID; fi
exit \$rc
JOB
jid=$(sbatch --parsable "$tmp/req.sbatch" 2>&1)
signalled=0
for _ in $(seq 600); do
    if [ $signalled -eq 0 ] && grep -q '^step     20/' "$tmp/req.out" 2>/dev/null; then
        scancel --signal=USR1 "$jid" && signalled=1
    fi
    state=$(scontrol show job "$jid" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
    restarts=$(scontrol show job "$jid" 2>/dev/null | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p')
    [ "$state" = COMPLETED ] || [ "$state" = FAILED ] || [ "$state" = CANCELLED ] && break
    # SLURM holds a requeued batch job for about two minutes (Reason=BeginTime, measured 121 s);
    # the test lets it start at once, as an admin could.
    if [ "${restarts:-0}" -ge 1 ] && [ "$state" = PENDING ] &&
       scontrol show job "$jid" 2>/dev/null | grep -q 'Reason=BeginTime'; then
        scontrol update JobId="$jid" StartTime=now
    fi
    sleep 0.2
done
stopped=$(sed -n 's/^stopping after step \([0-9]*\) on a signal.*/\1/p' "$tmp/req.out" | head -1)
if [ "$state" = COMPLETED ] && [ "${restarts:-0}" -ge 1 ] && [ -n "$stopped" ] &&
   grep -q "resumed from .* at step $stopped" "$tmp/req.out"; then
    ok "sbatch --requeue job $jid: SIGUSR1 mid-run, stopped after step $stopped, requeued ($restarts restart), resumed there, COMPLETED"
else
    bad "requeue job $jid: state '$state', restarts '$restarts', stopped at '$stopped'"; cat "$tmp/req.out" 2>/dev/null; explain_failure "$tmp/req.out"
fi
if cmp -s "$tmp/req.params" "$tmp/ref"; then ok "requeued and resumed == uninterrupted, bit for bit"; else bad "requeued run's parameters differ from the uninterrupted run's"; fi

t2=$(date +%s.%N)
bash "$repo/slurm/cluster/down.sh" "$cluster" >"$tmp/down.log" 2>&1 || { cat "$tmp/down.log"; bad "down.sh failed"; }
t3=$(date +%s.%N)
# Zombies (already dead, waiting for PID 1 to reap them) do not count.
left=$(ps -eo stat=,comm= | awk '$1 !~ /^Z/ && ($2 == "slurmctld" || $2 == "slurmd" || $2 == "munged")' | wc -l)
[ "$left" -eq 0 ] && ok "cluster down in $(awk -v a="$t2" -v b="$t3" 'BEGIN { printf "%.1f", b - a }') s, no slurm daemon left" || bad "$left slurm daemons left"
trap 'rm -rf "$tmp"' EXIT
finish
