/*
 * doctor_cuda.h - doctor's CUDA checks: what one rank collects (cuda_facts.c) and the checks over
 * it (cuda_checks.c). Declared apart from doctor.h so the CUDA facts have one owner.
 */
#ifndef DT_LAUNCH_DOCTOR_CUDA_H
#define DT_LAUNCH_DOCTOR_CUDA_H

#include "dtrain.h"

struct doc_list;
struct doctor_facts;

/* One rank's CUDA facts: plain fixed-size data (gathered as bytes). */
typedef struct doctor_cuda_facts {
    int collected; /* 1 once doctor_cuda_collect ran */
} doctor_cuda_facts;

/* Fills *f for this rank, whose placement is pl. Never fails: what cannot be read is recorded as
 * absent, and the checks say so. */
void doctor_cuda_collect(doctor_cuda_facts *f, const dt_placement *pl);

/* The per-rank CUDA checks over one rank's facts, into out (a scratch list). */
void doctor_cuda_check_rank(const struct doctor_facts *f, struct doc_list *out);
/* The per-job CUDA checks over every rank's facts (world entries), into job. */
void doctor_cuda_check_job(const struct doctor_facts *all, int world, struct doc_list *job);

#endif
