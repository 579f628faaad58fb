/*
 * cli_error.c - how a command says that it failed: "dtrain: error: ..." with the rank that says
 * it in a job of several (cli_error) or for the whole job (cli_error_job), messages held back
 * for one exchange to say once (cli_error_capture), and the one wording of a library failure
 * (cli_status_text).
 */
#include "launch/cli.h"
#include "base/status.h"
#include "base/printable.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Who prints the errors, once dt_init knows (cli_error_identity): in a job of several ranks the
 * launcher merges every rank's stderr into one stream, and a failure that only some ranks meet (a
 * dataset missing on one node) must say which, or it reads as the whole job's. */
static int g_err_rank = -1, g_err_world;
static char g_err_host[64];

void cli_error_identity(int rank, int world, const char *host)
{
    g_err_rank = rank;
    g_err_world = world;
    snprintf(g_err_host, sizeof g_err_host, "%s", host ? host : "?");
}

/* Set by cli_error_capture: cli_error's messages go here, for cli_agree_failure to print once. */
static char *g_capture;
static size_t g_capture_n;

void cli_error_capture(char *buf, size_t n)
{
    g_capture = buf && n ? buf : NULL;
    g_capture_n = n;
    if (g_capture) g_capture[0] = '\0';
}

/* cli_error's and cli_error_job's printing; identity: end with the rank that prints it. */
static void error_vprint(int identity, const char *fmt, va_list ap)
{
    char raw[4096], msg[4096];
    vsnprintf(raw, sizeof raw, fmt, ap);
    text_escape_controls(raw, msg, sizeof msg); /* names from a dataset or another user's file */
    if (g_capture) {                            /* a second message follows the first: none is lost */
        const size_t used = strlen(g_capture);
        snprintf(g_capture + used, g_capture_n - used, "%s%s", used ? "; " : "", msg);
        return;
    }
    if (identity && g_err_world > 1)
        fprintf(stderr, "dtrain: error: %s (rank %d of %d, on %s)\n", msg, g_err_rank, g_err_world, g_err_host);
    else
        fprintf(stderr, "dtrain: error: %s\n", msg);
}

void cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vprint(1, fmt, ap);
    va_end(ap);
}

void cli_error_job(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vprint(0, fmt, ap);
    va_end(ap);
}

int cli_peer_failure(dt_status s) { return status_shared(s) && status_from_peer(); }

const char *cli_status_text(char *buf, size_t n, const char *what, dt_status s)
{
    if (what)
        snprintf(buf, n, "%s: %s (%s)", what, dt_last_error(), dt_strerror(s));
    else
        snprintf(buf, n, "%s (%s)", dt_last_error(), dt_strerror(s));
    return buf;
}

void cli_status_error(const char *what, dt_status s)
{
    char line[4096]; /* error_vprint's own limit: the line is cut where it would cut it */
    cli_error("%s", cli_status_text(line, sizeof line, what, s));
}
