/*
 * test_ctx_rules.c - the rules of a context that a caller can break, each refused with its own
 * message rather than a crash, a hang or a wrong result with DT_OK:
 *   - dt_finalize while a model or reducer made on the context lives (their communicators would be
 *     freed after MPI_Finalize): refused, naming how many of each, nothing released; after they are
 *     freed it works;
 *   - a second thread entering a collective of the context while a first is inside one: refused
 *     before anything is sent (at 2 ranks: rank 0's first thread waits in dt_allreduce for rank 1,
 *     which comes a second late);
 *   - a count whose byte size overflows (SIZE_MAX fp32 elements, a negative count as size_t);
 *   - a second dt_init leaves the caller's handle as it was;
 *   - dt_init after the dt_finalize that ended dtrain's own MPI: DT_ERR_MPI naming the way to keep
 *     MPI (init_mpi = 0), not a claim that the caller finalized it.
 * Mode "mismatch" (2 ranks): the ranks call dt_allreduce with different counts, then one calls
 * dt_allreduce while the other calls dt_barrier: each rank gets DT_ERR_MPI naming the other's call,
 * where Open MPI's default handler on MPI_COMM_WORLD used to end the job (and rank 0 got DT_OK with
 * a short result). Mode "user-mpi": when the caller initialised MPI, dt_init leaves the handler of
 * MPI_COMM_WORLD as the caller set it, a second context may be made after dt_finalize, and a
 * dt_finalize after the caller's MPI_Finalize returns DT_ERR_MPI having released the context's
 * memory without MPI calls (it used to free its communicators, and MPI ended the job; then it kept
 * the memory, a leak the ASan run reports); dt_reducer_free and dt_model_free after it release
 * their memory without MPI calls (they too used to end the job).
 */
#define _POSIX_C_SOURCE 200809L
#include "mpi_check.h"

#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static int says(const char *needle) { return strstr(dt_last_error(), needle) != NULL; }

static void finalize_refused_while_objects_live(dt_ctx *ctx)
{
    dt_model *m = NULL;
    dt_reducer *r = NULL;
    static float g[64];
    CHECK(dt_model_create(ctx, "fc:4", "8", 1, 2, &m) == DT_OK, "dt_model_create");
    CHECK(dt_reducer_create(ctx, g, 64, NULL, 0, NULL, &r) == DT_OK, "dt_reducer_create");
    dt_status s = dt_finalize(ctx);
    /* The model's own reducer counts among the reducers. */
    CHECK(s == DT_ERR_INVALID_ARG && says("3 objects") && says("(1 model, 2 reducers;") && says("free them first"),
          "dt_finalize with a model and a reducer alive gave %d", (int)s);
    /* Nothing was released: the context still works. */
    float x = 1;
    CHECK(dt_allreduce(ctx, &x, 1, DT_F32, DT_SUM) == DT_OK && x == (float)world, "allreduce after the refusal");
    dt_reducer_free(r);
    s = dt_finalize(ctx);
    CHECK(s == DT_ERR_INVALID_ARG && says("2 objects") && says("(1 model, 1 reducer;"),
          "dt_finalize with a model alive gave %d", (int)s);
    dt_model_free(m);
}

static void huge_counts_refused(dt_ctx *ctx)
{
    float f[4] = {0};
    CHECK(dt_allreduce(ctx, f, SIZE_MAX, DT_F32, DT_SUM) == DT_ERR_INVALID_ARG && says("count 18446744073709551615"),
          "dt_allreduce of SIZE_MAX elements");
    CHECK(dt_allreduce(ctx, f, (size_t)PTRDIFF_MAX / 4 + 1, DT_F32, DT_SUM) == DT_ERR_INVALID_ARG &&
              says("more fp32 elements than any buffer can hold"),
          "dt_allreduce of PTRDIFF_MAX / 4 + 1 elements");
    CHECK(dt_broadcast(ctx, f, (size_t)-16, DT_U8, 0) == DT_ERR_INVALID_ARG && says("count 18446744073709551600"),
          "dt_broadcast of a negative count");
    const dt_status s = dt_check_replicas(ctx, f, SIZE_MAX, NULL, NULL);
    CHECK(s == DT_ERR_INVALID_ARG && (rank != 0 || says("bytes 18446744073709551615")),
          "dt_check_replicas of SIZE_MAX bytes gave %d", (int)s);
    CHECK(dt_allreduce(ctx, f, 4, DT_F32, DT_SUM) == DT_OK, "a sound allreduce after them");
}

