# shellcheck shell=bash
# link.sh - link shaping for the local SLURM cluster (sourced by up.sh; needs common.sh's cl_init).
#
# A link spec is RATE[:DELAY[:JITTER]], e.g. 800mbit, 1gbit:200us, 10gbit:50us:10us. It shapes a
# node's link like a full-duplex NIC: the same RATE in both directions, set as tbf on the egress of
# the node's eth0 (inside its netns: node -> bridge) and on the egress of the host-side veth
# (bridge -> node). DELAY/JITTER are one-way, added on the node's egress only, so a message from
# node A to node B waits DELAY_A and a round trip between two uniform nodes is 2 x DELAY.
#
# DELAY and JITTER need the netem qdisc (CONFIG_NET_SCH_NETEM). Kernels without it exist (the 2-core
# test VM: Firecracker, netem, fq and etf all absent); there is no sound in-kernel substitute
# there (an eBPF classifier can set skb->tstamp, but only fq or etf honour it), so up.sh refuses a
# DELAY on such a kernel, naming the config option, before it creates anything. Whether netem
# exists is found out at run time on a scratch veth pair, never assumed.

# Bits per second of a tc rate: NUMBER followed by bit, kbit, mbit, gbit or tbit (tc's decimal
# units). Prints nothing and fails for anything else.
link_rate_bits() {
    [[ $1 =~ ^([0-9]+)(\.[0-9]+)?(bit|kbit|mbit|gbit|tbit)$ ]] || return 1
    awk -v n="${BASH_REMATCH[1]}${BASH_REMATCH[2]}" -v u="${BASH_REMATCH[3]}" 'BEGIN {
        m = u == "bit" ? 1 : u == "kbit" ? 1e3 : u == "mbit" ? 1e6 : u == "gbit" ? 1e9 : 1e12
        printf "%.0f\n", n * m }'
}

# Microseconds of a tc time: NUMBER followed by us, ms or s. Fails for anything else.
link_time_us() {
    [[ $1 =~ ^([0-9]+)(\.[0-9]+)?(us|ms|s)$ ]] || return 1
    awk -v n="${BASH_REMATCH[1]}${BASH_REMATCH[2]}" -v u="${BASH_REMATCH[3]}" 'BEGIN {
        m = u == "us" ? 1 : u == "ms" ? 1e3 : 1e6
        printf "%.0f\n", n * m }'
}

# link_check SPEC: validates one spec; on error prints what is wrong and the fix, and fails.
link_check() {
    local spec=$1 rate delay jitter extra bits us
    IFS=: read -r rate delay jitter extra <<<"$spec"
    if [ -n "$extra" ]; then
        echo "--link '$spec' has more than three fields: use RATE[:DELAY[:JITTER]], e.g. 1gbit:200us:20us"; return 1
    fi
    if ! bits=$(link_rate_bits "$rate"); then
        echo "--link '$spec': rate '$rate' is not a number followed by bit, kbit, mbit, gbit or tbit (decimal, as tc reads them), e.g. 800mbit or 1.5gbit"; return 1
    fi
    # Below 1 Mbit/s slurmd's and PMIx's own traffic makes the node look dead; above 100 Gbit/s
    # the veth cannot carry it here and the shaper would shape nothing.
    if [ "$bits" -lt 1000000 ] || [ "$bits" -gt 100000000000 ]; then
        echo "--link '$spec': rate '$rate' is outside 1mbit..100gbit; pick a rate in that range"; return 1
    fi
    local name val
    for name in delay jitter; do
        val=${!name}
        [ -n "$val" ] || continue
        if ! us=$(link_time_us "$val"); then
            echo "--link '$spec': $name '$val' is not a number followed by us, ms or s, e.g. 200us or 1.5ms"; return 1
        fi
        if [ "$us" -gt 10000000 ]; then
            echo "--link '$spec': $name '$val' is over 10s; a delay that long times out slurmd and MPI: pick less"; return 1
        fi
    done
    if [ -n "$jitter" ] && [ -z "$delay" ]; then
        echo "--link '$spec': a jitter needs a delay to vary around: use RATE:DELAY:JITTER, e.g. 1gbit:200us:20us"; return 1
    fi
    if [ -n "$jitter" ] && [ "$(link_time_us "$jitter")" -gt "$(link_time_us "$delay")" ]; then
        echo "--link '$spec': jitter '$jitter' is larger than the delay '$delay' (a packet cannot leave before it was sent): make JITTER <= DELAY"; return 1
    fi
    return 0
}

