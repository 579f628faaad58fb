/*
 * test_ckpt_crafted.c - version-4 checkpoints rebuilt section by section with valid CRCs (or with
 * one damaged byte) where a wrong size, count or field would make the reader copy more than it
 * holds, or take a damaged file for a sound one:
 *   - dt_model's reader (ckpt_read4.c): a fixed-size section longer than its struct, a scaler window
 *     whose count or flags disagree with its bytes or its scaler, a data section shorter than the
 *     channels it claims, a params section of another length or missing, a per-rank or ragged
 *     section, a reserved field; each refused with the model untouched, and a weights-only load
 *     that leaves a damaged optimizer section unread;
 *   - the file's header and table (ckpt_file.c): its CRC, world and reserved fields, bytes after a
 *     name's NUL, a per-rank section that is no whole number of blobs or was written by more ranks
 *     than read it;
 *   - the newest-file search: a damaged last section is skipped for the older file, and a read of a
 *     file that changed after its open fails;
 *   - section names of DT_CKPT_NAME_MAX characters and no more, never empty.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/checkpoint/ckpt_format.h"
#include "dtrain.h"
#include "base/log.h"
#include "tmp_dir.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];

static const char *at(const char *name)
{
    static char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

/* One section of a rebuilt file: its bytes are its own copy. */
typedef struct sec {
    char name[DT_CKPT_NAME_MAX + 1];
    unsigned char *data;
    uint64_t bytes;
    uint32_t ranks;
} sec;

typedef struct image {
    ckpt4_header h;
    sec s[16];
    uint32_t n;
} image;

/* A 9-parameter model under AdamW with a scaler, saved as step `step` of dir. */
static dt_model *g_m;
static dt_optimizer *g_o;
static dt_scaler *g_sc;
static float g_before[9];

static int setup(void **state)
{
    (void)state;
    if (tmp_dir_make(dir, sizeof dir, "dtcraft")) return -1;
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    oc.kind = DT_OPTIM_ADAMW;
    dt_scaler_config scc;
    dt_scaler_defaults(&scc);
    if (dt_model_create(NULL, "fc:3", "2", 7, 4, &g_m) || dt_optimizer_create(&oc, 9, &g_o) ||
        dt_scaler_create(&scc, &g_sc))
        return -1;
    float g[9];
    for (int i = 0; i < 9; i++) g[i] = 0.1f * (float)(i + 1);
    if (dt_optimizer_step(g_o, dt_model_params(g_m), g) || dt_checkpoint_save(NULL, dir, g_m, g_o, g_sc, NULL, 4))
        return -1;
    /* The parameters move on, so a load that happens shows in them. */
    for (int i = 0; i < 9; i++) dt_model_params(g_m)[i] += 1.0f;
    memcpy(g_before, dt_model_params(g_m), sizeof g_before);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    dt_model_free(g_m);
    dt_optimizer_free(g_o);
    dt_scaler_free(g_sc);
    return tmp_dir_remove(dir);
}

/* The sections of the file at path. */
static void parse(const char *path, image *im)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    assert_int_equal(fread(&im->h, sizeof im->h, 1, fp), 1);
    im->n = im->h.nsections;
    assert_true(im->n <= 16);
    ckpt4_entry e[16];
    assert_int_equal(fread(e, sizeof *e, im->n, fp), im->n);
    for (uint32_t i = 0; i < im->n; i++) {
        memcpy(im->s[i].name, e[i].name, sizeof e[i].name);
        im->s[i].bytes = e[i].bytes;
        im->s[i].ranks = e[i].ranks;
        /* One spare byte, zeroed: a test that lengthens a section by one writes it. */
        assert_non_null(im->s[i].data = calloc(1, e[i].bytes + 1));
        assert_int_equal(fread(im->s[i].data, 1, e[i].bytes, fp), e[i].bytes);
    }
    fclose(fp);
}

static void image_free(image *im)
{
    for (uint32_t i = 0; i < im->n; i++) free(im->s[i].data);
    im->n = 0;
}

