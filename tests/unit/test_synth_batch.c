/*
 * test_synth_batch.c - the synthetic data as the op tables make it (synth_batch, kernels/synth.h)
 * and the loader's device path, on the CPU: a batch of any indices is the samples the reader
 * gives one at a time (flat inputs with and without leftover dot-product terms, images of odd
 * shapes, 2 to 1000 classes, a normalization); the labels of the first samples are the data's
 * definition and stay what they were; a loader on its device path (the CPU standing in for the
 * device, runtime/test_hooks.h) hands out dt_dataset_batch's batches over several epochs,
 * normalized or not, whatever loader threads it was given; augmentation keeps AUTO on the host and
 * makes DEVICE fail, as does a context on the CPU; dt_dataset_set_synthetic_on refuses what is not
 * in its enum. The CUDA kernel against this oracle: gpu.cuda_ops_synth.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dtrain.h"
#include "kernels/backend.h"
#include "kernels/synth.h"
#include "runtime/data/dataset.h"
#include "runtime/data/synthetic.h"
#include "runtime/test_hooks.h"

#include <stdlib.h>
#include <string.h>

typedef struct shape {
    int c, h, w, classes;
} shape;

static void check_batch_is_reads(const shape *sh, int normalized)
{
    ds_split *s;
    assert_int_equal(synthetic_open(sh->c, sh->h, sh->w, sh->classes, 50, 3, &s), DT_OK);
    synth_spec sp;
    assert_int_equal(synthetic_spec(s, &sp), 1);
    const size_t in = synth_input_size(&sp);
    float *mul = malloc((size_t)sh->c * sizeof *mul), *add = malloc((size_t)sh->c * sizeof *add);
    for (int c = 0; c < sh->c; c++) mul[c] = 0.5f + 0.25f * (float)c, add[c] = -0.125f * (float)c;
    if (normalized) sp.mul = mul, sp.add = add;
    const uint32_t idx[] = {5, 0, 17, 49, 5, 33};
    const int n = (int)(sizeof idx / sizeof idx[0]);
    float *x = malloc((size_t)n * in * sizeof *x), *one = malloc(in * sizeof *one);
    int32_t labels[6], label;
    backend *be = backend_cpu();
    assert_int_equal(be->ops->synth_batch(be, &sp, idx, n, x, labels), DT_OK);
    for (int j = 0; j < n; j++) {
        assert_int_equal(ds_read(s, idx[j], one, &label), DT_OK);
        assert_int_equal(labels[j], label);
        assert_true(label >= 0 && label < sh->classes);
        const size_t hw = (size_t)sh->h * sh->w;
        for (size_t v = 0; v < in; v++) {
            const float want = normalized ? one[v] * mul[v / hw] + add[v / hw] : one[v];
            if (memcmp(&x[(size_t)j * in + v], &want, sizeof want))
                fail_msg("%dx%dx%d, %d classes, sample %u value %zu: %a, the reader's %a", sh->c, sh->h, sh->w,
                         sh->classes, idx[j], v, (double)x[(size_t)j * in + v], (double)want);
        }
    }
    /* The same sample twice in a batch: the same bits. */
    assert_memory_equal(x, x + 4 * in, in * sizeof *x);
    free(x), free(one), free(mul), free(add);
    ds_close(s);
}

static void test_batch_is_reads(void **state)
{
    (void)state;
    const shape shapes[] = {{784, 1, 1, 10}, {37, 1, 1, 1000}, {3, 32, 32, 10}, {1, 28, 28, 2},
                            {3, 7, 5, 100},  {2, 1, 9, 10},    {5, 3, 1, 7}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int norm = 0; norm <= 1; norm++) check_batch_is_reads(&shapes[i], norm);
}

/* The labels of samples 0..15 (seed 1): what the synthetic data was before the generator moved
 * into the op tables, so runs and their checkpoints mean the same data. */
static void test_labels_stay(void **state)
{
    (void)state;
    static const int32_t flat[16] = {1, 2, 6, 8, 1, 7, 6, 1, 8, 7, 6, 4, 2, 8, 6, 7};
    static const int32_t image[16] = {4, 3, 0, 8, 6, 8, 6, 8, 2, 8, 8, 2, 2, 8, 6, 2};
    const shape shapes[2] = {{784, 1, 1, 10}, {3, 32, 32, 10}};
    for (int k = 0; k < 2; k++) {
        ds_split *s;
        assert_int_equal(synthetic_open(shapes[k].c, shapes[k].h, shapes[k].w, 10, 100, 1, &s), DT_OK);
        float *x = malloc(3072 * sizeof *x);
        for (uint32_t i = 0; i < 16; i++) {
            int32_t label;
            assert_int_equal(ds_read(s, i, x, &label), DT_OK);
            if (label != (k ? image : flat)[i])
                fail_msg("%s sample %u: label %d, was %d", k ? "3x32x32" : "784", i, label, (k ? image : flat)[i]);
        }
        free(x);
        ds_close(s);
    }
}

