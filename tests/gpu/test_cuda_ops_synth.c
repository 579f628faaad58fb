/*
 * test_cuda_ops_synth.c - the CUDA table's synth_batch against the CPU's (the synthetic reader's
 * own generator, which unit.test_synth_batch checks): flat inputs with and without leftover
 * dot-product terms, images of odd shapes, 2 to 1000 classes, with and without a normalization,
 * batches of 1 to 300 with repeated and out-of-order indices; and six batches queued back to back
 * into buffers of their own before one wait, so the staging ring's reuse (four entries) cannot
 * hand a kernel the next batch's indices.
 *
 * Tolerance: none. Every value and label bit for bit: the kernel rounds each product and sum
 * as the CPU does (no contraction into FMAs), and a label is the argmax of those sums.
 */
#include "cuda_ops_fixture.h"
#include "kernels/synth.h"
#include "runtime/data/synthetic.h"

/* The spec with its teacher and normalization in device memory (freed by spec_free). */
static synth_spec spec_to_device(const synth_spec *h)
{
    synth_spec d = *h;
    const size_t in = synth_input_size(h);
    d.w1 = dcopy(h->w1, SYNTH_TEACHER_HIDDEN * in);
    d.w2 = dcopy(h->w2, (size_t)h->classes * SYNTH_TEACHER_HIDDEN);
    d.mul = h->mul ? dcopy(h->mul, (size_t)h->c) : NULL;
    d.add = h->add ? dcopy(h->add, (size_t)h->c) : NULL;
    return d;
}

static void spec_free(synth_spec *d)
{
    cudaFree((void *)d->w1), cudaFree((void *)d->w2), cudaFree((void *)d->mul), cudaFree((void *)d->add);
}

static void check_synth(void)
{
    const struct {
        int c, h, w, classes;
    } shapes[] = {{784, 1, 1, 10}, {37, 1, 1, 1000}, {3, 32, 32, 10}, {1, 28, 28, 2},
                  {3, 7, 5, 100},  {2, 1, 9, 513},   {3, 64, 48, 10}};
    const int batches[] = {1, 6, 300};
    for (size_t z = 0; z < sizeof shapes / sizeof *shapes; z++)
        for (int norm = 0; norm <= 1; norm++) {
            ds_split *s;
            st_ok("synthetic_open",
                  synthetic_open(shapes[z].c, shapes[z].h, shapes[z].w, shapes[z].classes, 60000, 7, &s));
            synth_spec hs;
            synthetic_spec(s, &hs);
            float *mul = fmalloc((size_t)hs.c), *add = fmalloc((size_t)hs.c);
            fill(mul, (size_t)hs.c, 2.0f), fill(add, (size_t)hs.c, 1.0f);
            if (norm) hs.mul = mul, hs.add = add;
            synth_spec ds = spec_to_device(&hs);
            const size_t in = synth_input_size(&hs);
            for (size_t b = 0; b < sizeof batches / sizeof *batches; b++) {
                const int n = batches[b];
                uint32_t *idx = xmalloc((size_t)n * sizeof *idx);
                for (int j = 0; j < n; j++) idx[j] = (uint32_t)(rng_next() % 60000);
                if (n > 2) idx[n - 1] = idx[0], idx[1] = 59999;
                float *cx = fmalloc((size_t)n * in), *gx = fmalloc((size_t)n * in), *d_x = dfloats((size_t)n * in);
                int32_t *cl = xmalloc((size_t)n * 4), *gl = xmalloc((size_t)n * 4), *d_l = dmalloc((size_t)n * 4);
                st_ok("cpu synth_batch", cpu_be->ops->synth_batch(cpu_be, &hs, idx, n, cx, cl));
                st_ok("cuda synth_batch", gpu_be->ops->synth_batch(gpu_be, &ds, idx, n, d_x, d_l));
                st_ok("sync", gpu_be->ops->sync(gpu_be));
                down(gx, d_x, (size_t)n * in * sizeof *gx);
                down(gl, d_l, (size_t)n * sizeof *gl);
                char what[96];
                snprintf(what, sizeof what, "synth %dx%dx%d/%d%s batch %d values", hs.c, hs.h, hs.w, hs.classes,
                         norm ? " norm" : "", n);
                cmp_bits(what, gx, cx, (size_t)n * in, 4);
                snprintf(what, sizeof what, "synth %dx%dx%d/%d%s batch %d labels", hs.c, hs.h, hs.w, hs.classes,
                         norm ? " norm" : "", n);
                cmp_bits(what, gl, cl, (size_t)n, 4);
                cudaFree(d_x), cudaFree(d_l);
                free(idx), free(cx), free(gx), free(cl), free(gl);
            }
            spec_free(&ds);
            free(mul), free(add);
            ds_close(s);
        }
}

/* Six batches queued before any wait: each with its own indices and buffers. */
static void check_ring(void)
{
    enum { CALLS = 6, N = 64 };
    ds_split *s;
    st_ok("synthetic_open", synthetic_open(1, 28, 28, 10, 60000, 3, &s));
    synth_spec hs;
    synthetic_spec(s, &hs);
    synth_spec ds = spec_to_device(&hs);
    const size_t in = synth_input_size(&hs);
    uint32_t idx[CALLS][N];
    float *d_x[CALLS];
    int32_t *d_l[CALLS];
    for (int k = 0; k < CALLS; k++) {
        for (int j = 0; j < N; j++) idx[k][j] = (uint32_t)(k * 1000 + j * 7);
        d_x[k] = dfloats(N * in);
        d_l[k] = dmalloc(N * sizeof(int32_t));
        st_ok("cuda synth_batch", gpu_be->ops->synth_batch(gpu_be, &ds, idx[k], N, d_x[k], d_l[k]));
        memset(idx[k], 0xff, sizeof idx[k]); /* the call must have taken its copy */
    }
    st_ok("sync", gpu_be->ops->sync(gpu_be));
    float *cx = fmalloc(N * in), *gx = fmalloc(N * in);
    int32_t cl[N], gl[N];
    for (int k = 0; k < CALLS; k++) {
        uint32_t want[N];
        for (int j = 0; j < N; j++) want[j] = (uint32_t)(k * 1000 + j * 7);
        st_ok("cpu synth_batch", cpu_be->ops->synth_batch(cpu_be, &hs, want, N, cx, cl));
        down(gx, d_x[k], N * in * sizeof *gx);
        down(gl, d_l[k], sizeof gl);
        char what[64];
        snprintf(what, sizeof what, "synth queued batch %d of %d", k + 1, CALLS);
        cmp_bits(what, gx, cx, N * in, 4);
        cmp_bits(what, gl, cl, N, 4);
        cudaFree(d_x[k]), cudaFree(d_l[k]);
    }
    free(cx), free(gx);
    spec_free(&ds);
    ds_close(s);
}

int main(void)
{
    const cuda_check_fn checks[] = {check_synth, check_ring};
    return cuda_ops_main(NULL, checks, sizeof checks / sizeof *checks);
}
