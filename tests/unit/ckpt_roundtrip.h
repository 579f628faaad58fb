/*
 * ckpt_roundtrip.h - the checkpoint round-trip property, shared by the libFuzzer harness
 * (tests/fuzz/fuzz_ckpt_roundtrip.c) and the seeded unit test (test_ckpt_state.c), so `make test`
 * proves it without clang too: any training state the writers accept reads back bit for bit, and
 * written again from what was read, gives the same file byte for byte.
 *
 * ckpt_rt_check(bytes) derives a state from the bytes (layout below; missing bytes read as 0):
 *   mode byte: bits 0-1 the optimizer (AdamW, SGD with momentum, SGD without, weights only);
 *   bit 2 a loss scaler; bit 3 a data block; bit 4 values as raw fp32 bit patterns (else small
 *   values from one byte each); bit 5 also a file of named sections (dt_ckpt_add /
 *   dt_ckpt_add_per_rank); bit 6 the data block's figures given (mean and std); bit 7 the step
 *   and the data position as raw 64-bit patterns (else in range).
 *   then: inputs, hidden units, classes, a seed byte (the model fc[:H,relu],fc:K on N inputs), the
 *   step, the optimizer's step counter, the scaler's settings and state, the data block, the
 *   parameters, the moments, the figures, and the sections (count, then per section a flags byte,
 *   a name, a size and its bytes).
 * It then writes with dt_checkpoint_save into DIR/a, reads back with ckpt_read_file_data (the file
 * reader) and with dt_checkpoint_load_latest (the directory's newest) into fresh objects and
 * compares every field bit for bit; the same file's sections through dt_ckpt_open_latest; the
 * state read back is saved again into DIR/b and the two files must be equal. The writer must
 * refuse exactly the states the readers would refuse (a step or data block out of range, a
 * non-finite value, a negative second moment or std), naming the value, and leave no file or
 * temporary. The sections file goes the same way through DIR/s and DIR/t, its readers being
 * ckpt_file_open_fd and dt_ckpt_open_latest; its writer must refuse exactly the invalid names.
 *
 * The format is deterministic: no time stamp, padding or reserved field that is not zero, and the
 * sections in the order added, so a byte-identical file is the right check. One asymmetry, by
 * design (ckpt_apply.c): a standard normalization saved without its figures reads back as
 * normalize -1 (the caller's own figures stand); it is saved again as 2.
 *
 * A single process (ctx NULL, world 1): the collective paths are tests/mpi's.
 */
#ifndef DT_TESTS_CKPT_ROUNDTRIP_H
#define DT_TESTS_CKPT_ROUNDTRIP_H

#include "ckpt_roundtrip_base.h"
#include "ckpt_roundtrip_sections.h"

/* ---------------------------------------------------------------- dt_model checkpoints */

typedef struct rt_state {
    dt_model *m;
    dt_optimizer *o;
    dt_scaler *sc;
    dt_ckpt_data data;
    float fig[16]; /* mean[8] then std[8] */
} rt_state;

static void rt_state_free(rt_state *s)
{
    dt_model_free(s->m);
    dt_optimizer_free(s->o);
    dt_scaler_free(s->sc);
    memset(s, 0, sizeof *s);
}

/* What the derived state is made of, so fresh objects of the same shape can receive it. */
typedef struct rt_shape {
    char spec[64], input[16];
    int optim; /* 0 AdamW, 1 SGD with momentum, 2 SGD without, 3 weights only */
    int has_scaler, has_data, figures;
    dt_scaler_config scc;
    int channels; /* the data block's (room for reading it back) */
} rt_shape;

static dt_status rt_state_make(const rt_shape *sh, uint64_t seed, rt_state *s)
{
    memset(s, 0, sizeof *s);
    dt_status st = dt_model_create(NULL, sh->spec, sh->input, seed, 1, &s->m);
    if (st) return st;
    if (sh->optim != 3) {
        dt_optim_config oc;
        dt_optim_defaults(&oc);
        oc.kind = sh->optim == 0 ? DT_OPTIM_ADAMW : DT_OPTIM_SGD;
        oc.momentum = sh->optim == 2 ? 0.0f : 0.9f;
        if ((st = dt_optimizer_create(&oc, dt_model_num_params(s->m), &s->o))) return st;
    }
    if (sh->has_scaler && (st = dt_scaler_create(&sh->scc, &s->sc))) return st;
    for (int i = 0; i < 16; i++) s->fig[i] = -1234.5f; /* what a read that writes nothing leaves */
    s->data.channels = sh->channels;
    s->data.mean = s->fig;
    s->data.std = s->fig + 8;
    return DT_OK;
}

