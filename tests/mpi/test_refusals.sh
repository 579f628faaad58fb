#!/usr/bin/env bash
# Refusals with a clear message: the singleton trap, malformed launcher variables, launcher/MPI
# disagreements, a device that is not there; and the warning of a batch script that runs dtrain
# alone. Exit 1 for run-time failures (a launcher's variables
# included: the launch is broken, not the command), 2 for bad usage (flags and DTRAIN_* variables).
here=$(dirname "$0"); source "$here/lib.sh"
DTRAIN=$1 MPIRUN=$2

# srun without PMIx: each process is an MPI singleton while SLURM says 4 tasks.
expect 1 "srun --mpi=pmix" env SLURM_STEP_ID=0 SLURM_PROCID=0 SLURM_NTASKS=4 SLURM_LOCALID=0 "$DTRAIN" env
expect 1 "srun started 4 tasks (SLURM_NTASKS=4) without a PMI plugin" env SLURM_STEP_ID=0 SLURM_PROCID=0 SLURM_NTASKS=4 "$DTRAIN" env
expect 1 "WORLD_SIZE=2 but MPI sees a world of 1" env RANK=0 WORLD_SIZE=2 "$DTRAIN" env
# srun --mpi=pmi2 with an Open MPI built without PMI-2 (Debian's): refused before MPI_Init aborts.
if ompi_info 2>/dev/null | grep -qE "MCA pmix: s[12] "; then
    ok "srun --mpi=pmi2: SKIP: this Open MPI has PMI-2"
else
    expect 1 "was built without PMI-2" env SLURM_STEP_ID=0 SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_LOCALID=0 \
        SLURM_NODELIST=localhost SLURM_MPI_TYPE=pmi2 PMI_FD=9 PMI_RANK=0 PMI_SIZE=1 "$DTRAIN" env
fi
# Malformed values are refused before MPI starts, naming the variable and the value.
expect 1 "SLURM_PROCID='abc'" env SLURM_STEP_ID=0 SLURM_PROCID=abc SLURM_NTASKS=4 "$DTRAIN" env
expect 1 "SLURM_PROCID='-1'" env SLURM_STEP_ID=0 SLURM_PROCID=-1 SLURM_NTASKS=4 "$DTRAIN" env
expect 1 "99999999999999999999" env SLURM_STEP_ID=0 SLURM_PROCID=99999999999999999999 SLURM_NTASKS=4 "$DTRAIN" env
expect 1 "SLURM_PROCID=4 is not below SLURM_NTASKS=4" env SLURM_STEP_ID=0 SLURM_PROCID=4 SLURM_NTASKS=4 "$DTRAIN" env
expect 1 "node[01-04" env SLURM_STEP_ID=0 SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_NODEID=0 "SLURM_STEP_NODELIST=node[01-04" "$DTRAIN" env
expect 2 "DTRAIN_DEVICE='gpu'" env DTRAIN_DEVICE=gpu "$DTRAIN" env
expect 2 "DTRAIN_TIMEOUT" env DTRAIN_TIMEOUT=soon "$DTRAIN" env
expect 2 "DTRAIN_LOG='verbose' is not a log level" env DTRAIN_LOG=verbose "$DTRAIN" env
expect 2 "DTRAIN_TIMEOUT='1e-45' is out of range (expected 0 (never) or a number from 1 to 10000000)" \
    env DTRAIN_TIMEOUT=1e-45 "$DTRAIN" env
# A well-formed world of 1 passes.
expect 0 "0/1" env SLURM_STEP_ID=0 SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_LOCALID=0 SLURM_NODEID=0 SLURM_NNODES=1 "SLURM_STEP_NODELIST=$(hostname)" SLURM_TASKS_PER_NODE=1 "$DTRAIN" env
expect 0 "0/1" "$DTRAIN" env
# A batch script or salloc shell of a job with several tasks (SLURM_JOB_ID, no SLURM_STEP_ID) that
# runs dtrain without srun: it runs alone, which is no refusal, but it warns once.
batch="SLURM_JOB_ID=7 SLURM_NTASKS=4 SLURM_PROCID=0 SLURM_LOCALID=0 SLURM_NODEID=0 SLURM_JOB_NUM_NODES=2"
alone="this job has 4 tasks (SLURM_NTASKS=4) but dtrain runs alone"
# shellcheck disable=SC2086
for cmd in "env" "train --steps 1 --batch 4 --model fc:8,relu,fc:10 --input 8" \
    "bench gemm --n 64 --iters 1 --warmup 0 --max-seconds 0.1"; do
    expect 0 "$alone" env $batch "$DTRAIN" $cmd
    [ "$(grep -c "runs alone" "$tmp/out")" -eq 1 ] && grep -q "Fix: start it with \`srun --mpi=pmix" "$tmp/out" &&
        ok "${cmd%% *}: one warning with the fix" || bad "${cmd%% *}: not one warning with the fix"
