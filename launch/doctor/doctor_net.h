/*
 * doctor_net.h - doctor's net.env row (net_env.c): the MPI, UCX and NCCL transport variables set
 * in a rank's environment, read before MPI_Init, and the breaks visible without MPI (a btl list
 * without a usable transport, an interface that does not exist on this node, NCCL_DEBUG=INFO).
 * Read before MPI_Init because a bad one can kill MPI_Init itself: the row is then what doctor
 * can still say.
 */
#ifndef DT_LAUNCH_DOCTOR_NET_H
#define DT_LAUNCH_DOCTOR_NET_H

struct doc_list;

/* One rank's row: plain fixed-size data (gathered as bytes). */
typedef struct doctor_net_facts {
    int collected;
    int level;      /* a doc_level: PASS or WARN */
    char seen[320]; /* the variables set, then what is wrong */
    char fix[320];  /* "" for PASS */
} doctor_net_facts;

/* Reads this process's environment into *f. Not collective; needs no MPI. */
void doctor_net_collect(doctor_net_facts *f);

/* Appends f's row (net.env) to out (a per-rank scratch list or the job list). */
void doctor_net_check(const doctor_net_facts *f, struct doc_list *out);

#endif
