/*
 * test_ckpt_state.c - what a dt_model checkpoint keeps and gives back: a file-size limit is an
 * error, not a SIGXFSZ death; weights-only save and load; another optimizer's file refused; a
 * scaler without usable state restarted; the data block (position and normalization) as saved and
 * its crafted figures refused; and the round-trip property of ckpt_roundtrip.h (the fuzz
 * harness's) over seeded random states; an optimizer past 2^31 - 1 steps stepping and saving as
 * before. The fixture is ckpt_v3_fixture.h's.
 */
#include "ckpt_roundtrip.h"
#include "ckpt_v3_fixture.h"
#include "tmp_dir.h"
#include "runtime/model/model.h"

#include <limits.h>

#include <signal.h>
#include <sys/resource.h>

/* RLIMIT_FSIZE below the checkpoint's size: an error naming the limit, no temporary file left,
 * the previous checkpoint intact, and this process alive (SIGXFSZ used to kill it). */
static void test_file_size_limit(void **state)
{
    fixture *f = *state;
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 100;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    dt_status s = dt_checkpoint_save(NULL, f->dir, f->m, f->o, f->sc, NULL, 6);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    assert_int_equal(s, DT_ERR_IO);
    assert_non_null(strstr(dt_last_error(), "File too large"));
    assert_non_null(strstr(dt_last_error(), "limit 100 bytes"));
    assert_non_null(strstr(dt_last_error(), "ulimit -f"));
    char tmp[320];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path_in(f, "ckpt-0000000006.dtc"), (int)getpid());
    assert_int_equal(access(tmp, F_OK), -1);
    assert_int_equal(access(path_in(f, "ckpt-0000000006.dtc"), F_OK), -1);
    sigset_t pend;
    sigpending(&pend);
    assert_false(sigismember(&pend, SIGXFSZ));
    long step = -1;
    assert_int_equal(dt_checkpoint_load_latest(NULL, f->dir, f->m, f->o, f->sc, NULL, &step), DT_OK);
    assert_int_equal(step, 5);
    memcpy(dt_model_params(f->m), f->before, sizeof f->before);
}

/* Save and load without an optimizer: weights only, what inference needs. */
static void test_weights_only(void **state)
{
    fixture *f = *state;
    char wdir[128];
    snprintf(wdir, sizeof wdir, "%s/weights", f->dir);
    assert_int_equal(dt_checkpoint_save(NULL, wdir, f->m, NULL, NULL, NULL, 3), DT_OK);
    for (int i = 0; i < 9; i++) dt_model_params(f->m)[i] = 0;
    long step = -1;
    assert_int_equal(dt_checkpoint_load_latest(NULL, wdir, f->m, NULL, NULL, NULL, &step), DT_OK);
    assert_int_equal(step, 3);
    assert_memory_equal(dt_model_params(f->m), f->before, sizeof f->before);
    /* A weights-only file cannot resume an optimizer. */
    assert_int_equal(dt_checkpoint_load_latest(NULL, wdir, f->m, f->o, NULL, NULL, &step), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "weights only"));
    /* A full checkpoint loads its weights without an optimizer. */
    assert_int_equal(dt_checkpoint_load_latest(NULL, f->dir, f->m, NULL, NULL, NULL, &step), DT_OK);
    assert_int_equal(step, 5);
    assert_memory_equal(dt_model_params(f->m), section(f->img, 0), sizeof f->before);
    memcpy(dt_model_params(f->m), f->before, sizeof f->before);
    assert_int_equal(dt_checkpoint_save(NULL, wdir, NULL, NULL, NULL, NULL, 3), DT_ERR_INVALID_ARG);
    assert_int_equal(dt_checkpoint_save(NULL, wdir, f->m, NULL, NULL, NULL, -1), DT_ERR_INVALID_ARG);
}

/* A checkpoint without scaler state, or with state this run's settings refuse, leaves the scaler
 * at its initial state, as the header says, whatever it did before the load (a loop that rolls
 * back mid-run): before, it kept its backed-off scale and its window of overflows, and rank 0 (the
 * one that reads the file) then scaled differently from the ranks that took its state. */
