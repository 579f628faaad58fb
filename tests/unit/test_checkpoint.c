/*
 * test_checkpoint.c - dt_model's checkpoint reader trusts nothing in a file of the fixed layout
 * (format versions 1 to 3, which users still have on disk; ckpt_v3.h lays them out): CRC-valid
 * crafted files, one per header and section field, are refused with a message naming the field and
 * both values, and leave the model untouched; a byte damaged after the seal in each block a CRC
 * covers is refused naming the block (a weights-only load reads no optimizer section), as are the
 * figures of more channels than the data's; FIFOs and directories named like checkpoints are skipped
 * without blocking; a newer dtrain's file stops the search, a damaged version does not. What a
 * checkpoint keeps and gives back is test_ckpt_state.c's; the named-section files of version 4 are
 * test_ckpt_sections.c's.
 */
#include "block_guard.h"
#include "ckpt_v3_fixture.h"

#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <sys/stat.h>

static void test_sound_file_loads(void **state)
{
    fixture *f = *state;
    unsigned char *c = copy7(f);
    ckpt_seal(c, f->len);
    const char *p = path_in(f, "ckpt-0000000007.dtc");
    write_whole(p, c, f->len);
    long step = -1;
    int world = -1;
    assert_int_equal(ckpt_read_file(p, 7, f->m, f->o, f->sc, &step, &world), DT_OK);
    assert_int_equal(step, 7);
    assert_int_equal(world, 1);
    assert_memory_equal(dt_model_params(f->m), section(f->img, 0), sizeof f->before);
    memcpy(dt_model_params(f->m), f->before, sizeof f->before);
    unlink(p);
    free(c);
}

/* The audit's reproduction: section 0 claims the model's count + 4096, and 4096 zero floats are
 * appended, CRCs valid. Before the fix the reader copied them past the parameter buffer. */
static void test_section0_longer(void **state)
{
    fixture *f = *state;
    unsigned char *c = malloc(f->len + 4096 * sizeof(float));
    size_t s0 = sizeof(ckpt_header) + sizeof(ckpt_scaler);
    size_t p0 = 9 * sizeof(float);
    memcpy(c, f->img, s0 + p0);
    memset(c + s0 + p0, 0, 4096 * sizeof(float));
    memcpy(c + s0 + p0 + 4096 * sizeof(float), f->img + s0 + p0, f->len - s0 - p0);
    hdr(c)->step = 7;
    hdr(c)->section_n[0] += 4096;
    expect_refused(f, c, f->len + 4096 * sizeof(float), DT_ERR_CORRUPT, "section 0 (parameters) claims 4105 floats",
                   "the model has 9", NULL);
    /* The same with nparams raised too. */
    hdr(c)->nparams += 4096;
    expect_refused(f, c, f->len + 4096 * sizeof(float), DT_ERR_CORRUPT, "nparams is 4105", "9 parameters", NULL);
    free(c);
}

static void test_section0_shorter(void **state)
{
    fixture *f = *state;
    unsigned char *c = malloc(f->len);
    const size_t s0 = (size_t)((unsigned char *)section(f->img, 0) - f->img);
    memcpy(c, f->img, s0 + 5 * sizeof(float));
    memcpy(c + s0 + 5 * sizeof(float), f->img + s0 + 9 * sizeof(float), f->len - s0 - 9 * sizeof(float));
    hdr(c)->step = 7;
    hdr(c)->section_n[0] = 5;
    expect_refused(f, c, f->len - 4 * sizeof(float), DT_ERR_CORRUPT, "claims 5 floats", "the model has 9", NULL);
    free(c);
}

/* A huge count is refused from the header alone, before any allocation (the fuzzer saw a 6 GB
 * malloc for this 9-parameter model; the old reader then failed on the read, not on the field). */
static void test_huge_count_no_alloc(void **state)
{
    fixture *f = *state;
    unsigned char *c = copy7(f);
    hdr(c)->section_n[0] = 1500000000ull;
    expect_refused(f, c, f->len, DT_ERR_CORRUPT, "claims 1500000000 floats", NULL);
    free(c);
}