static sec *find(image *im, const char *name)
{
    for (uint32_t i = 0; i < im->n; i++)
        if (!strcmp(im->s[i].name, name)) return &im->s[i];
    fail_msg("no section %s", name);
    return NULL;
}

/* Where section s's bytes start past the table (the sections lie in table order, back to back). */
static size_t data_offset(const image *im, const sec *s)
{
    size_t off = 0;
    for (const sec *t = im->s; t < s; t++) off += t->bytes;
    return off;
}

/* Section s's bytes replaced by n bytes of p. */
static void set_bytes(sec *s, const void *p, uint64_t n)
{
    free(s->data);
    assert_non_null(s->data = calloc(1, n + 1));
    memcpy(s->data, p, n);
    s->bytes = n;
}

/* A new last section of im. */
static void add(image *im, const char *name, uint32_t ranks, const void *p, uint64_t n)
{
    assert_true(im->n < 16);
    sec *s = &im->s[im->n++];
    memset(s->name, 0, sizeof s->name); /* the table holds NULs after a name */
    snprintf(s->name, sizeof s->name, "%s", name);
    s->data = NULL;
    s->ranks = ranks;
    set_bytes(s, p, n);
}

/* im as step `step` of dir, sealed (valid CRCs), then damage_at's byte of the sections' data
 * flipped when it is not SIZE_MAX. */
static const char *write_image(const image *im, long step, size_t damage_at)
{
    ckpt4_header h = im->h;
    h.step = step;
    h.nsections = im->n;
    size_t len = sizeof h + im->n * sizeof(ckpt4_entry), data_at = len;
    for (uint32_t i = 0; i < im->n; i++) len += im->s[i].bytes;
    unsigned char *b = calloc(1, len), *p = b + sizeof h + im->n * sizeof(ckpt4_entry);
    assert_non_null(b);
    memcpy(b, &h, sizeof h);
    for (uint32_t i = 0; i < im->n; i++) {
        ckpt4_entry e = {.bytes = im->s[i].bytes, .ranks = im->s[i].ranks};
        memcpy(e.name, im->s[i].name, sizeof e.name);
        memcpy(b + sizeof h + i * sizeof e, &e, sizeof e);
        memcpy(p, im->s[i].data, im->s[i].bytes);
        p += im->s[i].bytes;
    }
    ckpt_seal(b, len);
    if (damage_at != SIZE_MAX) b[data_at + damage_at] ^= 0x10;
    static char name[64];
    snprintf(name, sizeof name, "ckpt-%010ld.dtc", step);
    const char *path = at(name);
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(b, 1, len, fp), len);
    fclose(fp);
    free(b);
    return path;
}

static void expect_msg(dt_status got, dt_status want, const char *must)
{
    if (got != want) fail_msg("status %d (want %d): %s", (int)got, (int)want, dt_last_error());
    if (must && !strstr(dt_last_error(), must)) fail_msg("message '%s' lacks '%s'", dt_last_error(), must);
}

/* im as step 7, read by dt_model's reader: want and a substring, the model untouched. */
static void expect_model_refused(const image *im, dt_status want, const char *must)
{
    const char *p = write_image(im, 7, SIZE_MAX);
    long step = -1;
    int world = -1;
    expect_msg(ckpt_read_file(p, 7, g_m, g_o, g_sc, &step, &world), want, must);
    assert_memory_equal(dt_model_params(g_m), g_before, sizeof g_before);
    assert_int_equal(step, -1);
    unlink(p);
}

