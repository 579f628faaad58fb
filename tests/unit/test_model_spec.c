/*
 * test_model_spec.c - the layer-list grammar (model_spec_parse): the presets and their shapes,
 * what a malformed spec or input is told, --input alone (model_spec_input), and the 64-bit size
 * bounds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/model/model.h"

#include <string.h>

static void expect_spec_error(const char *spec, const char *input, const char *must)
{
    model_spec s;
    assert_int_equal(model_spec_parse(spec, input, &s), DT_ERR_INVALID_ARG);
    if (!strstr(dt_last_error(), must))
        fail_msg("error for '%s' on '%s': '%s' lacks '%s'", spec, input ? input : "-", dt_last_error(), must);
}

static void test_presets(void **st)
{
    (void)st;
    model_spec s;
    assert_int_equal(model_spec_parse("mlp", NULL, &s), DT_OK);
    assert_int_equal(s.n, 5);
    assert_int_equal(s.classes, 10);
    /* 784*1024+1024 + 1024*1024+1024 + 1024*10+10 */
    assert_int_equal(s.num_params, 1863690);
    model_spec_free(&s);

    assert_int_equal(model_spec_parse("cnn", NULL, &s), DT_OK);
    /* conv 32*9+32, conv 64*32*9+64, (implied flatten), fc 3136*128+128, fc 128*10+10 */
    assert_int_equal(s.num_params, 320 + 18496 + 401536 + 1290);
    assert_int_equal(s.n, 10); /* 9 tokens + the implied flatten */
    assert_int_equal(s.layers[6].kind, LAYER_FLATTEN);
    assert_int_equal(s.layers[6].out_c, 64 * 7 * 7);
    assert_int_equal(s.layers[5].out_h, 7);
    model_spec_free(&s);

    /* Stride, padding, odd sizes, pooling floors. */
    assert_int_equal(model_spec_parse("conv:4:3:2:0,pool:2,fc:3", "3x9x7", &s), DT_OK);
    assert_int_equal(s.layers[0].out_h, 4);
    assert_int_equal(s.layers[0].out_w, 3);
    assert_int_equal(s.layers[1].out_h, 2);
    assert_int_equal(s.layers[1].out_w, 1);
    assert_int_equal(s.layers[3].in_c, 4 * 2 * 1);
    model_spec_free(&s);

    /* An explicit flatten, and a preset given an empty --input (its own shape). */
    assert_int_equal(model_spec_parse("conv:4:3:1:1,flatten,fc:2", "1x8x8", &s), DT_OK);
    assert_int_equal(s.layers[1].kind, LAYER_FLATTEN);
    assert_int_equal(s.layers[1].out_c, 4 * 8 * 8);
    assert_int_equal(s.layers[2].in_c, 4 * 8 * 8);
    assert_int_equal(s.num_params, 4 * 9 + 4 + 2 * 256 + 2);
    model_spec_free(&s);
    assert_int_equal(model_spec_parse("mlp", "", &s), DT_OK);
    assert_int_equal(s.in_c, 784);
    model_spec_free(&s);
    /* A conv on a map pooled down to 1x1 from an image: padded, it fits (only a vector --input
     * has no image to convolve). */
    assert_int_equal(model_spec_parse("conv:4:3:1:1,pool:8,conv:2:3:1:1,fc:2", "1x8x8", &s), DT_OK);
    assert_int_equal(s.layers[2].out_h, 1);
    model_spec_free(&s);
}

