/*
 * model_spec.c - the layer-list grammar and shape inference.
 *
 *   spec  := preset | token ("," token)*
 *   token := "fc:" OUT | "conv:" OUT ":" K ":" STRIDE ":" PAD | "pool:" K | "relu" | "flatten"
 *   input := N | C "x" H "x" W
 *
 * A flatten is implied before the first fc that follows a spatial (HxW > 1x1) map; a conv or pool
 * after an fc or flatten is refused (it would take the vector for a 1x1 image). Every error
 * names the token (by position and text) and says what would fit.
 *
 * Sizes are computed in 64 bits, every product checked, and held to the bounds below before any
 * of them lands in an int shape field or sizes a buffer: a model too large is refused here with
 * its true size, never built with a wrapped one.
 */
#include "runtime/model/model.h"
#include "base/status.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

/* A one-word spec that is neither a preset nor a layer ("resnet18", "CNN") is a wrong name, not a
 * layer list lacking its --input: said first, since asking for an input shape sends the user to fix
 * the wrong thing. Layer lists are checked token by token in model_spec_parse. */
dt_status model_spec_check_name(const char *spec)
{
    if (!spec || !*spec || strchr(spec, ',') || strchr(spec, ':') || model_preset(spec) || strcmp(spec, "relu") == 0 ||
        strcmp(spec, "flatten") == 0)
        return DT_OK;
    for (size_t i = 0; i < sizeof presets / sizeof *presets; i++)
        if (strcasecmp(spec, presets[i].name) == 0)
            return status_set_error(DT_ERR_INVALID_ARG, "model '%s' is not a preset: preset names are lower case (%s)",
                                    spec, presets[i].name);
    return status_set_error(DT_ERR_INVALID_ARG,
                            "model '%s' is neither a preset (mlp, cnn) nor a layer list: give one of those, or the "
                            "layers, e.g. conv:32:3:1:1,relu,pool:2,fc:128,relu,fc:10 (fc:OUT, conv:OUT:K:STRIDE:PAD, "
                            "pool:K, relu, flatten; the last one fc:CLASSES)",
                            spec);
}

/* The bounds, and what each protects:
 *  - SPEC_MAX_ELEMS: floats per sample of the input and of every layer's output (1 GiB of fp32).
 *    Every number of the grammar is at most this too. Shapes are ints, and batch x elements must
 *    stay a sane buffer size.
 *  - SPEC_MAX_LAYER_WEIGHTS: a layer's weights. GEMM dimensions are ints, and a convolution's
 *    C x K x K is one of them.
 *  - SPEC_MAX_PARAMS: the whole flat buffer. Every rank holds the parameters, the gradients and up
 *    to two optimizer states in fp32: 64 GiB at this bound.
 *  - SPEC_MAX_CLASSES: the logits of a sample. ImageNet-21k has 21,841 classes; label spaces far
 *    beyond 10^6 need a sampled softmax, which this loss is not. */
#define SPEC_MAX_ELEMS (UINT64_C(1) << 28)
#define SPEC_MAX_LAYER_WEIGHTS ((uint64_t)INT_MAX)
#define SPEC_MAX_PARAMS (UINT64_C(1) << 32)
#define SPEC_MAX_CLASSES (1 << 20)

/* Where the map that layer `index` (from 1) gets comes from, for the messages of a window that
 * does not fit it: "--input 1x8x8 after layers 1 to 3". */
static void map_origin(char *out, size_t n, int index, const char *input)
{
    if (index == 1)
        snprintf(out, n, "--input %s", input);
    else if (index == 2)
        snprintf(out, n, "--input %s after layer 1", input);
    else
        snprintf(out, n, "--input %s after layers 1 to %d", input, index - 1);
}

/* a * b, or UINT64_MAX when that does not fit (every bound is far below it). */
static uint64_t spec_mul(uint64_t a, uint64_t b)
{
    if (a != 0 && b > UINT64_MAX / a) return UINT64_MAX;
    return a * b;
}

/* A count for a message: exact, or "about 1.2e+27" (approx, the product in floating point) when
 * the 64-bit product overflowed. */
