/*
 * hostlist_fail.h - internal to the SLURM list parsers (hostlist.c, tasks_per_node.c): one wording
 * for their refusals, so that a bad SLURM_JOB_NODELIST and a bad SLURM_TASKS_PER_NODE read alike.
 */
#ifndef DT_RUNTIME_PLACEMENT_HOSTLIST_FAIL_H
#define DT_RUNTIME_PLACEMENT_HOSTLIST_FAIL_H

#include "dtrain.h"

static inline int hostlist_is_digit(char c) { return c >= '0' && c <= '9'; }

/* Describes one character for a message: printable ones quoted, others by code, so a stray
 * tab or newline is visible. Returns buf. */
const char *hostlist_char_desc(char c, char buf[24]);

/* Records "<what>='<s>' is not a valid <kind>: <reason> (expected <example>)" and returns
 * DT_ERR_ENV. Without a what: "<kind> '<s>' is not valid: ...". s is quoted in full up to 1000
 * characters, then cut with "...". */
dt_status hostlist_fail(const char *what, const char *kind, const char *example, const char *s, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#endif
