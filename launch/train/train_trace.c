/*
 * train_trace.c - where the --trace of `dtrain train` goes, and its writing at the end
 * (train_run.h). A run that starts afresh writes the --trace path, as it writes its --metrics
 * afresh. A resumed run never replaces a trace that is already there: that is the earlier run's,
 * typically the steps a preempted job was asked to trace, and a requeued job would lose it with
 * no word. It writes its own beside it, under a name that says the step it resumed at; and one
 * whose --trace-steps all lie at or before that step has nothing to record, so it says so and
 * writes nothing rather than an empty trace.
 */
#include "launch/train/train_run.h"

#include "launch/cli.h"
#include "runtime/checkpoint/ckpt_write_file.h"
#include "runtime/trace/trace_write.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

/* path's name for a run resumed after `step`: "t.json" -> "t.resumed-26.json", "trace" ->
 * "trace.resumed-26"; the n-th name (n > 1) "t.resumed-26-n.json". -1 when it does not fit. */
static int resumed_name(const char *path, long step, int n, char *out, size_t len)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    /* The extension is the base name's last dot on, unless that dot starts the name (".trace"). */
    const char *dot = strrchr(base, '.');
    const size_t stem = dot && dot > base ? (size_t)(dot - path) : strlen(path);
    char nth[24] = "";
    if (n > 1) snprintf(nth, sizeof nth, "-%d", n);
    const int k = snprintf(out, len, "%.*s.resumed-%ld%s%s", (int)stem, path, step, nth, path + stem);
    return k > 0 && (size_t)k < len ? 0 : -1;
}

/* Whether rank 0 must keep what is at path: a file (through a link too). A device or a FIFO
 * (/dev/null, /dev/stdout) is written in place and holds nothing to keep. */
static int holds_a_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Rank 0: the first free name beside --trace for a run resumed after `step` (none of the run's
 * other outputs), into out; a message in why when there is none. */
static void choose_resumed_name(const train_run *r, char *out, size_t len, char *why, size_t why_len)
{
    const train_opts *t = &r->t;
    struct stat st;
    for (int n = 1; n <= 100; n++) {
        if (resumed_name(t->trace, r->first_step, n, out, len)) {
            snprintf(why, why_len,
                     "--trace %s: the name for this resumed run's trace beside it is too long: give a "
                     "shorter --trace path",
                     t->trace);
            return;
        }
        const int taken = lstat(out, &st) == 0 || errno != ENOENT || (t->metrics && !strcmp(out, t->metrics)) ||
                          (t->dump && !strcmp(out, t->dump));
        if (!taken) {
            if (ckpt_write_file_try(out, "--trace")) snprintf(why, why_len, "%s", dt_last_error());
            return;
        }
    }
    snprintf(why, why_len,
             "--trace %s: 100 resumed runs' traces are beside it already: move them, or give another "
             "--trace path",
             t->trace);
}

int train_trace_resumed(train_run *r)
{
    const train_opts *t = &r->t;
    if (!t->trace) return EXIT_OK;
    snprintf(r->trace_out, sizeof r->trace_out, "%s", t->trace);
    if (r->first_step == 0) return EXIT_OK;
    /* Every rank knows the steps: all skip the write together. */
    if (t->trace_first && t->trace_last <= r->first_step) {
        r->trace_none = 1;
        if (r->rank == 0 && !t->quiet)
            printf("trace: --trace-steps %ld:%ld are all at or before step %ld, after which this run resumed: it "
                   "records nothing and writes no trace (%s is left as it is)\n",
                   t->trace_first, t->trace_last, r->first_step, t->trace);
        return EXIT_OK;
    }
    char why[1024] = "";
    if (r->rank == 0 && holds_a_file(t->trace)) {
        choose_resumed_name(r, r->trace_out, sizeof r->trace_out, why, sizeof why);
        if (!why[0] && !t->quiet)
            printf("trace: %s holds an earlier run's trace, kept; this run, resumed after step %ld, writes its own to "
                   "%s\n",
                   t->trace, r->first_step, r->trace_out);
    }
    int refused;
    const dt_status s = cli_rank0_verdict(r->ctx, why, sizeof why, &refused);
    if (s) return train_status_error(s);
    return refused ? EXIT_USAGE : EXIT_OK;
}

int train_trace_end(train_run *r)
{
    if (!r->t.trace || r->trace_none) return EXIT_OK;
    /* Messages that speak of --trace: this run ends on a failure, so the library's "call again with
     * another path" is not the user's fix. */
    dt_status s = trace_write_named(r->ctx, r->trace_out, "--trace");
    if (s) return train_status_error(s);
    if (r->rank == 0 && !r->t.quiet) {
        printf("trace of %d rank%s in %s (open it in ui.perfetto.dev)\n", r->world, cli_s(r->world), r->trace_out);
        fflush(stdout);
    }
    return EXIT_OK;
}
