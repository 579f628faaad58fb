#!/usr/bin/env bash
# `dtrain doctor`: a healthy mpirun -np 2 passes with a table; --json parses with the expected
# checks; faked environments (thread variables, no yield with more ranks than cores, torchrun
# variables without a launcher, srun variables without PMIx or that do not parse, CPUs narrowed by
# taskset) give their WARN or FAIL and exit code; --json stays valid UTF-8; ranks given other shared
# flags are refused; the model flags' bounds.
here=$(dirname "$0"); source "$here/lib.sh"
DTRAIN=$1 MPIRUN=$2
# A healthy job lets dtrain pick OpenBLAS's kernels; an OPENBLAS_CORETYPE the machine exports
# (some images set Haswell) would make cpu.blas warn, which is its own case below.
user_coretype=${OPENBLAS_CORETYPE-}
unset OPENBLAS_CORETYPE

# --no-comm: the timed rows are checked through --json below, where a loaded machine may make
# the 8-byte latency warn; the rest of a healthy job must be clean.
expect 0 "nothing found wrong" "$MPIRUN" -np 2 "$DTRAIN" doctor --no-comm
grep -q "^CHECK  *STATUS  *RANKS  *SEEN" "$tmp/out" && ok "a table" || bad "no table header"

"$MPIRUN" -np 2 "$DTRAIN" doctor --json >"$tmp/j" 2>"$tmp/err"; rc=$?
[ $rc -eq 0 ] && ok "--json exit 0" || bad "--json exited $rc: $(cat "$tmp/err")"
doctor_status "$tmp/j" launch.launcher=pass launch.identity=pass launch.pmix=pass mpi.busy_poll=pass cpu.overlap=pass \
    cpu.blas=pass node.shm=pass node.limits=pass comm.allreduce_1m=pass comm.allreduce_64m=pass &&
    ok "--json has the checks, all pass" || bad "--json checks"
# The 8-byte latency depends on how loaded this machine is (a parallel ctest can push it past 1 ms):
# it must be there, and it is the only row allowed to warn.
python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
names = [c["name"] for c in d["checks"]]
# A GPU node running these CPU ranks may warn about its GPU set-up (cuda.*, tested in test_doctor_cuda.sh).
warn = [c["name"] for c in d["checks"] if c["status"] in ("warn", "fail") and not c["name"].startswith("cuda.")]
assert d["world"] == 2 and "comm.latency" in names and set(warn) <= {"comm.latency"}, (d["world"], warn)
assert d["status"] == ("warn" if warn else "pass") or any(c["name"].startswith("cuda.") for c in d["checks"] if c["status"] == "warn")' "$tmp/j" &&
    ok "world 2, status pass (comm.latency may warn under load)" || bad "json world/status"

# dtrain sets OpenBLAS's threads itself: the variables change nothing and pass; a bad value and
# more BLAS threads than the rank's cores warn.
OMP_NUM_THREADS=64 "$MPIRUN" -np 2 -x OMP_NUM_THREADS "$DTRAIN" doctor --json --no-comm >"$tmp/j" 2>&1
[ $? -eq 0 ] && doctor_status "$tmp/j" cpu.threads=pass comm.allreduce=skip && grep -q "without effect" "$tmp/j" &&
    ok "OMP_NUM_THREADS=64 -> PASS, without effect" || bad "OMP_NUM_THREADS=64"
"$MPIRUN" -np 2 -x OPENBLAS_NUM_THREADS=abc "$DTRAIN" doctor --json --no-comm >"$tmp/j" 2>&1
doctor_status "$tmp/j" cpu.threads=warn && ok "OPENBLAS_NUM_THREADS=abc -> cpu.threads WARN" || bad "OPENBLAS_NUM_THREADS=abc"
if [ "$(nproc)" -le 2 ]; then
    "$MPIRUN" -np 2 "$DTRAIN" doctor --json --no-comm --blas-threads $(($(nproc) + 1)) >"$tmp/j" 2>&1
    doctor_status "$tmp/j" cpu.threads=warn && ok "--blas-threads above the rank's cores -> WARN" || bad "--blas-threads"
fi

# Resource limits: a low open-file limit in the ranks warns with its fix.
"$MPIRUN" -np 2 bash -c "ulimit -S -n 100 && exec \"$DTRAIN\" doctor --json --no-comm" >"$tmp/j" 2>&1
doctor_status "$tmp/j" node.limits=warn && grep -q "ulimit -n 4096" "$tmp/j" && ok "ulimit -n 100 -> node.limits WARN" ||
    bad "ulimit -n 100: $(grep -o '"node.limits[^}]*' "$tmp/j")"
