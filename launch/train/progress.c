/*
 * progress.c - the progress line of `dtrain train` (progress.h).
 */
#include "launch/train/progress.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* "\r" back to the line's start, ESC[K (EL, erase to the end of the line): what every terminal
 * since the VT100 understands, and what a "dumb" one does not. */
static const char erase[] = "\r\033[K";

/* A draw at most every 0.1 s: a fast run's steps would otherwise spend their time in the
 * terminal, and nobody reads faster. */
#define PROGRESS_INTERVAL_S 0.1
/* The weight of the newest sample in the smoothed rate and loss: about the last 5 draws. */
#define PROGRESS_SMOOTH 0.2

int progress_wanted(progress_mode mode, FILE *out)
{
    if (mode != PROGRESS_AUTO) return mode == PROGRESS_ALWAYS;
    /* Open MPI's mpirun hands its ranks a pseudo-terminal for stdout even when its own output goes
     * to a file or a pipe: under it, isatty says nothing about where the lines end up, and a log
     * must get exactly the plain lines. --progress always draws the line there. */
    if (getenv("OMPI_COMM_WORLD_SIZE")) return 0;
    const char *term = getenv("TERM");
    return isatty(fileno(out)) && term && *term && strcmp(term, "dumb") != 0;
}

void progress_start(progress *p, FILE *out, long first_step, long total, double samples_per_step, double now)
{
    *p = (progress){.out = out,
                    .total = total,
                    .samples_per_step = samples_per_step,
                    .last_draw = now - PROGRESS_INTERVAL_S,
                    .last_t = now,
                    .last_step = first_step,
                    .loss = -1};
}

/* h:mm:ss of s seconds, "-:--:--" before there is a rate. */
static void hms(double s, char *buf, size_t len)
{
    if (!(s >= 0) || s > 3.6e8) {
        snprintf(buf, len, "-:--:--");
        return;
    }
    const long t = (long)(s + 0.5);
    snprintf(buf, len, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
}

void progress_step(progress *p, long step, double epoch, double loss, double now)
{
    if (!p->out) return;
    /* A non-finite loss is shown as it is, and smoothing starts afresh after it. */
    p->loss = isfinite(loss) && isfinite(p->loss) && p->loss >= 0 ? p->loss + PROGRESS_SMOOTH * (loss - p->loss) : loss;
    /* After the last step its step line is the last word: nothing to redraw. */
    if (now - p->last_draw < PROGRESS_INTERVAL_S || step >= p->total) return;
    /* The rate over the steps since the last sample: a window of at least 0.1 s. */
    if (now > p->last_t && step > p->last_step) {
        const double r = (double)(step - p->last_step) * p->samples_per_step / (now - p->last_t);
        p->rate = p->rate > 0 ? p->rate + PROGRESS_SMOOTH * (r - p->rate) : r;
        p->last_t = now;
        p->last_step = step;
    }
    char eta[32];
    hms(p->rate > 0 ? (double)(p->total - step) * p->samples_per_step / p->rate : -1, eta, sizeof eta);
    char line[256];
    snprintf(line, sizeof line, "step %ld/%ld (%.0f%%)  epoch %.2f  %.1f samples/s  ETA %s  loss %.4f", step, p->total,
             100.0 * (double)step / (double)p->total, epoch, p->rate, eta, p->loss);
    /* A line longer than the terminal wraps, and "\r" goes back to the start of its last row only:
     * cut it to the width (asked each time: the window may have been resized), 80 when unknown. */
    struct winsize ws;
    const size_t cols = ioctl(fileno(p->out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 ? ws.ws_col : 80;
    if (strlen(line) > cols - 1) line[cols - 1] = '\0';
    fprintf(p->out, "%s%s", erase, line);
    fflush(p->out);
    p->drawn = 1;
    p->last_draw = now;
}

void progress_clear(progress *p)
{
    if (!p->out || !p->drawn) return;
    fputs(erase, p->out);
    fflush(p->out);
    p->drawn = 0;
}
