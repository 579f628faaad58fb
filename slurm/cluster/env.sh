# env.sh DIR — the environment a test needs to talk to the cluster that up.sh started in DIR.
#   . slurm/cluster/env.sh DIR      sets it in the current shell
#   slurm/cluster/env.sh DIR        prints `export ...` lines (eval "$(slurm/cluster/env.sh DIR)"),
#                                   and `# link: ...` comments saying how up.sh shaped each node
_dt_env() {
    local d here
    [ $# -eq 1 ] || { echo "usage: env.sh DIR" >&2; return 2; }
    d=$(cd "$1" 2>/dev/null && pwd -P) || { echo "env.sh: no such directory: $1" >&2; return 1; }
    [ -f "$d/etc/slurm.conf" ] || { echo "env.sh: $d/etc/slurm.conf missing (run up.sh $1 first)" >&2; return 1; }
    local p=$PATH
    case ":$p:" in *:/usr/sbin:*) ;; *) p=$p:/usr/sbin ;; esac
    case ":$p:" in *:/usr/bin:*) ;; *) p=/usr/bin:$p ;; esac
    # SLURM_CONF: the cluster's own config; OMPI_MCA_mpi_yield_when_idle=1: more ranks than cores
    # otherwise makes small MPI collectives ~500x slower (busy polling, see MACHINE-FACTS).
    printf 'export SLURM_CONF=%q\nexport PATH=%q\nexport OMPI_MCA_mpi_yield_when_idle=1\n' \
        "$d/etc/slurm.conf" "$p"
    # Open MPI's transports, named rather than left to its probing, so traffic between nodes is
    # TCP over the cluster's bridge (the link up.sh --link shapes) and within a node shared memory:
    # pml ob1 (the BTL path; pml ucx or cm/ofi would pick their own transports and ignore the BTL
    # list), btl self,vader,tcp (openib/ofi off: no such hardware), and TCP only on the bridge
    # subnet (each node has just lo and eth0; lo would "connect" two nodes' ranks to themselves).
    # btl_tcp_flags without "put": with the TCP BTL's put pipeline, a two-way exchange whose
    # receive is posted before its send (MPI_Sendrecv, and so MPI_Allreduce's ring and recursive
    # doubling) moves one direction at a time, half the link's rate when the link is the limit
    # (measured at 200 Mbit/s: 12.0 vs 24.0 MB/s each way); plain send/receive fragments keep both
    # directions busy. Unshaped, where the CPU is the limit, put was up to ~30% faster here.
    local net
    net=$(sed -n 's/.*NodeAddr=\([0-9]*\.[0-9]*\.[0-9]*\)\.[0-9]*.*/\1/p' "$d/etc/slurm.conf" | head -n 1)
    printf 'export OMPI_MCA_pml=ob1\nexport OMPI_MCA_btl=self,vader,tcp\nexport OMPI_MCA_btl_tcp_if_include=%s.0/24\n' "$net"
    printf 'export OMPI_MCA_btl_tcp_flags=send,inplace,need-ack,need-csum\n'
    # The shaping up.sh --link set, as comments (eval skips them), one line per node.
    if [ -s "$d/etc/link" ]; then sed 's/^/# link: /' "$d/etc/link"; else echo "# link: unshaped (veth, no tc)"; fi
}
if [ "${BASH_SOURCE[0]}" != "$0" ]; then
    _dt_out=$(_dt_env "$@") && eval "$_dt_out"; unset _dt_out; unset -f _dt_env
else
    _dt_env "$@"
fi
