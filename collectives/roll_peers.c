/*
 * roll_peers.c - the watchdogs' board (see roll_peers.h).
 */
#include "collectives/roll_peers.h"
#include "collectives/engine.h"
#include "base/abort_guard.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/status.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define VERDICT_TAG 1
#define PROBE_TAG 2
#define ANSWER_TAG 3
#define BUSY_TAG 4
#define VERDICT_BYTES 1400

struct roll_board {
    /* A rank's two waiting threads (the main thread in a collective, the communication thread's
     * deadline) both listen and probe: MPI forbids testing one request from two threads at once,
     * and the reposted receives and the busy times are shared. Held for each call, the probe's
     * and the verdict's waits included (after a deadline, before the abort). */
    pthread_mutex_t lock;
    MPI_Comm comm; /* owned: a duplicate of world, for these messages alone */
    int rank, size;
    MPI_Request verdict_rx, probe_rx, busy_rx; /* from any rank */
    int busy_in;
    double busy_seen, busy_sent; /* clock_now_s of the last busy word heard, and sent */
    char verdict[VERDICT_BYTES];
    int probe_in, probe_out;
    int told; /* a verdict (this rank's own) was sent: told once */
};

static void sleep_ms(void)
{
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
}

dt_status roll_board_create(MPI_Comm world, double timeout_s, roll_board **out)
{
    *out = NULL;
    int size = 1;
    MPI_Comm_size(world, &size);
    if (size == 1 || timeout_s <= 0) return DT_OK;
    roll_board *b = calloc(1, sizeof *b);
    if (!b) return status_set_error(DT_ERR_NOMEM, "out of memory for the watchdogs' board");
    b->verdict_rx = b->probe_rx = b->busy_rx = MPI_REQUEST_NULL;
    pthread_mutex_init(&b->lock, NULL);
    if (MPI_Comm_dup(world, &b->comm) != MPI_SUCCESS) {
        pthread_mutex_destroy(&b->lock);
        free(b);
        return status_set_error(DT_ERR_MPI, "MPI_Comm_dup for the watchdogs' board failed");
    }
    MPI_Comm_set_errhandler(b->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(b->comm, &b->rank);
    b->size = size;
    if (MPI_Irecv(b->verdict, VERDICT_BYTES, MPI_CHAR, MPI_ANY_SOURCE, VERDICT_TAG, b->comm, &b->verdict_rx) !=
            MPI_SUCCESS ||
        MPI_Irecv(&b->probe_in, 1, MPI_INT, MPI_ANY_SOURCE, PROBE_TAG, b->comm, &b->probe_rx) != MPI_SUCCESS ||
        MPI_Irecv(&b->busy_in, 1, MPI_INT, MPI_ANY_SOURCE, BUSY_TAG, b->comm, &b->busy_rx) != MPI_SUCCESS) {
        roll_board_destroy(b);
        return status_set_error(DT_ERR_MPI, "MPI_Irecv for the watchdogs' board failed");
    }
    *out = b;
    return DT_OK;
}

void roll_board_destroy(roll_board *b)
{
    if (!b) return;
    /* After the program's MPI_Finalize (dt_finalize's late call) only the memory goes: an MPI call
     * then would make MPI end the job. */
    if (!engine_mpi_finalized()) {
        MPI_Request *pending[] = {&b->verdict_rx, &b->probe_rx, &b->busy_rx};
        for (int i = 0; i < 3; i++)
            if (*pending[i] != MPI_REQUEST_NULL) {
                MPI_Cancel(pending[i]);
                MPI_Wait(pending[i], MPI_STATUS_IGNORE);
            }
        MPI_Comm_free(&b->comm);
    }
    pthread_mutex_destroy(&b->lock);
    free(b);
}

/* Answers another rank's probe if one has come. */
static void answer_probe(roll_board *b)
{
    int got = 0;
    MPI_Status st;
    if (b->probe_rx == MPI_REQUEST_NULL || MPI_Test(&b->probe_rx, &got, &st) != MPI_SUCCESS || !got) return;
    MPI_Request answer;
    b->probe_out = b->rank;
    if (MPI_Isend(&b->probe_out, 1, MPI_INT, st.MPI_SOURCE, ANSWER_TAG, b->comm, &answer) == MPI_SUCCESS)
        MPI_Request_free(&answer);
    MPI_Irecv(&b->probe_in, 1, MPI_INT, MPI_ANY_SOURCE, PROBE_TAG, b->comm, &b->probe_rx);
}

/* Takes the busy words that have come (each reposts the receive). */
static void take_busy(roll_board *b)
{
    int got = 1;
    while (got && b->busy_rx != MPI_REQUEST_NULL) {
        got = 0;
        if (MPI_Test(&b->busy_rx, &got, MPI_STATUS_IGNORE) != MPI_SUCCESS || !got) return;
        b->busy_seen = clock_now_s();
        if (MPI_Irecv(&b->busy_in, 1, MPI_INT, MPI_ANY_SOURCE, BUSY_TAG, b->comm, &b->busy_rx) != MPI_SUCCESS)
            b->busy_rx = MPI_REQUEST_NULL;
    }
}

void roll_board_busy(roll_board *b, double every_s)
{
    if (!b) return;
    pthread_mutex_lock(&b->lock);
    const double now = clock_now_s();
    if (b->busy_sent <= 0 || now - b->busy_sent >= every_s) {
        b->busy_sent = now;
        static const int word = 1; /* read-only: only its arrival matters */
        for (int j = 0; j < b->size; j++) {
            MPI_Request r;
            if (j != b->rank && MPI_Isend(&word, 1, MPI_INT, j, BUSY_TAG, b->comm, &r) == MPI_SUCCESS)
                MPI_Request_free(&r);
        }
    }
    pthread_mutex_unlock(&b->lock);
}

double roll_board_busy_seen(roll_board *b)
{
    if (!b) return 0;
    pthread_mutex_lock(&b->lock);
    const double seen = b->busy_seen;
    pthread_mutex_unlock(&b->lock);
    return seen;
}

const char *roll_board_listen(roll_board *b, int *from)
{
    if (!b) return NULL;
    int got = 0;
    MPI_Status st;
    pthread_mutex_lock(&b->lock);
    answer_probe(b);
    take_busy(b);
    /* Returned to the one call that takes it: its receive is not reposted, so the text stays put. */
    const char *told = NULL;
    if (b->verdict_rx != MPI_REQUEST_NULL && MPI_Test(&b->verdict_rx, &got, &st) == MPI_SUCCESS && got) {
        b->verdict[VERDICT_BYTES - 1] = '\0';
        *from = st.MPI_SOURCE;
        told = b->verdict;
    }
    pthread_mutex_unlock(&b->lock);
    return told;
}

void roll_board_tell(roll_board *b, const char *verdict)
{
    if (!b) return;
    pthread_mutex_lock(&b->lock);
    if (b->told) {
        pthread_mutex_unlock(&b->lock);
        return;
    }
    b->told = 1;
    MPI_Request *r = calloc((size_t)b->size, sizeof *r);
    if (!r) {
        pthread_mutex_unlock(&b->lock);
        return;
    }
    int n = 0, all = 0;
    const int len = (int)strnlen(verdict, VERDICT_BYTES - 1);
    for (int j = 0; j < b->size; j++)
        if (j != b->rank && MPI_Isend(verdict, len, MPI_CHAR, j, VERDICT_TAG, b->comm, &r[n]) == MPI_SUCCESS) n++;
    const double until = clock_now_s() + ROLL_VERDICT_S;
    while (!all && clock_now_s() < until && MPI_Testall(n, r, &all, MPI_STATUSES_IGNORE) == MPI_SUCCESS) sleep_ms();
    /* r stays allocated: the sends may still be in flight when the job ends. */
    pthread_mutex_unlock(&b->lock);
}

int roll_board_probe(roll_board *b, int *ranks, int cap)
{
    if (!b) return 0;
    pthread_mutex_lock(&b->lock);
    MPI_Request *r = malloc(2 * (size_t)b->size * sizeof *r);
    int *answered = calloc((size_t)b->size, sizeof *answered), *answer = calloc((size_t)b->size, sizeof *answer);
    static const int ping = 1; /* read-only: what is sent does not matter, only that it is answered */
    int n = 0;
    if (!r || !answered || !answer) {
        free(r);
        free(answered);
        free(answer);
        pthread_mutex_unlock(&b->lock);
        return 0;
    }
    for (int j = 0; j < b->size; j++) {
        r[2 * j] = r[2 * j + 1] = MPI_REQUEST_NULL;
        if (j == b->rank || MPI_Irecv(&answer[j], 1, MPI_INT, j, ANSWER_TAG, b->comm, &r[2 * j]) != MPI_SUCCESS ||
            MPI_Isend(&ping, 1, MPI_INT, j, PROBE_TAG, b->comm, &r[2 * j + 1]) != MPI_SUCCESS)
            answered[j] = -1; /* itself, or could not ask: not named */
    }
    const double until = clock_now_s() + ROLL_PROBE_S;
    for (int left = 1; left && clock_now_s() < until; sleep_ms()) {
        answer_probe(b); /* two ranks may probe at once: each must not count the other as silent */
        left = 0;
        for (int j = 0; j < b->size; j++) {
            int flag = 0;
            if (!answered[j] && MPI_Test(&r[2 * j], &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && flag) answered[j] = 1;
            if (!answered[j]) left = 1;
            if (r[2 * j + 1] != MPI_REQUEST_NULL) MPI_Test(&r[2 * j + 1], &flag, MPI_STATUS_IGNORE);
        }
    }
    for (int j = 0; j < b->size; j++)
        if (!answered[j] && n < cap) ranks[n++] = j;
    free(answered);
    /* r and answer stay allocated: MPI may write into them until the job ends. */
    pthread_mutex_unlock(&b->lock);
    return n;
}

/* Process-wide: a process ends the job once, whichever thread (or board) says why first. */
static atomic_int verdict_claimed;

int roll_board_claim(void) { return atomic_exchange(&verdict_claimed, 1) == 0; }

_Noreturn void roll_board_wait_end(void)
{
    const double until = clock_now_s() + ROLL_VERDICT_S + ROLL_PROBE_S + ABORT_GUARD_S + 1.0;
    while (clock_now_s() < until) sleep_ms();
    log_msg(LOG_LEVEL_ERROR, "the watchdog's abort has not ended this process; exiting with code 1");
    _exit(1);
}
