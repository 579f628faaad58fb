/*
 * doctor.h - `dtrain doctor`: what is wrong with this job's set-up, for every rank at once.
 *
 * Each rank collects its facts (doctor_facts: plain fixed-size data, so MPI_Gather moves them as
 * bytes); rank 0 then runs the checks over every rank's facts and prints one table. A check is a
 * pure function of facts, which is what lets the tests fake any environment: a unit test builds the
 * facts, a script test fakes what the collectors read (variables, /dev nodes in a namespace, the
 * test hooks of doctor_cuda.h).
 *
 * Checks come in two kinds:
 *   - per rank: run once for each rank's facts; rows that come out identical for several ranks are
 *     merged into one row listing those ranks ("0-3,6"), so a 512-rank job prints a few rows, not
 *     512 copies;
 *   - per job: run once over all ranks' facts, for what no single rank can see (two ranks on one
 *     GPU, overlapping cores on a node, the slowest node).
 *
 * Files: doctor_rows.c (the rows, merging, the table and --json), cmd_doctor.c (the command),
 * host_facts.c + host_checks.c (launcher, MPI, CPU, memory), comm_check.c (timed allreduces),
 * cuda_facts.c + cuda_parse.c + cuda_checks.c + cuda_job.c (driver, runtime, libraries, /dev nodes,
 * visible devices, toolkit, NUMA, NVML; two ranks on one GPU, ranks per node's GPUs),
 * memory_facts.c + memory_check.c (host memory, the largest batch that fits), node_facts.c +
 * node_checks.c (/dev/shm, cgroup CPU quota, resource limits), net_env.c (the transport
 * variables, read before MPI_Init), path_checks.c (--checkpoint-dir, --data, --metrics).
 */
#ifndef DT_LAUNCH_DOCTOR_H
#define DT_LAUNCH_DOCTOR_H

#include "dtrain.h"
#include "launch/doctor/doctor_cuda.h"
#include "launch/doctor/doctor_host.h"
#include "launch/doctor/doctor_memory.h"
#include "launch/doctor/doctor_net.h"
#include "launch/doctor/doctor_paths.h"

#include <stdarg.h>
#include <stdio.h>

/* A verdict. SKIP: the check does not apply here (no GPU in the job, NVML not installed), said so
 * rather than counted as a pass. The order is the severity order: the worst of a set is the max. */
typedef enum doc_level { DOC_PASS, DOC_SKIP, DOC_WARN, DOC_FAIL } doc_level;

/* "PASS", "SKIP", "WARN", "FAIL". */
const char *doc_level_name(doc_level lv);

#define DOC_NAME 40
#define DOC_TEXT 320

/* One row of the report: a check's verdict for a set of ranks. */
typedef struct doc_row {
    char name[DOC_NAME]; /* stable id, "<group>.<check>": "cuda.driver", "cpu.overlap"; --json's key */
    doc_level level;
    char seen[DOC_TEXT];  /* what was found, with the values: "driver 535.104 supports CUDA up to 12.2" */
    char fix[DOC_TEXT];   /* the exact fix; "" for PASS and SKIP */
    unsigned char *ranks; /* which ranks the row is about: a bitmap of world bits, NULL = the job */
} doc_row;

/* A growing list of rows. The list owns its rows' rank bitmaps. */
typedef struct doc_list {
    doc_row *rows;
    int n, cap;
    int world; /* bitmap size, in ranks; 0 for a per-rank scratch list */
    int nomem; /* an allocation failed: rows were lost and the report says so */
} doc_list;

void doc_list_init(doc_list *l, int world);
void doc_list_free(doc_list *l);

/* Appends a row: name, level, fix ("" or NULL for none) and seen as printf(fmt, ...). Texts
 * longer than DOC_TEXT are cut with "...". Out of memory sets l->nomem. */
void doc_add(doc_list *l, const char *name, doc_level lv, const char *fix, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void doc_vadd(doc_list *l, const char *name, doc_level lv, const char *fix, const char *fmt, va_list ap);

/* Appends printf(fmt, ...) to the text in buf (cap >= 4 bytes, holding a string), for the texts
 * a check builds piece by piece (a list of ranks, of nodes, of device nodes) before doc_add: a
 * text that outgrows buf ends in "..." (never a split UTF-8 character), so the row shows the cut
 * where snprintf would end it silently; once cut, later pieces leave it as it is. */
void doc_append(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Appends a job row about the given ranks (n of them, any order; n 0 = the whole job). */
void doc_add_ranks(doc_list *job, const int *ranks, int n, const char *name, doc_level lv, const char *fix,
                   const char *fmt, ...) __attribute__((format(printf, 7, 8)));

/* Merges the per-rank rows of one rank into job: a row equal in name, level, seen and fix to a
 * row already there gains this rank; any other is appended for this rank alone. */
void doc_merge_rank(doc_list *job, const doc_list *one, int rank);

/* The worst level in the list; DOC_PASS for an empty list. */
doc_level doc_worst(const doc_list *l);

/* Writes the ranks of a row as ranges, "all", "0-3,6", or "job" for NULL, into out (n bytes,
 * cut with "..." when longer). */
void doc_ranks_text(const doc_list *l, const doc_row *r, char *out, size_t n);

/* What the report says about the job itself, above the table. */
typedef struct doc_header {
    const char *version; /* dt_version_string() */
    int world, nodes;
    const char *devices; /* "cpu", "cuda" */
} doc_header;

/* The table for people: one row per check (CHECK STATUS RANKS SEEN), the fix indented under a row
 * that has one, and a summary line (counts per level). Rows print in list order. */
void doc_print_table(FILE *f, const doc_header *h, const doc_list *l);
/* The same as one JSON object: {"dtrain":..., "world":..., "nodes":..., "checks":[{"name","group",
 * "status","ranks":[...] or "job","seen","fix"}], "summary":{"pass","skip","warn","fail"},
 * "status":"pass|warn|fail"}. */
void doc_print_json(FILE *f, const doc_header *h, const doc_list *l);

/* Everything one rank reports: gathered to rank 0 as sizeof(doctor_facts) bytes. */
typedef struct doctor_facts {
    dt_placement pl;
    doctor_host_facts host;
    doctor_cuda_facts cuda;
    doctor_mem_facts mem;
    doctor_net_facts net;
    doctor_path_facts paths;
} doctor_facts;

#endif