/* Steps 0..steps of a loader of d against dt_dataset_batch of e (the same data, its own sampler). */
static void check_loader(dt_dataset *d, dt_dataset *e, int rank, int world, int batch, int threads, int steps,
                         int want_device)
{
    dt_loader *l;
    assert_int_equal(dt_loader_create(NULL, d, rank, world, batch, 0, threads, 3, &l), DT_OK);
    assert_int_equal(dt_loader_on_device(l), want_device);
    int c, h, w;
    dt_dataset_shape(d, &c, &h, &w);
    const size_t in = (size_t)c * h * w;
    float *x2 = malloc((size_t)batch * in * sizeof *x2);
    int32_t *y2 = malloc((size_t)batch * sizeof *y2);
    for (long st = 0; st < steps; st++) {
        long step;
        const float *x;
        const int32_t *y;
        assert_int_equal(dt_loader_next(l, &step, &x, &y), DT_OK);
        assert_int_equal(step, st);
        assert_int_equal(dt_dataset_batch(e, st, rank, world, batch, x2, y2), DT_OK);
        assert_memory_equal(y, y2, (size_t)batch * sizeof *y);
        assert_memory_equal(x, x2, (size_t)batch * in * sizeof *x);
    }
    free(x2), free(y2);
    dt_loader_free(l);
}

static void open_pair(int c, int h, int w, const dt_data_config *cfg, dt_dataset **d, dt_dataset **e)
{
    assert_int_equal(dt_synthetic_open(c, h, w, 10, 100, 9, cfg, d), DT_OK);
    assert_int_equal(dt_synthetic_open(c, h, w, 10, 100, 9, cfg, e), DT_OK);
}

static void test_loader_device_path(void **state)
{
    (void)state;
    loader_test_device_on_cpu(1);
    for (int norm = 0; norm <= 1; norm++)
        for (int threads = 0; threads <= 2; threads += 2) {
            dt_data_config cfg;
            dt_data_defaults(&cfg);
            cfg.normalize = norm ? DT_NORMALIZE_STANDARD : DT_NORMALIZE_NONE;
            cfg.seed = 4;
            dt_dataset *d, *e;
            open_pair(3, 9, 6, &cfg, &d, &e);
            /* 100 samples, 2 ranks of 16: an epoch every 3 steps, so 10 steps cross three. */
            check_loader(d, e, 1, 2, 16, threads, 10, 1);
            assert_int_equal(dt_dataset_set_synthetic_on(d, DT_SYNTHETIC_DEVICE), DT_OK);
            check_loader(d, e, 0, 2, 16, threads, 4, 1);
            /* HOST: the loader's threads (or the caller) make them as for a file. */
            assert_int_equal(dt_dataset_set_synthetic_on(d, DT_SYNTHETIC_HOST), DT_OK);
            check_loader(d, e, 0, 1, 7, threads, 20, 0);
            dt_dataset_free(d);
            dt_dataset_free(e);
        }
    loader_test_device_on_cpu(0);
}

static void test_augmentation_stays_on_host(void **state)
{
    (void)state;
    loader_test_device_on_cpu(1);
    dt_data_config cfg;
    dt_data_defaults(&cfg);
    cfg.normalize = DT_NORMALIZE_NONE;
    cfg.crop_pad = 2;
    cfg.flip = 1;
    dt_dataset *d, *e;
    open_pair(3, 8, 8, &cfg, &d, &e);
    check_loader(d, e, 0, 1, 8, 0, 5, 0); /* AUTO: on the host */
    assert_int_equal(dt_dataset_set_synthetic_on(d, DT_SYNTHETIC_DEVICE), DT_OK);
    dt_loader *l = NULL;
    assert_int_equal(dt_loader_create(NULL, d, 0, 1, 8, 0, 0, 3, &l), DT_ERR_INVALID_ARG);
    assert_null(l);
    assert_non_null(strstr(dt_last_error(), "augmentation"));
    dt_dataset_free(d);
    dt_dataset_free(e);
    loader_test_device_on_cpu(0);
}

static void test_device_needs_a_device(void **state)
{
    (void)state;
    dt_dataset *d;
    assert_int_equal(dt_synthetic_create(1, 4, 4, 10, 64, 1, &d), DT_OK);
    assert_int_equal(dt_dataset_set_synthetic_on(d, (dt_synthetic_on)7), DT_ERR_INVALID_ARG);
    assert_int_equal(dt_dataset_set_synthetic_on(NULL, DT_SYNTHETIC_AUTO), DT_ERR_INVALID_ARG);
    dt_loader *l;
    assert_int_equal(dt_loader_create(NULL, d, 0, 1, 8, 0, 0, 3, &l), DT_OK); /* AUTO on the CPU: the host */
    assert_int_equal(dt_loader_on_device(l), 0);
    dt_loader_free(l);
    assert_int_equal(dt_dataset_set_synthetic_on(d, DT_SYNTHETIC_DEVICE), DT_OK);
    l = NULL;
    assert_int_equal(dt_loader_create(NULL, d, 0, 1, 8, 0, 0, 3, &l), DT_ERR_INVALID_ARG);
    assert_null(l);
    assert_non_null(strstr(dt_last_error(), "placed on the CPU"));
    assert_int_equal(dt_loader_on_device(NULL), 0);
    dt_dataset_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_is_reads),        cmocka_unit_test(test_labels_stay),
        cmocka_unit_test(test_loader_device_path),    cmocka_unit_test(test_augmentation_stays_on_host),
        cmocka_unit_test(test_device_needs_a_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