static void second_init_keeps_handle(dt_ctx *ctx)
{
    dt_ctx *b = ctx;
    CHECK(dt_init(NULL, &b) == DT_ERR_INVALID_ARG && b == ctx, "second dt_init changed *out to %p", (void *)b);
    /* The accessors' documented answers without a context. */
    CHECK(strcmp(dt_backend_name(NULL), "none") == 0 && dt_rank(NULL) == -1 && dt_node_name(NULL, 0) == NULL,
          "the accessors given a NULL context");
    /* The collectives refuse one by name, before any one-thread mark is taken. */
    float v = 0;
    CHECK(dt_allreduce(NULL, &v, 1, DT_F32, DT_SUM) == DT_ERR_INVALID_ARG && says("dt_allreduce needs a context"),
          "dt_allreduce(NULL): %s", dt_last_error());
    CHECK(dt_broadcast(NULL, &v, 1, DT_F32, 0) == DT_ERR_INVALID_ARG && says("dt_broadcast needs a context"),
          "dt_broadcast(NULL): %s", dt_last_error());
    CHECK(dt_barrier(NULL) == DT_ERR_INVALID_ARG && says("dt_barrier needs a context"), "dt_barrier(NULL): %s",
          dt_last_error());
    CHECK(dt_gather_placement(NULL, NULL) == DT_ERR_INVALID_ARG && says("dt_gather_placement needs a context"),
          "dt_gather_placement(NULL): %s", dt_last_error());
}

static dt_ctx *g_ctx;
static dt_status g_first;
static float g_first_val;

static void *first_thread(void *arg)
{
    (void)arg;
    g_first_val = 1;
    g_first = dt_allreduce(g_ctx, &g_first_val, 1, DT_F32, DT_SUM);
    return NULL;
}

/* Rank 0: a thread waits in dt_allreduce (rank 1 comes 1 s late) while the main thread tries the
 * context's collectives and dt_finalize. Rank 1: one allreduce, late. */
static void second_thread_refused(dt_ctx *ctx)
{
    if (world != 2) return;
    g_ctx = ctx;
    if (rank == 0) {
        pthread_t t;
        CHECK(pthread_create(&t, NULL, first_thread, NULL) == 0, "pthread_create");
        sleep_s(0.3);
        float x = 5;
        dt_status s = dt_allreduce(ctx, &x, 1, DT_F32, DT_SUM);
        CHECK(s == DT_ERR_INVALID_ARG && says("dt_allreduce: another thread is running a collective") &&
                  says("one thread at a time") && x == 5,
              "dt_allreduce from a second thread gave %d", (int)s);
        s = dt_barrier(ctx);
        CHECK(s == DT_ERR_INVALID_ARG && says("dt_barrier: another thread"), "dt_barrier from a second thread: %d",
              (int)s);
        s = dt_finalize(ctx);
        CHECK(s == DT_ERR_INVALID_ARG && says("dt_finalize: another thread"), "dt_finalize from a second thread: %d",
              (int)s);
        pthread_join(t, NULL);
        CHECK(g_first == DT_OK && g_first_val == 2, "the first thread's allreduce: %d, %g", (int)g_first,
              (double)g_first_val);
    } else {
        sleep_s(1.0);
        float x = 1;
        CHECK(dt_allreduce(ctx, &x, 1, DT_F32, DT_SUM) == DT_OK && x == 2, "rank 1's allreduce");
    }
    /* The mark is gone once the first thread is out. */
    float y = 1;
    CHECK(dt_allreduce(ctx, &y, 1, DT_F32, DT_SUM) == DT_OK && y == 2, "allreduce after the threads");
}

/* Every rank must see DT_ERR_MPI naming the other rank's call; exits 1 on failure (the ranks'
 * communicator is not to be trusted after a mismatch, so nothing is summed over it). */
