#!/usr/bin/env bash
# dtrain under a real SLURM: a local cluster of two nodes (network namespaces) brought up for
# this test and torn down after it. srun -N 2 -n 4 places ranks on two nodes; srun without PMI is
# refused with the fix (one task or two); fake GPUs reach each rank; every slurm/*.sbatch template,
# submitted the README's way, completes, and a scancelled training template saves and stays
# cancelled; one with dtrain missing on a node fails at once, naming it; mpirun inside an allocation is recognized as openmpi despite stale SLURM_PROCID; dtrain doctor reports the whole job (and srun without PMI as a
# launch.pmix FAIL); a requeued job resumes bit for bit; down.sh leaves nothing of the
# cluster and nothing else touched. Exit 77 (SKIP) where the cluster cannot start here (not root,
# no slurmctld installed), saying why.
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
# The cluster's daemons, from its own pid files (down.sh removes them).
cl_pids=" $(cat "$cluster"/run/*.pid 2>/dev/null | tr '\n' ' ') "
t1=$(date +%s.%N)
ok "cluster of 2 nodes up in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s"

# --- srun -N 2 -n 4: ranks 0-3, local ranks 0-1 per node, nodes 0 and 1, two hostnames.
if once_more "$tmp/env" "$tmp/env" timeout 120 srun -N 2 -n 4 --mpi=pmix "$DTRAIN" env; then
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

# --- dtrain doctor over the whole cluster: one report for 4 ranks on 2 nodes, every rank's
# launcher resolved as slurm with PMIx, the two nodes timed against each other; without PMI the
# same srun is a launch.pmix FAIL (exit 1) naming the fix instead of an abort inside MPI_Init.
if once_more "$tmp/doc.json" "$tmp/doc.err" timeout 120 srun -N 2 -n 4 --mpi=pmix "$DTRAIN" doctor --json; then
    doc_rc=0
else
    doc_rc=$?
fi
if python3 - "$tmp/doc.json" <<'PY'; then
import json, sys
d = json.load(open(sys.argv[1]))
rows = {}
for c in d["checks"]:
    rows.setdefault(c["name"], []).append(c)
def ranks_of(name, status):
    out = set()
    for c in rows.get(name, []):
        if c["status"] == status:
            out |= set(range(d["world"])) if c["ranks"] == "job" else set(c["ranks"])
    return out
assert d["world"] == 4 and d["nodes"] == 2, (d["world"], d["nodes"])
assert ranks_of("launch.launcher", "pass") == {0, 1, 2, 3}, rows.get("launch.launcher")
assert all("slurm" in c["seen"] for c in rows["launch.launcher"]), rows["launch.launcher"]
assert ranks_of("launch.pmix", "pass") == {0, 1, 2, 3}, rows.get("launch.pmix")
assert "comm.nodes" in rows and "comm.allreduce_1m" in rows, sorted(rows)
# A loaded 2-core machine may make the timed rows warn; nothing may fail.
fails = [c["name"] for c in d["checks"] if c["status"] == "fail"]
assert not fails, fails
PY
    [ "$doc_rc" -eq 0 ] && ok "srun -N 2 -n 4 doctor --json: 4 ranks on 2 nodes, slurm + PMIx on every rank, exit 0" ||
        bad "srun doctor exited $doc_rc: $(cat "$tmp/doc.err")"
else
    bad "srun -N 2 -n 4 doctor --json (rc $doc_rc)"; cat "$tmp/doc.json" "$tmp/doc.err"
fi
expect 1 "srun --mpi=pmix" timeout 60 srun -N 2 -n 2 --mpi=none "$DTRAIN" doctor --no-comm
grep -q "launch.pmix *FAIL" "$tmp/out" && ok "srun --mpi=none doctor: launch.pmix FAIL" ||
    { bad "srun --mpi=none doctor: no launch.pmix FAIL row"; cat "$tmp/out"; }