static const char *spec_count(char buf[64], uint64_t v, double approx)
{
    if (v == UINT64_MAX)
        snprintf(buf, 64, "about %.3g", approx);
    else
        snprintf(buf, 64, "%" PRIu64, v);
    return buf;
}

/* The decimal number in text [s, s+len): 1 when it is digits only and at most hi (*out set), 0 when
 * it is not a number, -1 when it is a number above hi (however many digits it has). */
static int spec_number(const char *s, size_t len, uint64_t hi, uint64_t *out)
{
    if (len == 0) return 0;
    uint64_t v = 0;
    int over = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        if (!over) {
            v = v * 10 + (uint64_t)(s[i] - '0');
            over = v > hi; /* hi is far below UINT64_MAX / 10: no wrap before this test */
        }
    }
    if (over) return -1;
    *out = v;
    return 1;
}

/* The numeric fields of token text [p, p+len) = "name:a:b..." after the name, field i in
 * [lo[i], SPEC_MAX_ELEMS]. Returns 1 with vals set; 0 when the text is not `want` numbers (the
 * caller says what the token must be); -1 when the form is right but a number is out of range, with
 * the error set, naming the field and its range. */
static int spec_fields(const char *spec, int index, const char *tok, const char *p, size_t len, int want,
                       const char *const *names, const int *lo, int *vals, dt_status *st)
{
    const char *q = memchr(p, ':', len), *end = p + len;
    if (!q) return 0;
    int fields = 1;
    for (const char *t = q + 1; t < end; t++) fields += *t == ':';
    if (fields != want) return 0;
    q++;
    for (int n = 0; n < want; n++) {
        const char *c = memchr(q, ':', (size_t)(end - q));
        const size_t flen = (size_t)((c ? c : end) - q);
        uint64_t v = 0;
        const int r = spec_number(q, flen, SPEC_MAX_ELEMS, &v);
        if (r == 0) return 0;
        if (r < 0 || v < (uint64_t)lo[n]) {
            *st = status_set_error(DT_ERR_INVALID_ARG,
                                   "model '%s': layer %d '%s': %s = %.*s%s is out of range: it must "
                                   "be from %d to %" PRIu64,
                                   spec, index, tok, names[n], (int)(flen < 24 ? flen : 24), q, flen <= 24 ? "" : "...",
                                   lo[n], SPEC_MAX_ELEMS);
            return -1;
        }
        vals[n] = (int)v;
        q = c ? c + 1 : end;
    }
    return 1;
}

static dt_status spec_input(const char *input, model_spec *s)
{
    uint64_t v[3];
    int n = 0, big = 0;
    const char *p = input;
    while (n < 3) {
        const char *x = strchr(p, 'x');
        size_t len = x ? (size_t)(x - p) : strlen(p);
        const int r = spec_number(p, len, SPEC_MAX_ELEMS, &v[n]);
        if (r == 0 || (r > 0 && v[n] == 0)) break;
        if (r < 0) big = 1, v[n] = 0;
        n++;
        if (!x) {
            p = NULL;
            break;
        }
        p = x + 1;
    }
    if (p != NULL || (n != 1 && n != 3))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "input shape '%s' is not N (features) or CxHxW with "
                                "sizes from 1 to %" PRIu64 ", e.g. 784 or 1x28x28",
                                input, SPEC_MAX_ELEMS);
    if (big)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "input shape '%s': every size must be from 1 to %" PRIu64 " (and at most %" PRIu64
                                " elements per sample in all): use a smaller input",
                                input, SPEC_MAX_ELEMS, SPEC_MAX_ELEMS);
    const uint64_t elems = n == 1 ? v[0] : spec_mul(spec_mul(v[0], v[1]), v[2]);
    if (elems > SPEC_MAX_ELEMS)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "input shape '%s' has %" PRIu64 " elements per sample; at most "
                                "%" PRIu64 " (1 GiB of fp32) are supported: use a smaller input (crop or downsample "
                                "it)",
                                input, elems, SPEC_MAX_ELEMS);
    if (n == 1) {
        s->in_c = (int)v[0];
        s->in_h = s->in_w = 1;
    } else {
        s->in_c = (int)v[0];
        s->in_h = (int)v[1];
        s->in_w = (int)v[2];
    }
    return DT_OK;
}

