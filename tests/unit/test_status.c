/*
 * test_status.c - unit tests of base/status.c's last-error message: status_keep and
 * status_restore carry a failure's message over cleanup that records errors of its own, whole
 * (the longest message the thread can hold), and from a worker thread to the one that reports it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "dtrain.h"
#include "base/status.h"
#include "base/printable.h"

/* Cleanup that fails on its own account, as freeing device memory or a settle may. */
static void failing_cleanup(void) { (void)status_set_error(DT_ERR_DEVICE, "cleanup's own failure"); }

static void test_restore_after_cleanup(void **state)
{
    (void)state;
    const dt_status s = status_set_error(DT_ERR_IO, "reading %s failed: disk gone", "/data/train.dts");
    status_kept k;
    status_keep(&k);
    failing_cleanup();
    assert_string_equal(dt_last_error(), "cleanup's own failure");
    assert_int_equal(status_restore(s, &k), DT_ERR_IO);
    assert_string_equal(dt_last_error(), "reading /data/train.dts failed: disk gone");
    /* The kept copy is the caller's: restoring it again gives the same message. */
    failing_cleanup();
    assert_int_equal(status_restore(DT_ERR_NOMEM, &k), DT_ERR_NOMEM);
    assert_string_equal(dt_last_error(), "reading /data/train.dts failed: disk gone");
}

/* The fixed buffers this replaced kept 256 to 1024 bytes of a message the thread holds up to 2047
 * bytes of: a long message (a path, a device's words and the fix) lost its end. */
static void test_long_message_kept_whole(void **state)
{
    (void)state;
    char longmsg[2047 + 1];
    for (size_t i = 0; i < sizeof longmsg - 1; i++) longmsg[i] = (char)('a' + i % 26);
    longmsg[sizeof longmsg - 1] = '\0';
    (void)status_set_error(DT_ERR_CORRUPT, "%s", longmsg);
    assert_int_equal(strlen(dt_last_error()), 2047);
    status_kept k;
    status_keep(&k);
    status_clear_error();
    (void)status_restore(DT_ERR_CORRUPT, &k);
    assert_int_equal(strlen(dt_last_error()), 2047);
    assert_string_equal(dt_last_error(), longmsg);
}

typedef struct worker_result {
    dt_status status;
    status_kept msg;
} worker_result;

static void *worker(void *arg)
{
    worker_result *r = arg;
    r->status = status_set_error(DT_ERR_CORRUPT, "sample %d: label 12 is outside 0 to 9", 7);
    status_keep(&r->msg);
    return NULL;
}

/* The last error is per thread: the worker's message reaches the caller only through the kept
 * copy. */
/* A peer's failure is marked as one until the next error, and the mark travels with a kept message:
 * the launcher prints an out-of-memory summary only for this rank's own. */
static void test_peer_mark(void **state)
{
    (void)state;
    assert_int_equal(status_set_peer_error(DT_ERR_NOMEM, "dt_model_create failed on rank %d", 1), DT_ERR_NOMEM);
    assert_int_equal(status_from_peer(), 1);
    assert_string_equal(dt_last_error(), "dt_model_create failed on rank 1");
    status_kept k;
    status_keep(&k);
    status_set_error(DT_ERR_IO, "cleanup failed");
    assert_int_equal(status_from_peer(), 0);
    assert_int_equal(status_restore(DT_ERR_NOMEM, &k), DT_ERR_NOMEM);
    assert_int_equal(status_from_peer(), 1);
    status_set_error(DT_ERR_NOMEM, "out of memory here");
    assert_int_equal(status_from_peer(), 0);
}

/* A failure every rank got is marked shared for its status until the next error (so a launcher
 * reads it only about the failure it has), and the mark travels with a kept message. */
static void test_shared_mark(void **state)
{
    (void)state;
    assert_int_equal(status_mark_shared(status_set_error(DT_ERR_IO, "rank 0: disk full")), DT_ERR_IO);
    assert_int_equal(status_shared(DT_ERR_IO), 1);
    assert_int_equal(status_shared(DT_ERR_NOMEM), 0); /* another failure's status: not this mark */
    status_kept k;
    status_keep(&k);
    status_set_error(DT_ERR_IO, "cleanup failed");
    assert_int_equal(status_shared(DT_ERR_IO), 0);
    assert_int_equal(status_restore(DT_ERR_IO, &k), DT_ERR_IO);
    assert_int_equal(status_shared(DT_ERR_IO), 1);
    status_clear_error();
    assert_int_equal(status_shared(DT_ERR_IO), 0);
    status_mark_shared(DT_ERR_IO);
    status_set_peer_error(DT_ERR_IO, "dt_model_create failed on rank 1");
    assert_int_equal(status_shared(DT_ERR_IO), 0);
    assert_int_equal(status_shared(DT_OK), 0);
}