/* The first value the readers refuse, as the writer must name it ("params[3] "), or "" for none. */
static void rt_first_bad(const char *what, const float *v, size_t n, int nonneg, char *why, size_t len)
{
    for (size_t i = 0; i < n && !why[0]; i++)
        if (!isfinite(v[i]) || (nonneg && v[i] < 0)) snprintf(why, len, "%s[%zu] ", what, i);
}

/* Everything read into got equals what want held when it was saved. */
static int rt_compare(ckpt_rt *rt, const char *how, const rt_shape *sh, const rt_state *want, const rt_state *got,
                      int saved_channels)
{
    size_t at;
    const size_t np = dt_model_num_params(want->m);
    RT_CHECK(rt_same_bits(model_params_const(want->m), model_params_const(got->m), np, &at),
             "%s: parameter %zu reads %a, saved %a", how, at, (double)model_params_const(got->m)[at],
             (double)model_params_const(want->m)[at]);
    if (want->o) {
        const optimizer_view a = optimizer_state(want->o), b = optimizer_state(got->o);
        RT_CHECK(a.t == b.t, "%s: the optimizer's step counter reads %d, saved %d", how, b.t, a.t);
        RT_CHECK(a.n1 == b.n1 && rt_same_bits(a.s1, b.s1, a.n1, &at), "%s: optim.m[%zu] differs", how, at);
        RT_CHECK(a.n2 == b.n2 && rt_same_bits(a.s2, b.s2, a.n2, &at), "%s: optim.v[%zu] differs", how, at);
    }
    if (want->sc) {
        dt_scaler_state a, b;
        dt_scaler_get_state(want->sc, &a);
        dt_scaler_get_state(got->sc, &b);
        RT_CHECK(!memcmp(&a.scale, &b.scale, sizeof a.scale) && a.good_steps == b.good_steps &&
                     a.hysteresis_left == b.hysteresis_left && a.updates == b.updates && a.skipped == b.skipped,
                 "%s: the scaler reads scale %a good %d hyst %d updates %ld skipped %ld, saved %a %d %d %ld %ld", how,
                 b.scale, b.good_steps, b.hysteresis_left, b.updates, b.skipped, a.scale, a.good_steps,
                 a.hysteresis_left, a.updates, a.skipped);
        unsigned char wa[8], wb[8];
        const int na = scaler_window_get(want->sc, wa, 8), nb = scaler_window_get(got->sc, wb, 8);
        RT_CHECK(na == nb && !memcmp(wa, wb, (size_t)na), "%s: the scaler's window reads %d flags, saved %d", how, nb,
                 na);
    }
    const dt_ckpt_data *a = &want->data, *b = &got->data;
    RT_CHECK(b->present == sh->has_data, "%s: data block present %d, saved %d", how, b->present, sh->has_data);
    if (sh->has_data) {
        /* A standard normalization saved without its figures reads as -1: the caller's stand. */
        const int norm = a->normalize == 2 && saved_channels == 0 ? -1 : a->normalize;
        RT_CHECK(b->epoch == a->epoch && b->offset == a->offset && b->normalize == norm,
                 "%s: data block reads epoch %ld offset %ld normalize %d, saved %ld %ld %d (expected %d)", how,
                 b->epoch, b->offset, b->normalize, a->epoch, a->offset, a->normalize, norm);
        const int ch = saved_channels;
        RT_CHECK(rt_same_bits(a->mean, b->mean, (size_t)ch, &at), "%s: mean[%zu] differs", how, at);
        RT_CHECK(rt_same_bits(a->std, b->std, (size_t)ch, &at), "%s: std[%zu] differs", how, at);
        for (int i = ch; i < 8; i++)
            RT_CHECK(b->mean[i] == -1234.5f && b->std[i] == -1234.5f, "%s: figure %d past the %d saved was written",
                     how, i, ch);
    }
out:
    return rt->failed;
}