# --- Fake GPUs: `dtrain env` shows the GPU each rank would take, never two ranks of a node on one.
gpu_check() { # name, srun args...
    local name=$1; shift
    if once_more "$tmp/genv" "$tmp/genv" timeout 60 srun --mpi=pmix "$@" "$DTRAIN" env; then
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

# --- Every template in slurm/, submitted as the README shows it: `sbatch slurm/NAME.sbatch` from a
# directory that holds build/dtrain, DTRAIN unset (the templates find the binary themselves), only
# made to fit this cluster (2 ranks per node: 2 cores each) and small (TRAIN_ARGS). Each asks for
# GPUs and gets the cluster's fake ones, so each must end as the templates say a node without a
# driver does: COMPLETED with exit 0:0, every rank on the CPU, the GPU column showing the GPU each
# rank would take and the note saying so. A new template without a check here fails the test.
wait_job() { # jobid -> sets state
    for _ in $(seq 240); do
        state=$(scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
        case $state in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) return ;; esac
        sleep 0.5
    done
}
sub="$tmp/submit"
mkdir -p "$sub/build" && ln -s "$DTRAIN" "$sub/build/dtrain" && ln -s "$repo/slurm" "$sub/slurm"
small="--model fc:64,relu,fc:10 --input 784 --batch 16 --steps 20 --lr 0.1 --log-every 5 --blas-threads 1"
fits="--ntasks-per-node=2 --cpus-per-task=1"
declare -A tjob
submit_template() { (cd "$sub" && env -u DTRAIN TRAIN_ARGS="$small" sbatch --parsable $fits "slurm/$1" 2>&1); } # -> job id
for t in "$repo"/slurm/*.sbatch; do
    name=$(basename "$t")
    # All are submitted at once: SLURM runs them one after the other (each takes both nodes).
    tjob[$name]=$(submit_template "$name")
done
# Rows with DEVICE cpu and a GPU index, and the note of a node without a driver.
no_driver_ok() { # out-file ranks
    [ "$(env_rows "$1" | wc -l)" -eq "$2" ] &&
    [ "$(env_rows "$1" | awk '$6 == "cpu" && $7 ~ /^[0-9]+$/' | wc -l)" -eq "$2" ] &&
    grep -q "GPUs are assigned but none is usable here (no driver or device)" "$1"
}
template_out() { case $1 in env.sbatch) echo "$sub/dtrain-env-$2.out" ;; *) echo "$sub/dtrain-$2.out" ;; esac; }
for t in "$repo"/slurm/*.sbatch; do   # in the order they were submitted, so they run in it
    name=$(basename "$t"); jid=${tjob[$name]}
    wait_job "$jid"
    out=$(template_out "$name" "$jid")
    # Open MPI's crash inside MPI_Init (ompi_init_crash, tests/mpi/lib.sh): submitted once more.
    if [ "$state" != COMPLETED ] && ompi_init_crash "$out"; then
        echo "    sbatch slurm/$name (job $jid): Open MPI's TCP BTL crashed inside MPI_Init (third-party: docs/testing.md): submitted again"
        jid=$(submit_template "$name")
        wait_job "$jid"
        out=$(template_out "$name" "$jid")
    fi
    code=$(scontrol show job "$jid" 2>/dev/null | sed -n 's/.* ExitCode=\([0-9]*:[0-9]*\).*/\1/p')
    what=""; good=1
    [ "$state" = COMPLETED ] && [ "$code" = "0:0" ] || good=0
    case $name in
    env.sbatch)
        no_driver_ok "$out" 4 || good=0
        [ "$(env_rows "$out" | awk '{print $5}' | sort -u)" = slurm ] || good=0
        what="4 ranks on 2 nodes, launcher slurm" ;;
    train-multi-node.sbatch|train-single-node.sbatch)
        [ "$name" = train-multi-node.sbatch ] && n=4 || n=2
        first=$(grep -m1 '^step' "$out" 2>/dev/null | sed 's/.*loss \([0-9.]*\).*/\1/')
        last=$(grep '^step' "$out" 2>/dev/null | tail -1 | sed 's/.*loss \([0-9.]*\).*/\1/')
        no_driver_ok "$out" $n || good=0
        grep -q "^done: 20 steps .* parameters identical on all $n ranks" "$out" || good=0
        awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' || good=0
        # The final checkpoint where the template puts it (and the metrics of the multi-node one).
        ck=$(cd "$sub/ckpt-$jid" 2>/dev/null && ls ckpt-*20.dtc 2>/dev/null | tail -1)
        [ -n "$ck" ] || good=0
        [ "$name" = train-single-node.sbatch ] || [ -s "$sub/metrics-$jid.jsonl" ] || good=0
        what="$n ranks, loss $first -> $last, final checkpoint ckpt-$jid/${ck:-(none)}" ;;
    mpirun-in-allocation.sbatch)
        no_driver_ok "$out" 4 || good=0
        [ "$(env_rows "$out" | awk '{print $5}' | sort -u)" = openmpi ] || good=0
        grep -q '^done: 20 steps .* parameters identical on all 4 ranks' "$out" || good=0
        what="4 ranks launched by openmpi on 2 nodes, trained" ;;
    *)
        good=0; what="no check for this template in tests/slurm/test_slurm.sh: add one" ;;
    esac
    if [ $good -eq 1 ]; then
        ok "sbatch slurm/$name (job $jid): COMPLETED, exit 0:0, CPU with the GPUs named, $what"
    else
        bad "sbatch slurm/$name (job $jid): state '$state', exit '$code'; $what"; cat "$out" 2>/dev/null
        explain_failure "$out"
    fi
