/*
 * log.h - leveled logging to stderr with a `host:pid [rank r] dtrain LEVEL` prefix.
 *
 * DTRAIN_LOG=warn|info|debug picks the level (default warn). Errors are always printed, by every
 * rank; log_msg0 prints only on rank 0 (step lines, the effective configuration).
 */
#ifndef DT_BASE_LOG_H
#define DT_BASE_LOG_H

#include "dtrain.h"

typedef enum { LOG_LEVEL_ERROR = 0, LOG_LEVEL_WARN = 1, LOG_LEVEL_INFO = 2, LOG_LEVEL_DEBUG = 3 } log_level;

/* Reads DTRAIN_LOG; a value other than error|warn|info|debug fails with DT_ERR_ENV. */
dt_status log_init_from_env(void);
void log_set_level(log_level l);
log_level log_get_level(void);
/* Whether lines of level l are printed: check it before formatting a costly debug line. */
static inline int log_enabled(log_level l) { return l <= log_get_level(); }
/* Called once the rank is known; before that the prefix says [rank ?]. */
void log_set_rank(int rank);

void log_msg(log_level l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Like log_msg, but only on rank 0 (or while the rank is unknown). */
void log_msg0(log_level l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
