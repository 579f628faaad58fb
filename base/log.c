/*
 * log.c - the logger: one fully formatted line per write so lines of different ranks sharing one
 * terminal do not interleave mid-line.
 */
#include "base/log.h"
#include "base/printable.h"
#include "base/status.h"

#include <stdarg.h>
#include <stdlib.h>
#include <strings.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static log_level current_level = LOG_LEVEL_WARN;
static int log_rank = -1;

static const char *const level_names[] = {"ERROR", "WARN", "INFO", "DEBUG"};

dt_status log_init_from_env(void)
{
    const char *v = getenv("DTRAIN_LOG");
    if (!v || !*v) return DT_OK;
    for (int i = 0; i <= LOG_LEVEL_DEBUG; i++) {
        if (strcasecmp(v, level_names[i]) == 0) {
            current_level = (log_level)i;
            return DT_OK;
        }
    }
    return status_set_error(DT_ERR_ENV, "DTRAIN_LOG='%s' is not a log level; use error, warn, info or debug", v);
}

void log_set_level(log_level l) { current_level = l; }
log_level log_get_level(void) { return current_level; }
void log_set_rank(int rank) { log_rank = rank; }

static void log_vwrite(log_level l, const char *fmt, va_list ap)
{
    char host[64] = "?";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    char line[4096];
    int n;
    if (log_rank >= 0)
        n = snprintf(line, sizeof line, "%s:%d [rank %d] dtrain %s ", host, (int)getpid(), log_rank, level_names[l]);
    else
        n = snprintf(line, sizeof line, "%s:%d [rank ?] dtrain %s ", host, (int)getpid(), level_names[l]);
    if (n < 0 || (size_t)n >= sizeof line) n = 0;
    char msg[sizeof line];
    if (vsnprintf(msg, sizeof msg, fmt, ap) < 0) msg[0] = '\0';
    const size_t end = strlen(msg);
    if (end > 0 && msg[end - 1] == '\n') msg[end - 1] = '\0';
    /* One line, no control character: a name in the message cannot forge a log line or act on
     * the terminal (printable.h). */
    text_escape_controls(msg, line + n, sizeof line - (size_t)n - 1);
    size_t len = strlen(line);
    line[len++] = '\n';
    fwrite(line, 1, len, stderr);
    fflush(stderr);
}

void log_msg(log_level l, const char *fmt, ...)
{
    if (l > current_level) return;
    va_list ap;
    va_start(ap, fmt);
    log_vwrite(l, fmt, ap);
    va_end(ap);
}

void log_msg0(log_level l, const char *fmt, ...)
{
    if (l > current_level || log_rank > 0) return;
    va_list ap;
    va_start(ap, fmt);
    log_vwrite(l, fmt, ap);
    va_end(ap);
}