static void test_scaler_restarts(void **state)
{
    fixture *f = *state;
    char sdir[128];
    snprintf(sdir, sizeof sdir, "%s/noscaler", f->dir);
    assert_int_equal(dt_checkpoint_save(NULL, sdir, f->m, f->o, NULL, NULL, 4), DT_OK);
    assert_int_equal(dt_scaler_update(f->sc, 1), DT_OK);
    assert_int_equal(dt_scaler_update(f->sc, 1), DT_OK);
    assert_true(dt_scaler_scale(f->sc) < 65536.0f && dt_scaler_skipped(f->sc) == 2);
    long step = -1;
    assert_int_equal(dt_checkpoint_load_latest(NULL, sdir, f->m, f->o, f->sc, NULL, &step), DT_OK);
    assert_int_equal(step, 4);
    dt_scaler_state st;
    dt_scaler_get_state(f->sc, &st);
    assert_true(st.scale == 65536.0 && st.good_steps == 0 && st.updates == 0 && st.skipped == 0);

    /* Saved after 10 good steps; loaded into a scaler that grows every 5 (good_steps 10 is out of
     * its range) after it backed off. */
    char gdir[128];
    snprintf(gdir, sizeof gdir, "%s/grown", f->dir);
    for (int i = 0; i < 10; i++) assert_int_equal(dt_scaler_update(f->sc, 0), DT_OK);
    assert_int_equal(dt_checkpoint_save(NULL, gdir, f->m, f->o, f->sc, NULL, 6), DT_OK);
    dt_scaler_config scc;
    dt_scaler_defaults(&scc);
    scc.growth_interval = 5;
    dt_scaler *other = NULL;
    assert_int_equal(dt_scaler_create(&scc, &other), DT_OK);
    assert_int_equal(dt_scaler_update(other, 1), DT_OK);
    assert_int_equal(dt_checkpoint_load_latest(NULL, gdir, f->m, f->o, other, NULL, &step), DT_OK);
    dt_scaler_get_state(other, &st);
    assert_true(st.scale == 65536.0 && st.good_steps == 0 && st.updates == 0 && st.skipped == 0);
    dt_scaler_free(other);
}

/* A sound checkpoint of another optimizer is refused as a user error, naming both. */
static void test_other_optimizer(void **state)
{
    fixture *f = *state;
    dt_optim_config oc;
    dt_optim_defaults(&oc); /* sgd with momentum */
    dt_optimizer *sgd;
    assert_int_equal(dt_optimizer_create(&oc, 9, &sgd), DT_OK);
    long step = -1;
    assert_int_equal(dt_checkpoint_load_latest(NULL, f->dir, f->m, sgd, NULL, NULL, &step), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "optimizer adamw, this run uses sgd"));
    assert_memory_equal(dt_model_params(f->m), f->before, sizeof f->before);
    dt_optimizer_free(sgd);
}

/* A run past 2^31 - 1 optimizer steps (--steps goes to 2^40), or resumed from a checkpoint there:
 * the step counter wrapped negative, AdamW's bias correction made every parameter NaN, and the
 * next checkpoint held optim_t < 0, which every resume skips as damaged. The counter now stops at
 * INT_MAX, and the steps from there are bit for bit those at 2^30, where the correction is 1
 * already; the file saved there loads. */
static void test_step_counter_limit(void **state)
{
    fixture *f = *state;
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    oc.kind = DT_OPTIM_ADAMW;
    oc.beta2 = 0.99999994f; /* the largest float below 1: the slowest correction there is */
    dt_optimizer *late, *ref;
    assert_int_equal(dt_optimizer_create(&oc, 9, &late), DT_OK);
    assert_int_equal(dt_optimizer_create(&oc, 9, &ref), DT_OK);
    optimizer_set_t(late, INT_MAX - 1);
    optimizer_set_t(ref, 1 << 30);
    float p_ref[9], g[9];
    memcpy(p_ref, f->before, sizeof p_ref);
    for (int step = 0; step < 3; step++) {
        for (int i = 0; i < 9; i++) g[i] = 0.05f * (float)(i - 4 + step);
        assert_int_equal(dt_optimizer_step(late, dt_model_params(f->m), g), DT_OK);
        assert_int_equal(dt_optimizer_step(ref, p_ref, g), DT_OK);
        assert_memory_equal(dt_model_params(f->m), p_ref, sizeof p_ref);
    }
    assert_int_equal(optimizer_state(late).t, INT_MAX);
    char ldir[128];
    snprintf(ldir, sizeof ldir, "%s/late", f->dir);
    assert_int_equal(dt_checkpoint_save(NULL, ldir, f->m, late, NULL, NULL, 3000000000L), DT_OK);
    optimizer_set_t(late, 0);
    long step = -1;
    assert_int_equal(dt_checkpoint_load_latest(NULL, ldir, f->m, late, NULL, NULL, &step), DT_OK);
    assert_true(step == 3000000000L);
    assert_int_equal(optimizer_state(late).t, INT_MAX);
    assert_memory_equal(dt_model_params(f->m), p_ref, sizeof p_ref);
    memcpy(dt_model_params(f->m), f->before, sizeof f->before);
    dt_optimizer_free(late);
    dt_optimizer_free(ref);
}

/* Version 3's data block: the data position and the normalization come back as saved; a block
 * whose figures are crafted is refused, and one of other data (channels) is another dataset's. */
