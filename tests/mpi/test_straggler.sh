#!/usr/bin/env bash
# The straggler report of `dtrain train`: a rank slowed by DTRAIN_FAULT=slow (a sleep before every
# step, so in its compute) is named with its node and "compute" each --log-every interval, a WARN names it once
# on its third interval in a row (under --quiet too, which drops the lines), and the metrics
# records carry the verdict; --straggler-threshold silences it; a run without a slow rank, or on
# one rank, prints no straggler line; bad thresholds are refused. A tiny model, so the 20 ms sleep dwarfs the compute even on a loaded machine.
here=$(dirname "$0"); source "$here/lib.sh"
DTRAIN=$1 MPIRUN=$2

train() { # ranks, then train flags
    local np=$1; shift
    "$MPIRUN" -np "$np" "$DTRAIN" train --blas-threads 1 --model fc:64,relu,fc:10 --input 32 --batch 8 --log-every 5 "$@" >"$tmp/log" 2>&1 ||
        { cat "$tmp/log"; return 1; }
}

# The slow rank is named with its node (here every rank's: this host, as MPI names it).
host=$(hostname)
for spec in 2:1 3:2 3:0; do
    np=${spec%:*} slow=${spec#*:}
    DTRAIN_FAULT=slow:$slow:1 train "$np" --steps 20 --metrics "$tmp/m.jsonl" || bad "$np ranks, rank $slow slow: failed"
    n=$(grep -c "^straggler: rank $slow ($host) busy .* ms a step vs median .* ms (.*x): compute " "$tmp/log")
    others=$(grep '^straggler: ' "$tmp/log" | grep -vc "^straggler: rank $slow ")
    [ "$n" -eq 4 ] && [ "$others" -eq 0 ] && ok "$np ranks: rank $slow named with compute in all 4 intervals" ||
        { bad "$np ranks: rank $slow named $n times of 4, others $others"; cat "$tmp/log"; }
    w=$(grep -c "WARN rank $slow ($host) is the straggler 3 log intervals in a row (compute " "$tmp/log")
    [ "$w" -eq 1 ] && ok "$np ranks: one WARN names rank $slow persistently" || { bad "$np ranks: $w WARN lines"; cat "$tmp/log"; }
    m=$(grep -c "\"slowest_rank\": $slow, \"slowest_busy_s\": [0-9.e+-]*, \"median_busy_s\": [0-9.e+-]*, \"straggler\": true, \"straggler_phase\": \"compute\"" "$tmp/m.jsonl")
    [ "$m" -eq 4 ] && ok "$np ranks: 4 metrics records name rank $slow" || { bad "$np ranks: $m metrics records"; cat "$tmp/m.jsonl"; }
done

# --quiet: the line of each interval is a report and goes; the persistent straggler's WARN stays.
DTRAIN_FAULT=slow:1:1 train 2 --steps 20 --quiet || bad "--quiet with rank 1 slow failed"
! grep -q '^straggler:' "$tmp/log" && [ "$(grep -c "WARN rank 1 ($host) is the straggler 3 log intervals in a row" "$tmp/log")" -eq 1 ] &&
    ok "--quiet: no straggler: lines, the one WARN kept" || { bad "--quiet straggler lines"; cat "$tmp/log"; }

# A threshold above the gap: no line, and the records say "straggler": false without a phase.
DTRAIN_FAULT=slow:1:1 train 2 --steps 10 --straggler-threshold 1000 --metrics "$tmp/m.jsonl" || bad "--straggler-threshold 1000 failed"
! grep -qE '^straggler:|WARN rank' "$tmp/log" && [ "$(grep -c '"slowest_rank": 1, .*"straggler": false, "lr"' "$tmp/m.jsonl")" -eq 2 ] &&
    ok "--straggler-threshold 1000: no line, records with \"straggler\": false" || { bad "--straggler-threshold 1000"; cat "$tmp/log" "$tmp/m.jsonl"; }
! grep -q straggler_phase "$tmp/m.jsonl" && ok "no straggler_phase without a straggler" || bad "straggler_phase without a straggler"

# No slow rank: the step lines only (a threshold of 2 keeps a loaded machine's noise out).
train 2 --steps 10 --straggler-threshold 2 || bad "2 healthy ranks failed"
[ "$(grep -c '^step ' "$tmp/log")" -eq 2 ] && ! grep -qE '^straggler:|WARN rank' "$tmp/log" &&
    ok "2 healthy ranks: step lines, no straggler line" || { bad "2 healthy ranks"; cat "$tmp/log"; }
# One rank: nothing to compare, no straggler fields.
DTRAIN_FAULT=slow:0:1 train 1 --steps 10 --metrics "$tmp/m.jsonl" || bad "1 rank failed"
! grep -qE '^straggler:|WARN rank' "$tmp/log" && ! grep -q slowest_rank "$tmp/m.jsonl" &&
    ok "1 rank: no straggler line or fields" || { bad "1 rank"; cat "$tmp/log" "$tmp/m.jsonl"; }

expect 2 "--straggler-threshold (a rank this many times busier than the median is named; above 1) '1' is out of range (expected a number from 1.001 to 1000000)" \
    "$DTRAIN" train --steps 1 --straggler-threshold 1
expect 2 "--straggler-threshold" "$DTRAIN" train --steps 1 --straggler-threshold x
finish