done

# --- A plain scancel of a training template: the ranks save and exit 75, and the job stays
# cancelled (CANCELLED, no restart) with the template's "not requeued" line and its checkpoint,
# rather than coming back after SLURM's hold: the state SLURM shows the batch shell then
# (COMPLETING) is what the template goes by (tests/slurm/test_templates.sh fakes it).
jid=$(cd "$sub" && env -u DTRAIN TRAIN_ARGS="${small/--steps 20/--steps 1000000} --log-every 100" \
    sbatch --parsable $fits --nodes=1 slurm/train-single-node.sbatch 2>&1)
out=$(template_out train-single-node.sbatch "$jid")
for _ in $(seq 300); do grep -q '^step' "$out" 2>/dev/null && break; sleep 0.2; done
scancel "$jid"
wait_job "$jid"
restarts=$(scontrol show job "$jid" 2>/dev/null | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p')
if [ "$state" = CANCELLED ] && [ "${restarts:-0}" -eq 0 ] && grep -q "^not requeued: job $jid is COMPLETING" "$out" &&
   ls "$sub/ckpt-$jid"/ckpt-*.dtc >/dev/null 2>&1; then
    ok "scancel of sbatch slurm/train-single-node.sbatch (job $jid): saved, CANCELLED, not requeued"
else
    bad "scancel of a template job $jid: state '$state', restarts '$restarts'"; cat "$out" 2>/dev/null
fi
scancel "$jid" 2>/dev/null # were it requeued after all

# --- dtrain missing on one node (DTRAIN under the per-node DIR/nodetmp, there on node1 only): the
# training template ends FAILED at once, naming node2, rather than leaving node1's ranks waiting
# in MPI's start-up for tasks that never ran until the time limit (seen: still there after 10 min);
# and the placement check users run first (env.sbatch) alike, rather than waiting out its 5 minutes.
cp "$DTRAIN" "$cluster/tmp/node1/dtrain"
for name in train-multi-node.sbatch env.sbatch; do
    jid=$(cd "$sub" && DTRAIN="$cluster/nodetmp/dtrain" TRAIN_ARGS="$small" sbatch --parsable $fits "slurm/$name" 2>&1)
    out=$(template_out "$name" "$jid")
    for _ in $(seq 60); do
        state=$(scontrol show job "$jid" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
        case $state in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL) break ;; esac
        sleep 0.5
    done
    if [ "$state" = FAILED ] && grep -q "node2: .*No such file" "$out" && grep -q "does not start on every node of job $jid" "$out"; then
        ok "sbatch slurm/$name with dtrain missing on node2 (job $jid): FAILED within 30 s, naming node2"
    else
        bad "slurm/$name with dtrain missing on node2 (job $jid): state '$state' after 30 s"; cat "$out" 2>/dev/null
    fi
    scancel "$jid" 2>/dev/null && wait_job "$jid" # a hung one must not hold the nodes for what follows
done
rm -f "$cluster/tmp/node1/dtrain"

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
once_more "$tmp/ref.log" "$tmp/ref.log" timeout 300 srun -N 2 -n 2 --mpi=pmix "$DTRAIN" train $tr_common --dump-params "$tmp/ref" ||
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
# run_requeue_job: submits req.sbatch, signals it at step 20 and follows it to its end; sets jid,
# state and restarts.
run_requeue_job() {
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
}
run_requeue_job
# Open MPI's crash inside MPI_Init before the first step (ompi_init_crash): submitted once more.
if [ "$state" != COMPLETED ] && ompi_init_crash "$tmp/req.out"; then
    echo "    requeue job $jid: Open MPI's TCP BTL crashed inside MPI_Init (third-party: docs/testing.md): submitted again"
    mv "$tmp/req.out" "$tmp/req.out.crash"
    rm -rf "$tmp/req-ck"
    run_requeue_job
fi
# slurmd's own race: the requeued batch job, started at once (StartTime=now above), reached a
# slurmd still ending its previous run, which refused it ("Job N already killed, do not launch
# batch job") and SLURM marked the job FAILED with dtrain's run never started again (seen once in
# a full suite beside other work). Not dtrain's: submitted once more, saying so.
if [ "$state" = FAILED ] && grep -q "Job $jid already killed, do not launch batch job" "$cluster"/log/slurmd.node*.log; then
    echo "    requeue job $jid: slurmd refused the requeued start of a job it was still ending (SLURM's race): submitted again"
    mv "$tmp/req.out" "$tmp/req.out.race"
    rm -rf "$tmp/req-ck"
    run_requeue_job
fi
stopped=$(sed -n 's/^stopping after step \([0-9]*\) on a signal.*/\1/p' "$tmp/req.out" | head -1)
if [ "$state" = COMPLETED ] && [ "${restarts:-0}" -ge 1 ] && [ -n "$stopped" ] &&
   grep -q "resumed from .* at step $stopped" "$tmp/req.out"; then
    ok "sbatch --requeue job $jid: SIGUSR1 mid-run, stopped after step $stopped, requeued ($restarts restart), resumed there, COMPLETED"
else
    bad "requeue job $jid: state '$state', restarts '$restarts', stopped at '$stopped'"; cat "$tmp/req.out" 2>/dev/null; explain_failure "$tmp/req.out"
fi
if cmp -s "$tmp/req.params" "$tmp/ref"; then ok "requeued and resumed == uninterrupted, bit for bit"; else bad "requeued run's parameters differ from the uninterrupted run's"; fi

# --- Down: nothing of the cluster is left, and nothing else is touched. A munged of its own
# (socket, pid and key outside the cluster's directory) stands in for a machine's system munged:
# down.sh must leave it running, and the count below must not take it for the cluster's.
# alive = exists and is not a zombie (dead, waiting for PID 1 to reap it; kill -0 succeeds on those)
alive() { local st; { read -r st <"/proc/$1/stat"; } 2>/dev/null || return 1; st=${st##*) }; [ "${st%% *}" != Z ]; }
cluster_procs() { # the cluster's processes still alive, one "pid comm" a line
    local p v c hit
    for p in /proc/[0-9]*; do
        p=${p#/proc/}
        [ "$p" = $$ ] || [ "$p" = "$BASHPID" ] && continue
        alive "$p" || continue
        hit=0
        # Its daemons (pid files), whatever names the cluster's directory on its command line
        # (munged), or runs with its SLURM_CONF (slurmscriptd, slurmstepd, sruns, job tasks).
        case "$cl_pids" in *" $p "*) hit=1 ;; esac
        if [ $hit = 0 ]; then
            while IFS= read -r -d '' v; do case $v in *"$cluster/"*) hit=1; break ;; esac; done 2>/dev/null <"/proc/$p/cmdline"
        fi
        if [ $hit = 0 ]; then
            while IFS= read -r -d '' v; do [ "$v" = "SLURM_CONF=$SLURM_CONF" ] && { hit=1; break; }; done 2>/dev/null <"/proc/$p/environ"
        fi
        [ $hit = 1 ] && { read -r c 2>/dev/null <"/proc/$p/comm"; echo "$p ${c:-?}"; }
    done
    return 0
}
decoy=""
mkdir -p "$tmp/decoy"
if [ -r /etc/munge/munge.key ]; then install -m 0400 /etc/munge/munge.key "$tmp/decoy/key"
else dd if=/dev/urandom of="$tmp/decoy/key" bs=1024 count=1 status=none; chmod 0400 "$tmp/decoy/key"; fi
# Started without this test's SLURM_CONF, as the system's would be (down.sh takes any munged that
# runs with the cluster's SLURM_CONF for the cluster's).
if env -u SLURM_CONF munged --force --socket="$tmp/decoy/sock" --pid-file="$tmp/decoy/pid" --key-file="$tmp/decoy/key" \
          --log-file="$tmp/decoy/log" --seed-file="$tmp/decoy/seed" >/dev/null 2>&1; then
    for _ in $(seq 50); do [ -s "$tmp/decoy/pid" ] && break; sleep 0.1; done
    decoy=$(cat "$tmp/decoy/pid" 2>/dev/null)
fi
[ -n "$decoy" ] || bad "a second munged (standing in for the system's) did not start"
trap 'bash "$repo/slurm/cluster/down.sh" "$cluster" >/dev/null 2>&1; [ -n "$decoy" ] && kill "$decoy" 2>/dev/null; rm -rf "$tmp"' EXIT
t2=$(date +%s.%N)
bash "$repo/slurm/cluster/down.sh" "$cluster" >"$tmp/down.log" 2>&1 || { cat "$tmp/down.log"; bad "down.sh failed"; }
t3=$(date +%s.%N)
left=$(cluster_procs)
[ -z "$left" ] && ok "cluster down in $(awk -v a="$t2" -v b="$t3" 'BEGIN { printf "%.1f", b - a }') s, none of its processes left" ||
    bad "processes of the cluster left after down.sh: $(tr '\n' ' ' <<<"$left")"
if [ -n "$decoy" ]; then
    alive "$decoy" && ok "a munged that is not the cluster's (pid $decoy) is still running" ||
        bad "down.sh killed a munged that was not the cluster's (pid $decoy)"
    kill "$decoy" 2>/dev/null
fi
trap 'rm -rf "$tmp"' EXIT
finish