static void test_step_fields(void **state)
{
    fixture *f = *state;
    unsigned char *c = copy7(f);
    hdr(c)->step = (int64_t)1 << 62;
    expect_refused(f, c, f->len, DT_ERR_CORRUPT, "step is 4611686018427387904", "file name says step 7", NULL);
    hdr(c)->step = -1;
    expect_refused(f, c, f->len, DT_ERR_CORRUPT, "step is -1", "step 7", NULL);
    hdr(c)->step = 7;
    hdr(c)->optim_t = INT_MIN;
    expect_refused(f, c, f->len, DT_ERR_CORRUPT, "optim_t", "-2147483648", ">= 0", NULL);
    free(c);
}

static void test_header_fields(void **state)
{
    fixture *f = *state;
    unsigned char *c = copy7(f);
    hdr(c)->world = 0;
    expect_refused(f, c, f->len, DT_ERR_CORRUPT, "world is 0", "1 to 16777216", NULL);
    hdr(c)->world = 1u << 30;
    expect_refused(f, c, f->len, DT_ERR_CORRUPT, "world is 1073741824", NULL);
    hdr(c)->world = 1;
    hdr(c)->optim_kind = 7;
    expect_refused(f, c, f->len, DT_ERR_CORRUPT, "optim_kind is 7", NULL);
    hdr(c)->optim_kind = DT_OPTIM_ADAMW;
    hdr(c)->reserved = 3;
    expect_refused(f, c, f->len, DT_ERR_CORRUPT, "reserved", "3", NULL);
    hdr(c)->reserved = 0;
    hdr(c)->section_n[2] = 10;
    expect_refused(f, c, f->len + 4, DT_ERR_CORRUPT, "section 2", "claims 10 floats", NULL);
    hdr(c)->section_n[2] = 9;
    hdr(c)->fingerprint ^= 1;
    expect_refused(f, c, f->len, DT_ERR_INVALID_ARG, "another model", NULL);
    hdr(c)->fingerprint ^= 1;
    hdr(c)->version = CKPT_VERSION + 1;
    expect_refused(f, c, f->len, DT_ERR_INVALID_ARG, "format version 5, written by a newer dtrain",
                   "reads versions 1 to 4", "move the file out", NULL);
    hdr(c)->version = 0;
    expect_refused(f, c, f->len, DT_ERR_CORRUPT, "version 0", "versions 1 to 4", NULL);
    free(c);
}

static void test_scaler_fields(void **state)
{
    fixture *f = *state;
    unsigned char *c = copy7(f);
    scl(c)->scale = NAN;
    expect_refused(f, c, f->len, DT_ERR_CORRUPT, "scaler field scale is nan", NULL);
    scl(c)->scale = -4;
    expect_refused(f, c, f->len, DT_ERR_CORRUPT, "scale is -4", NULL);
    scl(c)->scale = 1024;
    scl(c)->present = 2;
    expect_refused(f, c, f->len, DT_ERR_CORRUPT, "present is 2", NULL);
    scl(c)->present = 1;
    scl(c)->updates = 3;
    scl(c)->skipped = 4;
    expect_refused(f, c, f->len, DT_ERR_CORRUPT, "updates 3 and skipped 4", NULL);
    scl(c)->skipped = 0;
    scl(c)->good_steps = -1;
    expect_refused(f, c, f->len, DT_ERR_CORRUPT, "good_steps -1", NULL);
    free(c);
}

static void test_section_values_and_size(void **state)
{
    fixture *f = *state;
    unsigned char *c = copy7(f);
    section(c, 0)[3] = NAN;
    expect_refused(f, c, f->len, DT_ERR_CORRUPT, "section 0 holds nan at index 3", NULL);
    memcpy(c, f->img, f->len);
    hdr(c)->step = 7;
    section(c, 2)[8] = -1.0f;
    expect_refused(f, c, f->len, DT_ERR_CORRUPT, "section 2 holds -1 at index 8", ">= 0", NULL);
    memcpy(c, f->img, f->len);
    hdr(c)->step = 7;
    expect_refused(f, c, f->len - 4, DT_ERR_CORRUPT, "truncated", NULL);
    memset(c + f->len, 0, 4);
    expect_refused(f, c, f->len + 4, DT_ERR_CORRUPT, "data after its last section", NULL);
    free(c);
}