# A 1 MiB /dev/shm in a private mount namespace (root only; skipped elsewhere).
if unshare -m true 2>/dev/null; then
    unshare -m bash -c "mount -t tmpfs -o size=1m tmpfs /dev/shm && \"$MPIRUN\" -np 2 \"$DTRAIN\" doctor --json --no-comm" \
        >"$tmp/j" 2>/dev/null
    doctor_status "$tmp/j" node.shm=warn && grep -q "shm-size" "$tmp/j" && ok "1 MiB /dev/shm -> node.shm WARN" ||
        bad "1 MiB /dev/shm: $(grep -o '"node.shm[^}]*' "$tmp/j")"
else
    ok "1 MiB /dev/shm: SKIP: no mount namespace here"
fi

# More ranks than cores without yielding: busy-polling WARN, overlap WARN (cores must be shared).
n=$(( $(nproc) + 1 ))
OMPI_MCA_mpi_yield_when_idle=0 "$MPIRUN" -np $n --oversubscribe "$DTRAIN" doctor --json --no-comm >"$tmp/j" 2>&1
doctor_status "$tmp/j" mpi.busy_poll=warn cpu.overlap=warn && ok "$n ranks on $(nproc) cores, no yield -> WARN" ||
    bad "busy-poll/overlap warn"
# Every rank of the node shares its cores: the overlap row names them all, not one pair of them.
grep -q "\"name\":\"cpu.overlap\",\"group\":\"cpu\",\"status\":\"warn\",\"ranks\":\[$(seq -s, 0 $((n - 1)))\],\"seen\":\"$n ranks on the $(nproc) CPUs" "$tmp/j" &&
    ok "$n ranks on $(nproc) cores: cpu.overlap names all $n ranks" || bad "cpu.overlap at $n ranks: $(grep -o '"name":"cpu.overlap"[^}]*' "$tmp/j")"

# Open MPI's booleans: "false" and "no" are false as much as "0" is.
for y in false no; do
    OMPI_MCA_mpi_yield_when_idle=$y "$MPIRUN" -np $n --oversubscribe "$DTRAIN" doctor --json --no-comm >"$tmp/j" 2>&1
    doctor_status "$tmp/j" mpi.busy_poll=warn && ok "OMPI_MCA_mpi_yield_when_idle=$y, $n ranks -> busy_poll WARN" ||
        bad "OMPI_MCA_mpi_yield_when_idle=$y: no busy_poll WARN"
done
# Unset, an mpirun that oversubscribes sets OMPI_MCA_mpi_oversubscribe=1 and Open MPI yields by itself.
env -u OMPI_MCA_mpi_yield_when_idle "$MPIRUN" -np $n --oversubscribe "$DTRAIN" doctor --json --no-comm >"$tmp/j" 2>&1
doctor_status "$tmp/j" mpi.busy_poll=pass && ok "yield unset, mpirun --oversubscribe -> busy_poll PASS (Open MPI yields)" ||
    bad "yield unset under mpirun --oversubscribe: busy_poll not PASS"