# link_netem_probe: succeeds when `tc qdisc ... netem` works on this kernel; otherwise prints tc's
# complaint. Tried on a scratch veth pair (CL_TAG-prefixed, so down.sh finds it if we die here).
link_netem_probe() {
    local a=${CL_TAG}nt0 b=${CL_TAG}nt1 out rc=0
    ip link del "$a" 2>/dev/null || true
    ip link add "$a" type veth peer name "$b" || { echo "cannot create the scratch veth $a to probe netem"; return 1; }
    out=$(tc qdisc add dev "$a" root netem delay 1ms 2>&1) || rc=1
    ip link del "$a" 2>/dev/null || true
    [ $rc = 0 ] || echo "$out"
    return $rc
}

# Token bucket sizes for RATE (bits/s), as "BURST_BYTES LIMIT_BYTES".
# burst: tokens tbf may spend at once. It must hold a whole GSO super-packet (veth sends TCP in
# up to 64 KiB segments; a packet larger than the bucket is split in software, costing CPU on a
# 2-core machine), and the tokens of one 4 ms timer tick (HZ=250 here), so a late dequeue
# (a busy CPU, a coarse timer) does not throw away rate. So max(128 KiB, RATE x 4 ms): 128 KiB up
# to 262 Mbit/s, 500 KB at 1 Gbit/s. Over a 16 MiB message that lets at most ~1% above RATE.
# limit: bytes queued before tbf drops. 50 ms of RATE (at least 1 MiB) plus the burst: enough for
# two senders converging on one node's downlink without TCP losses, while a full queue adds ~50 ms
# of delay (more below 168 Mbit/s, where the 1 MiB floor rules; the sender's own queue is held
# short by TCP small queues anyway).
link_tbf_sizes() {
    awk -v r="$1" 'BEGIN {
        b = r / 8 * 0.004; if (b < 131072) b = 131072
        l = r / 8 * 0.05; if (l < 1048576) l = 1048576
        printf "%.0f %.0f\n", b, l + b }'
}

# link_apply NS VETH SPEC: shapes a node's link (both directions) per SPEC. Fails with tc's message
# (every tc is checked: callers run it under ||, where set -e does not stop at a failure).
link_apply() {
    local ns=$1 veth=$2 spec=$3 rate delay jitter _x bits sizes burst limit
    IFS=: read -r rate delay jitter _x <<<"$spec"
    bits=$(link_rate_bits "$rate")
    sizes=$(link_tbf_sizes "$bits"); burst=${sizes% *}; limit=${sizes#* }
    # bridge -> node: the host-side veth's egress
    tc qdisc replace dev "$veth" root handle 1: tbf rate "$rate" burst "$burst" limit "$limit" || return 1
    # node -> bridge: eth0's egress in the node's netns; netem first (delay), tbf under it (rate),
    # netem's packet limit sized for the packets in flight during DELAY+JITTER at RATE, x2 margin.
    if [ -n "$delay" ]; then
        local us pk
        us=$(( $(link_time_us "$delay") + $(link_time_us "${jitter:-0us}") ))
        pk=$(awk -v r="$bits" -v us="$us" 'BEGIN { p = r / 8 * us / 1e6 / 1500 * 2; printf "%.0f\n", p < 1000 ? 1000 : p }')
        nsenter --net="/run/netns/$ns" tc qdisc replace dev eth0 root handle 1: netem delay "$delay" ${jitter:+"$jitter"} limit "$pk" || return 1
        nsenter --net="/run/netns/$ns" tc qdisc add dev eth0 parent 1: handle 10: tbf rate "$rate" burst "$burst" limit "$limit" || return 1
    else
        nsenter --net="/run/netns/$ns" tc qdisc replace dev eth0 root handle 1: tbf rate "$rate" burst "$burst" limit "$limit" || return 1
    fi
}

# link_describe SPEC: one line for humans, e.g. "800mbit both ways (tbf burst 131072 B, limit ...)"
link_describe() {
    local rate delay jitter _x sizes
    IFS=: read -r rate delay jitter _x <<<"$1"
    sizes=$(link_tbf_sizes "$(link_rate_bits "$rate")")
    printf '%s each way (tbf burst %s B, limit %s B)%s\n' "$rate" "${sizes% *}" "${sizes#* }" \
        "${delay:+, +$delay one-way on the node egress (netem)${jitter:+ +-$jitter jitter}}"
}
