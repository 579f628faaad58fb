/*
 * status.h - the thread-local last-error message behind dt_last_error().
 *
 * Every failing internal function records what failed, the offending value and the fix with
 * status_set_error(), then returns the status; callers pass the status up unchanged.
 */
#ifndef DT_BASE_STATUS_H
#define DT_BASE_STATUS_H

#include "dtrain.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Records a printf-style message as this thread's last error and returns s, so a failure reads
 * `return status_set_error(DT_ERR_ENV, "SLURM_PROCID='%s' is not a number; ...", v);`. */
dt_status status_set_error(dt_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Clears this thread's last error (dt_last_error() then returns ""). */
void status_clear_error(void);

#ifdef __cplusplus
}
#endif
#endif