static void test_names(void **state)
{
    (void)state;
    long st = -1;
    assert_true(ckpt_name_step("ckpt-0000000005.dtc", &st) && st == 5);
    assert_true(ckpt_name_step("ckpt-12345678901.dtc", &st) && st == 12345678901L);
    assert_true(ckpt_name_step("ckpt-999999999999999999.dtc", &st) && st == 999999999999999999L);
    /* One name per step: the writer's. */
    const char *bad[] = {"ckpt-5.dtc",   "ckpt-00000000005.dtc", "ckpt-+5.dtc",
                         "ckpt- 5.dtc",  "ckpt--5.dtc",          "ckpt-0000000005.dtc.tmp.123",
                         "ckpt-.dtc",    "ckpt-0000000005.dtcx", "ckpt-1000000000000000000.dtc",
                         "ckpt-0x5.dtc", "xckpt-0000000005.dtc"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (ckpt_name_step(bad[i], &st)) fail_msg("'%s' taken as a checkpoint name", bad[i]);
}

/* A byte damaged after the seal, in each block the CRCs cover: refused naming the block, the model
 * untouched; the optimizer's sections are not read for a weights-only load, so damage there does
 * not stop one. A data block whose present field is neither 0 nor 1 is refused too. */
static void test_damaged_blocks(void **state)
{
    fixture *f = *state;
    unsigned char *c = copy7(f);
    const char *p = path_in(f, "ckpt-0000000007.dtc");
    const size_t data_at = sizeof(ckpt_header) + sizeof(ckpt_scaler);
    const struct {
        size_t at;
        const char *must;
    } cases[] = {
        {sizeof(ckpt_header) + 8, "the loss-scaler block is damaged (CRC mismatch)"},
        {data_at, "the data block is damaged (CRC mismatch)"},
        {(size_t)((unsigned char *)&section(c, 0)[4] - c), "section 0 is damaged (CRC mismatch)"},
    };
    long step = -1;
    int world = -1;
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        memcpy(c, f->img, f->len);
        hdr(c)->step = 7;
        ckpt_seal(c, f->len);
        c[cases[k].at] ^= 0x08;
        write_whole(p, c, f->len);
        if (ckpt_read_file(p, 7, f->m, f->o, f->sc, &step, &world) != DT_ERR_CORRUPT ||
            !strstr(dt_last_error(), cases[k].must))
            fail_msg("damage at byte %zu: \"%s\" lacks \"%s\"", cases[k].at, dt_last_error(), cases[k].must);
        assert_memory_equal(dt_model_params(f->m), f->before, sizeof f->before);
    }
    memcpy(c, f->img, f->len);
    hdr(c)->step = 7;
    ckpt_seal(c, f->len);
    section(c, 1)[2] = 1e30f; /* optim.m, its CRC now wrong */
    write_whole(p, c, f->len);
    assert_int_equal(ckpt_read_file(p, 7, f->m, f->o, f->sc, &step, &world), DT_ERR_CORRUPT);
    assert_non_null(strstr(dt_last_error(), "section 1 is damaged (CRC mismatch)"));
    assert_int_equal(ckpt_read_file(p, 7, f->m, NULL, NULL, &step, &world), DT_OK);
    assert_int_equal(step, 7);
    unlink(p);
    memcpy(dt_model_params(f->m), f->before, sizeof f->before);
    memcpy(c, f->img, f->len);
    hdr(c)->step = 7;
    ckpt_data cd;
    memcpy(&cd, c + data_at, sizeof cd);
    cd.present = 2;
    memcpy(c + data_at, &cd, sizeof cd);
    expect_refused(f, c, f->len, DT_ERR_CORRUPT, "data block fields present 2 and channels 0 are out of range", NULL);
    free(c);
    /* Figures of 3 channels for data of 1: refused, not copied into the caller's room for 1. */
    float mean3[3] = {0.1f, 0.2f, 0.3f}, std3[3] = {1, 2, 3}, mean1[1] = {5}, std1[1] = {6};
    dt_ckpt_data three = {.present = 1, .normalize = 2, .channels = 3, .mean = mean3, .std = std3};
    size_t len;
    c = ckpt_v3_image(f->m, f->o, f->sc, &three, 7, &len);
    assert_non_null(c);
    write_whole(p, c, len);
    dt_ckpt_data one = {.channels = 1, .mean = mean1, .std = std1};
    assert_int_equal(ckpt_read_file_data(p, 7, f->m, f->o, f->sc, &one, &step, &world, NULL), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "was trained on data of 3 channels; this data has 1"));
    assert_true(mean1[0] == 5 && std1[0] == 6);
    assert_memory_equal(dt_model_params(f->m), f->before, sizeof f->before);
    unlink(p);
    free(c);
}

/* A FIFO and a directory named like newer checkpoints are skipped without blocking: the sound
 * step-5 file loads. */