static void test_spec_errors(void **st)
{
    (void)st;
    expect_spec_error("fc:10,softmax,fc:10", "784", "layer 2 'softmax' is not a layer");
    expect_spec_error("fc:0,fc:10", "784", "'fc:0'");
    expect_spec_error("fc:-5,fc:10", "784", "'fc:-5'");
    expect_spec_error("fc:ten", "784", "'fc:ten'");
    /* A pool too large names the map it gets, from where, and the changes that make it fit. */
    expect_spec_error("conv:8:3:1:1,pool:2,pool:2,pool:2,fc:2", "1x4x4",
                      "layer 4 'pool:2': its 2x2 window does not fit the 1x1 map it gets (--input 1x4x4 after layers "
                      "1 to 3): drop this pool, or use fewer pools or strides before it, or a larger --input");
    expect_spec_error("conv:8:3:1:1,pool:4,fc:2", "1x3x5",
                      "its 4x4 window does not fit the 3x5 map it gets (--input 1x3x5 after layer 1): use pool:3 or "
                      "smaller here, fewer pools");
    expect_spec_error("pool:9,fc:2", "1x8x8", "does not fit the 8x8 map it gets (--input 1x8x8): use pool:8");
    expect_spec_error("conv:8:5:1:0,fc:2", "1x3x3",
                      "kernel 5 does not fit the 3x3 map it gets (--input 1x3x3) with padding 0: use a kernel of 3 or "
                      "less or a padding of 1 or more here");
    /* After a pool, padded: 4 + 2 x 1 = 6 fits a kernel of 6, and a padding of 2 fits the 7. */
    expect_spec_error("pool:2,conv:8:7:1:1,fc:2", "1x8x8",
                      "layer 2 'conv:8:7:1:1': kernel 7 does not fit the 4x4 map it gets (--input 1x8x8 after layer 1) "
                      "with padding 1: use a kernel of 6 or less or a padding of 2 or more here");
    expect_spec_error("conv:8:3:0:1,fc:2", "1x8x8", "'conv:8:3:0:1'");
    expect_spec_error("conv:8:3:1,fc:2", "1x8x8", "conv:OUT:K:STRIDE:PAD");
    expect_spec_error("fc:10,,fc:2", "784", "layer 2 is empty");
    expect_spec_error("fc:10,", "784", "is empty");
    expect_spec_error("fc:10,relu", "784", "last layer must be fc");
    expect_spec_error("fc:1", "784", "at least 2");
    expect_spec_error("conv:4:3:1:1,fc:2", "784",
                      "needs an image input with H or W above 1; --input 784 is a vector of 784 values");
    /* A conv or pool after an fc or flatten would take the vector for a 1x1 image (accepted before
     * with a padded kernel, as nn.Conv2d after nn.Linear is not in PyTorch). */
    expect_spec_error("conv:4:3:1:1,fc:8,conv:4:3:1:1,fc:2", "1x8x8",
                      "layer 3 'conv:4:3:1:1' comes after layer 2 'fc:8', whose output is a vector of 8 values, not "
                      "an image: put the conv and pool layers before the first fc or flatten");
    expect_spec_error("fc:64,relu,conv:16:3:1:0,fc:3", "784", "layer 3 'conv:16:3:1:0' comes after layer 1 'fc:64'");
    expect_spec_error("conv:4:3:1:1,flatten,pool:1,fc:2", "1x8x8", "layer 3 'pool:1' comes after layer 2 'flatten'");
    expect_spec_error("", "784", "empty");
    expect_spec_error("fc:10", "28x28", "input shape '28x28'");
    expect_spec_error("fc:10", "0", "input shape '0'");
    expect_spec_error("fc:10", "1x28x", "input shape");
    expect_spec_error("fc:10", NULL, "needs an input shape");
    /* A wrong name is said as such, not as a layer list lacking --input. */
    expect_spec_error("resnet18", NULL, "model 'resnet18' is neither a preset (mlp, cnn) nor a layer list");
    expect_spec_error("resnet18", "3x32x32", "is neither a preset (mlp, cnn) nor a layer list");
    expect_spec_error("CNN", NULL, "model 'CNN' is not a preset: preset names are lower case (cnn)");
    expect_spec_error("relu", NULL, "needs an input shape");
    /* A name the grammar knows, with more after it, is no layer. */
    expect_spec_error("fc:10,relux,fc:2", "784", "layer 2 'relux' is not a layer");
    expect_spec_error("conv:4:3:1:1,flattened,fc:2", "1x8x8", "layer 2 'flattened' is not a layer");
    expect_spec_error("conv:4:3:1:1", "1x8x8", "the last layer must be fc:CLASSES (the logits), not 'conv:4:3:1:1'");
    /* The first fc is named, not the latest. */
    expect_spec_error("fc:8,relu,fc:6,conv:4:3:1:1,fc:2", "1x8x8", "layer 4 'conv:4:3:1:1' comes after layer 1 'fc:8'");
    /* A kernel too tall for a wide map: either side too small refuses it, and the smaller side
     * sets the kernel that fits. */
    expect_spec_error("conv:8:5:1:0,fc:2", "1x3x9",
                      "kernel 5 does not fit the 3x9 map it gets (--input 1x3x9) with padding 0: use a kernel of 3 or "
                      "less or a padding of 1 or more here");
}

/* --input alone (model_spec_input), as `dtrain bench data` sizes its data by it: the model's rules,
 * not sscanf's "%dx%dx%d", which took trailing text, blanks and signs and wrapped a size past an
 * int ("4294967299x8x8" was 3x8x8). */
static void test_spec_input(void **st)
{
    (void)st;
    int c = -1, h = -1, w = -1;
    assert_int_equal(model_spec_input("3x32x24", &c, &h, &w), 3);
    assert_true(c == 3 && h == 32 && w == 24);
    assert_int_equal(model_spec_input("784", &c, &h, &w), 1);
    assert_true(c == 784 && h == 1 && w == 1);
    static const char *const bad[] = {"3x8x8junk", "4294967299x8x8", " 3x8x8", "+3x8x8", "3x-8x8",        "3x8x8x1",
                                      "3x8",       "0x8x8",          "",       "3x8x",   "1x65536x65537", "7:4"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        c = h = w = -7;
        if (model_spec_input(bad[i], &c, &h, &w) != 0) fail_msg("--input '%s' accepted as %dx%dx%d", bad[i], c, h, w);
        assert_true(c == -7 && h == -7 && w == -7);
        if (!strstr(dt_last_error(), "input shape '"))
            fail_msg("'%s': the error '%s' names no shape", bad[i], dt_last_error());
    }
    assert_int_equal(model_spec_input(NULL, &c, &h, &w), 0);
}

/* Sizes are computed in 64 bits and bounded before they reach an int: each message gives the true
 * size, the bound and what to change (these wrapped in 32 bits, or said something false, before). */