/* A caller's prefix keeps whose failure it is and that every rank has it. */
static void test_prefix_keeps_marks(void **state)
{
    (void)state;
    status_mark_shared(status_set_peer_error(DT_ERR_NOMEM, "unshard failed on rank 1"));
    assert_int_equal(status_prefix(DT_ERR_NOMEM, "--bucket-mb auto"), DT_ERR_NOMEM);
    assert_string_equal(dt_last_error(), "--bucket-mb auto: unshard failed on rank 1");
    assert_int_equal(status_shared(DT_ERR_NOMEM), 1);
    assert_int_equal(status_from_peer(), 1);
    status_set_error(DT_ERR_IO, "mine");
    status_prefix(DT_ERR_IO, "dt_model_synchronize");
    assert_string_equal(dt_last_error(), "dt_model_synchronize: mine");
    assert_int_equal(status_shared(DT_ERR_IO), 0);
    assert_int_equal(status_from_peer(), 0);
    status_clear_error();
}

static void test_carried_across_threads(void **state)
{
    (void)state;
    status_clear_error();
    worker_result r = {0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, worker, &r), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_string_equal(dt_last_error(), "");
    assert_int_equal(status_restore(r.status, &r.msg), DT_ERR_CORRUPT);
    assert_string_equal(dt_last_error(), "sample 7: label 12 is outside 0 to 9");
}

/* A message naming a file of a shared dataset prints no control character: ESC, BEL, a newline
 * (a forged log line) and the C1 CSI (UTF-8 c2 9b) come out as C escapes, other UTF-8 as it was;
 * an escape is never cut in half at the end of the room. */
static void test_message_printable(void **state)
{
    (void)state;
    const char *name = "bad\x1b]0;pwned\x07 \xc2\x9b"
                       "31m\nrank 3 dtrain ERROR\tx\x7f caf\xc3\xa9";
    status_set_error(DT_ERR_CORRUPT, "%s cannot be decoded", name);
    assert_string_equal(dt_last_error(), "bad\\x1b]0;pwned\\x07 \\xc2\\x9b31m\\nrank 3 dtrain ERROR\\tx\\x7f "
                                         "caf\xc3\xa9 cannot be decoded");
    char out[8];
    text_escape_controls("ab\x1b", out, sizeof out); /* "ab\x1b" needs 7 bytes and the end */
    assert_string_equal(out, "ab\\x1b");
    text_escape_controls("abcd\x1b", out, sizeof out);
    assert_string_equal(out, "abcd");
    text_escape_controls("\xc2", out, sizeof out); /* a lone lead byte at the end is no C1 control */
    assert_string_equal(out, "\\xc2");
    text_escape_controls("abcdef\xc3\xa9", out, sizeof out); /* é would need bytes 7-8 and the end */
    assert_string_equal(out, "abcdef");
}

/* A byte of no well-formed UTF-8 sequence is escaped: a lone CSI byte (0x9b, which an 8-bit
 * terminal acts on), Latin-1, a stray continuation byte, an overlong '/', a UTF-16 surrogate, a
 * code point past U+10FFFF, a sequence cut short; well-formed 2- to 4-byte characters are kept. */
static void test_ill_formed_utf8_escaped(void **state)
{
    (void)state;
    char out[128];
    text_escape_controls("x\x9b"
                         "31m caf\xe9 \x80 \xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 \xe2\x82",
                         out, sizeof out);
    assert_string_equal(out, "x\\x9b31m caf\\xe9 \\x80 \\xc0\\xaf \\xed\\xa0\\x80 \\xf4\\x90\\x80\\x80 "
                             "\\xe2\\x82");
    text_escape_controls("\xc3\xa9 \xe2\x82\xac \xed\x9f\xbf \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf", out, sizeof out);
    assert_string_equal(out, "\xc3\xa9 \xe2\x82\xac \xed\x9f\xbf \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf");
}

/* Properties over random byte strings (fixed seed): the output holds no C0 control, DEL or C1
 * control (as UTF-8), escaping it again changes nothing (so a message escaped twice, as cli_error
 * does with dt_last_error, reads the same), and printable ASCII comes through as it was. */
static void test_escape_properties(void **state)
{
    (void)state;
    unsigned seed = 12345;
    char in[24], out[128], again[128];
    for (int round = 0; round < 20000; round++) {
        const int len = (int)((seed = seed * 1103515245u + 12345u) >> 16) % (int)(sizeof in);
        for (int i = 0; i < len; i++) {
            seed = seed * 1103515245u + 12345u;
            in[i] = (char)(1 + (seed >> 16) % 255); /* no NUL inside */
        }
        in[len] = '\0';
        text_escape_controls(in, out, sizeof out);
        for (const unsigned char *p = (const unsigned char *)out; *p; p++) {
            if (*p < 0x20 || *p == 0x7f) fail_msg("control byte 0x%02x in the output of round %d", *p, round);
            if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) fail_msg("C1 control in the output of round %d", round);
        }
        text_escape_controls(out, again, sizeof again);
        assert_string_equal(again, out);
    }
    text_escape_controls("node-01 rank 3: ok ~!@#$%^&*()_+{}|:<>?", out, sizeof out);
    assert_string_equal(out, "node-01 rank 3: ok ~!@#$%^&*()_+{}|:<>?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_restore_after_cleanup),
        cmocka_unit_test(test_long_message_kept_whole),
        cmocka_unit_test(test_carried_across_threads),
        cmocka_unit_test(test_peer_mark),
        cmocka_unit_test(test_shared_mark),
        cmocka_unit_test(test_prefix_keeps_marks),
        cmocka_unit_test(test_message_printable),
        cmocka_unit_test(test_ill_formed_utf8_escaped),
        cmocka_unit_test(test_escape_properties),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
