/*
 * model_spec.c - the layer-list grammar and shape inference.
 *
 *   spec  := preset | token ("," token)*
 *   token := "fc:" OUT | "conv:" OUT ":" K ":" STRIDE ":" PAD | "pool:" K | "relu" | "flatten"
 *   input := N | C "x" H "x" W
 *
 * A flatten is implied before the first fc that follows a spatial (HxW > 1x1) map. Every error
 * names the token (by position and text) and says what would fit.
 */
#include "model.h"
#include "status.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name, *spec, *input;
} presets[] = {
    {"mlp", "fc:1024,relu,fc:1024,relu,fc:10", "784"},
    {"cnn", "conv:32:3:1:1,relu,pool:2,conv:64:3:1:1,relu,pool:2,fc:128,relu,fc:10", "1x28x28"},
};

const char *model_preset(const char *name)
{
    for (size_t i = 0; i < sizeof presets / sizeof *presets; i++)
        if (strcmp(name, presets[i].name) == 0) return presets[i].spec;
    return NULL;
}

const char *model_preset_input(const char *name)
{
    for (size_t i = 0; i < sizeof presets / sizeof *presets; i++)
        if (strcmp(name, presets[i].name) == 0) return presets[i].input;
    return NULL;
}

/* Strict positive int from text [s, s+len). */
static int spec_int(const char *s, size_t len, int lo, int *out)
{
    if (len == 0 || len > 9) return 0;
    long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo) return 0;
    *out = (int)v;
    return 1;
}

/* Splits token text "name:a:b" into its numeric fields after the name; returns the field count
 * or -1 when a field is not a number >= lo. */
static int spec_fields(const char *tok, size_t len, int *vals, int max, int lo)
{
    const char *p = memchr(tok, ':', len);
    if (!p) return 0;
    int n = 0;
    const char *end = tok + len;
    p++;
    while (1) {
        const char *q = memchr(p, ':', (size_t)(end - p));
        size_t flen = (size_t)((q ? q : end) - p);
        if (n >= max || !spec_int(p, flen, lo, &vals[n])) return -1;
        n++;
        if (!q) break;
        p = q + 1;
    }
    return n;
}

static dt_status spec_input(const char *input, model_spec *s)
{
    int v[3], n = 0;
    const char *p = input;
    while (n < 3) {
        const char *x = strchr(p, 'x');
        size_t len = x ? (size_t)(x - p) : strlen(p);
        if (!spec_int(p, len, 1, &v[n])) break;
        n++;
        if (!x) {
            p = NULL;
            break;
        }
        p = x + 1;
    }
    if (p != NULL || (n != 1 && n != 3))
        return dt_set_error(DT_ERR_INVALID_ARG, "input shape '%s' is not N (features) or CxHxW with "
                            "positive sizes, e.g. 784 or 1x28x28", input);
    if (n == 1) {
        s->in_c = v[0];
        s->in_h = s->in_w = 1;
    } else {
        s->in_c = v[0];
        s->in_h = v[1];
        s->in_w = v[2];
    }
    return DT_OK;
}

/* Appends a layer, growing the array. */
static dt_status spec_push(model_spec *s, int *cap, layer l)
{
    if (s->n == *cap) {
        int nc = *cap ? *cap * 2 : 8;
        layer *nl = realloc(s->layers, (size_t)nc * sizeof *nl);
        if (!nl) return dt_set_error(DT_ERR_NOMEM, "out of memory parsing the model");
        s->layers = nl;
        *cap = nc;
    }
    s->layers[s->n++] = l;
    return DT_OK;
}

#define SPEC_FAIL(...) do { st = dt_set_error(DT_ERR_INVALID_ARG, __VA_ARGS__); goto fail; } while (0)