done
expect 0 "this job has 2 nodes (SLURM_JOB_NUM_NODES=2)" env SLURM_JOB_ID=7 SLURM_JOB_NUM_NODES=2 "$DTRAIN" env
# Running alone is right: a job of one task, commands that are not a job's (version, help, data),
# and mpirun in the batch script.
# shellcheck disable=SC2086
for run in "env SLURM_JOB_ID=7 SLURM_NTASKS=1 $DTRAIN env" "env $batch $DTRAIN version" "env $batch $DTRAIN help" \
    "env $batch $DTRAIN data info --help" "env $batch $MPIRUN -np 2 -x SLURM_JOB_ID -x SLURM_NTASKS $DTRAIN env"; do
    $run >"$tmp/out" 2>&1
    ! grep -q "runs alone" "$tmp/out" && ok "no warning: ${run#env }" || bad "a warning where running alone is right: $run"
done
# Under mpirun, a variable that disagrees with MPI stops the job (every rank, no hang).
expect 1 "OMPI_COMM_WORLD_RANK=0 but MPI says this is rank 1" "$MPIRUN" -np 2 bash -c "OMPI_COMM_WORLD_RANK=0 exec $DTRAIN env"
expect 1 "OMPI_COMM_WORLD_LOCAL_SIZE=3 is larger than OMPI_COMM_WORLD_SIZE=2" "$MPIRUN" -np 2 bash -c "OMPI_COMM_WORLD_LOCAL_SIZE=3 exec $DTRAIN env"
expect 1 "OMPI_COMM_WORLD_LOCAL_RANK=1 but MPI says this is local rank 0" "$MPIRUN" -np 2 bash -c \
    "OMPI_COMM_WORLD_LOCAL_RANK=\$((1 - OMPI_COMM_WORLD_LOCAL_RANK)) exec $DTRAIN env"
# One rank failing alone, before or after MPI_Init, still ends the whole job (no hang).
expect 2 "DTRAIN_LOG='bogus'" timeout 60 "$MPIRUN" -np 2 bash -c \
    "[ \$OMPI_COMM_WORLD_RANK = 1 ] && export DTRAIN_LOG=bogus; exec $DTRAIN env"
expect 1 "OMPI_COMM_WORLD_RANK=0 but MPI says this is rank 3" timeout 60 "$MPIRUN" -np 4 bash -c \
    "[ \$OMPI_COMM_WORLD_RANK = 3 ] && export OMPI_COMM_WORLD_RANK=0; exec $DTRAIN env"
# No GPU here: --device cuda says so (how depends on whether CUDA was built in).
if "$DTRAIN" version | grep -q cuda; then
    if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
        echo "GPU present: the no-GPU refusal is not tested here"
    else
        expect 1 "--device cuda, but no GPU is visible" "$DTRAIN" env --device cuda
    fi
else
    expect 1 "built without CUDA" "$DTRAIN" env --device cuda
fi
# A refused training run gives its message and exit code whether the refusal comes before MPI
# starts (DTRAIN_FAULT), right after it (--dataset-size) or once the model exists (--lr-schedule).
# That it also frees what it made first (the loss scaler of an fp16 run) is checked where memory
# is watched: under ASan this test's runs are LeakSanitizer's (an ASan exit is 66;
# tests/sanitizers/run_asan.sh), and `make test-valgrind` runs the same three under memcheck
# (tests/sanitizers/run_valgrind.sh, refusal.*) on its CPU build, where a run takes 2-6 s (15-25 s
# here, with the CUDA libraries loaded).
DTRAIN_FAULT=bogus:0:1 expect 2 "KIND 'bogus' is not a fault" "$DTRAIN" train --precision fp16 --steps 2
expect 2 "--dataset-size 2 is smaller than one global batch" "$DTRAIN" train --precision fp16 --dataset-size 2 --batch 4
expect 2 "--lr-schedule bogus" "$DTRAIN" train --precision fp16 --lr-schedule bogus --steps 2 --batch 4 \
    --model fc:8,relu,fc:10 --input 8
finish
