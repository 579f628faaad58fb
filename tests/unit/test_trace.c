/*
 * test_trace.c - unit tests of the span recorder (base/trace.c) and the Chrome JSON writer
 * (base/trace_json.c): capacity and drop counting, two threads recording at once, --trace-steps
 * gating, and a written file that parses back with the offsets applied.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/trace.h"

/* A full recorder keeps the first cap events and counts the rest as dropped. */
static void test_capacity_and_drops(void **state)
{
    (void)state;
    trace_rec *r = trace_rec_create(4);
    assert_non_null(r);
    for (int i = 0; i < 6; i++) trace_rec_add(r, "span", TRACE_CAT_USER, 0, 10 * i, 10 * i + 5, i, -1);
    assert_int_equal(trace_rec_count(r), 4);
    assert_int_equal(trace_rec_dropped(r), 2);
    trace_event ev[4];
    assert_int_equal(trace_rec_snapshot(r, ev, 4), 4);
    for (int i = 0; i < 4; i++) assert_int_equal(ev[i].arg, i);
    assert_null(trace_rec_create(0));
    trace_rec_add(NULL, "nothing", TRACE_CAT_USER, 0, 0, 1, 0, -1); /* tracing off: a no-op */
    trace_rec_free(r);
}

/* A name longer than the slot is cut, an end before the begin is clamped, and the snapshot sorts
 * by track, then begin, the enclosing span first. */
static void test_names_and_order(void **state)
{
    (void)state;
    trace_rec *r = trace_rec_create(8);
    trace_rec_add(r, "inner", TRACE_CAT_FWD, 0, 100, 150, 0, -1);
    trace_rec_add(r, "a name much longer than twenty-three bytes", TRACE_CAT_COMM, 1, 50, 40, 0, -1);
    trace_rec_add(r, "outer", TRACE_CAT_STEP, 0, 100, 300, 0, -1);
    trace_rec_add(r, "first", TRACE_CAT_DATA, 0, 20, 30, 0, -1);
    trace_event ev[8];
    assert_int_equal(trace_rec_snapshot(r, ev, 8), 4);
    assert_string_equal(ev[0].name, "first");
    assert_string_equal(ev[1].name, "outer");
    assert_string_equal(ev[2].name, "inner");
    assert_int_equal(strlen(ev[3].name), TRACE_NAME_LEN - 1);
    assert_int_equal(ev[3].track, 1);
    assert_true(ev[3].t1 == ev[3].t0);
    trace_rec_free(r);
    /* A cut never splits a UTF-8 character (the file must stay valid UTF-8 JSON): 26 ASCII bytes
     * then a 2-byte u-umlaut straddling the 27-byte limit keep the 26 only; one that fits stays. */
    r = trace_rec_create(2);
    trace_rec_add(r, "aaaaaaaaaaaaaaaaaaaaaaaaaa\xc3\xbc tail", TRACE_CAT_USER, 0, 1, 2, 0, -1);
    trace_rec_add(r, "aaaaaaaaaaaaaaaaaaaaaaaaa\xc3\xbc tail", TRACE_CAT_USER, 0, 3, 4, 0, -1);
    assert_int_equal(trace_rec_snapshot(r, ev, 2), 2);
    assert_string_equal(ev[0].name, "aaaaaaaaaaaaaaaaaaaaaaaaaa");
    assert_string_equal(ev[1].name, "aaaaaaaaaaaaaaaaaaaaaaaaa\xc3\xbc");
    trace_rec_free(r);
}

typedef struct writer_arg {
    trace_rec *r;
    int track, n;
} writer_arg;

static void *writer(void *p)
{
    writer_arg *a = p;
    char name[32];
    for (int i = 0; i < a->n; i++) {
        snprintf(name, sizeof name, "t%d #%d", a->track, i);
        trace_rec_add(a->r, name, TRACE_CAT_USER, a->track, (uint64_t)i, (uint64_t)i + 1, i, -1);
    }
    return NULL;
}

