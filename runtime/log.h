/*
 * log.h - leveled logging to stderr with a `host:pid [rank r] dtrain LEVEL` prefix.
 *
 * DTRAIN_LOG=warn|info|debug picks the level (default warn). Errors are always printed, by every
 * rank; dt_log0 prints only on rank 0 (step lines, the effective configuration).
 */
#ifndef DT_RUNTIME_LOG_H
#define DT_RUNTIME_LOG_H

#include "dtrain.h"

typedef enum { DT_LOG_ERROR = 0, DT_LOG_WARN = 1, DT_LOG_INFO = 2, DT_LOG_DEBUG = 3 } dt_log_level;

/* Reads DTRAIN_LOG; a value other than error|warn|info|debug fails with DT_ERR_ENV. */
dt_status log_init_from_env(void);
void log_set_level(dt_log_level l);
dt_log_level log_get_level(void);
/* Whether lines of level l are printed: check it before formatting a costly debug line. */
static inline int log_enabled(dt_log_level l) { return l <= log_get_level(); }
/* Called once the rank is known; before that the prefix says [rank ?]. */
void log_set_rank(int rank);

void dt_log(dt_log_level l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Like dt_log, but only on rank 0 (or while the rank is unknown). */
void dt_log0(dt_log_level l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
