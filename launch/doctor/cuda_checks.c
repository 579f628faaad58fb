/*
 * cuda_checks.c - PLACEHOLDER until the CUDA checks land: collects nothing and says so in one SKIP
 * row, so the report does not pass what it did not look at.
 */
#include "launch/doctor/doctor.h"

void doctor_cuda_collect(doctor_cuda_facts *f, const dt_placement *pl)
{
    (void)pl;
    f->collected = 1;
}
void doctor_cuda_check_rank(const doctor_facts *f, doc_list *out)
{
    (void)f;
    doc_add(out, "cuda.checks", DOC_SKIP, "",
            "this version of doctor does not check CUDA yet; dtrain env shows each rank's GPU");
}
void doctor_cuda_check_job(const doctor_facts *all, int world, doc_list *job) { (void)all, (void)world, (void)job; }
