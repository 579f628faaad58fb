/*
 * test_ckpt_model_files.c - dt_model's checkpoints are files of named sections (format version
 * 4, as dt_ckpt_* writes them): its reader refuses a user's section file, dt_ckpt_open_latest
 * refuses dt_model's version-3 files, and the loss scaler's window of recent overflows survives a
 * checkpoint (a crafted window is refused).
 */
#include "ckpt_sections_fixture.h"

#include "runtime/checkpoint/ckpt_format.h"
#include "runtime/model/model.h"
#include "ckpt_v3.h"
#include "dtrain.h"
#include "base/log.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
        cmocka_unit_test_setup_teardown(test_model_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scaler_window, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
