/*
 * memory_check.c - PLACEHOLDER until the memory checks land: collects nothing and says so in one
 * SKIP row, so --model does not seem to have been checked.
 */
#include "launch/doctor/doctor.h"

void doctor_memory_collect(doctor_mem_facts *f, dt_ctx *ctx, const doctor_model_query *q)
{
    (void)ctx, (void)q;
    f->collected = 1;
}
void doctor_memory_check_rank(const doctor_facts *f, doc_list *out)
{
    (void)f;
    doc_add(out, "memory.checks", DOC_SKIP, "",
            "this version of doctor does not check memory yet (--model is accepted and not yet planned)");
}
void doctor_memory_check_job(const doctor_facts *all, int world, doc_list *job) { (void)all, (void)world, (void)job; }