static int mismatch(dt_ctx *ctx, int barrier)
{
    static float g[2000];
    for (int i = 0; i < 2000; i++) g[i] = 1;
    dt_status s;
    if (barrier && rank == 1)
        s = dt_barrier(ctx);
    else
        s = dt_allreduce(ctx, g, barrier || rank == 0 ? 1008 : 1000, DT_F32, DT_SUM);
    const char *want = !barrier    ? (rank == 0 ? "rank 1 called MPI_Allreduce of 1000 elements"
                                                : "rank 0 called MPI_Allreduce of 1008 elements")
                       : rank == 0 ? "rank 1 called MPI_Barrier"
                                   : "rank 0 called MPI_Allreduce of 1008 elements";
    if (s != DT_ERR_MPI || !says(want)) {
        fprintf(stderr, "FAIL rank %d (%s): status %d, wanted DT_ERR_MPI saying '%s': %s\n", rank,
                barrier ? "allreduce vs barrier" : "counts", (int)s, want, dt_last_error());
        return 1;
    }
    printf("rank %d: %s refused: %s\n", rank, barrier ? "allreduce vs barrier" : "different counts", dt_last_error());
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "rules";
    dt_config cfg;
    dt_config_defaults(&cfg);
    cfg.device = DT_DEVICE_CPU;
    cfg.timeout_s = 20; /* a collective that pairs wrongly ends the job soon, failing the test */
    if (strcmp(mode, "user-mpi") == 0) {
        int provided = 0;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
        cfg.init_mpi = 0;
        dt_ctx *ctx = mpi_check_init_config("test_ctx_rules user-mpi", &cfg);
        MPI_Errhandler h;
        MPI_Comm_get_errhandler(MPI_COMM_WORLD, &h);
        CHECK(h == MPI_ERRORS_ARE_FATAL, "dt_init changed the caller's handler of MPI_COMM_WORLD");
        if (h != MPI_ERRORS_ARE_FATAL) MPI_Errhandler_free(&h);
        const int rc = mpi_check_finish(ctx, "test_ctx_rules user-mpi");
        CHECK(dt_finalize(ctx) == DT_OK, "dt_finalize");
        /* The caller's MPI lives on: a second context may be made on it. */
        ctx = NULL;
        CHECK(dt_init(&cfg, &ctx) == DT_OK && ctx, "dt_init after dt_finalize on the caller's MPI");
        /* A model and a reducer still alive when the caller finalizes MPI: their frees release
         * the memory and skip the communicators' MPI calls (MPI would end the job). */
        dt_model *m = NULL;
        dt_reducer *r = NULL;
        static float g[64];
        if (ctx) {
            CHECK(dt_model_create(ctx, "fc:4", "8", 1, 2, &m) == DT_OK, "dt_model_create");
            CHECK(dt_reducer_create(ctx, g, 64, NULL, 0, NULL, &r) == DT_OK, "dt_reducer_create");
        }
        /* The caller finalizing MPI first: dt_finalize frees the memory alone (freeing the
         * communicators now would make MPI end the job), names the order, and the process goes on
         * to exit 0. */
        MPI_Finalize();
        dt_reducer_free(r);
        dt_model_free(m);
        if (ctx) {
            dt_status s = dt_finalize(ctx);
            CHECK(s == DT_ERR_MPI && says("MPI_Finalize ran before dt_finalize") && says("its memory was released") &&
                      says("call dt_finalize before MPI_Finalize"),
                  "dt_finalize after the caller's MPI_Finalize gave %d", (int)s);
        }
        return rc || failures;
    }
    dt_ctx *ctx = mpi_check_init_config("test_ctx_rules", &cfg);
    if (strcmp(mode, "mismatch") == 0 || strcmp(mode, "barrier") == 0) {
        if (world != 2) {
            fprintf(stderr, "test_ctx_rules %s needs 2 ranks\n", mode);
            return 2;
        }
        const int bad = mismatch(ctx, strcmp(mode, "barrier") == 0);
        dt_finalize(ctx);
        return bad;
    }
    second_init_keeps_handle(ctx);
    huge_counts_refused(ctx);
    second_thread_refused(ctx);
    finalize_refused_while_objects_live(ctx);
    const int rc = mpi_check_finish(ctx, "test_ctx_rules");
    if (dt_finalize(ctx) != DT_OK) {
        fprintf(stderr, "FAIL rank %d: dt_finalize after freeing everything: %s\n", rank, dt_last_error());
        return 1;
    }
    /* dt_finalize finalized the MPI that dt_init started, and MPI cannot start again: a second
     * dt_init says so and how to keep MPI (init_mpi = 0), not that the caller finalized it. */
    ctx = NULL;
    dt_status s = dt_init(&cfg, &ctx);
    CHECK(s == DT_ERR_MPI && !ctx && says("finalized by dtrain") && says("init_mpi = 0"),
          "dt_init after dt_finalize ended dtrain's MPI gave %d", (int)s);
    return rc || failures;
}