static void test_spec_bounds(void **st)
{
    (void)st;
    /* Input: at most 2^28 elements per sample. */
    expect_spec_error("fc:10", "1x65536x65537",
                      "input shape '1x65536x65537' has 4295032832 elements per sample; "
                      "at most 268435456 (1 GiB of fp32) are supported");
    expect_spec_error("fc:16", "1x99999x99999", "has 9999800001 elements per sample");
    expect_spec_error("fc:16", "99999999999", "every size must be from 1 to 268435456");
    expect_spec_error("fc:16", "1x99999999999999999999999x1", "every size must be from 1 to 268435456");
    expect_spec_error("fc:16", "1xax1", "with sizes from 1 to 268435456");
    /* Numbers of the grammar: out of range, not "must be fc:OUT". */
    expect_spec_error("fc:9999999999", "4",
                      "layer 1 'fc:9999999999': OUT = 9999999999 is out of range: it must "
                      "be from 1 to 268435456");
    expect_spec_error("fc:99999999999999999999999999,fc:2", "4", "OUT = 999999999999999999999999... is out of range");
    expect_spec_error("fc:0,fc:10", "784", "OUT = 0 is out of range: it must be from 1 to 268435456");
    expect_spec_error("conv:1:1:1:999999999,fc:2", "1x200000000x1",
                      "'conv:1:1:1:999999999': PAD = 999999999 is out of range: it must be from 0 to 268435456");
    expect_spec_error("conv:8:3:0:1,fc:2", "1x8x8", "STRIDE = 0 is out of range: it must be from 1 to 268435456");
    expect_spec_error("pool:0,fc:2", "1x8x8", "K = 0 is out of range");
    expect_spec_error("fc:ten", "784", "must be fc:OUT with OUT a whole number from 1 to 268435456");
    expect_spec_error("pool:2:2,fc:2", "1x8x8",
                      "model 'pool:2:2,fc:2': layer 1 'pool:2:2' must be pool:K with K a whole number from 1 to "
                      "268435456");
    expect_spec_error("conv:8:3:1:1:1,fc:2", "1x8x8", "with OUT, K, STRIDE from 1 to 268435456 and PAD from 0");
    /* Conv output: the padded size no longer wraps into "kernel 1 does not fit". */
    expect_spec_error("conv:1:1:1:200000000,fc:2", "1x200000000x1",
                      "layer 1 'conv:1:1:1:200000000' has 240000000600000000 outputs per sample "
                      "(1x600000000x400000001); at most 268435456");
    /* Weights per layer: at most INT_MAX, true even past 2^64. */
    expect_spec_error("fc:65536,fc:65536,fc:2", "16",
                      "layer 2 'fc:65536' has 4294967296 weights (65536 outputs x "
                      "65536 inputs); at most 2147483647 per layer");
    expect_spec_error("conv:4:3:1:1,fc:2000000", "1x64x64", "has 32768000000 weights (2000000 outputs x 16384 inputs)");
    expect_spec_error("conv:268435456:268435456:1:268435456,fc:2", "1x2x2", "has about 1.93e+25 weights");
    /* All parameters: at most 2^32. */
    expect_spec_error("fc:40000,fc:40000,fc:40000,fc:40000,fc:10", "40000",
                      "has more than 4294967296 parameters (4800120000 through layer 3 'fc:40000')");
    /* Classes: at most 2^20. */
    expect_spec_error("fc:1048577", "1", "the last fc has 1048577 outputs, one per class; at most 1048576 classes");

    /* At the bounds, accepted with the right sizes. */
    model_spec s;
    assert_int_equal(model_spec_parse("fc:1048576", "1", &s), DT_OK);
    assert_int_equal(s.classes, 1048576);
    model_spec_free(&s);
    assert_int_equal(model_spec_parse("fc:2", "1x16384x16384", &s), DT_OK);
    assert_int_equal(s.layers[0].kind, LAYER_FLATTEN);
    assert_int_equal(s.layers[0].out_c, 268435456);
    assert_true(s.num_params == (size_t)2 * 268435456 + 2);
    assert_true(s.max_act == 268435456);
    model_spec_free(&s);
    assert_int_equal(model_spec_parse("conv:2:3:1:1,fc:2", "1x8192x8192", &s), DT_OK);
    assert_int_equal(s.layers[0].out_h, 8192);
    assert_true(s.max_act == (size_t)2 * 8192 * 8192);
    model_spec_free(&s);
    /* A layer's output of exactly 2^28, and exactly 2^32 parameters in all. */
    assert_int_equal(model_spec_parse("conv:4:3:1:1,fc:2", "1x8192x8192", &s), DT_OK);
    assert_true(s.max_act == 268435456);
    model_spec_free(&s);
    assert_int_equal(model_spec_parse("fc:8,fc:195225786,fc:2", "268435455", &s), DT_OK);
    assert_true(s.num_params == (size_t)1 << 32);
    model_spec_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_presets),
        cmocka_unit_test(test_spec_errors),
        cmocka_unit_test(test_spec_bounds),
        cmocka_unit_test(test_spec_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