int model_spec_input(const char *input, int *c, int *h, int *w)
{
    model_spec s;
    if (!input) {
        status_set_error(DT_ERR_INVALID_ARG, "no input shape: give N (features) or CxHxW, e.g. 784 or 1x28x28");
        return 0;
    }
    if (spec_input(input, &s) != DT_OK) return 0;
    *c = s.in_c, *h = s.in_h, *w = s.in_w;
    return strchr(input, 'x') ? 3 : 1; /* spec_input takes one size without an x, three with */
}

/* Appends a layer, growing the array. */
static dt_status spec_push(model_spec *s, int *cap, layer l)
{
    if (s->n == *cap) {
        int nc = *cap ? *cap * 2 : 8;
        layer *nl = realloc(s->layers, (size_t)nc * sizeof *nl);
        if (!nl) return status_set_error(DT_ERR_NOMEM, "out of memory parsing the model");
        s->layers = nl;
        *cap = nc;
    }
    s->layers[s->n++] = l;
    return DT_OK;
}

/* Where the parse of a layer list stands: the current map, the first layer whose output is a
 * vector, the layer being read, and what is made so far. */
typedef struct spec_walk {
    const char *spec_in, *input;
    model_spec s;
    int cap;
    /* The current map. Its element count is at most SPEC_MAX_ELEMS (checked for the input and after
     * every layer), so c * h * w always fits an int. */
    int c, h, w;
    uint64_t params;
    size_t max_act;
    /* The first fc or flatten layer: from there the map is a vector, which a conv or pool after it
     * would take for a 1x1 image (nn.Conv2d after nn.Linear fails in PyTorch too). */
    int vec_index;
    char vec_tok[64];
    int index;    /* the layer being read, from 1 */
    char tok[64]; /* its text as messages quote it */
} spec_walk;

#define SPEC_REFUSE(...) return status_set_error(DT_ERR_INVALID_ARG, __VA_ARGS__)

#define SPEC_VECTOR_REFUSE(k)                                                                                          \
    SPEC_REFUSE("model '%s': layer %d '%s' comes after layer %d '%s', whose output is a vector of %d values, not an "  \
                "image: put the conv and pool layers before the first fc or flatten",                                  \
                (k)->spec_in, (k)->index, (k)->tok, (k)->vec_index, (k)->vec_tok, (k)->c)

/* This layer's output is a vector from here on, when it is the first. */
static void mark_vector(spec_walk *k)
{
    if (!k->vec_index) k->vec_index = k->index, snprintf(k->vec_tok, sizeof k->vec_tok, "%s", k->tok);
}

/* The one number of a layer "kind:NAME" at [p, p+len) into *v, from 1 to SPEC_MAX_ELEMS: fc:OUT
 * and pool:K read it, and refuse it, in the same words. */
static dt_status one_field(const spec_walk *k, const char *p, size_t len, const char *kind, const char *name, int *v)
{
    const char *const names[] = {name};
    static const int lo[] = {1};
    dt_status st = DT_OK;
    const int r = spec_fields(k->spec_in, k->index, k->tok, p, len, 1, names, lo, v, &st);
    if (r < 0) return st;
    if (r == 0)
        SPEC_REFUSE("model '%s': layer %d '%s' must be %s:%s with %s a whole number from 1 to %" PRIu64, k->spec_in,
                    k->index, k->tok, kind, name, name, SPEC_MAX_ELEMS);
    return DT_OK;
}

