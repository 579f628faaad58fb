/*
 * ckpt_v3.h - builds a checkpoint image of format version 3 (the fixed layout dtrain wrote before
 * named sections) from a model's state, so the tests keep crafting and reading the files of older
 * versions that users still have on disk. The library no longer writes this layout; the image is
 * laid out here from ckpt_format.h and sealed with ckpt_seal.
 */
#ifndef DT_TEST_CKPT_V3_H
#define DT_TEST_CKPT_V3_H

#include "runtime/checkpoint/ckpt_format.h"
#include "dtrain.h"
#include "runtime/model/model.h"

#include <stdlib.h>
#include <string.h>

/* The image (malloc'd, room for 4096 more floats after it) and its length. o, sc and data may be
 * NULL; data's figures are written when it has channels. */
static inline unsigned char *ckpt_v3_image(const dt_model *m, const dt_optimizer *o, const dt_scaler *sc,
                                           const dt_ckpt_data *data, long step, size_t *len)
{
    const float *sec[3] = {model_params_const(m), NULL, NULL};
    size_t n[3] = {dt_model_num_params(m), 0, 0};
    optimizer_view v = {.t = 0};
    if (o) v = optimizer_state(o);
    sec[1] = v.s1, n[1] = v.n1, sec[2] = v.s2, n[2] = v.n2;
    ckpt_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, CKPT_MAGIC, 8);
    h.version = 3;
    h.fingerprint = model_fingerprint(m);
    h.nparams = n[0];
    h.step = step;
    h.world = 1;
    h.optim_kind = o ? (uint32_t)v.cfg.kind : CKPT_OPTIM_NONE;
    h.optim_t = v.t;
    for (int i = 0; i < 3; i++) h.section_n[i] = n[i];
    ckpt_scaler cs;
    memset(&cs, 0, sizeof cs);
    if (sc) {
        dt_scaler_state st;
        dt_scaler_get_state(sc, &st);
        cs.present = 1;
        cs.scale = st.scale;
        cs.good_steps = st.good_steps;
        cs.hysteresis_left = st.hysteresis_left;
        cs.updates = st.updates;
        cs.skipped = st.skipped;
    }
    ckpt_data cd;
    memset(&cd, 0, sizeof cd);
    if (data) {
        cd.present = 1;
        cd.epoch = data->epoch;
        cd.offset = data->offset;
        cd.normalize = (uint32_t)data->normalize;
        cd.channels = data->mean && data->std ? (uint32_t)data->channels : 0;
    }
    const size_t figs = 2 * (size_t)cd.channels * sizeof(float);
    *len = sizeof h + sizeof cs + sizeof cd + figs + (n[0] + n[1] + n[2]) * sizeof(float);
    unsigned char *img = calloc(1, *len + 4096 * sizeof(float)), *p = img;
    if (!img) return NULL;
    memcpy(p, &h, sizeof h), p += sizeof h;
    memcpy(p, &cs, sizeof cs), p += sizeof cs;
    memcpy(p, &cd, sizeof cd), p += sizeof cd;
    if (cd.channels) {
        memcpy(p, data->mean, figs / 2), p += figs / 2;
        memcpy(p, data->std, figs / 2), p += figs / 2;
    }
    for (int i = 0; i < 3; i++)
        if (n[i]) memcpy(p, sec[i], n[i] * sizeof(float)), p += n[i] * sizeof(float);
    ckpt_seal(img, *len);
    return img;
}

#endif
