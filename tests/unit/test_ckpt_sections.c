/*
 * test_ckpt_sections.c - checkpoints of named sections (dt_ckpt_* in include/dtrain/checkpoint.h,
 * format version 4) on one process: what is added is what is read back, by name; every bad name,
 * size or missing section is an error naming it; a damaged, truncated or crafted file (valid CRCs,
 * lengths past its end, duplicate names, a table larger than the file, a per-rank blob past
 * DT_CKPT_PER_RANK_MAX) is refused from its header
 * and table and skipped for an older sound one; a file-size limit or an unwritable directory is an
 * error and leaves no file. dt_model's own section files: test_ckpt_model_files.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/checkpoint/ckpt_format.h"
#include "dtrain.h"
#include "base/log.h"
#include "ckpt_sections_fixture.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static unsigned char big[3 << 20]; /* more than one 1 MiB verification chunk */

/* Step `step` with sections a (13 bytes), empty (0), big (3 MiB), rng (per rank, 16 bytes). */
static void write_sample(long step, unsigned char seed)
{
    unsigned char a[13], rng[16];
    for (size_t i = 0; i < sizeof a; i++) a[i] = (unsigned char)(seed + i);
    for (size_t i = 0; i < sizeof rng; i++) rng[i] = (unsigned char)(seed * 3 + i);
    for (size_t i = 0; i < sizeof big; i++) big[i] = (unsigned char)(i * 7 + seed);
    dt_ckpt_writer *w;
    assert_int_equal(dt_ckpt_begin(NULL, dir, step, &w), DT_OK);
    assert_int_equal(dt_ckpt_add(w, "a", a, sizeof a), DT_OK);
    assert_int_equal(dt_ckpt_add(w, "empty", NULL, 0), DT_OK);
    assert_int_equal(dt_ckpt_add(w, "big", big, sizeof big), DT_OK);
    assert_int_equal(dt_ckpt_add_per_rank(w, "rng", rng, sizeof rng), DT_OK);
    memset(a, 0, sizeof a); /* copied at the add: the file keeps what was added */
    assert_int_equal(dt_ckpt_commit(w), DT_OK);
}

static void test_round_trip(void **state)
{
    (void)state;
    write_sample(3, 1);
    write_sample(12, 2);
    dt_ckpt_reader *r;
    long step = -1;
    assert_int_equal(dt_ckpt_open_latest(NULL, dir, &r, &step), DT_OK);
    assert_non_null(r);
    assert_int_equal(step, 12);
    assert_string_equal(dt_ckpt_path(r), at("ckpt-0000000012.dtc"));
    assert_int_equal(dt_ckpt_saved_world(r), 1);
    assert_int_equal(dt_ckpt_num_sections(r), 4);
    const char *names[] = {"a", "empty", "big", "rng"};
    for (int i = 0; i < 4; i++) assert_string_equal(dt_ckpt_section_name(r, i), names[i]);
    assert_null(dt_ckpt_section_name(r, 4));
    assert_null(dt_ckpt_section_name(r, -1));
    size_t bytes = 0;
    assert_int_equal(dt_ckpt_section_size(r, "big", &bytes), DT_OK);
    assert_int_equal(bytes, sizeof big);
    unsigned char a[13], rng[16], *b = malloc(sizeof big);
    assert_int_equal(dt_ckpt_read(r, "a", a, sizeof a), DT_OK);
    for (size_t i = 0; i < sizeof a; i++) assert_int_equal(a[i], (unsigned char)(2 + i));
    assert_int_equal(dt_ckpt_read(r, "empty", NULL, 0), DT_OK);
    assert_int_equal(dt_ckpt_read(r, "big", b, sizeof big), DT_OK);
    assert_memory_equal(b, big, sizeof big);
    assert_int_equal(dt_ckpt_read_rank(r, "rng", rng, sizeof rng), DT_OK);
    for (size_t i = 0; i < sizeof rng; i++) assert_int_equal(rng[i], (unsigned char)(6 + i));
    free(b);
    dt_ckpt_close(r);
    /* No directory, or one without checkpoints: nothing, and no error. */
    assert_int_equal(dt_ckpt_open_latest(NULL, "/tmp/dtsec-does-not-exist", &r, &step), DT_OK);
    assert_null(r);
    assert_int_equal(step, 0);
}