static void test_fifo_and_directory(void **state)
{
    fixture *f = *state;
    assert_int_equal(mkfifo(path_in(f, "ckpt-0000000009.dtc"), 0644), 0);
    assert_int_equal(mkdir(path_in(f, "ckpt-0000000008.dtc"), 0755), 0);
    long step = -1;
    int world = -1;
    assert_int_equal(ckpt_read_file(path_in(f, "ckpt-0000000008.dtc"), 8, f->m, f->o, f->sc, &step, &world),
                     DT_ERR_CORRUPT);
    assert_non_null(strstr(dt_last_error(), "is a directory, not a checkpoint file"));
    block_guard_start(20);
    assert_int_equal(ckpt_read_file(path_in(f, "ckpt-0000000009.dtc"), 9, f->m, f->o, f->sc, &step, &world),
                     DT_ERR_CORRUPT);
    assert_non_null(strstr(dt_last_error(), "is a FIFO"));
    assert_int_equal(dt_checkpoint_load_latest(NULL, f->dir, f->m, f->o, f->sc, NULL, &step), DT_OK);
    block_guard_stop();
    assert_int_equal(step, 5);
    unlink(path_in(f, "ckpt-0000000009.dtc"));
    rmdir(path_in(f, "ckpt-0000000008.dtc"));
    memcpy(dt_model_params(f->m), f->before, sizeof f->before);
}

/* The load falls back over a crafted newer file to the sound one. */
static void test_load_latest_skips_crafted(void **state)
{
    fixture *f = *state;
    unsigned char *c = copy7(f);
    hdr(c)->section_n[0] = 9 + 4096;
    ckpt_seal(c, f->len);
    write_whole(path_in(f, "ckpt-0000000007.dtc"), c, f->len);
    long step = -1;
    assert_int_equal(dt_checkpoint_load_latest(NULL, f->dir, f->m, f->o, f->sc, NULL, &step), DT_OK);
    assert_int_equal(step, 5);
    unlink(path_in(f, "ckpt-0000000007.dtc"));
    memcpy(dt_model_params(f->m), f->before, sizeof f->before);
    free(c);
}

/* A newer dtrain's file (format version 5) is refused, not skipped: taking the older sound file
 * would resume behind the newer run's state and, later, write over its file of the same step. */
static void test_load_latest_refuses_newer(void **state)
{
    fixture *f = *state;
    unsigned char *c = copy7(f);
    hdr(c)->version = CKPT_VERSION + 1;
    write_whole(path_in(f, "ckpt-0000000007.dtc"), c, f->len);
    long step = -1;
    assert_int_equal(dt_checkpoint_load_latest(NULL, f->dir, f->m, f->o, f->sc, NULL, &step), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "ckpt-0000000007.dtc has format version 5, written by a newer dtrain"));
    assert_memory_equal(dt_model_params(f->m), f->before, sizeof f->before);
    /* Moved away, as the message says, the older file loads. */
    char newer[256];
    snprintf(newer, sizeof newer, "%s", path_in(f, "newer.dtc")); /* path_in's buffer is static */
    assert_int_equal(rename(path_in(f, "ckpt-0000000007.dtc"), newer), 0);
    assert_int_equal(dt_checkpoint_load_latest(NULL, f->dir, f->m, f->o, f->sc, NULL, &step), DT_OK);
    assert_int_equal(step, 5);
    unlink(newer);
    memcpy(dt_model_params(f->m), f->before, sizeof f->before);
    /* A version no dtrain will write soon (a flipped high bit): damage, skipped for the older file. */
    hdr(c)->version = CKPT_VERSION_NEWER_MAX + 1;
    write_whole(path_in(f, "ckpt-0000000007.dtc"), c, f->len);
    assert_int_equal(dt_checkpoint_load_latest(NULL, f->dir, f->m, f->o, f->sc, NULL, &step), DT_OK);
    assert_int_equal(step, 5);
    memcpy(dt_model_params(f->m), f->before, sizeof f->before);
    free(c);
}
int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test_setup_teardown(test_sound_file_loads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_section0_longer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_section0_shorter, setup, teardown),
        cmocka_unit_test_setup_teardown(test_huge_count_no_alloc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_step_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(test_header_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scaler_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(test_section_values_and_size, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged_blocks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fifo_and_directory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_latest_skips_crafted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_latest_refuses_newer, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
