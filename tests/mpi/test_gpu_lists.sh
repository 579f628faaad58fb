#!/usr/bin/env bash
# GPU placement without a GPU, under mpirun with per-rank variables: per-task GPU lists (srun
# --gpus-per-task=2) planned by each rank's place among the ranks that share its list; the warning
# when GPUs are assigned but --device auto falls back to the CPU; and a rank refused before MPI_Init
# under a simulated `srun --mpi=pmix` (no OMPI_* variables) stopping every rank, each naming it.
here=$(dirname "$0"); source "$here/lib.sh"
DTRAIN=$1 MPIRUN=$2
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    echo "GPU present: these runs would use it; the no-GPU plans are not tested here"
    exit 77
fi
# per_rank 'VAR' 'v0' 'v1' ...: a bash line that sets VAR to the rank's value under mpirun.
per_rank() { local var=$1; shift; local i=0 line="case \$OMPI_COMM_WORLD_RANK in"
    for v in "$@"; do line+=" $i) export $var='$v';;"; i=$((i + 1)); done; echo "$line esac"; }

# --- srun --gpus-per-task=2 with 3 tasks: each task sees its own two GPUs and takes its first.
"$MPIRUN" -np 3 bash -c "$(per_rank CUDA_VISIBLE_DEVICES 0,1 2,3 4,5); exec $DTRAIN env --device auto" >"$tmp/own" 2>&1
rc=$?
gpus=$(env_rows "$tmp/own" | sort | awk '{print $7}' | tr '\n' ' ')
[ $rc -eq 0 ] && [ "$gpus" = "0 2 4 " ] && ok "3 tasks x 2 GPUs of their own: GPUs $gpus" ||
    { bad "per-task lists: rc $rc, GPUs '$gpus'"; cat "$tmp/own"; }
# Two ranks share 0,1 and one has 4,5: the sharing pair splits its list.
"$MPIRUN" -np 3 bash -c "$(per_rank CUDA_VISIBLE_DEVICES 0,1 4,5 0,1); exec $DTRAIN env --device auto" >"$tmp/mix" 2>&1
gpus=$(env_rows "$tmp/mix" | sort | awk '{print $7}' | tr '\n' ' ')
[ "$gpus" = "0 4 1 " ] && ok "two ranks on 0,1 and one on 4,5: GPUs $gpus" || { bad "mixed lists: GPUs '$gpus'"; cat "$tmp/mix"; }
# One list for all, fewer GPUs than ranks: still refused in the plan.
"$MPIRUN" -np 3 bash -c "export CUDA_VISIBLE_DEVICES=0,1; exec $DTRAIN env --device auto" >"$tmp/few" 2>&1
grep -q -- "-_(3_ranks,_2_GPUs)" "$tmp/few" && ok "3 ranks on one list of 2: planned as too few" ||
    { bad "3 ranks on 0,1 not marked"; cat "$tmp/few"; }

# --- GPUs assigned, none usable: one warning per node with the reason; --device cpu silences it.
"$MPIRUN" -np 2 bash -c "export CUDA_VISIBLE_DEVICES=0,1; exec $DTRAIN env --device auto" >"$tmp/warn" 2>&1
n=$(grep -c "GPUs are assigned to this node's ranks (CUDA_VISIBLE_DEVICES=0,1) but no GPU is usable" "$tmp/warn")
[ "$n" -eq 1 ] && grep -q -- "--device cuda makes this an error; --device cpu silences it" "$tmp/warn" &&
    ok "assigned GPUs unused: warned once, with the fix" || { bad "assigned-GPU warning ($n lines)"; cat "$tmp/warn"; }
"$MPIRUN" -np 2 bash -c "export CUDA_VISIBLE_DEVICES=0,1; exec $DTRAIN env --device cpu" >"$tmp/quiet" 2>&1
grep -q "GPUs are assigned to this node" "$tmp/quiet" && bad "--device cpu still warned" || ok "--device cpu: no warning"
"$MPIRUN" -np 2 bash -c "export CUDA_VISIBLE_DEVICES=; exec $DTRAIN env --device auto" >"$tmp/hidden" 2>&1
grep -q "GPUs are assigned to this node" "$tmp/hidden" && bad "an empty CUDA_VISIBLE_DEVICES warned as assigned" ||
    ok "CUDA_VISIBLE_DEVICES='': no assigned-GPU warning"