static void test_model_sections(void **state)
{
    (void)state;
    image im;
    unsigned char big[64] = {0};
    /* Longer than its struct: read whole, it would run past the struct on the stack. */
    parse(at("ckpt-0000000004.dtc"), &im);
    memcpy(big, find(&im, CKPT4_MODEL)->data, sizeof(ckpt4_model));
    set_bytes(find(&im, CKPT4_MODEL), big, sizeof(ckpt4_model) + 8);
    expect_model_refused(&im, DT_ERR_CORRUPT, "section \"dtrain.model\" is 40 bytes; it must be 32");
    image_free(&im);
    parse(at("ckpt-0000000004.dtc"), &im);
    ckpt4_scaler cs;
    memcpy(&cs, find(&im, CKPT4_SCALER)->data, sizeof cs);
    set_bytes(find(&im, CKPT4_SCALER), big, sizeof(ckpt4_scaler) + 16);
    expect_model_refused(&im, DT_ERR_CORRUPT, "section \"scaler\" is 48 bytes; it must be 32");
    image_free(&im);
    /* A scaler that could hold a long window, then windows at odds with it or with their bytes. */
    cs.updates = 5000;
    unsigned char win[4 + 2] = {0};
    const uint32_t claims = 1000; /* copied as 1000 flags out of 2 */
    memcpy(win, &claims, 4);
    parse(at("ckpt-0000000004.dtc"), &im);
    set_bytes(find(&im, CKPT4_SCALER), &cs, sizeof cs);
    set_bytes(find(&im, CKPT4_SCALER_WINDOW), win, sizeof win);
    expect_model_refused(&im, DT_ERR_CORRUPT, "field count is 1000 but it holds 2 flags");
    cs.updates = 1;
    set_bytes(find(&im, CKPT4_SCALER), &cs, sizeof cs);
    const uint32_t two = 2;
    memcpy(win, &two, 4);
    set_bytes(find(&im, CKPT4_SCALER_WINDOW), win, sizeof win);
    expect_model_refused(&im, DT_ERR_CORRUPT, "holds 2 flags (0 overflows); the scaler had only 1 updates");
    cs.updates = 2 * (int64_t)CKPT_MAX_SCALER_WINDOW;
    set_bytes(find(&im, CKPT4_SCALER), &cs, sizeof cs);
    const uint32_t many = CKPT_MAX_SCALER_WINDOW + 1;
    unsigned char *long_win = calloc(1, 4 + (size_t)many);
    assert_non_null(long_win);
    memcpy(long_win, &many, 4);
    set_bytes(find(&im, CKPT4_SCALER_WINDOW), long_win, 4 + (uint64_t)many);
    free(long_win);
    expect_model_refused(&im, DT_ERR_CORRUPT, "is 1048581 bytes; it must be 4 plus one per flag, at most 1048576");
    image_free(&im);
    /* Fewer figures than its channels: copied, they would be read past the section. */
    parse(at("ckpt-0000000004.dtc"), &im);
    unsigned char data[sizeof(ckpt4_data) + 8] = {0};
    ckpt4_data cd = {.normalize = 2, .channels = 3};
    memcpy(data, &cd, sizeof cd);
    const float fig[2] = {0.5f, 1.0f};
    memcpy(data + sizeof cd, fig, sizeof fig);
    add(&im, CKPT4_DATA, 0, data, sizeof data);
    expect_model_refused(&im, DT_ERR_CORRUPT, "section \"data\" is 32 bytes but claims 3 channels (48 bytes)");
    image_free(&im);
    /* params: a float short (copied, the model's 9 would be read past it), missing, per-rank. */
    parse(at("ckpt-0000000004.dtc"), &im);
    find(&im, CKPT4_PARAMS)->bytes -= sizeof(float);
    expect_model_refused(&im, DT_ERR_CORRUPT, "section \"params\" holds 8 floats; the model has 9");
    find(&im, CKPT4_PARAMS)->bytes += sizeof(float);
    find(&im, CKPT4_PARAMS)->ranks = 1;
    expect_model_refused(&im, DT_ERR_CORRUPT, "section \"params\" is per-rank");
    find(&im, CKPT4_PARAMS)->ranks = 0;
    snprintf(find(&im, CKPT4_PARAMS)->name, DT_CKPT_NAME_MAX + 1, "params.old");
    expect_model_refused(&im, DT_ERR_CORRUPT, "has no section \"params\"");
    image_free(&im);
    /* An optimizer section of no whole number of floats; a reserved field set. */
    parse(at("ckpt-0000000004.dtc"), &im);
    find(&im, CKPT4_MOMENT1)->bytes += 1;
    expect_model_refused(&im, DT_ERR_CORRUPT, "section \"optim.m\" is 37 bytes, not a whole number of floats");
    find(&im, CKPT4_MOMENT1)->bytes -= 1;
    ckpt4_model mm;
    memcpy(&mm, find(&im, CKPT4_MODEL)->data, sizeof mm);
    mm.reserved = 1;
    memcpy(find(&im, CKPT4_MODEL)->data, &mm, sizeof mm);
    expect_model_refused(&im, DT_ERR_CORRUPT, "section \"dtrain.model\" field reserved is 1");
    image_free(&im);
}

