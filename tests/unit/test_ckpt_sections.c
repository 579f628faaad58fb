/*
 * test_ckpt_sections.c - checkpoints of named sections (dt_ckpt_* in include/dtrain/checkpoint.h,
 * format version 4) on one process: what is added is what is read back, by name; every bad name,
 * size or missing section is an error naming it; a damaged, truncated or crafted file (valid CRCs,
 * lengths past its end, duplicate names, a table larger than the file, a per-rank blob past
 * DT_CKPT_PER_RANK_MAX) is refused from its header
 * and table and skipped for an older sound one; a file-size limit or an unwritable directory is an
 * error and leaves no file; dt_model's checkpoints are such files, and its reader refuses a user's;
 * the loss scaler's window of recent overflows survives a checkpoint.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/checkpoint/ckpt_format.h"
#include "runtime/model/model.h"
#include "ckpt_v3.h"
#include "dtrain.h"
#include "base/log.h"
#include "tmp_dir.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static const char *at(const char *name)
{
    static char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

static int setup(void **state)
{
    (void)state;
    return tmp_dir_make(dir, sizeof dir, "dtsec");
}

static int teardown(void **state)
{
    (void)state;
    return tmp_dir_remove(dir);
}

static void expect_error(dt_status got, dt_status want, const char *must)
{
    if (got != want) fail_msg("status %d (want %d): %s", (int)got, (int)want, dt_last_error());
    if (must && !strstr(dt_last_error(), must)) fail_msg("message '%s' lacks '%s'", dt_last_error(), must);
}

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

/* The bytes of a file, and the offset of section name's data in them. */
static unsigned char *load(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    *len = (size_t)ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *b = malloc(*len + 64);
    assert_int_equal(fread(b, 1, *len, fp), *len);
    fclose(fp);
    return b;
}

static void save(const char *path, const void *p, size_t len)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(p, 1, len, fp), len);
    fclose(fp);
}