/* The model file's sections through the public section reader: dtrain's names in order, the
 * parameters' bytes as saved. */
static int rt_model_sections(ckpt_rt *rt, const char *dir, long step, const rt_shape *sh, const rt_state *want)
{
    dt_ckpt_reader *r = NULL;
    long got_step = -1;
    float *p = NULL;
    const char *names[7];
    int n = 0;
    names[n++] = CKPT4_MODEL;
    names[n++] = CKPT4_PARAMS;
    if (sh->optim <= 1) names[n++] = CKPT4_MOMENT1;
    if (sh->optim == 0) names[n++] = CKPT4_MOMENT2;
    if (sh->has_scaler) names[n++] = CKPT4_SCALER;
    if (sh->has_scaler) names[n++] = CKPT4_SCALER_WINDOW;
    if (sh->has_data) names[n++] = CKPT4_DATA;
    RT_CHECK(dt_ckpt_open_latest(NULL, dir, &r, &got_step) == DT_OK && r, "dt_ckpt_open_latest(%s): %s", dir,
             dt_last_error());
    RT_CHECK(got_step == step && dt_ckpt_saved_world(r) == 1, "the sections reader gives step %ld world %d, saved %ld",
             got_step, dt_ckpt_saved_world(r), step);
    RT_CHECK(dt_ckpt_num_sections(r) == n, "the model file has %d sections, expected %d", dt_ckpt_num_sections(r), n);
    for (int i = 0; i < n; i++)
        RT_CHECK(!strcmp(dt_ckpt_section_name(r, i), names[i]), "section %d is %s, expected %s", i,
                 dt_ckpt_section_name(r, i), names[i]);
    const size_t np = dt_model_num_params(want->m);
    p = malloc(np * sizeof *p);
    RT_CHECK(p && dt_ckpt_read(r, CKPT4_PARAMS, p, np * sizeof *p) == DT_OK, "reading section params: %s",
             dt_last_error());
    RT_CHECK(!memcmp(p, model_params_const(want->m), np * sizeof *p), "section params is not the parameters' bytes");
out:
    free(p);
    dt_ckpt_close(r);
    return rt->failed;
}

/* Sets the saved state from the input and says whether the writer must accept it (why "" when it
 * must, else what its refusal must name). */
static void rt_fill(ckpt_rt *rt, int raw, int t, const uint8_t sbytes[8], rt_state *s, rt_shape *sh, char *why,
                    size_t len)
{
    const size_t np = dt_model_num_params(s->m);
    float *p = dt_model_params(s->m);
    for (size_t i = 0; i < np; i++) p[i] = rt_value(rt, raw);
    rt_first_bad(CKPT4_PARAMS, p, np, 0, why, len);
    if (s->o) {
        const optimizer_view v = optimizer_state(s->o);
        for (size_t i = 0; i < v.n1; i++) v.s1[i] = rt_value(rt, raw);
        for (size_t i = 0; i < v.n2; i++) v.s2[i] = rt_value(rt, raw);
        rt_first_bad(CKPT4_MOMENT1, v.s1, v.n1, 0, why, len);
        rt_first_bad(CKPT4_MOMENT2, v.s2, v.n2, 1, why, len);
        optimizer_set_t(s->o, t);
    }
    if (s->sc) {
        /* Whatever the scaler takes: set_state refuses what its settings exclude, and then the
         * scaler's own initial state is the one saved. */
        dt_scaler_state st = {.good_steps = sbytes[1], .hysteresis_left = sbytes[2] % 4};
        st.scale = raw ? ldexp(1.0 + sbytes[3] / 256.0, (int)(sbytes[0] % 40) - 8) : ldexp(1.0, sbytes[0] % 26);
        st.updates = (long)sbytes[4] << (sbytes[6] % 40);
        st.skipped = (long)sbytes[5] << (sbytes[7] % 40);
        (void)dt_scaler_set_state(s->sc, &st);
        /* A window of up to 4 recent verdicts, as many as the updates allow, no more overflows
         * than the skipped steps (what a real run's window can hold). */
        dt_scaler_get_state(s->sc, &st);
        unsigned char flags[4];
        int n = 0;
        long ones = 0;
        for (; n < (int)(sbytes[1] % 5) && n < st.updates; n++) {
            flags[n] = (unsigned char)((sbytes[2] >> n) & 1) && ones < st.skipped;
            ones += flags[n];
        }
        scaler_window_set(s->sc, flags, n);
    }
    if (sh->has_data && sh->figures) {
        const int ch = sh->channels;
        for (int i = 0; i < ch; i++) s->fig[i] = rt_value(rt, raw);
        for (int i = 0; i < ch; i++) s->fig[8 + i] = rt_value(rt, raw);
        /* The writer checks the data block before the values: its refusal comes first. */
        char w2[64] = "";
        rt_first_bad("mean", s->fig, (size_t)ch, 0, w2, sizeof w2);
        rt_first_bad("std", s->fig + 8, (size_t)ch, 1, w2, sizeof w2);
        if (w2[0]) snprintf(why, len, "%s", w2);
    }
}

