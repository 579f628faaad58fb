#!/bin/bash
# down.sh DIR — stops the cluster that up.sh started in DIR and removes everything it created
# outside DIR (processes, network namespaces, veths, bridge, mounts). Safe to run twice, and after
# an up.sh that failed halfway. Files under DIR (logs, config) are kept.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "down.sh: must run as root" >&2; exit 1; }
PATH=$PATH:/usr/sbin:/sbin
. "$HERE/common.sh"
cl_init "$1"   # works even if DIR is gone: names derive from the path
owner=$(cl_bridge_owner)
if [ -n "$owner" ] && [ "$owner" != "$CL_DIR" ]; then
    echo "down.sh: bridge $CL_BR and its namespaces belong to the cluster in $owner, not $CL_DIR: not touching them" >&2
    exit 1
fi
D=$CL_DIR

# ---- collect pids: pid files, everything inside our netns, daemons naming DIR, sruns on it ---
pids=()
# live = exists and is not a zombie (zombies are already dead; init reaps them later)
live() { local st; { read -r st <"/proc/$1/stat"; } 2>/dev/null || return 1; st=${st##*) }; [ "${st%% *}" != Z ]; }
comm() { local c=; { read -r c <"/proc/$1/comm"; } 2>/dev/null; echo "$c"; }
add() { local p q; for p in "$@"; do [[ $p =~ ^[0-9]+$ ]] && [ "$p" != $$ ] && live "$p" || continue
    for q in "${pids[@]}"; do [ "$q" = "$p" ] && continue 2; done; pids+=("$p"); done; return 0; }
collect() {
    pids=()
    local pf ns p
    for pf in "$D"/run/*.pid; do   # only if the pid still is a munged/slurm daemon (pids get reused)
        [ -f "$pf" ] || continue; p=$(cat "$pf" 2>/dev/null)
        case "$(comm "$p")" in munged|slurm*) add "$p" ;; esac
    done
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^${CL_TAG}-node" || true); do
        add $(ip netns pids "$ns" 2>/dev/null)
    done
    for p in /proc/[0-9]*; do
        p=${p#/proc/}
        # only munged/slurm*/srun/salloc/sbatch: those naming DIR on their command line (munged),
        # or with this cluster's SLURM_CONF in their environment (slurm daemons, steps, sruns)
        case "$(comm "$p")" in
            munged|slurm*|srun|salloc|sbatch)
                if { tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null | grep -qF -- "$D/" ||
                   { tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null | grep -qxF "SLURM_CONF=$CL_CONF"; then
                    add "$p"
                fi ;;
        esac
    done
}
# wait until none of the given pids is alive, at most $1 tenths of a second
waitgone() { local n=$1 p a; shift; while [ "$n" -gt 0 ]; do a=0
    for p in "$@"; do live "$p" && { a=1; break; }; done; [ $a = 0 ] && return 0; sleep 0.1; n=$((n-1)); done; return 1; }
collect
if [ ${#pids[@]} -gt 0 ]; then
    # 1. job steps, their tasks and sruns (clients) are disposable: SIGKILL (an srun would catch
    #    SIGTERM and wait for its step)
    steps=(); daemons=(); mp=$(cat "$D/run/munged.pid" 2>/dev/null || true)
    for p in "${pids[@]}"; do
        case "$(comm "$p")" in
            slurmctld|slurmd|slurmscriptd|munged) daemons+=("$p") ;;
            *) steps+=("$p") ;;
        esac
    done
    [ ${#steps[@]} -gt 0 ] && kill -KILL "${steps[@]}" 2>/dev/null
    # 2. daemons and sruns: SIGTERM, then SIGKILL after 5 s; munged last
    others=(); for p in "${daemons[@]}"; do [ "$p" = "$mp" ] || others+=("$p"); done
    if [ ${#others[@]} -gt 0 ]; then
        kill -TERM "${others[@]}" 2>/dev/null
        waitgone 50 "${others[@]}" || { echo "down.sh: SIGKILL ${others[*]}" >&2; kill -KILL "${others[@]}" 2>/dev/null; }
    fi
    collect   # anything that appeared meanwhile, and munged
    if [ ${#pids[@]} -gt 0 ]; then
        kill -TERM "${pids[@]}" 2>/dev/null
        waitgone 50 "${pids[@]}" || { echo "down.sh: SIGKILL ${pids[*]}" >&2; kill -KILL "${pids[@]}" 2>/dev/null; waitgone 20 "${pids[@]}"; }
    fi
fi
rm -f "$D"/run/*.pid 2>/dev/null

# ---- mounts under DIR in the host mount namespace (up.sh makes none here; belt and braces) ---
awk -v d="$D/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo 2>/dev/null | sort -r |
    while read -r m; do umount -l "$m" 2>/dev/null; done

# ---- network namespaces, veths (nodes', and up.sh's netem probe pair), bridge ------------------
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^${CL_TAG}-node" || true); do
    ip netns del "$ns" 2>/dev/null || { umount -l "/run/netns/$ns" 2>/dev/null; rm -f "/run/netns/$ns"; }
done
for v in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^${CL_TAG}(v[0-9]+p?|nt[01])$" || true); do
    ip link del "$v" 2>/dev/null
done
ip link show "$CL_BR" >/dev/null 2>&1 && ip link del "$CL_BR" 2>/dev/null

# ---- report what is left (non-zero exit if anything) -----------------------------------------
collect
left=""
[ ${#pids[@]} -gt 0 ] && left+=" processes:${pids[*]}"
ip netns list 2>/dev/null | grep -q "^${CL_TAG}-node" && left+=" netns"
ip link show "$CL_BR" >/dev/null 2>&1 && left+=" bridge"
if [ -n "$left" ]; then echo "down.sh: left behind:$left" >&2; exit 1; fi
echo "down.sh: $D is down" >&2
exit 0
