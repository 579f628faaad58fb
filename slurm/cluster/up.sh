#!/bin/bash
# up.sh DIR [NODES=2] [CPUS_PER_NODE=2] [GPUS_PER_NODE=4] [--nodes N] [--cpus N] [--gpus N]
#       [--link RATE[:DELAY[:JITTER]][,SPEC...]]
# Brings up a private SLURM cluster entirely under DIR: munged, slurmctld on the host, and NODES
# slurmd "nodes" node1..nodeN, each in its own network namespace (own IP on a bridge) and its own
# UTS + mount namespace (own hostname, own /etc/hosts). Fake GPUs are character devices (c 195 N).
# Options may stand anywhere; --nodes/--cpus/--gpus are the positional counts by name (giving
# both, differently, is an error). --link shapes every node's link (link.sh): one spec for all
# nodes, or NODES comma-separated specs, node1 first; e.g. --link 800mbit, --link 1gbit:200us.
# Env: TASK_PLUGIN (default task/affinity, task/none when CPUS_PER_NODE > host CPUs), UP_TIMEOUT (default 60 s), KEEP_ON_FAIL=1 (do not tear
# down after a failed start, to inspect it).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
usage() {
    echo "usage: $0 DIR [NODES=2] [CPUS_PER_NODE=2] [GPUS_PER_NODE=4] [--nodes N] [--cpus N] [--gpus N] [--link RATE[:DELAY[:JITTER]][,...]]" >&2
    [ $# -gt 0 ] && echo "up.sh: error: $*" >&2
    exit 2
}
pos=(); opt_nodes=; opt_cpus=; opt_gpus=; LINK=
while [ $# -gt 0 ]; do
    case $1 in
        --nodes|--cpus|--gpus|--link)
            [ $# -ge 2 ] || usage "$1 needs a value"
            case $1 in --nodes) opt_nodes=$2 ;; --cpus) opt_cpus=$2 ;; --gpus) opt_gpus=$2 ;; --link) LINK=$2 ;; esac
            shift 2 ;;
        --nodes=*) opt_nodes=${1#*=}; shift ;;
        --cpus=*) opt_cpus=${1#*=}; shift ;;
        --gpus=*) opt_gpus=${1#*=}; shift ;;
        --link=*) LINK=${1#*=}; shift ;;
        -h|--help) usage ;;
        -*) usage "unknown option '$1'" ;;
        *) pos+=("$1"); shift ;;
    esac