# The CPUs the ranks may use, not the node's: two unpinned ranks under taskset -c 0 share one CPU.
if command -v taskset >/dev/null; then
    taskset -c 0 "$MPIRUN" -np 2 --bind-to none "$DTRAIN" doctor --json --no-comm >"$tmp/j" 2>&1
    doctor_status "$tmp/j" cpu.overlap=warn && grep -q "2 ranks on the 1 CPU they may use" "$tmp/j" &&
        ok "taskset -c 0: cpu.overlap says 2 ranks on 1 CPU" || bad "taskset -c 0: cpu.overlap $(grep -o '"seen": "ranks[^"]*' "$tmp/j")"
fi

# LOCAL_RANK / LOCAL_WORLD_SIZE that disagree with MPI's local rank and size (a program picking its
# GPU from them would take the wrong one).
"$MPIRUN" -np 2 -x LOCAL_RANK=1 -x LOCAL_WORLD_SIZE=7 "$DTRAIN" doctor --json --no-comm >"$tmp/j" 2>&1
doctor_status "$tmp/j" launch.conflict=warn && grep -q "LOCAL_WORLD_SIZE=7" "$tmp/j" &&
    ok "LOCAL_RANK=1 LOCAL_WORLD_SIZE=7 -> launch.conflict WARN" || bad "LOCAL_RANK/LOCAL_WORLD_SIZE: no launch.conflict WARN"

# --json is valid UTF-8 even when a value is cut in the middle of a character.
CUDA_VISIBLE_DEVICES="$(printf 'x%.0s' $(seq 199))é" DTRAIN_TEST_CUDA_DRIVER=12020 "$DTRAIN" doctor --no-comm --json \
    >"$tmp/j" 2>/dev/null
python3 -c 'import json,sys; json.load(open(sys.argv[1], encoding="utf-8"))' "$tmp/j" 2>/dev/null &&
    ok "--json stays valid UTF-8 when a value is cut inside a character" || bad "--json: not valid UTF-8 JSON"

# Ranks not pinned on a node with a core for each: overlap WARN naming the ranks.
"$MPIRUN" -np 2 --bind-to none "$DTRAIN" doctor --pin none --json --no-comm >"$tmp/j" 2>&1
doctor_status "$tmp/j" cpu.overlap=warn && grep -q "ranks 0 and 1" "$tmp/j" && ok "--pin none overlap -> WARN names ranks" ||
    bad "--pin none overlap"

# A core type forced below what the CPU can run: cpu.blas WARN naming both (Prescott is the
# oldest x86-64 kernel set, so any CPU that runs this test has a better one).
OPENBLAS_CORETYPE=Prescott "$MPIRUN" -np 2 -x OPENBLAS_CORETYPE "$DTRAIN" doctor --json --no-comm >"$tmp/j" 2>"$tmp/err"
doctor_status "$tmp/j" cpu.blas=warn && grep -q "runs its Prescott kernels" "$tmp/j" &&
    ok "OPENBLAS_CORETYPE=Prescott -> cpu.blas WARN${user_coretype:+ (this machine exports $user_coretype)}" ||
    bad "OPENBLAS_CORETYPE=Prescott: no cpu.blas WARN"

# Refusals dt_init would make are reported, not died of: exit 1 with the fix.
expect 1 "unset RANK and WORLD_SIZE" env RANK=0 WORLD_SIZE=4 "$DTRAIN" doctor --no-comm
expect 1 "srun --mpi=pmix" env SLURM_STEP_ID=0 SLURM_PROCID=0 SLURM_NTASKS=4 SLURM_NODELIST=localhost \
    "$DTRAIN" doctor --no-comm
# The first task of such an srun says that the others ran alone; a lone task has no others.
grep -qF "(each of the 4 tasks ran alone; only the first printed this report)" "$tmp/out" &&
    ok "srun without PMIx, 4 tasks: the first says the others ran alone" || bad "4 tasks: no tasks-ran-alone line"
env SLURM_STEP_ID=0 SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_NODELIST=localhost "$DTRAIN" doctor --no-comm >"$tmp/one" 2>&1
grep -q "srun --mpi=pmix" "$tmp/one" && ! grep -q "ran alone" "$tmp/one" && ok "srun without PMIx, 1 task: no others named" ||
    bad "1 task: $(grep "ran alone" "$tmp/one")"
# Launcher variables that do not parse: launch.launcher FAILs naming the variable, and the PMI row
# does not pretend to know the launcher.
env SLURM_STEP_ID=0 SLURM_PROCID=0 SLURM_NTASKS=2x SLURM_NODELIST=localhost "$DTRAIN" doctor --no-comm --json \
    >"$tmp/j" 2>&1
doctor_status "$tmp/j" launch.launcher=fail launch.pmix=skip && grep -q "give SLURM_NTASKS a valid value" "$tmp/j" &&
    grep -q "srun sets it to the number of tasks; variables seen" "$tmp/j" &&
    ! grep -q "another PMI" "$tmp/j" && ok "SLURM_NTASKS=2x -> launch.launcher FAIL naming it and who sets it" ||
    bad "SLURM_NTASKS=2x: $(cat "$tmp/j")"
# Run directly in a batch script of a 4-task job (no srun step): launch.launcher WARNs with the fix.
env SLURM_JOB_ID=7 SLURM_NTASKS=4 SLURM_PROCID=0 SLURM_LOCALID=0 SLURM_NODEID=0 "$DTRAIN" doctor --no-comm --json \
    >"$tmp/j" 2>&1
rc=$?
[ $rc -eq 0 ] && doctor_status "$tmp/j" launch.launcher=warn && grep -q "this job has 4 tasks (SLURM_NTASKS=4)" "$tmp/j" &&
    grep -q 'srun --mpi=pmix dtrain doctor' "$tmp/j" && ok "batch script, 4 tasks: launch.launcher WARN with the fix" ||
    bad "batch script, 4 tasks: rc $rc: $(cat "$tmp/j")"
# srun --mpi=pmi2 with an Open MPI built without PMI-2 (Debian's): MPI_Init would abort, blaming
# SLURM support; doctor reports it in its table, naming the cause and the fix, and exits 1.
pmi2="SLURM_STEP_ID=0 SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_LOCALID=0 SLURM_NODELIST=localhost SLURM_MPI_TYPE=pmi2
      PMI_FD=9 PMI_RANK=0 PMI_SIZE=1"
if ompi_info 2>/dev/null | grep -qE "MCA pmix: s[12] "; then
    ok "srun --mpi=pmi2: SKIP: this Open MPI has PMI-2"
else
    # shellcheck disable=SC2086
    env $pmi2 "$DTRAIN" doctor --no-comm --json >"$tmp/j" 2>&1
    rc=$?
    [ $rc -eq 1 ] && doctor_status "$tmp/j" launch.identity=fail && grep -q "was built without PMI-2" "$tmp/j" &&
        grep -q "srun --mpi=pmix" "$tmp/j" && ok "srun --mpi=pmi2 without PMI-2: launch.identity FAIL with the fix, exit 1" ||
        bad "srun --mpi=pmi2 without PMI-2: rc $rc: $(tail -5 "$tmp/j")"
fi
# The other tasks of such an srun stay quiet (the first one reports) but fail too.
env SLURM_STEP_ID=0 SLURM_PROCID=2 SLURM_NTASKS=4 SLURM_NODELIST=localhost "$DTRAIN" doctor --no-comm >"$tmp/q" 2>&1
rc=$?
[ $rc -eq 1 ] && ! grep -q CHECK "$tmp/q" && ok "task 2 of a refused srun: quiet, exit 1" || bad "task 2: rc $rc"

# Ranks given other flags whose checks they share are refused at once, said once: another
# --no-comm left rank 0 in the communication check with no deadline, a hang until the launcher's.
expect 2 "rank 1 was given '--no-comm on' where rank 0 was given '--no-comm off'" timeout 60 "$MPIRUN" \
    -np 1 "$DTRAIN" doctor : -np 1 "$DTRAIN" doctor --no-comm
[ "$(grep -c "dtrain: error" "$tmp/out")" -eq 1 ] && ! grep -q "MPI_ABORT" "$tmp/out" &&
    ok "doctor flags that differ between ranks: said once, no MPI_Abort" ||
    { bad "doctor flags that differ between ranks"; cat "$tmp/out"; }
# Each of the shared flags, not only --no-comm, is compared: another --batch, --precision, --model
# or --input on a rank would report that rank's model in the job's memory rows.
# BASE|A|B: rank 0 given BASE A, rank 1 BASE B.
for set in "--model cnn|--batch 8|--batch 16" "--model cnn|--precision fp32|--precision bf16" "|--model cnn|--model mlp" \
    "--model cnn|--input 3x32x32|--input 3x16x16"; do
    IFS='|' read -r base a b <<<"$set"
    # shellcheck disable=SC2086 # the flags' words
    expect 2 "rank 1 was given '$b' where rank 0 was given '$a'" timeout 60 "$MPIRUN" \
        -np 1 "$DTRAIN" doctor --no-comm $base $a : -np 1 "$DTRAIN" doctor --no-comm $base $b
done
# The model flags' bounds: --batch from 1 to train's limit of 1048576 (a batch doctor says fits,
# train must take), --keep-checkpoints from 0; each model flag wants --model.
expect 2 "--batch '0' is out of range (expected an integer from 1 to 1048576)" "$DTRAIN" doctor --model cnn --batch 0
expect 2 "--batch '1048577' is out of range (expected an integer from 1 to 1048576)" \
    "$DTRAIN" doctor --model cnn --batch 1048577
expect 2 "--keep-checkpoints '-1' is out of range" "$DTRAIN" doctor --checkpoint-dir "$tmp/kc" --keep-checkpoints -1
"$DTRAIN" doctor --no-comm --json --checkpoint-dir "$tmp/kc" --keep-checkpoints 0 >"$tmp/j" 2>&1
doctor_status "$tmp/j" path.checkpoint=pass && ok "--keep-checkpoints 0 (keep all) is taken" || bad "--keep-checkpoints 0"
expect 2 "add --model" "$DTRAIN" doctor --input 3x32x32
expect 2 "add --model" "$DTRAIN" doctor --precision bf16
expect 2 "unknown option '--bogus'" "$DTRAIN" doctor --bogus
expect 2 "add --model" "$DTRAIN" doctor --batch 8
expect 0 "usage: dtrain doctor" "$DTRAIN" help doctor
finish
