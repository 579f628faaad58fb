/*
 * fuzz_model_spec.c - the model-spec grammar (runtime/model/model_spec.c): --model and --input.
 *
 * Input: the spec, then a NUL or newline, then the input shape ("fc:10\n1x28x28"); without a
 * separator the whole input is the spec and the shape is left to the preset (NULL).
 * Beyond ASan/UBSan, a spec that parses must give a model the rest of the runtime can trust: at
 * least one layer, the last an fc with >= 2 classes, every layer's input the previous layer's
 * output, positive shapes, and weight/bias views of the fc and conv layers that tile
 * [0, num_params) in order. The shape alone (model_spec_input, --input wherever it sizes data)
 * reads as the spec's: accepted whenever the spec is, with its sizes (one without an 'x', three
 * with), and never with sizes outside 1..2^28 a sample; a refusal leaves the outputs alone.
 */
#include "fuzz_common.h"
#include "runtime/model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *spec, *input;
    fuzz_split(data, size, &spec, &input);
    int ic = -7, ih = -7, iw = -7;
    const int dims = input ? model_spec_input(input, &ic, &ih, &iw) : -1;
    if (dims == 0) FUZZ_CHECK(ic == -7 && ih == -7 && iw == -7, "a refused input shape set %dx%dx%d", ic, ih, iw);
    if (dims > 0) {
        FUZZ_CHECK(dims == (strchr(input, 'x') ? 3 : 1), "'%s' read as %d sizes", input, dims);
        FUZZ_CHECK(ic >= 1 && ih >= 1 && iw >= 1 && (dims == 3 || (ih == 1 && iw == 1)), "'%s' read as %dx%dx%d", input,
                   ic, ih, iw);
        FUZZ_CHECK((uint64_t)ic * (uint64_t)ih * (uint64_t)iw <= (UINT64_C(1) << 28), "'%s' read as %dx%dx%d", input,
                   ic, ih, iw);
    }
    model_spec s;
    memset(&s, 0xa5, sizeof s);
    if (model_spec_parse(spec, input, &s) == DT_OK) {
        if (input && *input)
            FUZZ_CHECK(dims > 0 && ic == s.in_c && ih == s.in_h && iw == s.in_w,
                       "the spec took --input '%s' as %dx%dx%d, model_spec_input as %dx%dx%d (%d sizes)", input, s.in_c,
                       s.in_h, s.in_w, ic, ih, iw, dims);
        FUZZ_CHECK(s.n >= 1 && s.layers, "n %d", s.n);
        const layer *last = &s.layers[s.n - 1];
        FUZZ_CHECK(last->kind == LAYER_FC && s.classes == last->out && s.classes >= 2, "classes %d", s.classes);
        int c = s.in_c, h = s.in_h, w = s.in_w;
        FUZZ_CHECK(c >= 1 && h >= 1 && w >= 1, "input %dx%dx%d", c, h, w);
        size_t off = 0, max_act = (size_t)c * (size_t)h * (size_t)w;
        for (int i = 0; i < s.n; i++) {
            const layer *l = &s.layers[i];
            FUZZ_CHECK(l->in_c == c && l->in_h == h && l->in_w == w, "layer %d takes %dx%dx%d after %dx%dx%d", i,
                       l->in_c, l->in_h, l->in_w, c, h, w);
            FUZZ_CHECK(l->out_c >= 1 && l->out_h >= 1 && l->out_w >= 1, "layer %d gives %dx%dx%d", i, l->out_c,
                       l->out_h, l->out_w);
            /* Layers without parameters (relu, pool, flatten) may leave their offsets at 0. */
            if (l->w_n + l->b_n) {
                FUZZ_CHECK(l->w_off == off && l->b_off == off + l->w_n, "layer %d views at %zu/%zu, expected %zu", i,
                           l->w_off, l->b_off, off);
                FUZZ_CHECK(l->kind == LAYER_FC || l->kind == LAYER_CONV, "layer %d of kind %d has parameters", i,
                           (int)l->kind);
            }
            off += l->w_n + l->b_n;
            size_t out_n = (size_t)l->out_c * (size_t)l->out_h * (size_t)l->out_w;
            if (out_n > max_act) max_act = out_n;
            c = l->out_c, h = l->out_h, w = l->out_w;
        }
        FUZZ_CHECK(off == s.num_params, "views end at %zu, num_params %zu", off, s.num_params);
        FUZZ_CHECK(max_act == s.max_act, "largest activation %zu, max_act %zu", max_act, s.max_act);
        model_spec_free(&s);
        FUZZ_CHECK(s.layers == NULL && s.n == 0, "model_spec_free left the layers");
    }
    free(spec);
    return 0;
}