/* fc:OUT at [p, p+len) into *l (its weights' count *w_n), after the implied flatten of an image. */
static dt_status parse_fc(spec_walk *k, const char *p, size_t len, layer *l, uint64_t *w_n)
{
    int v[1];
    dt_status st = one_field(k, p, len, "fc", "OUT", v);
    if (st) return st;
    if (k->h != 1 || k->w != 1) {
        /* The implied flatten. */
        const int c = k->c, h = k->h, w = k->w;
        layer f = {.kind = LAYER_FLATTEN, .in_c = c, .in_h = h, .in_w = w, .out_c = c * h * w, .out_h = 1, .out_w = 1};
        if ((st = spec_push(&k->s, &k->cap, f))) return st;
        k->c = c * h * w;
        k->h = k->w = 1;
    }
    mark_vector(k);
    const int c = k->c;
    l->kind = LAYER_FC;
    l->out = v[0];
    l->in_c = c, l->in_h = 1, l->in_w = 1;
    l->out_c = v[0], l->out_h = 1, l->out_w = 1;
    *w_n = spec_mul((uint64_t)v[0], (uint64_t)c);
    char n1[64];
    if (*w_n > SPEC_MAX_LAYER_WEIGHTS)
        SPEC_REFUSE("model '%s': layer %d '%s' has %s weights (%d outputs x %d inputs); at most %" PRIu64
                    " per layer are supported (GEMM dimensions are ints): use fewer outputs, or shrink its "
                    "input (a pool or a strided conv before it)",
                    k->spec_in, k->index, k->tok, spec_count(n1, *w_n, (double)v[0] * c), v[0], c,
                    SPEC_MAX_LAYER_WEIGHTS);
    l->b_n = (size_t)v[0];
    return DT_OK;
}

/* conv:OUT:K:STRIDE:PAD at [p, p+len) into *l (its weights' count *w_n): on an image, its kernel
 * within the padded map. */
static dt_status parse_conv(spec_walk *k, const char *p, size_t len, layer *l, uint64_t *w_n)
{
    static const char *const names[] = {"OUT", "K", "STRIDE", "PAD"};
    static const int lo[] = {1, 1, 1, 0};
    int v[4];
    dt_status st = DT_OK;
    const int r = spec_fields(k->spec_in, k->index, k->tok, p, len, 4, names, lo, v, &st);
    if (r < 0) return st;
    if (r == 0)
        SPEC_REFUSE("model '%s': layer %d '%s' must be conv:OUT:K:STRIDE:PAD with OUT, K, STRIDE from 1 to "
                    "%" PRIu64 " and PAD from 0 to %" PRIu64,
                    k->spec_in, k->index, k->tok, SPEC_MAX_ELEMS, SPEC_MAX_ELEMS);
    if (k->vec_index) SPEC_VECTOR_REFUSE(k);
    const int c = k->c, h = k->h, w = k->w;
    if (h == 1 && w == 1 && k->s.in_h == 1 && k->s.in_w == 1)
        SPEC_REFUSE("model '%s': layer %d '%s' needs an image input with H or W above 1; --input %s is a "
                    "vector of %d values (a 1x1 map): give --input CxHxW of the images, or put fc layers first",
                    k->spec_in, k->index, k->tok, k->input, k->s.in_c);
    l->kind = LAYER_CONV;
    l->out = v[0], l->k = v[1], l->stride = v[2], l->pad = v[3];
    /* Each term is at most 2^28, so these fit an int64 and the output sizes an int. */
    const int64_t hp = (int64_t)h + 2 * (int64_t)l->pad, wp = (int64_t)w + 2 * (int64_t)l->pad;
    if (l->k > hp || l->k > wp) {
        /* The map this layer gets, where it comes from, and the changes that make it fit. */
        const int64_t most = hp < wp ? hp : wp, side = h < w ? h : w;
        char from[96];
        map_origin(from, sizeof from, k->index, k->input);
        SPEC_REFUSE("model '%s': layer %d '%s': kernel %d does not fit the %dx%d map it gets (%s) with padding "
                    "%d: use a kernel of %" PRId64 " or less or a padding of %" PRId64
                    " or more here, fewer pools or strides before it, or a larger --input",
                    k->spec_in, k->index, k->tok, l->k, h, w, from, l->pad, most, ((int64_t)l->k - side + 1) / 2);
    }
    l->in_c = c, l->in_h = h, l->in_w = w;
    l->out_c = l->out;
    l->out_h = (int)((hp - l->k) / l->stride + 1);
    l->out_w = (int)((wp - l->k) / l->stride + 1);
    *w_n = spec_mul(spec_mul((uint64_t)l->out, (uint64_t)c), spec_mul((uint64_t)l->k, (uint64_t)l->k));
    char n1[64];
    if (*w_n > SPEC_MAX_LAYER_WEIGHTS)
        SPEC_REFUSE("model '%s': layer %d '%s' has %s weights (%d outputs x %d channels x %dx%d); at most "
                    "%" PRIu64 " per layer are supported (GEMM dimensions are ints): use fewer outputs or "
                    "a smaller kernel",
                    k->spec_in, k->index, k->tok, spec_count(n1, *w_n, (double)l->out * c * l->k * l->k), l->out, c,
                    l->k, l->k, SPEC_MAX_LAYER_WEIGHTS);
    l->b_n = (size_t)l->out;
    return DT_OK;
}