static int rt_model(ckpt_rt *rt, const char *base)
{
    rt_state s0 = {0}, s1 = {0}, s2 = {0};
    rt_shape sh = {0};
    char a[256], b[256], path[320];
    snprintf(a, sizeof a, "%s/a", base);
    snprintf(b, sizeof b, "%s/b", base);
    const unsigned mode = rt_byte(rt);
    const int raw = (mode >> 4) & 1, raw_pos = (mode >> 7) & 1;
    sh.optim = (int)(mode & 3);
    sh.has_scaler = (mode >> 2) & 1;
    sh.has_data = (mode >> 3) & 1;
    sh.figures = (mode >> 6) & 1;
    const int inputs = 1 + (int)(rt_byte(rt) % 6), hidden = (int)(rt_byte(rt) % 6),
              classes = 2 + (int)(rt_byte(rt) % 5);
    const uint64_t seed = rt_byte(rt);
    if (hidden)
        snprintf(sh.spec, sizeof sh.spec, "fc:%d,relu,fc:%d", hidden, classes);
    else
        snprintf(sh.spec, sizeof sh.spec, "fc:%d", classes);
    snprintf(sh.input, sizeof sh.input, "%d", inputs);
    const uint64_t su = rt_bits(rt, 8);
    const long step = raw_pos ? (long)su : (long)(su % ((uint64_t)CKPT_MAX_STEP + 1));
    const int t = (int)(rt_bits(rt, 4) & 0x7fffffffu);
    dt_scaler_defaults(&sh.scc);
    sh.scc.growth_interval = 1 + (int)rt_byte(rt);
    sh.scc.hysteresis = 1 + (int)(rt_byte(rt) % 3);
    uint8_t sbytes[8];
    for (int i = 0; i < 8; i++) sbytes[i] = (uint8_t)rt_byte(rt);
    long epoch = (long)rt_bits(rt, raw_pos ? 8 : 2), offset = (long)rt_bits(rt, raw_pos ? 8 : 3);
    const int normalize = (int)(rt_byte(rt) % 5) - 1; /* -1 and 3 are out of range */
    sh.channels = (int)(rt_byte(rt) % 9);

    RT_CHECK(rt_clear_dir(a) >= 0 && rt_clear_dir(b) >= 0, "cannot make %s and %s", a, b);
    RT_CHECK(rt_state_make(&sh, seed, &s0) == DT_OK, "cannot make a %s model on %s: %s", sh.spec, sh.input,
             dt_last_error());
    char why[96] = "";
    if (step < 0 || step > CKPT_MAX_STEP)
        snprintf(why, sizeof why, "step %ld ", step);
    else if (sh.has_data && (epoch < 0 || offset < 0 || normalize < 0 || normalize > 2))
        snprintf(why, sizeof why, "data block epoch");
    s0.data.epoch = epoch;
    s0.data.offset = offset;
    s0.data.normalize = normalize;
    if (!sh.figures) s0.data.mean = s0.data.std = NULL; /* channels then say nothing: none saved */
    char vwhy[64] = "";
    rt_fill(rt, raw, t, sbytes, &s0, &sh, vwhy, sizeof vwhy);
    if (!why[0]) snprintf(why, sizeof why, "%s", vwhy);
    const int saved_channels = sh.figures ? sh.channels : 0;

    dt_status st = dt_checkpoint_save(NULL, a, s0.m, s0.o, s0.sc, sh.has_data ? &s0.data : NULL, step);
    RT_CHECK((st == DT_OK) == !why[0], "dt_checkpoint_save %s a state %s%s", st == DT_OK ? "accepted" : "refused",
             why[0] ? "the readers refuse: " : "the readers take: ", why[0] ? why : dt_last_error());
    if (st != DT_OK) {
        RT_CHECK(strstr(dt_last_error(), why), "the refusal does not name \"%s\": %s", why, dt_last_error());
        RT_CHECK(rt_clear_dir(a) == 0, "a refused save left a file in %s", a);
        goto out;
    }
    rt->saved = 1;
    snprintf(path, sizeof path, "%s/ckpt-%010ld.dtc", a, step);
    s0.data.mean = s0.fig;
    s0.data.std = s0.fig + 8;

    /* The file reader. */
    RT_CHECK(rt_state_make(&sh, seed + 1, &s1) == DT_OK, "cannot make the model again: %s", dt_last_error());
    long got_step = -1;
    int world = 0;
    st = ckpt_read_file_data(path, step, s1.m, s1.o, s1.sc, sh.has_data ? &s1.data : NULL, &got_step, &world, NULL);
    RT_CHECK(st == DT_OK, "the file reader refuses what the writer wrote: %s", dt_last_error());
    RT_CHECK(got_step == step && world == 1, "the file reader gives step %ld world %d, saved %ld", got_step, world,
             step);
    if (!sh.has_data) s1.data.present = 0;
    if (rt_compare(rt, "ckpt_read_file_data", &sh, &s0, &s1, saved_channels)) goto out;

    /* The directory's newest. */
    RT_CHECK(rt_state_make(&sh, seed + 2, &s2) == DT_OK, "cannot make the model again: %s", dt_last_error());
    got_step = -1;
    st = dt_checkpoint_load_latest(NULL, a, s2.m, s2.o, s2.sc, sh.has_data ? &s2.data : NULL, &got_step);
    RT_CHECK(st == DT_OK && got_step == step, "dt_checkpoint_load_latest gives step %ld (saved %ld): %s", got_step,
             step, st ? dt_last_error() : "");
    if (rt_compare(rt, "dt_checkpoint_load_latest", &sh, &s0, &s2, saved_channels)) goto out;
    if (rt_model_sections(rt, a, step, &sh, &s0)) goto out;

    /* Written again from what was read: the same file. */
    if (s1.data.normalize == -1) s1.data.normalize = 2;
    s1.data.channels = saved_channels;
    if (!saved_channels) s1.data.mean = s1.data.std = NULL;
    st = dt_checkpoint_save(NULL, b, s1.m, s1.o, s1.sc, sh.has_data ? &s1.data : NULL, step);
    RT_CHECK(st == DT_OK, "the state read back cannot be saved again: %s", dt_last_error());
    char path_b[320];
    snprintf(path_b, sizeof path_b, "%s/ckpt-%010ld.dtc", b, step);
    rt_same_files(rt, path, path_b);
out:
    rt_state_free(&s0);
    rt_state_free(&s1);
    rt_state_free(&s2);
    return rt->failed;
}

/* The whole property for one input, in scratch directory base (made by the caller; its a, b, s and
 * t are emptied first). Returns 0, or 1 with the broken promise in msg (len bytes); *saved (when
 * not NULL) says whether the writer accepted the model's state, so a caller can check both kinds
 * of input were tried. */
static int ckpt_rt_check(const uint8_t *data, size_t size, const char *base, char *msg, size_t len, int *saved)
{
    ckpt_rt rt = {.d = data, .size = size};
    const int sections = size > 0 && (data[0] & 0x20);
    if (!rt_model(&rt, base) && sections) rt_sections(&rt, base);
    if (rt.failed) snprintf(msg, len, "%s", rt.msg);
    if (saved) *saved = rt.saved;
    return rt.failed;
}

#undef RT_CHECK

#endif
