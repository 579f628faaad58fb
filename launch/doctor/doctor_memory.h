/*
 * doctor_memory.h - doctor's memory checks: host memory free per node, and with --model the
 * largest batch that fits on this rank's device from the model's memory plan (memory_check.c).
 */
#ifndef DT_LAUNCH_DOCTOR_MEMORY_H
#define DT_LAUNCH_DOCTOR_MEMORY_H

#include "dtrain.h"

struct doc_list;
struct doctor_facts;

/* What --model/--input/--precision ask doctor to plan for; model NULL: no model check. */
typedef struct doctor_model_query {
    const char *model, *input;
    dt_dtype precision;
    int batch; /* the batch the user means to run (0: not given) */
} doctor_model_query;

/* One rank's memory facts: plain fixed-size data (gathered as bytes). */
typedef struct doctor_mem_facts {
    int collected; /* 1 once doctor_memory_collect ran */
} doctor_mem_facts;

/* Fills *f for this rank of ctx (q may be NULL). Never fails: what cannot be read or planned is
 * recorded, and the checks say so. Not collective. */
void doctor_memory_collect(doctor_mem_facts *f, dt_ctx *ctx, const doctor_model_query *q);

/* The per-rank memory checks over one rank's facts, into out (a scratch list). */
void doctor_memory_check_rank(const struct doctor_facts *f, struct doc_list *out);
/* The per-job memory checks over every rank's facts (world entries), into job. */
void doctor_memory_check_job(const struct doctor_facts *all, int world, struct doc_list *job);

#endif
