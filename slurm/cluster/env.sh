# env.sh DIR — the environment a test needs to talk to the cluster that up.sh started in DIR.
#   . slurm/cluster/env.sh DIR      sets it in the current shell
#   slurm/cluster/env.sh DIR        prints `export ...` lines (eval "$(slurm/cluster/env.sh DIR)")
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
}
if [ "${BASH_SOURCE[0]}" != "$0" ]; then
    _dt_out=$(_dt_env "$@") && eval "$_dt_out"; unset _dt_out; unset -f _dt_env
else
    _dt_env "$@"
fi