static void test_bad_names(void **state)
{
    (void)state;
    dt_ckpt_writer *w;
    assert_int_equal(dt_ckpt_begin(NULL, dir, 1, &w), DT_OK);
    char name[80];
    memset(name, 'n', 64);
    name[64] = '\0';
    expect_error(dt_ckpt_add(w, name, "x", 1), DT_ERR_INVALID_ARG, "is 64 bytes; at most 63");
    name[63] = '\0';
    assert_int_equal(dt_ckpt_add(w, name, "x", 1), DT_OK);
    expect_error(dt_ckpt_add(w, "rng state", "x", 1), DT_ERR_INVALID_ARG, "character 0x20 at byte 3");
    expect_error(dt_ckpt_add(w, "a/b", "x", 1), DT_ERR_INVALID_ARG, "\"a/b\" has character 0x2f");
    expect_error(dt_ckpt_add(w, "", "x", 1), DT_ERR_INVALID_ARG, "is empty");
    expect_error(dt_ckpt_add(w, NULL, "x", 1), DT_ERR_INVALID_ARG, "name is NULL");
    expect_error(dt_ckpt_add(w, "dtrain.model", "x", 1), DT_ERR_INVALID_ARG, "dtrain keeps for its own");
    assert_int_equal(dt_ckpt_add(w, "Opt_1.m-2", "x", 1), DT_OK);
    expect_error(dt_ckpt_add(w, "Opt_1.m-2", "y", 1), DT_ERR_INVALID_ARG, "\"Opt_1.m-2\" was already added");
    expect_error(dt_ckpt_add_per_rank(w, "huge", big, DT_CKPT_PER_RANK_MAX + 1), DT_ERR_INVALID_ARG,
                 "per-rank section \"huge\"");
    expect_error(dt_ckpt_add(NULL, "a", "x", 1), DT_ERR_INVALID_ARG, "writer is NULL");
    /* The refused adds left the writer as it was: the two good sections are written. */
    assert_int_equal(dt_ckpt_commit(w), DT_OK);
    dt_ckpt_reader *r;
    long step;
    assert_int_equal(dt_ckpt_open_latest(NULL, dir, &r, &step), DT_OK);
    assert_int_equal(dt_ckpt_num_sections(r), 2);
    dt_ckpt_close(r);
    expect_error(dt_ckpt_begin(NULL, dir, -1, &w), DT_ERR_INVALID_ARG, "step -1");
    expect_error(dt_ckpt_begin(NULL, "", 1, &w), DT_ERR_INVALID_ARG, "no checkpoint directory");
    /* Data that is missing on rank 0 fails the commit, which writes nothing. */
    assert_int_equal(dt_ckpt_begin(NULL, dir, 2, &w), DT_OK);
    expect_error(dt_ckpt_add(w, "params", NULL, 8), DT_ERR_INVALID_ARG, "has no data (NULL) on rank 0");
    expect_error(dt_ckpt_commit(w), DT_ERR_INVALID_ARG, "\"params\" of 8 bytes has no data");
    assert_int_equal(access(at("ckpt-0000000002.dtc"), F_OK), -1);
    /* Discarded: nothing written. */
    assert_int_equal(dt_ckpt_begin(NULL, dir, 4, &w), DT_OK);
    assert_int_equal(dt_ckpt_add(w, "a", "x", 1), DT_OK);
    dt_ckpt_discard(w);
    assert_int_equal(access(at("ckpt-0000000004.dtc"), F_OK), -1);
}

static void test_bad_reads(void **state)
{
    (void)state;
    write_sample(5, 1);
    dt_ckpt_reader *r;
    long step;
    assert_int_equal(dt_ckpt_open_latest(NULL, dir, &r, &step), DT_OK);
    unsigned char buf[32];
    size_t bytes = 7;
    expect_error(dt_ckpt_read(r, "rngstate", buf, 16), DT_ERR_INVALID_ARG,
                 "holds no section \"rngstate\"; its sections: \"a\", \"empty\", \"big\", \"rng\"");
    expect_error(dt_ckpt_section_size(r, "nope", &bytes), DT_ERR_INVALID_ARG, "no section \"nope\"");
    assert_int_equal(bytes, 0);
    expect_error(dt_ckpt_read(r, "a", buf, 12), DT_ERR_INVALID_ARG, "section \"a\" of");
    assert_non_null(strstr(dt_last_error(), "is 13 bytes; the call asks for 12"));
    expect_error(dt_ckpt_read(r, "a", NULL, 13), DT_ERR_INVALID_ARG, "destination of section \"a\"");
    expect_error(dt_ckpt_read_rank(r, "a", buf, 13), DT_ERR_INVALID_ARG, "is not per-rank");
    expect_error(dt_ckpt_read_rank(r, "rng", buf, 32), DT_ERR_INVALID_ARG, "is 16 bytes per rank");
    /* A per-rank section reads whole too. */
    assert_int_equal(dt_ckpt_read(r, "rng", buf, 16), DT_OK);
    dt_ckpt_close(r);
}