/* Weights only (no optimizer): the moments stay unread, so a damaged one does not stop the load. */
static void test_weights_only_skips_moments(void **state)
{
    (void)state;
    image im;
    parse(at("ckpt-0000000004.dtc"), &im);
    const char *p = write_image(&im, 7, data_offset(&im, find(&im, CKPT4_MOMENT1)) + 2);
    long step = -1;
    int world = -1;
    expect_msg(ckpt_read_file(p, 7, g_m, g_o, g_sc, &step, &world), DT_ERR_CORRUPT,
               "section \"optim.m\" is damaged (CRC mismatch)");
    assert_int_equal(ckpt_read_file(p, 7, g_m, NULL, NULL, &step, &world), DT_OK);
    assert_int_equal(step, 7);
    memcpy(dt_model_params(g_m), g_before, sizeof g_before);
    unlink(p);
    image_free(&im);
}

/* im as step 9, opened with every section verified: want and a substring. */
static void expect_file(const image *im, dt_status want, const char *must)
{
    const char *p = write_image(im, 9, SIZE_MAX);
    int fd;
    uint64_t size;
    uint32_t version;
    ckpt_file *f = NULL;
    dt_status s = ckpt_open_regular(p, &fd, &size, &version);
    if (!s) s = ckpt_file_open_fd(fd, size, p, 9, 1, &f);
    expect_msg(s, want, must);
    ckpt_file_close(f);
    unlink(p);
}

static void test_header_and_table(void **state)
{
    (void)state;
    image im;
    parse(at("ckpt-0000000004.dtc"), &im);
    expect_file(&im, DT_OK, NULL);
    im.h.world = CKPT_MAX_WORLD + 1;
    expect_file(&im, DT_ERR_CORRUPT, "header field world is 16777217; it must be 1 to 16777216");
    im.h.world = 1;
    im.h.reserved = 1;
    expect_file(&im, DT_ERR_CORRUPT, "reserved header field is 1; it must be 0");
    im.h.reserved = 0;
    /* Bytes after a name's NUL: the table is NULs after each name. */
    find(&im, CKPT4_PARAMS)->name[DT_CKPT_NAME_MAX] = 'x';
    expect_file(&im, DT_ERR_CORRUPT, "the name of section 1 is not 1 to 63 characters");
    find(&im, CKPT4_PARAMS)->name[DT_CKPT_NAME_MAX] = '\0';
    /* A per-rank section of 2 ranks that is no whole number of blobs. */
    im.h.world = 2;
    add(&im, "rng", 2, "123456789", 9);
    expect_file(&im, DT_ERR_CORRUPT, "per-rank section \"rng\" is 9 bytes, not a whole number of blobs for 2 ranks");
    /* Whole blobs of 2 ranks, read by a job of 1: one blob each cannot be handed out. */
    find(&im, "rng")->bytes = 8;
    write_image(&im, 9, SIZE_MAX);
    dt_ckpt_reader *r;
    long step = -1;
    assert_int_equal(dt_ckpt_open_latest(NULL, dir, &r, &step), DT_OK);
    assert_int_equal(step, 9);
    unsigned char blob[4];
    expect_msg(dt_ckpt_read_rank(r, "rng", blob, sizeof blob), DT_ERR_INVALID_ARG,
               "holds one blob for each of the 2 ranks that wrote it, and this job has 1");
    dt_ckpt_close(r);
    unlink(at("ckpt-0000000009.dtc"));
    image_free(&im);
    /* A header byte changed after the seal (world 1 -> 2, a field no other check can doubt). */
    parse(at("ckpt-0000000004.dtc"), &im);
    const char *p = write_image(&im, 9, SIZE_MAX);
    int fd = open(p, O_WRONLY);
    assert_true(fd >= 0);
    const uint32_t two = 2;
    assert_int_equal(pwrite(fd, &two, 4, offsetof(ckpt4_header, world)), 4);
    close(fd);
    uint64_t size;
    uint32_t version;
    ckpt_file *f = NULL;
    dt_status s = ckpt_open_regular(p, &fd, &size, &version);
    if (!s) s = ckpt_file_open_fd(fd, size, p, 9, 1, &f);
    expect_msg(s, DT_ERR_CORRUPT, "is not a dtrain checkpoint or its header is damaged");
    unlink(p);
    image_free(&im);
}