dt_status model_spec_parse(const char *spec_in, const char *input, model_spec *out)
{
    model_spec s;
    memset(&s, 0, sizeof s);
    dt_status st = DT_OK;
    int cap = 0;
    if (!spec_in || !*spec_in)
        return dt_set_error(DT_ERR_INVALID_ARG, "the model is empty: give a preset (mlp, cnn) or a "
                            "layer list such as fc:128,relu,fc:10");
    const char *spec = model_preset(spec_in) ? model_preset(spec_in) : spec_in;
    if (!input || !*input) input = model_preset_input(spec_in);
    if (!input)
        return dt_set_error(DT_ERR_INVALID_ARG, "model '%s' needs an input shape (--input N or CxHxW)", spec_in);
    if ((st = spec_input(input, &s))) return st;

    int c = s.in_c, h = s.in_h, w = s.in_w;
    size_t params = 0, max_act = (size_t)c * h * w;
    const char *p = spec;
    int index = 0;
    while (1) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        index++;
        char tok[64];
        snprintf(tok, sizeof tok, "%.*s", (int)(len < 60 ? len : 60), p);
        if (len == 0) SPEC_FAIL("model '%s': layer %d is empty (a doubled or trailing comma?)", spec_in, index);
        layer l;
        memset(&l, 0, sizeof l);
        int v[4];
        if (len > 3 && strncmp(p, "fc:", 3) == 0) {
            if (spec_fields(p, len, v, 1, 1) != 1)
                SPEC_FAIL("model '%s': layer %d '%s' must be fc:OUT with OUT >= 1", spec_in, index, tok);
            if (h != 1 || w != 1) {
                /* The implied flatten. */
                layer f = {.kind = LAYER_FLATTEN, .in_c = c, .in_h = h, .in_w = w, .out_c = c * h * w,
                           .out_h = 1, .out_w = 1};
                if ((st = spec_push(&s, &cap, f))) goto fail;
                c = c * h * w;
                h = w = 1;
            }
            l.kind = LAYER_FC;
            l.out = v[0];
            l.in_c = c, l.in_h = 1, l.in_w = 1;
            l.out_c = v[0], l.out_h = 1, l.out_w = 1;
            l.w_n = (size_t)v[0] * c;
            l.b_n = (size_t)v[0];
        } else if (len > 5 && strncmp(p, "conv:", 5) == 0) {
            if (spec_fields(p, len, v, 4, 0) != 4 || v[0] < 1 || v[1] < 1 || v[2] < 1)
                SPEC_FAIL("model '%s': layer %d '%s' must be conv:OUT:K:STRIDE:PAD with OUT, K, STRIDE >= 1 "
                          "and PAD >= 0", spec_in, index, tok);
            if (h == 1 && w == 1 && s.in_h == 1 && s.in_w == 1)
                SPEC_FAIL("model '%s': layer %d '%s' needs an image input CxHxW, not %s", spec_in, index, tok, input);
            l.kind = LAYER_CONV;
            l.out = v[0], l.k = v[1], l.stride = v[2], l.pad = v[3];
            if (l.k > h + 2 * l.pad || l.k > w + 2 * l.pad)
                SPEC_FAIL("model '%s': layer %d '%s': kernel %d does not fit the %dx%d map with padding %d",
                          spec_in, index, tok, l.k, h, w, l.pad);
            l.in_c = c, l.in_h = h, l.in_w = w;
            l.out_c = l.out;
            l.out_h = (h + 2 * l.pad - l.k) / l.stride + 1;
            l.out_w = (w + 2 * l.pad - l.k) / l.stride + 1;
            l.w_n = (size_t)l.out * c * l.k * l.k;
            l.b_n = (size_t)l.out;
        } else if (len > 5 && strncmp(p, "pool:", 5) == 0) {
            if (spec_fields(p, len, v, 1, 1) != 1)
                SPEC_FAIL("model '%s': layer %d '%s' must be pool:K with K >= 1", spec_in, index, tok);
            if (h < v[0] || w < v[0])
                SPEC_FAIL("model '%s': layer %d '%s': a %dx%d window does not fit the %dx%d map", spec_in, index,
                          tok, v[0], v[0], h, w);
            l.kind = LAYER_POOL;
            l.k = v[0];
            l.in_c = c, l.in_h = h, l.in_w = w;
            l.out_c = c, l.out_h = h / l.k, l.out_w = w / l.k;
        } else if (len == 4 && strncmp(p, "relu", 4) == 0) {
            l.kind = LAYER_RELU;
            l.in_c = l.out_c = c, l.in_h = l.out_h = h, l.in_w = l.out_w = w;
        } else if (len == 7 && strncmp(p, "flatten", 7) == 0) {
            l.kind = LAYER_FLATTEN;
            l.in_c = c, l.in_h = h, l.in_w = w;
            l.out_c = c * h * w, l.out_h = 1, l.out_w = 1;
        } else {
            SPEC_FAIL("model '%s': layer %d '%s' is not a layer; use fc:OUT, conv:OUT:K:STRIDE:PAD, pool:K, "
                      "relu or flatten", spec_in, index, tok);
        }
        size_t out_n = (size_t)l.out_c * l.out_h * l.out_w;
        if (out_n > (size_t)1 << 28 || l.w_n > (size_t)1 << 31)
            SPEC_FAIL("model '%s': layer %d '%s' is too large (%zu outputs, %zu weights per sample)", spec_in,
                      index, tok, out_n, l.w_n);
        l.w_off = params;
        l.b_off = params + l.w_n;
        params += l.w_n + l.b_n;
        c = l.out_c, h = l.out_h, w = l.out_w;
        if (out_n > max_act) max_act = out_n;
        if ((st = spec_push(&s, &cap, l))) goto fail;
        if (!comma) break;
        p = comma + 1;
    }
    if (s.layers[s.n - 1].kind != LAYER_FC)
        SPEC_FAIL("model '%s': the last layer must be fc:CLASSES (the logits), not '%s'", spec_in,
                  strrchr(spec, ',') ? strrchr(spec, ',') + 1 : spec);
    s.classes = s.layers[s.n - 1].out;
    if (s.classes < 2) SPEC_FAIL("model '%s': the last fc has %d output; classification needs at least 2",
                                 spec_in, s.classes);
    s.num_params = params;
    s.max_act = max_act;
    *out = s;
    return DT_OK;
fail:
    free(s.layers);
    return st;
}

void model_spec_free(model_spec *s)
{
    if (!s) return;
    free(s->layers);
    s->layers = NULL;
    s->n = 0;
}