/* img (len bytes, sealed unless raw) as step 9, opened and verified: want and a substring. */
static void expect_file(unsigned char *img, size_t len, int raw, dt_status want, const char *must)
{
    if (!raw) ckpt_seal(img, len);
    save(at("ckpt-0000000009.dtc"), img, len);
    int fd;
    uint64_t size;
    uint32_t version;
    ckpt_file *f = NULL;
    dt_status s = ckpt_open_regular(at("ckpt-0000000009.dtc"), &fd, &size, &version);
    if (!s) s = ckpt_file_open_fd(fd, size, at("ckpt-0000000009.dtc"), 9, 1, &f);
    expect_error(s, want, must);
    ckpt_file_close(f);
    unlink(at("ckpt-0000000009.dtc"));
}

static void test_damaged_and_crafted(void **state)
{
    (void)state;
    write_sample(5, 1);
    write_sample(9, 2);
    size_t len, off = 0;
    unsigned char *img = load(at("ckpt-0000000009.dtc"), &len), *c = malloc(len + 64);
    /* A flipped byte in one section: the newer file is skipped, the older one opens. */
    memcpy(c, img, len);
    entry(c, "big", &off);
    c[off + 1234567] ^= 0x40;
    save(at("ckpt-0000000009.dtc"), c, len);
    dt_ckpt_reader *r;
    long step;
    log_set_level(LOG_LEVEL_ERROR);
    assert_int_equal(dt_ckpt_open_latest(NULL, dir, &r, &step), DT_OK);
    assert_int_equal(step, 5);
    dt_ckpt_close(r);
    /* Truncated: the same. */
    save(at("ckpt-0000000009.dtc"), img, len - 5);
    assert_int_equal(dt_ckpt_open_latest(NULL, dir, &r, &step), DT_OK);
    assert_int_equal(step, 5);
    dt_ckpt_close(r);
    log_set_level(LOG_LEVEL_WARN);
    expect_file(c, len, 1, DT_ERR_CORRUPT, "section \"big\" is damaged (CRC mismatch)");
    memcpy(c, img, len);
    expect_file(c, len - 5, 1, DT_ERR_CORRUPT, "; its header describes");
    expect_file(c, len, 0, DT_OK, NULL);
    /* A length past the end of the file, CRCs valid: refused from the table, nothing allocated. */
    entry(c, "a", NULL)->bytes = (uint64_t)1 << 62;
    expect_file(c, len, 0, DT_ERR_CORRUPT, "(truncated)");
    entry(c, "a", NULL)->bytes = UINT64_MAX - 5;
    expect_file(c, len, 0, DT_ERR_CORRUPT, "describes at least");
    memcpy(c, img, len);
    entry(c, "a", NULL)->bytes = 12; /* one byte short: data after the last section */
    expect_file(c, len, 0, DT_ERR_CORRUPT, "data after its last section");
    memcpy(c, img, len);
    ((ckpt4_header *)(void *)c)->nsections = 3000000;
    expect_file(c, len, 0, DT_ERR_CORRUPT, "nsections is 3000000; a file holds at most 65536");
    ((ckpt4_header *)(void *)c)->nsections = 60000; /* a table larger than the file */
    expect_file(c, len, 0, DT_ERR_CORRUPT, "a table of 60000 sections");
    memcpy(c, img, len);
    memset(entry(c, "empty", NULL)->name, 0, DT_CKPT_NAME_MAX + 1);
    memcpy(entry(c, "a", NULL)[1].name, "a", 1); /* section 1, now "a" too, NUL-padded */
    expect_file(c, len, 0, DT_ERR_CORRUPT, "two sections are named \"a\"");
    memcpy(c, img, len);
    memcpy(entry(c, "empty", NULL)->name, "em pty", 6);
    expect_file(c, len, 0, DT_ERR_CORRUPT, "the name of section 1 is not");
    memcpy(c, img, len);
    memset(entry(c, "empty", NULL)->name, 'x', DT_CKPT_NAME_MAX + 1); /* no NUL at all */
    expect_file(c, len, 0, DT_ERR_CORRUPT, "the name of section 1 is not");
    memcpy(c, img, len);
    entry(c, "rng", NULL)->ranks = 2;
    expect_file(c, len, 0, DT_ERR_CORRUPT, "claims blobs of 2 ranks");
    /* A per-rank blob past the writer's cap (past 2^31 it would reach MPI_Scatter as a cut int
     * count): refused from the table, before the sizes are added up. */
    memcpy(c, img, len);
    entry(c, "rng", NULL)->bytes = DT_CKPT_PER_RANK_MAX + 1;
    expect_file(c, len, 0, DT_ERR_CORRUPT, "claims blobs of 67108865 bytes; dt_ckpt_add_per_rank writes at most");
    memcpy(c, img, len);
    ((ckpt4_header *)(void *)c)->step = 8;
    expect_file(c, len, 0, DT_ERR_CORRUPT, "header field step is 8 but the file name says step 9");
    memcpy(c, img, len);
    ((ckpt4_header *)(void *)c)->world = 0;
    expect_file(c, len, 0, DT_ERR_CORRUPT, "world is 0");
    memcpy(c, img, len);
    entry(c, "a", NULL)->name[0] = 'b'; /* the table's CRC, unsealed */
    expect_file(c, len, 1, DT_ERR_CORRUPT, "the section table is damaged");
    expect_file(c, 20, 1, DT_ERR_CORRUPT, "is truncated (20 bytes");
    free(c);
    free(img);
}