/* pool:K at [p, p+len) into *l: on an image, its window within the map. */
static dt_status parse_pool(spec_walk *k, const char *p, size_t len, layer *l)
{
    int v[1];
    const dt_status st = one_field(k, p, len, "pool", "K", v);
    if (st) return st;
    if (k->vec_index) SPEC_VECTOR_REFUSE(k);
    const int c = k->c, h = k->h, w = k->w;
    if (h < v[0] || w < v[0]) {
        /* The map this layer gets, where it comes from, and the changes that make it fit. */
        const int most = h < w ? h : w;
        char from[96], fix[64] = "drop this pool, or use";
        map_origin(from, sizeof from, k->index, k->input);
        if (most > 1) snprintf(fix, sizeof fix, "use pool:%d or smaller here,", most);
        SPEC_REFUSE("model '%s': layer %d '%s': its %dx%d window does not fit the %dx%d map it gets (%s): %s "
                    "fewer pools or strides before it, or a larger --input",
                    k->spec_in, k->index, k->tok, v[0], v[0], h, w, from, fix);
    }
    l->kind = LAYER_POOL;
    l->k = v[0];
    l->in_c = c, l->in_h = h, l->in_w = w;
    l->out_c = c, l->out_h = h / l->k, l->out_w = w / l->k;
    return DT_OK;
}

/* The layer at [p, p+len) into *l (its weights' count *w_n), by its kind. */
static dt_status parse_layer(spec_walk *k, const char *p, size_t len, layer *l, uint64_t *w_n)
{
    const int c = k->c, h = k->h, w = k->w;
    if (len > 3 && strncmp(p, "fc:", 3) == 0) return parse_fc(k, p, len, l, w_n);
    if (len > 5 && strncmp(p, "conv:", 5) == 0) return parse_conv(k, p, len, l, w_n);
    if (len > 5 && strncmp(p, "pool:", 5) == 0) return parse_pool(k, p, len, l);
    if (len == 4 && strncmp(p, "relu", 4) == 0) {
        l->kind = LAYER_RELU;
        l->in_c = l->out_c = c, l->in_h = l->out_h = h, l->in_w = l->out_w = w;
        return DT_OK;
    }
    if (len == 7 && strncmp(p, "flatten", 7) == 0) {
        mark_vector(k);
        l->kind = LAYER_FLATTEN;
        l->in_c = c, l->in_h = h, l->in_w = w;
        l->out_c = c * h * w, l->out_h = 1, l->out_w = 1;
        return DT_OK;
    }
    SPEC_REFUSE("model '%s': layer %d '%s' is not a layer; use fc:OUT, conv:OUT:K:STRIDE:PAD, pool:K, "
                "relu or flatten",
                k->spec_in, k->index, k->tok);
}

/* Layer l (w_n weights) appended, within the bounds of a layer's output and of the model's
 * parameters; its parameters placed after those before it; its output the current map. */
