/*
 * fault_inject.c - the DTRAIN_FAULT test hook of `dtrain train`: read strictly, checked against
 * the job, injected at its rank and step (see fault_inject.h for the kinds).
 */
#include "launch/train/fault_inject.h"

#include "launch/cli.h"
#include "runtime/test_hooks.h"
#include "base/parse.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FAULT_STR2(x) #x
#define FAULT_STR(x) FAULT_STR2(x)

/* KIND's name and what the rank then does, indexed by fault_kind. */
static const struct {
    const char *name, *does;
} kinds[FAULT_NKINDS] = {
    [FAULT_NONE] = {"", ""},
    [FAULT_STALL] = {"stall", "stalls"},
    [FAULT_EXIT] = {"exit", "exits"},
    [FAULT_KILL] = {"kill", "is killed"},
    [FAULT_USR1] = {"usr1", "gets SIGUSR1"},
    [FAULT_TERM] = {"term", "gets SIGTERM"},
    [FAULT_INT] = {"int", "gets SIGINT"},
    [FAULT_HUP] = {"hup", "gets SIGHUP"},
    [FAULT_INF] = {"inf", "puts an inf into its gradients"},
    [FAULT_SEGV] = {"segv", "calls a NULL function pointer"},
    [FAULT_SLOW] = {"slow", "sleeps " FAULT_STR(FAULT_SLOW_MS) " ms in every step from then on, the first"},
    [FAULT_CKPT] = {"ckpt", "fails its next checkpoint write (no space left)"},
};

/* The form, with the kinds named from the table above so a new kind cannot be missing here. */
static const char *fault_form(void)
{
    static char form[256];
    if (!form[0]) {
        size_t n = (size_t)snprintf(form, sizeof form, "the form is KIND:RANK:STEP, KIND one of");
        for (int k = FAULT_NONE + 1; k < FAULT_NKINDS && n < sizeof form; k++)
            n += (size_t)snprintf(form + n, sizeof form - n, "%s %s", k > 1 ? "," : "", kinds[k].name);
        if (n < sizeof form) snprintf(form + n, sizeof form - n, " (a test hook; unset it)");
    }
    return form;
}

/* One of RANK and STEP: digits only (parse_long also takes a sign, which a rank or step never
 * needs), then parse_long's range check. */
static int fault_number(const char *v, const char *what, const char *text, long hi, long *out)
{
    if (!(text[0] >= '0' && text[0] <= '9')) {
        cli_error("DTRAIN_FAULT='%s': %s '%s' is not a whole number from 0 to %ld; %s", v, what, text, hi,
                  fault_form());
        return EXIT_USAGE;
    }
    if (parse_long(what, text, 0, hi, out) != DT_OK) {
        cli_error("DTRAIN_FAULT='%s': %s; %s", v, dt_last_error(), fault_form());
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

int fault_parse(fault *f)
{
    memset(f, 0, sizeof *f);
    const char *v = getenv("DTRAIN_FAULT");
    if (!v || !*v) return EXIT_OK;
    char buf[128];
    if (strlen(v) >= sizeof buf) {
        cli_error("DTRAIN_FAULT='%.40s...' is too long; %s", v, fault_form());
        return EXIT_USAGE;
    }
    strcpy(buf, v);
    /* Exactly three fields: strsep keeps empty ones, so "stall::1" and "stall:1:2:" fail below. */
    char *rest = buf, *field[4] = {NULL, NULL, NULL, NULL};
    int n = 0;
    for (char *tok; n < 4 && (tok = strsep(&rest, ":")) != NULL;) field[n++] = tok;
    if (n != 3) {
        cli_error("DTRAIN_FAULT='%s' has %s fields; %s", v, n < 3 ? "too few" : "too many", fault_form());
        return EXIT_USAGE;
    }
    fault_kind kind = FAULT_NONE;
    for (int k = FAULT_NONE + 1; k < FAULT_NKINDS; k++)
        if (!strcmp(field[0], kinds[k].name)) kind = (fault_kind)k;
    if (kind == FAULT_NONE) {
        cli_error("DTRAIN_FAULT='%s': KIND '%s' is not a fault; %s", v, field[0], fault_form());
        return EXIT_USAGE;
    }
    long rank, step;
    if (fault_number(v, "RANK", field[1], 2147483647L, &rank) || fault_number(v, "STEP", field[2], 1L << 40, &step))
        return EXIT_USAGE;
    f->kind = kind;
    f->rank = (int)rank;
    f->step = step;
    return EXIT_OK;
}

int fault_check(const fault *f, int world, long steps, const char *ckpt_dir)
{
    if (f->kind == FAULT_NONE) return EXIT_OK;
    const char *v = getenv("DTRAIN_FAULT");
    if (f->rank >= world) {
        char ranks[48];
        if (world == 1)
            snprintf(ranks, sizeof ranks, "rank 0 only");
        else
            snprintf(ranks, sizeof ranks, "ranks 0 to %d", world - 1);
        cli_error("DTRAIN_FAULT='%s': rank %d is not in this job: the world size is %d (%s)", v ? v : "", f->rank,
                  world, ranks);
        return EXIT_USAGE;
    }
    if (f->kind == FAULT_CKPT && (f->rank != 0 || !ckpt_dir)) {
        cli_error("DTRAIN_FAULT='%s': a ckpt fault needs rank 0 (the rank that writes the checkpoint files) and "
                  "--checkpoint-dir",
                  v ? v : "");
        return EXIT_USAGE;
    }
    if (f->step > steps) {
        cli_error("DTRAIN_FAULT='%s': step %ld comes after the last step of this run (--steps %ld)", v ? v : "",
                  f->step, steps);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

/* The segv fault: a call through a pointer that stays NULL, the crash whose backtrace is empty;
 * not inlined and not a tail call, so the crash report's caller is this function. */
static void (*volatile fault_null_fn)(void);
static __attribute__((noinline)) void fault_segv(void)
{
    fault_null_fn();
    __asm__ volatile("" ::: "memory");
}

void fault_maybe(const fault *f, int rank, long step, dt_model *m)
{
    if (f->kind == FAULT_NONE || f->rank != rank) return;
    if (f->kind == FAULT_SLOW && step > f->step) {
        usleep(FAULT_SLOW_MS * 1000);
        return;
    }
    if (f->step != step) return;
    fprintf(stderr, "dtrain: fault injection (DTRAIN_FAULT): rank %d %s at step %ld\n", rank, kinds[f->kind].does,
            step);
    fflush(stderr);
    switch (f->kind) {
        case FAULT_INF:
            if (m) model_test_inject_inf(m);
            return;
        case FAULT_SLOW: usleep(FAULT_SLOW_MS * 1000); return;
        case FAULT_CKPT: ckpt_test_fail_next_write(); return;
        case FAULT_EXIT: _exit(3);
        case FAULT_USR1: raise(SIGUSR1); return; /* through the real handler */
        case FAULT_TERM: raise(SIGTERM); return;
        case FAULT_INT: raise(SIGINT); return;
        case FAULT_HUP: raise(SIGHUP); return;
        case FAULT_KILL: raise(SIGKILL); break;
        case FAULT_SEGV: fault_segv(); break;
        case FAULT_STALL: break;
        case FAULT_NONE:
        case FAULT_NKINDS: return;
    }
    /* The stall; a kill or a crash that somehow returned stalls too, rather than train on. */
    for (;;) pause();
}