static ckpt4_entry *entry(unsigned char *img, const char *name, size_t *data_off)
{
    ckpt4_header h;
    memcpy(&h, img, sizeof h);
    size_t off = sizeof h + h.nsections * sizeof(ckpt4_entry);
    for (uint32_t i = 0; i < h.nsections; i++) {
        ckpt4_entry *e = (ckpt4_entry *)(void *)(img + sizeof h + i * sizeof *e);
        if (strcmp(e->name, name) == 0) {
            if (data_off) *data_off = off;
            return e;
        }
        off += (size_t)e->bytes;
    }
    fail_msg("no section %s", name);
    return NULL;
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

/* dt_model's checkpoint is a section file; a user's file is not a dt_model checkpoint; a file of
 * format version 3 is dt_model's reader's, not dt_ckpt_open_latest's. */
static void test_model_files(void **state)
{
    (void)state;
    dt_model *m;
    dt_optimizer *o;
    dt_scaler *sc;
    assert_int_equal(dt_model_create(NULL, "fc:3", "2", 7, 4, &m), DT_OK);
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    oc.kind = DT_OPTIM_ADAMW;
    assert_int_equal(dt_optimizer_create(&oc, 9, &o), DT_OK);
    dt_scaler_config scc;
    dt_scaler_defaults(&scc);
    assert_int_equal(dt_scaler_create(&scc, &sc), DT_OK);
    float g[9], saved[9];
    for (int i = 0; i < 9; i++) g[i] = 0.1f * (float)(i + 1);
    assert_int_equal(dt_optimizer_step(o, dt_model_params(m), g), DT_OK);
    memcpy(saved, dt_model_params(m), sizeof saved);
    assert_int_equal(dt_checkpoint_save(NULL, dir, m, o, sc, NULL, 4), DT_OK);
    dt_ckpt_reader *r;
    long step;
    assert_int_equal(dt_ckpt_open_latest(NULL, dir, &r, &step), DT_OK);
    assert_int_equal(step, 4);
    const char *names[] = {"dtrain.model", "params", "optim.m", "optim.v", "scaler", "scaler.window"};
    assert_int_equal(dt_ckpt_num_sections(r), 6);
    for (int i = 0; i < 6; i++) assert_string_equal(dt_ckpt_section_name(r, i), names[i]);
    float p[9];
    assert_int_equal(dt_ckpt_read(r, "params", p, sizeof p), DT_OK);
    assert_memory_equal(p, saved, sizeof p);
    dt_ckpt_close(r);
    /* Crafted model sections, CRCs valid, through dt_model's reader. */
    size_t len, off = 0;
    unsigned char *img = load(at("ckpt-0000000004.dtc"), &len);
    long st;
    int world;
    const char *p7 = at("ckpt-0000000007.dtc");
    ((ckpt4_header *)(void *)img)->step = 7;
    struct {
        const char *section;
        size_t at;
        float value;
        dt_status want;
        const char *must;
    } cases[] = {
        {"params", 3, NAN, DT_ERR_CORRUPT, "section \"params\" holds nan at index 3"},
        {"optim.v", 8, -1, DT_ERR_CORRUPT, "section \"optim.v\" holds -1 at index 8"},
        {"scaler", 0, 0, DT_ERR_CORRUPT, "scaler field scale is"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        unsigned char *c = malloc(len);
        memcpy(c, img, len);
        entry(c, cases[k].section, &off);
        if (cases[k].section[0] == 's') {
            double z = 0; /* the scale is a double */
            memcpy(c + off, &z, sizeof z);
        } else {
            memcpy(c + off + cases[k].at * sizeof(float), &cases[k].value, sizeof(float));
        }
        ckpt_seal(c, len);
        save(p7, c, len);
        expect_error(ckpt_read_file(p7, 7, m, o, sc, &st, &world), cases[k].want, cases[k].must);
        free(c);
    }
    entry(img, "dtrain.model", &off);
    ckpt4_model mm;
    memcpy(&mm, img + off, sizeof mm);
    mm.fingerprint ^= 1;
    memcpy(img + off, &mm, sizeof mm);
    ckpt_seal(img, len);
    save(p7, img, len);
    expect_error(ckpt_read_file(p7, 7, m, o, sc, &st, &world), DT_ERR_INVALID_ARG, "another model");
    mm.fingerprint ^= 1;
    mm.optim_kind = DT_OPTIM_SGD; /* SGD keeps one moment, the file has two */
    memcpy(img + off, &mm, sizeof mm);
    ckpt_seal(img, len);
    save(p7, img, len);
    expect_error(ckpt_read_file(p7, 7, m, o, sc, &st, &world), DT_ERR_CORRUPT,
                 "section \"optim.v\" (optimizer "
                 "state) claims 9 floats; for optimizer sgd it must be 0");
    unlink(p7);
    assert_memory_equal(dt_model_params(m), saved, sizeof saved);
    free(img);
    /* A user's checkpoint, newest in the directory: dt_model's loader refuses it by name. */
    dt_ckpt_writer *w;
    assert_int_equal(dt_ckpt_begin(NULL, dir, 8, &w), DT_OK);
    assert_int_equal(dt_ckpt_add(w, "weights", saved, sizeof saved), DT_OK);
    assert_int_equal(dt_ckpt_commit(w), DT_OK);
    expect_error(dt_checkpoint_load_latest(NULL, dir, m, o, NULL, NULL, &step), DT_ERR_INVALID_ARG,
                 "holds no dt_model state (no section \"dtrain.model\"; its sections: \"weights\")");
    unlink(at("ckpt-0000000008.dtc"));
    /* A version-3 file, newer: dt_ckpt_open_latest skips it for the version-4 one; dt_model's
     * reader loads it. */
    size_t vlen;
    unsigned char *v3 = ckpt_v3_image(m, o, sc, NULL, 10, &vlen);
    save(at("ckpt-0000000010.dtc"), v3, vlen);
    log_set_level(LOG_LEVEL_ERROR);
    assert_int_equal(dt_ckpt_open_latest(NULL, dir, &r, &step), DT_OK);
    log_set_level(LOG_LEVEL_WARN);
    assert_int_equal(step, 4);
    dt_ckpt_close(r);
    for (int i = 0; i < 9; i++) dt_model_params(m)[i] = 0;
    assert_int_equal(dt_checkpoint_load_latest(NULL, dir, m, o, sc, NULL, &step), DT_OK);
    assert_int_equal(step, 10);
    assert_memory_equal(dt_model_params(m), saved, sizeof saved);
    /* A newer dtrain's file (format version 5), newest: both readers refuse it, naming its version,
     * rather than take an older file in its place. */
    const uint32_t v5 = CKPT_VERSION + 1;
    memcpy(v3 + 8, &v5, sizeof v5);
    save(at("ckpt-0000000012.dtc"), v3, vlen);
    expect_error(dt_ckpt_open_latest(NULL, dir, &r, &step), DT_ERR_INVALID_ARG,
                 "ckpt-0000000012.dtc has format version 5, written by a newer dtrain");
    assert_null(r);
    expect_error(dt_checkpoint_load_latest(NULL, dir, m, o, sc, NULL, &step), DT_ERR_INVALID_ARG,
                 "reads versions 1 to 4: go on with the dtrain that wrote it");
    /* A version no dtrain will write soon (a flipped high bit) is damage: skipped by both. */
    const uint32_t flipped = CKPT_VERSION_NEWER_MAX + 1;
    memcpy(v3 + 8, &flipped, sizeof flipped);
    save(at("ckpt-0000000012.dtc"), v3, vlen);
    assert_int_equal(dt_checkpoint_load_latest(NULL, dir, m, o, sc, NULL, &step), DT_OK);
    assert_int_equal(step, 10);
    unlink(at("ckpt-0000000012.dtc"));
    free(v3);
    dt_model_free(m);
    dt_optimizer_free(o);
    dt_scaler_free(sc);
}

/* The loss scaler's window of recent overflows goes through a checkpoint: a run that had 2
 * overflows of 2 updates in a window of 4 tolerating 2 gives up at the next overflow after a
 * resume too (an empty window would tolerate 2 more), a shorter window keeps the newest flags, and
 * a crafted window (a flag that is not 0 or 1, more overflows than skipped steps) is refused. */
static void test_scaler_window(void **state)
{
    (void)state;
    dt_model *m;
    assert_int_equal(dt_model_create(NULL, "fc:3", "2", 7, 4, &m), DT_OK);
    dt_scaler_config scc;
    dt_scaler_defaults(&scc);
    scc.window = 4;
    scc.max_overflow_fraction = 0.5;
    dt_scaler *sc, *back;
    assert_int_equal(dt_scaler_create(&scc, &sc), DT_OK);
    assert_int_equal(dt_scaler_update(sc, 0), DT_OK);
    assert_int_equal(dt_scaler_update(sc, 1), DT_OK);
    assert_int_equal(dt_scaler_update(sc, 1), DT_OK);
    assert_int_equal(dt_checkpoint_save(NULL, dir, m, NULL, sc, NULL, 3), DT_OK);
    assert_int_equal(dt_scaler_create(&scc, &back), DT_OK);
    long step;
    assert_int_equal(dt_checkpoint_load_latest(NULL, dir, m, NULL, back, NULL, &step), DT_OK);
    unsigned char flags[4];
    assert_int_equal(scaler_window_get(back, flags, 4), 3);
    assert_memory_equal(flags, "\0\1\1", 3);
    expect_error(dt_scaler_update(back, 1), DT_ERR_NUMERIC, "3 of the last 4 updates overflowed");
    expect_error(dt_scaler_update(sc, 1), DT_ERR_NUMERIC, "3 of the last 4 updates overflowed");
    dt_scaler_free(back);
    scc.window = 2; /* another --loss-scale-window: the newest two */
    assert_int_equal(dt_scaler_create(&scc, &back), DT_OK);
    assert_int_equal(dt_checkpoint_load_latest(NULL, dir, m, NULL, back, NULL, &step), DT_OK);
    assert_int_equal(scaler_window_get(back, flags, 4), 2);
    assert_memory_equal(flags, "\1\1", 2);
    /* Crafted, CRCs valid: refused naming the section. */
    size_t len, off = 0;
    unsigned char *img = load(at("ckpt-0000000003.dtc"), &len);
    const char *p7 = at("ckpt-0000000007.dtc");
    ((ckpt4_header *)(void *)img)->step = 7;
    entry(img, "scaler.window", &off);
    img[off + 4] = 2;
    ckpt_seal(img, len);
    save(p7, img, len);
    long st;
    int world;
    expect_error(ckpt_read_file(p7, 7, m, NULL, back, &st, &world), DT_ERR_CORRUPT,
                 "section \"scaler.window\" flag 0 is 2; it must be 0 or 1");
    img[off + 4] = 1; /* three ones where the scaler skipped two steps */
    ckpt_seal(img, len);
    save(p7, img, len);
    expect_error(ckpt_read_file(p7, 7, m, NULL, back, &st, &world), DT_ERR_CORRUPT,
                 "holds 3 flags (3 overflows); the scaler had only 3 updates (2 skipped)");
    unlink(p7);
    free(img);
    dt_scaler_free(back);
    dt_scaler_free(sc);
    dt_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_reads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged_and_crafted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_io_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_model_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scaler_window, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
