/*
 * net_env.c - doctor's net.env row: the transport variables (OMPI_MCA_btl*, OMPI_MCA_pml, UCX_TLS,
 * UCX_NET_DEVICES, NCCL_SOCKET_IFNAME, NCCL_IB_*, NCCL_DEBUG, the *_if_include lists) as the rank
 * sees them before MPI_Init, and what can be told wrong without starting MPI:
 *   - OMPI_MCA_btl that leaves no transport Open MPI can use between two processes (self alone,
 *     or ^self...: the ob1 pml then finds no path and MPI_Init or the first send dies);
 *   - an interface list naming an interface this node does not have (if_nametoindex), which
 *     Open MPI's tcp btl or NCCL's socket transport then waits on or refuses;
 *   - NCCL_DEBUG=INFO or TRACE: a line per channel and call on every rank, slow and noisy.
 * A subnet (10.0.0.0/8) or a NCCL prefix rule (^eth, =eth0) is read as NCCL and Open MPI read
 * it: only plain names are looked up.
 */
#include "launch/doctor/doctor_net.h"

#include "launch/doctor/doctor.h"

#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

extern char **environ;

static int transport_var(const char *kv)
{
    static const char *const prefix[] = {"OMPI_MCA_btl", "OMPI_MCA_pml=",    "OMPI_MCA_oob_tcp_if",
                                         "UCX_TLS=",     "UCX_NET_DEVICES=", "NCCL_SOCKET_IFNAME=",
                                         "NCCL_IB_",     "NCCL_DEBUG="};
    for (size_t i = 0; i < sizeof prefix / sizeof *prefix; i++)
        if (!strncmp(kv, prefix[i], strlen(prefix[i]))) return 1;
    return 0;
}

/* OMPI_MCA_btl: a list, or ^list to exclude. Usable between processes: vader/sm (one node), tcp,
 * ofi, uct, openib. self alone talks only to itself; ^self leaves the rest (Open MPI then runs). */
static int btl_usable(const char *v)
{
    static const char *const between[] = {"vader", "sm", "tcp", "ofi", "uct", "openib", "smcuda"};
    const int exclude = v[0] == '^';
    char list[256];
    snprintf(list, sizeof list, ",%s,", v + exclude);
    int listed = 0;
    for (size_t i = 0; i < sizeof between / sizeof *between; i++) {
        char item[32];
        snprintf(item, sizeof item, ",%s,", between[i]);
        if (strstr(list, item))
            listed++;
        else if (exclude)
            return 1; /* one transport between processes is left */
    }
    return !exclude && listed > 0;
}

/* The names of list (comma-separated; NCCL's ^ and = prefixes dropped) this node lacks, into
 * out. Entries that are not plain names (a subnet, a UCX device "mlx5_0:1") are not looked up. */
static void missing_ifaces(const char *list, char *out, size_t n)
{
    out[0] = '\0';
    if (list[0] == '^') return; /* an exclusion list names what not to use */
    /* The whole list: a copy cut to a fixed size would end in a piece of a name ("mlx5" of
     * "mlx5_0:1") and report it missing. */
    char *copy = strdup(list[0] == '=' ? list + 1 : list);
    if (!copy) return;
    for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (!*tok || strpbrk(tok, "/:.") || strlen(tok) >= IF_NAMESIZE) continue;
        /* NCCL_SOCKET_IFNAME=eth is a prefix (eth0, eth1): an exact name is needed only with '='. */
        if (if_nametoindex(tok)) continue;
        if (list[0] != '=') {
            struct if_nameindex *all = if_nameindex(), *i;
            int prefix = 0;
            for (i = all; i && i->if_name; i++) prefix |= !strncmp(i->if_name, tok, strlen(tok));
            if (all) if_freenameindex(all);
            if (prefix) continue;
        }
        doc_append(out, n, "%s%s", out[0] ? "," : "", tok);
    }
    free(copy);
}

void doctor_net_collect(doctor_net_facts *f)
{
    memset(f, 0, sizeof *f);
    f->collected = 1;
    f->level = DOC_PASS;
    /* The variables set may outgrow the row (their cut below shows it); what is wrong and the fix
     * end in "..." should they ever outgrow theirs (doc_append). */
    char set[2 * sizeof f->seen] = "", wrong[sizeof f->seen] = "", fix[sizeof f->fix] = "";
    for (char **e = environ; *e; e++)
        if (transport_var(*e)) doc_append(set, sizeof set, "%s%s", set[0] ? " " : "", *e);
    const char *btl = getenv("OMPI_MCA_btl");
    if (btl && *btl && !btl_usable(btl)) {
        doc_append(wrong, sizeof wrong, "%sOMPI_MCA_btl=%.64s leaves no transport between ranks", wrong[0] ? "; " : "",
                   btl);
        doc_append(fix, sizeof fix, "%s%s", fix[0] ? "; " : "",
                   "unset OMPI_MCA_btl, or list self with a transport (self,vader,tcp)");
    }
    static const char *const lists[] = {"OMPI_MCA_btl_tcp_if_include", "OMPI_MCA_oob_tcp_if_include",
                                        "NCCL_SOCKET_IFNAME", "UCX_NET_DEVICES"};
    for (size_t i = 0; i < sizeof lists / sizeof *lists; i++) {
        const char *v = getenv(lists[i]);
        char missing[128];
        if (!v || !*v || !strcmp(v, "all")) continue;
        missing_ifaces(v, missing, sizeof missing);
        if (!missing[0]) continue;
        char what[200];
        snprintf(what, sizeof what, "%s names %s", lists[i], missing);
        doc_append(wrong, sizeof wrong, "%s%s, not an interface of this node", wrong[0] ? "; " : "", what);
        doc_append(fix, sizeof fix, "%s%s", fix[0] ? "; " : "",
                   "name interfaces this node has (ip -br link) or unset the variable");
    }
    const char *dbg = getenv("NCCL_DEBUG");
    if (dbg && (!strcasecmp(dbg, "INFO") || !strcasecmp(dbg, "TRACE"))) {
        doc_append(wrong, sizeof wrong, "%sNCCL_DEBUG=%s prints on every rank for every call (slow, noisy)",
                   wrong[0] ? "; " : "", dbg);
        doc_append(fix, sizeof fix, "%s%s", fix[0] ? "; " : "", "unset NCCL_DEBUG (or WARN) outside a debugging run");
    }
    /* What is wrong must survive the row's size: the variables' values (one long list is enough to
     * fill it) give way to it, cut with "...". */
    const char *vars = set[0] ? set : "no MPI/UCX/NCCL transport variable set";
    const size_t need = wrong[0] ? strlen(wrong) + 2 : 0, vlen = strlen(vars);
    const size_t room = need < sizeof f->seen - 1 ? sizeof f->seen - 1 - need : 0;
    const int cut = vlen > room;
    const int keep = (int)(cut ? (room > 3 ? room - 3 : 0) : vlen);
    doc_append(f->seen, sizeof f->seen, "%.*s%s%s", keep, vars, cut && room >= 3 ? "..." : "", wrong[0] ? ": " : "");
    doc_append(f->seen, sizeof f->seen, "%s", wrong);
    if (wrong[0]) {
        f->level = DOC_WARN;
        snprintf(f->fix, sizeof f->fix, "%s", fix);
    }
}

void doctor_net_check(const doctor_net_facts *f, doc_list *out)
{
    if (!f->collected) return;
    doc_add(out, "net.env", (doc_level)f->level, f->fix, "%s", f->seen);
}