grep -q "CUDA_VISIBLE_DEVICES is empty (no GPU visible)" "$tmp/hidden" && ok "CUDA_VISIBLE_DEVICES='' named as empty" ||
    { bad "empty CUDA_VISIBLE_DEVICES message"; cat "$tmp/hidden"; }
# The env table's own note on those runs: why no GPU is used (no driver, or --device cpu), and none
# for ranks planned no GPU at all ("-": more ranks than GPUs on one list).
grep -q "note: GPUs are assigned but none is usable here (no driver or device)" "$tmp/warn" &&
    grep -q "note: GPUs are assigned but none is usable here (--device cpu)" "$tmp/quiet" &&
    ! grep -q "note: GPUs are assigned" "$tmp/few" && ok "env's GPU note: its reason, and none for '-' rows" ||
    { bad "env's GPU note"; cat "$tmp/warn" "$tmp/quiet" "$tmp/few"; }

# --- A simulated `srun --mpi=pmix` step (PMIx live, OMPI_* unset): task 1's SLURM_LOCALID is
# malformed. Both tasks end at once, and task 0 names task 1 and its reason (before, it waited in
# MPI_Init until PMIx gave up). srun lets task 0 run on after task 1's exit, and so does mpirun
# here (orte_abort_on_non_zero_status 0): by default it would kill task 0 as soon as task 1 exits,
# on a loaded machine before task 0 has said anything.
srun_env="r=\$OMPI_COMM_WORLD_RANK; unset \${!OMPI_COMM_WORLD_*}; export SLURM_STEP_ID=0 SLURM_JOB_ID=7 SLURM_NTASKS=2 SLURM_NNODES=1 \
SLURM_NODEID=0 SLURM_STEP_NODELIST=$(hostname) SLURM_NODELIST=$(hostname) SLURM_STEP_TASKS_PER_NODE=2 \
SLURM_MPI_TYPE=pmix SLURM_PROCID=\$r SLURM_LOCALID=\$r"
start=$(date +%s)
timeout 120 "$MPIRUN" --mca orte_abort_on_non_zero_status 0 -np 2 bash -o pipefail -c "$srun_env; [ \$r = 1 ] && export SLURM_LOCALID=x; \
$DTRAIN env 2>&1 | sed \"s/^/task \$r: /\"; echo \"task \$r exited \$?\"" >"$tmp/held" 2>&1
rc=$? took=$(($(date +%s) - start))
if [ $rc -ne 124 ] && [ $took -lt 60 ] && grep -q "^task 0 exited [1-9]" "$tmp/held" && grep -q "^task 1 exited [1-9]" "$tmp/held" &&
    grep -q "^task 0: .*dt_init failed on rank 1 (bad environment variable) before MPI_Init, so no rank goes on; rank 1 says: SLURM_LOCALID='x'" "$tmp/held" &&
    grep -q "^task 1: .*SLURM_LOCALID='x' is not a whole number" "$tmp/held"; then
    ok "task 1 refused before MPI_Init: both tasks stop in ${took} s, task 0 naming task 1's SLURM_LOCALID='x'"
else
    bad "held refusal: mpirun's rc $rc after ${took} s"; cat "$tmp/held"
fi
# The same step, well formed, still starts (the verdict costs no failure).
timeout 120 "$MPIRUN" -np 2 bash -c "$srun_env; exec $DTRAIN env" >"$tmp/clean" 2>&1 && [ "$(env_rows "$tmp/clean" | awk '{print $5}' | sort -u)" = slurm ] &&
    ok "a clean simulated srun step runs (launcher slurm)" || { bad "clean simulated srun step"; cat "$tmp/clean"; }
finish
