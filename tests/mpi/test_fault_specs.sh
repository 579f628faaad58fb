#!/usr/bin/env bash
# What a fault-injected or mismatched job is told before anything times out: DTRAIN_FAULT read
# strictly (a malformed value, or a rank or step the run does not have, refused with exit 2); ranks
# given other training flags refused at the start, once, without MPI_Abort; DTRAIN_LOG=debug's
# placement, bucket-plan and collective lines (info: none); a checkpoint write that fails on rank 0
# ends every rank with exit 1 and names the step kept; SIGUSR1 with and without --checkpoint-dir.
# The watchdog's cases, which race deadlines, are mpi.faults (test_faults.sh); these check only
# exit codes and messages, so they run beside other tests.
here=$(dirname "$0"); source "$here/lib.sh"
DTRAIN=$1 MPIRUN=$2
# Jobs end here as users see them, with Open MPI's default grace between the survivors' SIGTERM and
# SIGKILL (the tests' environment sets 0 for speed): a rank that exits 1 on its own must still be
# let to print and finalize after the first one's exit.
export OMPI_MCA_odls_base_sigkill_timeout=1

expect 2 "DTRAIN_FAULT='sleep:1:2'" env DTRAIN_FAULT=sleep:1:2 "$DTRAIN" train --steps 1
# Ranks with different bucket plans would pair wrong buffers and hang: refused at start instead,
# by the comparison of the ranks' flags before anything is made (dt_model_set_sync compares the
# settings too, for a library caller: mpi.agree).
expect 2 "rank 1 was given '--bucket-mb 25' where rank 0 was given '--bucket-mb 4'" timeout 60 "$MPIRUN" -np 2 bash -c \
    "exec $DTRAIN train --steps 2 --bucket-mb \$(( OMPI_COMM_WORLD_RANK == 0 ? 4 : 25 ))"
# Every rank words that verdict alike: said once, each rank ending on its own.
grep -q "every rank of a job must get the same training flags .*(the same on all 2 ranks)$" "$tmp/out" &&
    [ "$(grep -c "dtrain: error" "$tmp/out")" -eq 1 ] && ! grep -q "MPI_ABORT" "$tmp/out" &&
    ok "settings that differ between ranks: one line, no MPI_Abort" || { bad "settings that differ between ranks"; cat "$tmp/out"; }
# So are other flags given differently: another --lr (it ended in "the ranks ended with different
# parameters: a bug in dtrain"), another --steps (ranks waited in collectives the others never
# joined until the watchdog's deadline), --data on some ranks only. Paths may differ.
expect 2 "rank 1 was given '--lr 0.05' where rank 0 was given '--lr 0.01' (2 ranks differ from rank 0)" timeout 60 \
    "$MPIRUN" -np 3 bash -c "exec $DTRAIN train --steps 2 --lr \$(( OMPI_COMM_WORLD_RANK == 0 ? 1 : 5 ))e-2"
[ "$(grep -c "dtrain: error" "$tmp/out")" -eq 1 ] && ! grep -q "MPI_ABORT" "$tmp/out" &&
    ok "--lr that differs between ranks: one line, no MPI_Abort" || { bad "--lr that differs between ranks"; cat "$tmp/out"; }
expect 2 "rank 1 was given '--steps 3' where rank 0 was given '--steps 2'" timeout 60 "$MPIRUN" \
    -np 1 "$DTRAIN" train --steps 2 : -np 1 "$DTRAIN" train --steps 3
expect 2 "rank 1 was given 'no --data' where rank 0 was given '--data PATH'" timeout 60 "$MPIRUN" \
    -np 1 "$DTRAIN" train --steps 2 --data /nonexistent : -np 1 "$DTRAIN" train --steps 2

# DTRAIN_LOG=debug: placement, the bucket plan, each collective's start and end; info: none of it.
for level in debug info; do
    expect 0 "" env DTRAIN_LOG=$level timeout 60 "$MPIRUN" -np 2 -x DTRAIN_LOG "$DTRAIN" train --steps 2 --batch 4 \
        --model fc:32,relu,fc:10 --input 16
    cp "$tmp/out" "$tmp/log-$level"
done
for line in "placement: launcher openmpi \\(rank 1 of 2" "placement: device cpu \\(--device" \
    "placement: allowed CPUs [0-9,-]+ \([0-9]+\); GPU none; candidates" "placement: CPUs [0-9,-]+ \([0-9]+ cores\): .*BLAS thread" \
    "bucket plan: bucket 0: ranges 0\.\.1, elements \[0, 874\), 3496 bytes" \
    "coll mpi: start #[0-9]+ MPI_Bcast of 874 elements \(3496 bytes\)" \
    "coll mpi: end #[0-9]+ MPI_Bcast of 874 elements \(3496 bytes\) done in [0-9]+ us" \
    "engine: start #1 allreduce of bucket 0, 874 elements, 3496 bytes fp32" \
    "engine: end #1 allreduce of bucket 0, 874 elements, 3496 bytes fp32, by MPI_Allreduce done in [0-9]+ us"; do
    grep -qE "\] dtrain DEBUG $line" "$tmp/log-debug" && ok "DTRAIN_LOG=debug prints '$line'" ||
        { bad "DTRAIN_LOG=debug did not print '$line'"; grep DEBUG "$tmp/log-debug" | head -20; }