static dt_status add_layer(spec_walk *k, layer l, uint64_t w_n)
{
    char n1[64];
    const uint64_t out_n = spec_mul(spec_mul((uint64_t)l.out_c, (uint64_t)l.out_h), (uint64_t)l.out_w);
    if (out_n > SPEC_MAX_ELEMS)
        SPEC_REFUSE("model '%s': layer %d '%s' has %s outputs per sample (%dx%dx%d); at most %" PRIu64 " (1 GiB "
                    "of fp32) are supported: use fewer outputs or channels, a larger stride, or a pool before it",
                    k->spec_in, k->index, k->tok, spec_count(n1, out_n, (double)l.out_c * l.out_h * l.out_w), l.out_c,
                    l.out_h, l.out_w, SPEC_MAX_ELEMS);
    /* Both terms are at most 2^32, so the sum cannot wrap. */
    const uint64_t total = k->params + w_n + (uint64_t)l.b_n;
    if (total > SPEC_MAX_PARAMS)
        SPEC_REFUSE("model '%s' has more than %" PRIu64 " parameters (%" PRIu64 " through layer %d '%s'); at most "
                    "%" PRIu64 " are supported (16 GiB of fp32, 64 GiB on every rank with the gradients and the "
                    "optimizer's state): make the model smaller",
                    k->spec_in, SPEC_MAX_PARAMS, total, k->index, k->tok, SPEC_MAX_PARAMS);
    l.w_n = (size_t)w_n;
    l.w_off = (size_t)k->params;
    l.b_off = (size_t)k->params + l.w_n;
    k->params = total;
    k->c = l.out_c, k->h = l.out_h, k->w = l.out_w;
    if (out_n > k->max_act) k->max_act = (size_t)out_n;
    return spec_push(&k->s, &k->cap, l);
}

/* The last layer: an fc of 2 to SPEC_MAX_CLASSES outputs, the classes' logits. */
static dt_status check_classes(spec_walk *k, const char *spec)
{
    const model_spec *s = &k->s;
    if (s->layers[s->n - 1].kind != LAYER_FC)
        SPEC_REFUSE("model '%s': the last layer must be fc:CLASSES (the logits), not '%s'", k->spec_in,
                    strrchr(spec, ',') ? strrchr(spec, ',') + 1 : spec);
    k->s.classes = s->layers[s->n - 1].out;
    if (s->classes < 2)
        SPEC_REFUSE("model '%s': the last fc has %d output; classification needs at least 2", k->spec_in, s->classes);
    if (s->classes > SPEC_MAX_CLASSES)
        SPEC_REFUSE("model '%s': the last fc has %d outputs, one per class; at most %d classes are supported: use "
                    "fewer classes",
                    k->spec_in, s->classes, SPEC_MAX_CLASSES);
    return DT_OK;
}

dt_status model_spec_parse(const char *spec_in, const char *input, model_spec *out)
{
    if (!spec_in || !*spec_in)
        return status_set_error(DT_ERR_INVALID_ARG, "the model is empty: give a preset (mlp, cnn) or a "
                                                    "layer list such as fc:128,relu,fc:10");
    dt_status st = model_spec_check_name(spec_in);
    if (st) return st;
    const char *spec = model_preset(spec_in) ? model_preset(spec_in) : spec_in;
    if (!input || !*input) input = model_preset_input(spec_in);
    if (!input)
        return status_set_error(DT_ERR_INVALID_ARG, "model '%s' needs an input shape (--input N or CxHxW)", spec_in);
    spec_walk k;
    memset(&k, 0, sizeof k);
    k.spec_in = spec_in, k.input = input;
    if ((st = spec_input(input, &k.s))) return st;
    k.c = k.s.in_c, k.h = k.s.in_h, k.w = k.s.in_w;
    k.max_act = (size_t)k.c * k.h * k.w;
    for (const char *p = spec;;) {
        const char *comma = strchr(p, ',');
        const size_t len = comma ? (size_t)(comma - p) : strlen(p);
        k.index++;
        snprintf(k.tok, sizeof k.tok, "%.*s%s", (int)(len < 60 ? len : 60), p, len > 60 ? "..." : "");
        if (len == 0) {
            st = status_set_error(DT_ERR_INVALID_ARG, "model '%s': layer %d is empty (a doubled or trailing comma?)",
                                  spec_in, k.index);
            break;
        }
        layer l;
        memset(&l, 0, sizeof l);
        uint64_t w_n = 0;
        if ((st = parse_layer(&k, p, len, &l, &w_n)) || (st = add_layer(&k, l, w_n))) break;
        if (!comma) break;
        p = comma + 1;
    }
    if (!st) st = check_classes(&k, spec);
    if (st) {
        free(k.s.layers);
        return st;
    }
    k.s.num_params = (size_t)k.params;
    k.s.max_act = k.max_act;
    *out = k.s;
    return DT_OK;
}

void model_spec_free(model_spec *s)
{
    if (!s) return;
    free(s->layers);
    s->layers = NULL;
    s->n = 0;
}
