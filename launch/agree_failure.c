/*
 * agree_failure.c - one message for a failure that many ranks meet alike. A step every rank runs
 * on its own before training (opening --data, the steps and schedule read from it) failed on
 * every rank of a job with the same error: a wrong path at 1024 ranks printed 1024 identical
 * errors, and the job ended through MPI_Abort and its banner. Each rank's exit code and a hash of
 * its message go to every rank in one exchange (rank_share_slots); the lowest failing rank says a
 * shared message once, with the count. A verdict only rank 0 can reach (cli_rank0_verdict) goes
 * to every rank likewise, so that all stop together.
 */
#include "launch/cli.h"
#include "collectives/rank_verdict.h"
#include "base/hash.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* How many failing ranks a message lists by number. */
#define LISTED_RANKS 8

typedef struct seen {
    int failed, first_rank, first_rc, same;
    float first_h0, first_h1;
    char ranks[128]; /* the first LISTED_RANKS failing ranks, "0, 3, 5" */
} seen;

static void visit(int rank, const float *v, void *state)
{
    seen *s = state;
    if (v[0] == 0) return;
    if (s->failed == 0) {
        s->first_rank = rank, s->first_rc = (int)v[0];
        s->first_h0 = v[1], s->first_h1 = v[2];
    } else if (v[0] != (float)s->first_rc || v[1] != s->first_h0 || v[2] != s->first_h1) {
        s->same = 0;
    }
    if (s->failed < LISTED_RANKS) {
        const size_t used = strlen(s->ranks);
        snprintf(s->ranks + used, sizeof s->ranks - used, "%s%d", used ? ", " : "", rank);
    } else if (s->failed == LISTED_RANKS) {
        const size_t used = strlen(s->ranks);
        snprintf(s->ranks + used, sizeof s->ranks - used, ", ...");
    }
    s->failed++;
}

int cli_agree_failure(dt_ctx *ctx, int rc, const char *why, int *shared)
{
    *shared = 1;
    const int world = dt_world_size(ctx), rank = dt_rank(ctx);
    if (world <= 1) {
        if (rc && why[0]) cli_error("%s", why);
        return rc;
    }
    /* The message's hash as two 16-bit digits: exact in the fp32 slots. */
    const uint64_t h = fnv1a_buffer(why, strlen(why));
    const float mine[3] = {(float)rc, (float)(h & 0xffff), (float)((h >> 16) & 0xffff)};
    seen s = {.first_rank = -1, .same = 1};
    const dt_status st = rank_share_slots(ctx, mine, 3, visit, &s);
    if (st) {
        *shared = 0;
        if (rc && why[0]) cli_error("%s", why);
        if (!rc) cli_error("%s", dt_last_error());
        return rc ? rc : EXIT_FAIL;
    }
    if (s.failed == 0) return EXIT_OK;
    if (!s.same || s.failed == 1) { /* the rank's own words; cli_error names the rank */
        if (rc && why[0]) cli_error("%s", why);
    } else if (rank == s.first_rank && why[0]) {
        if (s.failed == world) /* no rank of its own: cli_error's "(rank R of W, on HOST)" would contradict it */
            cli_error_job("%s (the same on all %d ranks)", why, world);
        else
            cli_error("%s (the same on %d of %d ranks: %s)", why, s.failed, world, s.ranks);
    }
    return rc ? rc : s.first_rc;
}

int cli_say_shared_failure(dt_ctx *ctx, dt_status s, const char *what, int *shared)
{
    const int own = !cli_peer_failure(s);
    char why[2048] = "";
    if (own) cli_status_text(why, sizeof why, what, s);
    const int rc = s == DT_ERR_INVALID_ARG ? EXIT_USAGE : EXIT_FAIL;
    const int out = cli_agree_failure(ctx, own ? rc : EXIT_OK, why, shared);
    return out ? out : rc;
}

dt_status cli_rank0_verdict(dt_ctx *ctx, char *why, size_t len, int *refused)
{
    *refused = 0;
    const dt_status s = dt_broadcast(ctx, why, len, DT_U8, 0);
    if (s) return s;
    why[len - 1] = '\0';
    *refused = why[0] != '\0';
    if (*refused && dt_rank(ctx) == 0) cli_error("%s", why);
    return DT_OK;
}