/* Two threads at once: every event lands whole in its own slot, and kept + dropped = recorded. */
static void test_two_writers(void **state)
{
    (void)state;
    enum { N = 20000, CAP = 30000 };
    trace_rec *r = trace_rec_create(CAP);
    writer_arg a[2] = {{r, 0, N}, {r, 1, N}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&th[i], NULL, writer, &a[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    assert_int_equal(trace_rec_count(r), CAP);
    assert_int_equal(trace_rec_dropped(r), 2 * N - CAP);
    trace_event *ev = malloc(CAP * sizeof *ev);
    assert_int_equal(trace_rec_snapshot(r, ev, CAP), CAP);
    /* Each slot holds the event one thread wrote: its name matches its track and number. */
    char want[32];
    for (int i = 0; i < CAP; i++) {
        snprintf(want, sizeof want, "t%d #%lld", ev[i].track, (long long)ev[i].arg);
        assert_string_equal(ev[i].name, want);
        assert_true(ev[i].t0 == (uint64_t)ev[i].arg);
        if (i && ev[i].track == ev[i - 1].track) assert_true(ev[i].t0 > ev[i - 1].t0);
    }
    free(ev);
    trace_rec_free(r);
}

/* A writer that checked the recorder before it closed may finish its slot between the count that
 * sized the copy and the copy itself (dt_trace_write): the copy keeps to the room it was given. */
static void test_late_writer(void **state)
{
    (void)state;
    trace_rec *r = trace_rec_create(8);
    trace_rec_add(r, "done", TRACE_CAT_USER, 0, 1, 2, 0, -1);
    /* A slot claimed and still being copied into, as by trace_rec_add on another thread. */
    const size_t late = atomic_fetch_add(&r->next, 1);
    trace_rec_close(r);
    const size_t have = trace_rec_count(r);
    assert_int_equal(have, 1);
    r->ev[late].t0 = 3, r->ev[late].t1 = 4;
    atomic_store(&r->ev[late].ready, 1); /* the late writer finishes now */
    trace_event ev[2];
    memset(ev, 0x5a, sizeof ev);
    assert_int_equal(trace_rec_snapshot(r, ev, have), 1);
    const unsigned char *guard = (const unsigned char *)&ev[1];
    for (size_t i = 0; i < sizeof ev[1]; i++) assert_int_equal(guard[i], 0x5a);
    trace_rec_free(r);
}

/* The tracks the metadata names: loaders up to the highest used, a GPU track's bit, and no bit for
 * a track far above the GPU's (dt_trace_span takes up to 65535). A program's own spans
 * (TRACE_CAT_USER, the last two) name no loader or GPU track: its track 40 was named loader 38. */
static void test_tracks_used(void **state)
{
    (void)state;
    const int tracks[] = {
        0, 1, TRACE_TRACK_LOADER + 2, TRACE_TRACK_GPU + 1, 5000, 65535, TRACE_TRACK_GPU + 32, 40, TRACE_TRACK_GPU};
    const size_t n = sizeof tracks / sizeof *tracks;
    trace_event ev[sizeof tracks / sizeof *tracks] = {{0}};
    for (size_t i = 0; i < n; i++) ev[i].track = (uint16_t)tracks[i];
    ev[n - 2].cat = ev[n - 1].cat = TRACE_CAT_USER;
    int loaders = -1, gpu = -1;
    trace_tracks_used(ev, sizeof tracks / sizeof *tracks, &loaders, &gpu);
    assert_int_equal(loaders, 3);
    assert_int_equal(gpu, 1 << 1);
    trace_tracks_used(ev, 2, &loaders, &gpu);
    assert_int_equal(loaders, 0);
    assert_int_equal(gpu, 0);
}

/* --trace-steps 2:3: steps 1 and 4 record nothing, 2 and 3 do. */
static void test_step_range(void **state)
{
    (void)state;
    trace_rec *r = trace_rec_create(16);
    trace_rec_set_steps(r, 2, 3);
    trace_rec_add(r, "before any step", TRACE_CAT_USER, 0, 0, 1, 0, -1);
    for (long s = 1; s <= 4; s++) {
        trace_rec_step(r, s);
        trace_rec_add(r, "in step", TRACE_CAT_USER, 0, (uint64_t)s, (uint64_t)s + 1, s, -1);
    }
    trace_event ev[16];
    assert_int_equal(trace_rec_snapshot(r, ev, 16), 2);
    assert_int_equal(ev[0].arg, 2);
    assert_int_equal(ev[1].arg, 3);
    assert_int_equal(trace_rec_dropped(r), 0);
    /* A range set in the middle of a run applies to the step marked last, not to step 1. */
    trace_rec *mid = trace_rec_create(4);
    trace_rec_step(mid, 4);
    mid->cur_step = 4; /* as dt_trace_step keeps it */
    trace_rec_set_steps(mid, 3, 5);
    assert_non_null(trace_active(mid));
    trace_rec_set_steps(mid, 1, 2);
    assert_null(trace_active(mid));
    trace_rec_free(mid);
    /* A range from step 1 records from the start, before the first step is marked. */
    trace_rec_set_steps(r, 1, 1);
    assert_non_null(trace_active(r));
    /* Closed (written): nothing turns it on again. */
    trace_rec_close(r);
    trace_rec_set_steps(r, 1, 5);
    trace_rec_step(r, 2);
    assert_null(trace_active(r));
    trace_rec_add(r, "after close", TRACE_CAT_USER, 0, 9, 10, 9, -1);
    assert_int_equal(trace_rec_count(r), 2);
    trace_rec_free(r);
}

/* The writer's file: valid JSON (python3 parses it), names escaped, the offsets applied, a GPU
 * track named only where the rank has it, and a program's own tracks (dt_trace_span's) named
 * "user N" once each, a track whose events come in two chunks included. */
static void test_json(void **state)
{
    (void)state;
    char path[] = "/tmp/test_trace_XXXXXX";
    const int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    trace_rank_info ri[2] = {
        {.rank = 0, .host = "h\"0", .count = 1, .loader_tracks = 1},
        {.rank = 1, .host = "h1", .offset_ns = 1000, .rtt_ns = 500, .dropped = 3, .count = 1, .gpu_tracks = 2}};
    const uint64_t base = 1000000;
    trace_event e0 = {.t0 = base + 2000, .t1 = base + 5000, .arg = 7, .arg2 = 4096, .track = 1, .cat = TRACE_CAT_COMM};
    snprintf(e0.name, sizeof e0.name, "allreduce b0");
    trace_event e1 = {.t0 = base + 3000, .t1 = base + 4000, .arg = 1, .arg2 = -1, .track = 0, .cat = TRACE_CAT_FWD};
    snprintf(e1.name, sizeof e1.name, "say \"hi\"\n");
    trace_event u[3] = {{.t0 = base + 3000, .t1 = base + 3500, .arg2 = -1, .track = 40, .cat = TRACE_CAT_USER},
                        {.t0 = base + 3600, .t1 = base + 3700, .arg2 = -1, .track = 40, .cat = TRACE_CAT_USER},
                        {.t0 = base + 3000, .t1 = base + 3100, .arg2 = -1, .track = 2000, .cat = TRACE_CAT_USER}};
    for (int i = 0; i < 3; i++) snprintf(u[i].name, sizeof u[i].name, "mine");
    assert_int_equal(trace_json_head(f, ri, 2, base), 0);
    int named = -1;
    trace_json_events(f, &ri[0], &e0, 1, base, &named);
    named = -1;
    trace_json_events(f, &ri[1], &e1, 1, base, &named);
    trace_json_events(f, &ri[1], &u[0], 1, base, &named); /* track 40 in two chunks: one name */
    trace_json_events(f, &ri[1], &u[1], 2, base, &named);
    assert_int_equal(trace_json_tail(f), 0);
    fclose(f);
    char cmd[2048];
    snprintf(
        cmd, sizeof cmd,
        "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); x=[e for e in d[\"traceEvents\"] if "
        "e[\"ph\"]==\"X\" and e[\"cat\"]!=\"user\"]; assert [(e[\"pid\"],e[\"tid\"],e[\"ts\"],e[\"dur\"]) for e in "
        "x]==[(0,1,2.0,3.0),"
        "(1,0,2.0,1.0)], x; assert x[1][\"name\"]==\"say \\\"hi\\\"\\n\"; assert x[0][\"args\"]==dict(n=7,bytes=4096); "
        "assert d[\"otherData\"][\"dropped_events\"]==3; assert "
        "d[\"otherData\"][\"ranks\"][1][\"clock_offset_us\"]==1.0; "
        "m=[e[\"args\"][\"name\"] for e in d[\"traceEvents\"] if e[\"ph\"]==\"M\" and "
        "e[\"name\"]!=\"process_sort_index\"]; "
        "assert m==[\"rank 0 (h\\\"0)\",\"train\",\"comm\",\"loader 0\",\"rank 1 (h1)\",\"train\",\"comm\",\"gpu "
        "nccl\",\"user 40\",\"user 2000\"], m; "
        "assert {(e[\"pid\"],e[\"tid\"]) for e in d[\"traceEvents\"] if e[\"ph\"]==\"M\" and "
        "e[\"args\"].get(\"name\",\"\").startswith(\"user\")}=={(1,40),(1,2000)}' %s",
        path);
    if (system("python3 -c 1 >/dev/null 2>&1") != 0) {
        remove(path);
        skip(); /* no python3 to parse the file back */
    }
    assert_int_equal(system(cmd), 0);
    remove(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capacity_and_drops),
        cmocka_unit_test(test_names_and_order),
        cmocka_unit_test(test_two_writers),
        cmocka_unit_test(test_late_writer),
        cmocka_unit_test(test_tracks_used),
        cmocka_unit_test(test_step_range),
        cmocka_unit_test(test_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
