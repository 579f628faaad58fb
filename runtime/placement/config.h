/*
 * config.h - rules of dt_config's settings that the command line and the DTRAIN_* variables share,
 * so a value is taken or refused alike wherever it is given (config.c).
 */
#ifndef DT_RUNTIME_PLACEMENT_CONFIG_H
#define DT_RUNTIME_PLACEMENT_CONFIG_H

#include "dtrain.h"

/* A collective's deadline: 0 = never, else CONFIG_TIMEOUT_MIN_S to CONFIG_TIMEOUT_MAX_S seconds.
 * Under a second, healthy collectives pass the deadline (the first NCCL call, a peer writing a
 * checkpoint, a loaded node), and the watchdog would abort the job blaming live ranks. */
#define CONFIG_TIMEOUT_MIN_S 1.0
#define CONFIG_TIMEOUT_MAX_S 1e7

/* Parses a timeout from the variable or flag `name` (DTRAIN_TIMEOUT, --timeout) into *out under
 * the rule above; errors as parse_double_or_zero's (parse.h): "--timeout '0.5' is out of range
 * (expected 0 (never) or a number from 1 to 10000000)". */
dt_status config_timeout_parse(const char *name, const char *value, double *out);

/* The same rule for a timeout set in code (dt_config.timeout_s). */
static inline int config_timeout_valid(double t)
{
    return t == 0 || (t >= CONFIG_TIMEOUT_MIN_S && t <= CONFIG_TIMEOUT_MAX_S);
}

/* Every field of a dt_config given to dt_init in code, under the rules the DTRAIN_* variables
 * follow: DT_ERR_INVALID_ARG naming the field, its value and the range. */
dt_status config_check(const dt_config *c);

#endif