done
! grep -q "dtrain DEBUG" "$tmp/log-info" && ok "DTRAIN_LOG=info prints no debug line" ||
    { bad "DTRAIN_LOG=info printed debug lines"; grep DEBUG "$tmp/log-info" | head -5; }

# DTRAIN_FAULT itself is read strictly: a malformed value, or a rank or step the run does not
# have, is refused (exit 2) rather than wrapped, half-read or silently never injected.
quick="train --steps 3 --batch 2 --model fc:8,relu,fc:10 --input 8 --log-every 1"
expect 2 "RANK='4294967296' is out of range" env DTRAIN_FAULT=stall:4294967296:1 timeout -s KILL 10 "$DTRAIN" $quick
expect 2 "RANK ' 1' is not a whole number" env "DTRAIN_FAULT=stall: 1:1" timeout -s KILL 10 "$DTRAIN" $quick
expect 2 "RANK '+0' is not a whole number" env DTRAIN_FAULT=stall:+0:1 timeout -s KILL 10 "$DTRAIN" $quick
expect 2 "STEP '-1' is not a whole number" env DTRAIN_FAULT=stall:0:-1 timeout -s KILL 10 "$DTRAIN" $quick
expect 2 "KIND ' stall' is not a fault" env "DTRAIN_FAULT= stall:0:1" timeout -s KILL 10 "$DTRAIN" $quick
expect 2 "'stall:0:1:' has too many fields" env DTRAIN_FAULT=stall:0:1: timeout -s KILL 10 "$DTRAIN" $quick
expect 2 "'stall:0' has too few fields" env DTRAIN_FAULT=stall:0 timeout -s KILL 10 "$DTRAIN" $quick
expect 2 "rank 1 is not in this job: the world size is 1 (rank 0 only)" env DTRAIN_FAULT=stall:1:1 timeout -s KILL 10 "$DTRAIN" $quick
expect 2 "rank 2 is not in this job: the world size is 2 (ranks 0 to 1)" env DTRAIN_FAULT=stall:2:1 timeout -s KILL 60 \
    "$MPIRUN" -np 2 -x DTRAIN_FAULT "$DTRAIN" $quick
expect 2 "step 9 comes after the last step of this run (--steps 3)" env DTRAIN_FAULT=stall:0:9 timeout -s KILL 10 "$DTRAIN" $quick
# The last step is a step of the run; a ckpt fault on a rank but 0 is refused with --checkpoint-dir too.
expect 0 "rank 0 sleeps 20 ms in every step from then on, the first at step 3" env DTRAIN_FAULT=slow:0:3 \
    timeout -s KILL 10 "$DTRAIN" $quick
expect 2 "a ckpt fault needs rank 0 (the rank that writes the checkpoint files)" env DTRAIN_FAULT=ckpt:1:1 timeout -s KILL 60 \
    "$MPIRUN" -np 2 -x DTRAIN_FAULT "$DTRAIN" $quick --checkpoint-dir "$tmp/ck-r1"
# A failure every rank gets (rank 0's checkpoint write meets a full disk, and the commit's verdict
# tells every rank) ends with every rank finalizing and exiting 1 with its own message, without
# MPI_Abort's banner (a rank that may have failed alone, above, still aborts the job); rank 0 then
# says what is lost: step 4's save fails, step 2's checkpoint is where a resume goes on.
DTRAIN_FAULT=ckpt:0:3 timeout -s KILL 60 "$MPIRUN" -np 2 -x DTRAIN_FAULT bash -c \
    '"$0" "$@"; echo "rank $OMPI_COMM_WORLD_RANK exited $?"' "$DTRAIN" $quick --steps 5 --checkpoint-dir \
    "$tmp/ck-full" --checkpoint-every 2 >"$tmp/out" 2>&1
if grep -q "^rank 0 exited 1$" "$tmp/out" && grep -q "^rank 1 exited 1$" "$tmp/out" &&
    [ "$(grep -c "writing checkpoint .* failed: No space left on device" "$tmp/out")" -eq 2 ] &&
    [ "$(grep -c "the checkpoint of step 4 is not saved, so the run ends here: the newest in $tmp/ck-full is of step 2, where --resume auto goes on (steps 3 to 4 run again)" "$tmp/out")" -eq 1 ] &&
    ! grep -q "MPI_ABORT was invoked" "$tmp/out"; then
    ok "a checkpoint write that fails on rank 0: both ranks exit 1 with the message, rank 0 names the step kept, no MPI_Abort"
else
    bad "a failed checkpoint write at 2 ranks"; sed 's/^/    /' "$tmp/out" | tail -20
fi
expect 2 "a ckpt fault needs rank 0 (the rank that writes the checkpoint files) and --checkpoint-dir" \
    env DTRAIN_FAULT=ckpt:0:1 timeout -s KILL 10 "$DTRAIN" $quick
# Stopped with no --checkpoint-dir: nothing saved, so not the requeue's 75.
expect 143 "no --checkpoint-dir: nothing saved" env DTRAIN_FAULT=usr1:0:2 timeout -s KILL 10 "$DTRAIN" $quick
expect 75 "rank 0 gets SIGUSR1 at step 2" env DTRAIN_FAULT=usr1:0:2 timeout -s KILL 10 "$DTRAIN" $quick \
    --checkpoint-dir "$tmp/ck-usr1"
finish