done
[ ${#pos[@]} -ge 1 ] || usage "name the cluster directory DIR (first argument), e.g. $0 /tmp/dtcluster --nodes 3"
[ ${#pos[@]} -le 4 ] || usage "too many arguments: ${pos[*]}"
# name given both ways: the same value is fine, two different ones are a mistake
pick() { # positional option-value what default
    if [ -n "$1" ] && [ -n "$2" ] && [ "$1" != "$2" ]; then usage "$3 given twice, $1 and $2: give it once"; fi
    echo "${1:-${2:-$4}}"
}
NODES=$(pick "${pos[1]:-}" "$opt_nodes" NODES 2); CPUS=$(pick "${pos[2]:-}" "$opt_cpus" CPUS_PER_NODE 2)
GPUS=$(pick "${pos[3]:-}" "$opt_gpus" GPUS_PER_NODE 4)
set -- "${pos[0]}"
for v in "$NODES" "$CPUS" "$GPUS"; do [[ $v =~ ^[0-9]+$ ]] || usage "'$v' is not a whole number (NODES, CPUS_PER_NODE, GPUS_PER_NODE)"; done
[ "$NODES" -ge 1 ] && [ "$NODES" -le 200 ] || usage "NODES=$NODES: give 1 to 200 nodes"
[ "$CPUS" -ge 1 ] || usage "CPUS_PER_NODE=$CPUS: give at least 1"
. "$HERE/link.sh"
# One spec per node (LINKS[i-1] for node i), every one checked before anything is created.
LINKS=()
if [ -n "$LINK" ]; then
    IFS=, read -r -a specs <<<"$LINK"
    if [ ${#specs[@]} -ne 1 ] && [ ${#specs[@]} -ne "$NODES" ]; then
        usage "--link '$LINK' has ${#specs[@]} specs for $NODES nodes: give one spec for all nodes or exactly $NODES"
    fi
    for s in "${specs[@]}"; do msg=$(link_check "$s") || usage "$msg"; done
    for i in $(seq 1 "$NODES"); do
        if [ ${#specs[@]} -eq 1 ]; then LINKS+=("${specs[0]}"); else LINKS+=("${specs[$((i - 1))]}"); fi
    done
fi
# task/affinity binds tasks to CPU ids 0..CPUS-1 of the node; when a node claims more CPUs than
# the host has, that layout fails ("Unable to layout tasks on given cpus"): use task/none then.
if [ "$CPUS" -le "$(nproc --all)" ]; then TASK_PLUGIN=${TASK_PLUGIN:-task/affinity}
else TASK_PLUGIN=${TASK_PLUGIN:-task/none}; fi
UP_TIMEOUT=${UP_TIMEOUT:-60}

die() { echo "up.sh: error: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "must run as root (network namespaces, mknod, bind mounts)"
tools="ip unshare nsenter mount mknod munged slurmctld slurmd sinfo scontrol srun"
[ -n "$LINK" ] && tools="$tools tc"
for c in $tools; do
    command -v "$c" >/dev/null || PATH=$PATH:/usr/sbin:/sbin
    command -v "$c" >/dev/null || die "'$c' not found (apt-get install -y iproute2 util-linux munge slurmctld slurmd slurm-client)"
done

. "$HERE/common.sh"
mkdir -p "$1" || die "cannot create $1"
cl_init "$1"
D=$CL_DIR

# ---- refuse if a cluster is already running here -------------------------------------------
owner=$(cl_bridge_owner)
if [ -n "$owner" ] && [ "$owner" != "$D" ]; then
    die "bridge $CL_BR belongs to the cluster in $owner (same id $CL_ID from the path hash); use another DIR"
fi
for pf in "$D"/run/*.pid; do
    [ -f "$pf" ] || continue
    p=$(cat "$pf" 2>/dev/null || true)
    if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then
        die "$D already has a running cluster ($(basename "$pf" .pid) pid $p); run: $HERE/down.sh $D"
    fi
done
if ip netns list 2>/dev/null | grep -q "^${CL_TAG}-node"; then
    die "network namespaces ${CL_TAG}-node* exist (stale cluster for $D?); run: $HERE/down.sh $D"
fi
# leftovers of a dead cluster (bridge, veths): clean quietly
"$HERE/down.sh" "$D" >/dev/null 2>&1 || true

# ---- link shaping: a DELAY needs netem; find out now, before anything exists ----------------
if printf '%s\n' "${LINKS[@]}" | grep -q ':'; then
    if ! why=$(link_netem_probe); then
        die "--link '$LINK' asks for a delay, which needs the netem qdisc, and this kernel has none (tc said: $why). Fix: a kernel with CONFIG_NET_SCH_NETEM=y or =m (then modprobe sch_netem), or drop :DELAY[:JITTER] and shape the bandwidth alone (tbf works here)"
    fi
fi

T0=$(date +%s.%N)
fail() {
    echo "up.sh: error: $*" >&2
    for f in "$D"/log/*.log; do
        [ -f "$f" ] || continue
        echo "---- tail of $f" >&2; tail -n 15 "$f" >&2
    done
    if [ "${KEEP_ON_FAIL:-0}" = 1 ]; then
        echo "up.sh: KEEP_ON_FAIL=1: left running; clean up with: $HERE/down.sh $D" >&2
    else
        echo "up.sh: tearing down (set KEEP_ON_FAIL=1 to keep it for inspection)" >&2
        "$HERE/down.sh" "$D" >&2 || true
    fi
    exit 1
}
trap 'fail "command failed at line $LINENO: $BASH_COMMAND"' ERR
trap 'fail "interrupted"' INT TERM

rm -rf "$D/etc" "$D/run" "$D/state" "$D/spool" "$D/dev" "$D/munge" "$D/log" "$D/tmp" "$D/nodetmp"
mkdir -p "$D/etc" "$D/run" "$D/state" "$D/dev" "$D/log" "$D/nodetmp"
# Per-node temporary directory: every node sees its own $D/tmp/nodeI at the same path $D/nodetmp
# (bind mount in the node's mount namespace). All nodes share the host's /tmp otherwise, and PMIx
# puts /tmp/spmix_appdir_<uid>_<job>.<step> there, which collides between nodes.
for i in $(seq 1 "$NODES"); do mkdir -p "$D/spool/node$i" "$D/tmp/node$i"; chmod 1777 "$D/tmp/node$i"; done

# ---- munge: own key, socket, pid, log, seed under DIR/munge ---------------------------------
install -d -m 0755 -o root -g root "$D/munge"   # munged wants the socket dir world-executable
if [ -r /etc/munge/munge.key ]; then
    install -m 0400 -o root -g root /etc/munge/munge.key "$D/munge/munge.key"
else
    dd if=/dev/urandom of="$D/munge/munge.key" bs=1024 count=1 status=none
    chmod 0400 "$D/munge/munge.key"
fi
munged --force --socket="$CL_MUNGE_SOCK" --pid-file="$D/run/munged.pid" \
       --key-file="$D/munge/munge.key" --log-file="$D/log/munged.log" \
       --seed-file="$D/munge/munged.seed" >>"$D/log/munged.log" 2>&1 \
    || fail "munged did not start"
for _ in $(seq 50); do [ -S "$CL_MUNGE_SOCK" ] && break; sleep 0.1; done
[ -S "$CL_MUNGE_SOCK" ] || fail "munged socket $CL_MUNGE_SOCK did not appear"

# ---- fake GPUs ------------------------------------------------------------------------------
for g in $(seq 0 $((GPUS - 1))); do mknod -m 0666 "$D/dev/nvidia$g" c 195 "$g"; done

# ---- config ---------------------------------------------------------------------------------
CTLD_NAME=$(hostname -s)
{
cat <<CONF
# generated by slurm/cluster/up.sh for $D
ClusterName=dtrain
SlurmctldHost=${CTLD_NAME}(${CL_CTLD_IP})
SlurmctldPort=${CL_CTLD_PORT}
SlurmdPort=6818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=${CL_MUNGE_SOCK}
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool/%n
TmpFS=$D/nodetmp
SlurmctldPidFile=$D/run/slurmctld.pid
SlurmdPidFile=$D/run/slurmd.%n.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=${TASK_PLUGIN}
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
SlurmdParameters=config_overrides
SwitchType=switch/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MailProg=/bin/true
ReturnToService=2
KillWait=5
MinJobAge=30
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=60
Waittime=0
CONF
[ "$GPUS" -gt 0 ] && echo "GresTypes=gpu"
for i in $(seq 1 "$NODES"); do
    echo "NodeName=node$i NodeAddr=${CL_NET}.$i NodeHostname=node$i CPUs=$CPUS Sockets=1 CoresPerSocket=$CPUS ThreadsPerCore=1 RealMemory=1000$( [ "$GPUS" -gt 0 ] && echo " Gres=gpu:$GPUS") State=UNKNOWN"
done
echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
} > "$CL_CONF"
echo "PMIxCliTmpDirBase=$D/nodetmp" > "$D/etc/mpi.conf"
if [ "$GPUS" -gt 0 ]; then
    if [ "$GPUS" -eq 1 ]; then f="$D/dev/nvidia0"; else f="$D/dev/nvidia[0-$((GPUS - 1))]"; fi
    echo "NodeName=node[1-$NODES] Name=gpu File=$f" > "$D/etc/gres.conf"
else
    : > "$D/etc/gres.conf"
fi
{
    echo "127.0.0.1 localhost"
    echo "${CL_CTLD_IP} ${CTLD_NAME} ctld"
    for i in $(seq 1 "$NODES"); do echo "${CL_NET}.$i node$i"; done
} > "$D/etc/hosts"
export SLURM_CONF=$CL_CONF

# ---- network: bridge + one veth pair and netns per node -------------------------------------
ip link add "$CL_BR" type bridge
ip link set dev "$CL_BR" alias "$D"      # owner mark, checked by up.sh/down.sh of other DIRs
ip addr add "${CL_CTLD_IP}/24" dev "$CL_BR"
ip link set "$CL_BR" up
for i in $(seq 1 "$NODES"); do
    ns=$(cl_ns "$i"); v=$(cl_veth "$i")
    ip netns add "$ns"
    ip link add "$v" type veth peer name "${v}p"
    ip link set "${v}p" netns "$ns"
    ip link set "$v" master "$CL_BR" up
    nsenter --net="/run/netns/$ns" sh -ec "
        ip link set lo up
        ip link set ${v}p name eth0
        ip addr add ${CL_NET}.$i/24 dev eth0
        ip link set eth0 up"
done
# Shaping, and a record of it for env.sh and humans: one line per node.
: > "$D/etc/link"
for i in $(seq 1 "$NODES"); do
    [ ${#LINKS[@]} -gt 0 ] || break
    link_apply "$(cl_ns "$i")" "$(cl_veth "$i")" "${LINKS[$((i - 1))]}" || fail "tc could not shape node$i's link (${LINKS[$((i - 1))]})"
    echo "node$i ${LINKS[$((i - 1))]}: $(link_describe "${LINKS[$((i - 1))]}")" >> "$D/etc/link"
done

# ---- slurmctld (host network namespace, listens on the bridge address) ---------------------
slurmctld -i >>"$D/log/slurmctld.out" 2>&1 || fail "slurmctld did not start"
for _ in $(seq 100); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.1; done
scontrol ping 2>/dev/null | grep -q UP || fail "slurmctld does not answer scontrol ping"

# ---- slurmd per node: own mount+UTS namespace (hostname, /etc/hosts), own netns ------------
for i in $(seq 1 "$NODES"); do
    ns=$(cl_ns "$i")
    unshare --mount --uts --propagation private sh -ec "
        mount --bind '$D/etc/hosts' /etc/hosts
        mount --bind '$D/tmp/node$i' '$D/nodetmp'
        hostname node$i
        exec nsenter --net=/run/netns/$ns slurmd -N node$i" >>"$D/log/slurmd.node$i.out" 2>&1 \
        || fail "slurmd node$i did not start"
done

# ---- wait until every node is idle ----------------------------------------------------------
deadline=$(( $(date +%s) + UP_TIMEOUT ))
while :; do
    idle=$(sinfo -h -N -t idle -o '%N' 2>/dev/null | sort -u | wc -l)
    [ "$idle" -ge "$NODES" ] && break
    [ "$(date +%s)" -lt "$deadline" ] || fail "only $idle of $NODES nodes idle after ${UP_TIMEOUT}s: $(sinfo -N -h -o '%N %T' 2>&1 | tr '\n' ' ')"
    sleep 0.2
done
trap - ERR INT TERM
printf 'up.sh: %d node(s) idle in %.1f s (dir %s, bridge %s, net %s.0/24, slurmctld port %s, link %s)\n' \
    "$NODES" "$(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')" "$D" "$CL_BR" "$CL_NET" "$CL_CTLD_PORT" \
    "${LINK:-unshaped}" >&2
sed 's/^/up.sh: link /' "$D/etc/link" >&2
echo "export SLURM_CONF=$CL_CONF"