/* A file-size limit: an error naming it, no temporary file, this process alive; an unwritable
 * directory: an error naming it. */
static void test_io_failures(void **state)
{
    (void)state;
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 4096;
    dt_ckpt_writer *w;
    assert_int_equal(dt_ckpt_begin(NULL, dir, 6, &w), DT_OK);
    assert_int_equal(dt_ckpt_add(w, "big", big, sizeof big), DT_OK);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    dt_status s = dt_ckpt_commit(w);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    expect_error(s, DT_ERR_IO, "File too large (limit 4096 bytes");
    assert_non_null(strstr(dt_last_error(), "ulimit -f"));
    char tmp[320];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", at("ckpt-0000000006.dtc"), (int)getpid());
    assert_int_equal(access(tmp, F_OK), -1);
    assert_int_equal(access(at("ckpt-0000000006.dtc"), F_OK), -1);
    sigset_t pend;
    sigpending(&pend);
    assert_false(sigismember(&pend, SIGXFSZ));
    /* A regular file where the directory should be. */
    save(at("notadir"), "x", 1);
    char sub[128];
    snprintf(sub, sizeof sub, "%s/notadir", dir);
    assert_int_equal(dt_ckpt_begin(NULL, sub, 1, &w), DT_OK);
    expect_error(dt_ckpt_commit(w), DT_ERR_IO, "cannot write checkpoint");
    assert_non_null(strstr(dt_last_error(), "Not a directory: a part of its path is a file, not a directory: use "
                                            "another --checkpoint-dir"));
    /* No file descriptor left (the soft limit at the lowest free one): the errno's fix, with the
     * limits this process has. */
    assert_int_equal(dt_ckpt_begin(NULL, dir, 7, &w), DT_OK);
    assert_int_equal(dt_ckpt_add(w, "a", "x", 1), DT_OK);
    struct rlimit nofile, low;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &nofile), 0);
    const int lowest = dup(0);
    assert_true(lowest >= 0);
    close(lowest);
    low = nofile;
    low.rlim_cur = (rlim_t)lowest;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    s = dt_ckpt_commit(w);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &nofile), 0);
    char want[160];
    snprintf(want, sizeof want,
             "Too many open files: this process has as many files open as it may (ulimit -n: soft limit %d", lowest);
    expect_error(s, DT_ERR_IO, want);
    assert_non_null(
        strstr(dt_last_error(), "raise the soft limit (ulimit -n, up to the hard one) or use fewer --loader-threads"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_reads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged_and_crafted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_io_failures, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
