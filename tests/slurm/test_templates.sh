#!/usr/bin/env bash
# The sbatch templates' own logic, without SLURM: on preemption or scancel SLURM sends SIGTERM to
# the whole batch step's process group, the batch shell included. The shell must outlive it, take
# srun's exit code (75: stopped with a checkpoint) and run `scontrol requeue`. Stand-ins for srun
# (traps TERM, exits 75 as dtrain does) and scontrol (records its arguments) run in their place.
# Also: mpirun-in-allocation.sbatch gives each rank its --cpus-per-task cores, not one.
here=$(dirname "$0"); source "$here/../mpi/lib.sh"
repo=$(cd "$here/../.." && pwd)

mkdir -p "$tmp/bin"
cat >"$tmp/bin/srun" <<'STUB'
#!/bin/bash
case " $* " in *" train "*) ;; *) exit 0 ;; esac # `dtrain env` steps: nothing to do
trap 'exit 75' TERM
: >"$STUB_DIR/started"
while :; do sleep 0.1; done
STUB
cat >"$tmp/bin/scontrol" <<'STUB'
#!/bin/bash
echo "$*" >>"$STUB_DIR/scontrol.log"
STUB
chmod +x "$tmp/bin/srun" "$tmp/bin/scontrol"

for t in train-multi-node.sbatch train-single-node.sbatch; do
    rm -f "$tmp/started" "$tmp/scontrol.log"
    # Its own process group (setsid), as slurmstepd starts the batch shell.
    PATH="$tmp/bin:$PATH" STUB_DIR=$tmp SLURM_JOB_ID=42 SLURM_SUBMIT_DIR=$tmp DTRAIN=dtrain \
        setsid bash "$repo/slurm/$t" >"$tmp/out" 2>&1 &
    pid=$!
    for _ in $(seq 100); do [ -e "$tmp/started" ] && break; sleep 0.1; done
    kill -TERM -- "-$pid" 2>/dev/null # the whole group, as SLURM signals the batch step
    wait "$pid"
    rc=$?
    if [ $rc -eq 75 ] && grep -qx "requeue 42" "$tmp/scontrol.log" 2>/dev/null; then
        ok "$t: SIGTERM to the batch step's group -> exit 75 and scontrol requeue 42"
    else
        bad "$t: SIGTERM to the batch step's group -> exit $rc, scontrol: '$(cat "$tmp/scontrol.log" 2>/dev/null)'"
        sed 's/^/    /' "$tmp/out"
    fi
done

# mpirun binds each rank to --cpus-per-task cores (PE=), so BLAS gets them all.
t="$repo/slurm/mpirun-in-allocation.sbatch"
if grep -E "^mpirun " "$t" | grep -v -q 'PE="${SLURM_CPUS_PER_TASK:-1}"'; then
    bad "mpirun-in-allocation.sbatch: an mpirun line without --map-by ppr:N:node:PE=\"\${SLURM_CPUS_PER_TASK:-1}\""
else
    ok "mpirun-in-allocation.sbatch: every mpirun maps PE=\$SLURM_CPUS_PER_TASK cores per rank"
fi
finish