/* The newest file's last section damaged: skipped for the older file. A section changed on disk
 * after the open: its read fails rather than hand over other bytes. */
static void test_newest_and_changed(void **state)
{
    (void)state;
    image im;
    parse(at("ckpt-0000000004.dtc"), &im);
    /* The first byte of the last section ("scaler.window"). */
    write_image(&im, 9, data_offset(&im, &im.s[im.n - 1]));
    dt_ckpt_reader *r;
    long step = -1;
    log_set_level(LOG_LEVEL_ERROR);
    assert_int_equal(dt_ckpt_open_latest(NULL, dir, &r, &step), DT_OK);
    log_set_level(LOG_LEVEL_WARN);
    assert_int_equal(step, 4);
    dt_ckpt_close(r);
    unlink(at("ckpt-0000000009.dtc"));

    assert_int_equal(dt_ckpt_open_latest(NULL, dir, &r, &step), DT_OK);
    assert_int_equal(step, 4);
    const size_t off = sizeof(ckpt4_header) + im.n * sizeof(ckpt4_entry) + data_offset(&im, find(&im, CKPT4_PARAMS));
    int fd = open(at("ckpt-0000000004.dtc"), O_RDWR);
    assert_true(fd >= 0);
    unsigned char b;
    assert_int_equal(pread(fd, &b, 1, (off_t)off), 1);
    b ^= 0x10;
    assert_int_equal(pwrite(fd, &b, 1, (off_t)off), 1);
    float p[9];
    expect_msg(dt_ckpt_read(r, CKPT4_PARAMS, p, sizeof p), DT_ERR_CORRUPT, "it changed since it was opened");
    b ^= 0x10; /* put back for the other tests */
    assert_int_equal(pwrite(fd, &b, 1, (off_t)off), 1);
    close(fd);
    dt_ckpt_close(r);
    image_free(&im);
}

static void test_name_lengths(void **state)
{
    (void)state;
    char name[DT_CKPT_NAME_MAX + 2];
    memset(name, 'a', sizeof name);
    name[DT_CKPT_NAME_MAX] = '\0';
    assert_true(ckpt_name_valid(name)); /* 63 characters: the most */
    name[DT_CKPT_NAME_MAX] = 'a';
    name[DT_CKPT_NAME_MAX + 1] = '\0';
    assert_false(ckpt_name_valid(name)); /* 64 would leave the table's field no NUL */
    assert_false(ckpt_name_valid(""));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_name_lengths),
        cmocka_unit_test_setup_teardown(test_model_sections, setup, teardown),
        cmocka_unit_test_setup_teardown(test_weights_only_skips_moments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_header_and_table, setup, teardown),
        cmocka_unit_test_setup_teardown(test_newest_and_changed, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
