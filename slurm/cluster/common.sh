# Shared by up.sh / down.sh / env.sh: names derived from the cluster directory.
# Usage: . common.sh DIR   (sets CL_* variables; DIR need not exist)
cl_init() {
    CL_DIR=$(realpath -m "$1")
    # A small id from the directory path, so two clusters in two dirs do not collide:
    # bridge/veth/netns names, subnet 10.231.ID.0/24 and slurmctld port.
    CL_ID=$(( $(printf '%s' "$CL_DIR" | cksum | cut -d' ' -f1) % 200 + 20 ))
    CL_TAG=dt${CL_ID}                      # prefix of every kernel object we create
    CL_BR=${CL_TAG}br                      # bridge
    CL_NET=10.231.${CL_ID}                 # /24
    CL_CTLD_IP=${CL_NET}.254               # bridge address = slurmctld address
    CL_CTLD_PORT=$((16800 + CL_ID))
    CL_CONF=$CL_DIR/etc/slurm.conf
    CL_MUNGE_SOCK=$CL_DIR/munge/munge.socket.2
}
# netns name of node i
cl_ns() { echo "${CL_TAG}-node$1"; }
# host-side veth of node i (<= 15 chars)
cl_veth() { echo "${CL_TAG}v$1"; }
# DIR of the cluster that owns the bridge (its alias), empty if none
cl_bridge_owner() { { ip -d link show "$CL_BR" 2>/dev/null || true; } | sed -n 's/^ *alias //p'; }
