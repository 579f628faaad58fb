/*
 * roll_peers.c - rank 0's verdict and probe for the other ranks (see roll_peers.h).
 */
#include "collectives/roll_peers.h"
#include "base/clock.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Beside the roll call's tag (7411, coll_mpi.c). */
#define VERDICT_TAG 7412
#define PROBE_TAG 7413
#define ANSWER_TAG 7414

static void sleep_ms(void)
{
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
}

void roll_listener_init(roll_listener *l)
{
    l->verdict_rx = MPI_REQUEST_NULL;
    l->probe_rx = MPI_REQUEST_NULL;
}

int roll_listener_post(roll_listener *l, MPI_Comm comm)
{
    int rc = MPI_Irecv(l->verdict, ROLL_VERDICT_BYTES, MPI_CHAR, 0, VERDICT_TAG, comm, &l->verdict_rx);
    if (rc == MPI_SUCCESS) rc = MPI_Irecv(&l->probe_in, 1, MPI_INT, 0, PROBE_TAG, comm, &l->probe_rx);
    return rc;
}

const char *roll_listen(roll_listener *l, MPI_Comm comm, int rank)
{
    int got = 0;
    if (l->probe_rx != MPI_REQUEST_NULL && MPI_Test(&l->probe_rx, &got, MPI_STATUS_IGNORE) == MPI_SUCCESS && got) {
        MPI_Request answer;
        l->probe_out = rank;
        if (MPI_Isend(&l->probe_out, 1, MPI_INT, 0, ANSWER_TAG, comm, &answer) == MPI_SUCCESS)
            MPI_Request_free(&answer);
        MPI_Irecv(&l->probe_in, 1, MPI_INT, 0, PROBE_TAG, comm, &l->probe_rx);
    }
    got = 0;
    if (l->verdict_rx == MPI_REQUEST_NULL || MPI_Test(&l->verdict_rx, &got, MPI_STATUS_IGNORE) != MPI_SUCCESS || !got)
        return NULL;
    l->verdict[ROLL_VERDICT_BYTES - 1] = '\0';
    return l->verdict;
}

void roll_listener_cancel(roll_listener *l)
{
    MPI_Request *pending[] = {&l->verdict_rx, &l->probe_rx};
    for (int i = 0; i < 2; i++)
        if (*pending[i] != MPI_REQUEST_NULL) {
            MPI_Cancel(pending[i]);
            MPI_Wait(pending[i], MPI_STATUS_IGNORE);
        }
}

void roll_verdict_send(MPI_Comm comm, int size, const char *verdict, double wait_s)
{
    MPI_Request *r = calloc((size_t)size, sizeof *r);
    if (!r) return;
    int n = 0, all = 0;
    for (int j = 1; j < size; j++)
        if (MPI_Isend(verdict, (int)strlen(verdict) + 1, MPI_CHAR, j, VERDICT_TAG, comm, &r[n]) == MPI_SUCCESS) n++;
    const double until = clock_now_s() + wait_s;
    while (!all && clock_now_s() < until && MPI_Testall(n, r, &all, MPI_STATUSES_IGNORE) == MPI_SUCCESS) sleep_ms();
    /* r stays allocated: the sends may still be in flight when the job ends. */
}

int roll_probe_silent(MPI_Comm comm, int size, double wait_s, int *ranks, int cap)
{
    MPI_Request *r = malloc(2 * (size_t)size * sizeof *r);
    int *answered = calloc((size_t)size, sizeof *answered), *answer = calloc((size_t)size, sizeof *answer), n = 0;
    static const int ping = 1; /* read-only: what is sent does not matter, only that it is answered */
    if (!r || !answered || !answer) {
        free(r);
        free(answered);
        free(answer);
        return 0;
    }
    for (int j = 1; j < size; j++) {
        r[2 * j] = r[2 * j + 1] = MPI_REQUEST_NULL;
        if (MPI_Irecv(&answer[j], 1, MPI_INT, j, ANSWER_TAG, comm, &r[2 * j]) != MPI_SUCCESS ||
            MPI_Isend(&ping, 1, MPI_INT, j, PROBE_TAG, comm, &r[2 * j + 1]) != MPI_SUCCESS)
            answered[j] = -1; /* could not ask: not named */
    }
    const double until = clock_now_s() + wait_s;
    for (int left = 1; left && clock_now_s() < until; sleep_ms()) {
        left = 0;
        for (int j = 1; j < size; j++) {
            int flag = 0;
            if (!answered[j] && MPI_Test(&r[2 * j], &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && flag) answered[j] = 1;
            if (!answered[j]) left = 1;
            if (r[2 * j + 1] != MPI_REQUEST_NULL) MPI_Test(&r[2 * j + 1], &flag, MPI_STATUS_IGNORE);
        }
    }
    for (int j = 1; j < size; j++)
        if (!answered[j] && n < cap) ranks[n++] = j;
    free(answered);
    /* r and answer stay allocated: MPI may write into them until the job ends. */
    return n;
}
