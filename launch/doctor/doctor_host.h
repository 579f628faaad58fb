/*
 * doctor_host.h - doctor's launcher, MPI, CPU and memory checks: what one rank collects
 * (host_facts.c) and the checks over it (host_checks.c), and the timed allreduces (comm_check.c).
 */
#ifndef DT_LAUNCH_DOCTOR_HOST_H
#define DT_LAUNCH_DOCTOR_HOST_H

#include "dtrain.h"

struct doc_list;
struct doctor_facts;

/* One rank's host facts: plain fixed-size data (gathered as bytes). */
typedef struct doctor_host_facts {
    int collected; /* 1 once doctor_host_collect ran */
} doctor_host_facts;

/* Fills *f for this rank, whose placement is pl. Never fails: what cannot be read is recorded as
 * absent, and the checks say so. */
void doctor_host_collect(doctor_host_facts *f, const dt_placement *pl);

/* The per-rank host checks over one rank's facts, into out (a scratch list). */
void doctor_host_check_rank(const struct doctor_facts *f, struct doc_list *out);
/* The per-job host checks over every rank's facts (world entries), into job. */
void doctor_host_check_job(const struct doctor_facts *all, int world, struct doc_list *job);

#endif