static void test_data_block(void **state)
{
    fixture *f = *state;
    float mean[3] = {0.5f, 0.25f, 0.125f}, sd[3] = {2, 3, 4};
    const dt_ckpt_data in = {
        .epoch = 4, .offset = 1234, .normalize = DT_NORMALIZE_STANDARD, .channels = 3, .mean = mean, .std = sd};
    assert_int_equal(dt_checkpoint_save(NULL, f->dir, f->m, f->o, f->sc, &in, 9), DT_OK);
    float m2[3] = {0}, s2[3] = {0};
    dt_ckpt_data out = {.channels = 3, .mean = m2, .std = s2};
    long step = -1;
    assert_int_equal(dt_checkpoint_load_latest(NULL, f->dir, f->m, f->o, f->sc, &out, &step), DT_OK);
    assert_int_equal(step, 9);
    assert_int_equal(out.present, 1);
    assert_int_equal(out.epoch, 4);
    assert_int_equal(out.offset, 1234);
    assert_int_equal(out.normalize, DT_NORMALIZE_STANDARD);
    assert_memory_equal(m2, mean, sizeof mean);
    assert_memory_equal(s2, sd, sizeof sd);
    /* Other data: 1 channel, not 3. */
    dt_ckpt_data other = {.channels = 1, .mean = m2, .std = s2};
    assert_int_equal(dt_checkpoint_load_latest(NULL, f->dir, f->m, f->o, f->sc, &other, &step), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "3 channels"));
    /* The same block in a version-3 file loads the same. */
    unlink(path_in(f, "ckpt-0000000009.dtc"));
    size_t len;
    unsigned char *img = ckpt_v3_image(f->m, f->o, f->sc, &in, 9, &len);
    write_whole(path_in(f, "ckpt-0000000009.dtc"), img, len);
    memset(m2, 0, sizeof m2);
    memset(&out, 0, sizeof out);
    out.channels = 3, out.mean = m2, out.std = s2;
    assert_int_equal(dt_checkpoint_load_latest(NULL, f->dir, f->m, f->o, f->sc, &out, &step), DT_OK);
    assert_int_equal(step, 9);
    assert_int_equal(out.present, 1);
    assert_int_equal(out.offset, 1234);
    assert_memory_equal(m2, mean, sizeof mean);
    unlink(path_in(f, "ckpt-0000000009.dtc"));
    /* Crafted blocks, sealed with valid CRCs. */
    hdr(img)->step = 7;
    const size_t off = sizeof(ckpt_header) + sizeof(ckpt_scaler);
    ckpt_data *cd = (ckpt_data *)(void *)(img + off);
    float *fl = (float *)(void *)(img + off + sizeof *cd);
    fl[4] = -1; /* std of channel 1 */
    expect_refused(f, img, len, DT_ERR_CORRUPT, "std -1 of channel 1", NULL);
    fl[4] = 3;
    cd->epoch = -2;
    expect_refused(f, img, len, DT_ERR_CORRUPT, "epoch -2", NULL);
    cd->epoch = 4;
    cd->channels = 2000000;
    expect_refused(f, img, len, DT_ERR_CORRUPT, "2000000 channels", NULL);
    cd->channels = 3;
    free(img);
}

/* The round-trip property of ckpt_roundtrip.h (fuzz_ckpt_roundtrip's) over 200 seeded random
 * inputs: every state the writer accepts reads back bit for bit and is written again as the same
 * file; it refuses exactly those the readers would refuse. Both kinds must occur, or the test
 * proves nothing. */
static void test_roundtrip_property(void **state)
{
    (void)state;
    char dir[64];
    assert_int_equal(tmp_dir_make(dir, sizeof dir, "dtckrt"), 0);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    int saved = 0, refused = 0, with_sections = 0;
    unsigned char buf[700];
    for (int i = 0; i < 200; i++) {
        for (size_t k = 0; k < sizeof buf; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64 */
            buf[k] = (unsigned char)(x >> 24);
        }
        /* Random 64-bit steps and positions are nearly all out of range: a quarter of the inputs. */
        if (i % 4) buf[0] &= 0x7f;
        const size_t n = 24 + buf[1] * 2u + buf[2];
        char msg[1024];
        int ok = 0;
        if (ckpt_rt_check(buf, n, dir, msg, sizeof msg, &ok)) fail_msg("input %d (mode 0x%02x): %s", i, buf[0], msg);
        saved += ok;
        refused += !ok;
        with_sections += ok && (buf[0] & 0x20);
    }
    print_message("round trip: %d states saved and read back (%d with named sections), %d refused\n", saved,
                  with_sections, refused);
    assert_true(saved >= 60 && refused >= 40 && with_sections >= 20);
    assert_int_equal(tmp_dir_remove(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_file_size_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_weights_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_optimizer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scaler_restarts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_data_block, setup, teardown),
        cmocka_unit_test_setup_teardown(test_step_counter_limit, setup, teardown),
        cmocka_unit_test(test_roundtrip_property),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
