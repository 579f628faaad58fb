/*
 * test_cuda_ops_loss.c - the CUDA table's softmax cross-entropy against the CPU table: one
 * class, tied and all-equal rows, batches of 1 to 1000, without dlogits, rerun, and queued into
 * pinned memory behind more work until loss_wait.
 *
 * Tolerances: loss within 1e-5 relative, correct count exact, dlogits within 2e-6 * grad_scale
 * absolute (every entry lies in [-grad_scale, grad_scale]; CUDA's expf may differ from glibc's by
 * 2 ulp); a rerun gives the same loss and count.
 */
#include "cuda_ops_fixture.h"

/* The table's softmax cross-entropy as a value, as the checks compare it. */
static double xent(backend *be, const float *logits, const int32_t *labels, float *dlogits, int batch, int classes,
                   float grad_scale, int *correct)
{
    double loss = NAN;
    st_ok("softmax_xent",
          be->ops->softmax_xent(be, logits, labels, dlogits, batch, classes, grad_scale, &loss, correct));
    st_ok("loss_wait", be->ops->loss_wait(be));
    return loss;
}

/* The host values of one queued loss. */
typedef struct loss_slot {
    double loss;
    int correct;
} loss_slot;

/* ---------------------------------------------------------------- softmax cross-entropy */

static void check_xent(void)
{
    const struct {
        int batch, classes;
    } cfg[] = {{1, 10}, {3, 37}, {128, 10}, {64, 1000}, {5, 1}, {1000, 33}};
    for (size_t z = 0; z < sizeof cfg / sizeof *cfg; z++) {
        const int B = cfg[z].batch, C = cfg[z].classes;
        const size_t n = (size_t)B * C;
        const float gs = 1.0f / (float)B;
        float *x = fmalloc(n), *d = fmalloc(n), *gd = fmalloc(n);
        int32_t *lab = xmalloc((size_t)B * sizeof *lab);
        fill(x, n, 8.0f);
        for (int i = 0; i < B; i++) lab[i] = (int32_t)(rng_next() % (uint64_t)C);
        /* row 0: all equal (argmax 0); row 1: the maximum twice (argmax the first); a third of
         * the labels on the argmax so that the count is not trivially 0 */
        for (int j = 0; j < C; j++) x[j] = 0.25f;
        if (B > 1 && C > 3) x[C + 1] = x[C + 3] = 20.0f, lab[1] = 1;
        for (int i = 2; i < B; i += 3) {
            int am = 0;
            for (int j = 1; j < C; j++)
                if (x[(size_t)i * C + j] > x[(size_t)i * C + am]) am = j;
            lab[i] = am;
        }
        float *d_x = dcopy(x, n), *d_d = dfloats(n);
        int32_t *d_lab = dmalloc((size_t)B * sizeof *d_lab);
        up(d_lab, lab, (size_t)B * sizeof *lab);
        int cc = -1, gc = -1, gc2 = -1, gc3 = -1;
        const double cl = xent(cpu_be, x, lab, d, B, C, gs, &cc);
        const double gl = xent(gpu_be, d_x, d_lab, d_d, B, C, gs, &gc);
        ops_ok("softmax_xent");
        down(gd, d_d, n * sizeof *gd);
        const double gl2 = xent(gpu_be, d_x, d_lab, NULL, B, C, gs, &gc2); /* no dlogits */
        const double gl3 = xent(gpu_be, d_x, d_lab, d_d, B, C, gs, &gc3);  /* again */
        ops_ok("softmax_xent again");
        const double rel = fabs(gl - cl) / (fabs(cl) > 1e-30 ? fabs(cl) : 1.0);
        check(rel <= 1e-5 && gc == cc,
              "softmax_xent %dx%d: loss gpu %.10g cpu %.10g (rel err %.3g, tol 1e-05), "
              "correct gpu %d cpu %d",
              B, C, gl, cl, rel, gc, cc);
        check(memcmp(&gl, &gl2, sizeof gl) == 0 && memcmp(&gl, &gl3, sizeof gl) == 0 && gc2 == gc && gc3 == gc,
              "softmax_xent %dx%d: the same loss and count without dlogits and when rerun", B, C);
        /* As a training pass queues it: into pinned memory, the copy behind the kernels, work
         * queued after it (another loss, on other labels, into a second slot, overwriting the
         * device scratch), then one loss_wait for both. */
        loss_slot *slots = NULL;
        st_ok("host_alloc", gpu_be->ops->host_alloc(gpu_be, 2 * sizeof *slots, "loss slots", (void **)&slots));
        slots[0] = slots[1] = (loss_slot){NAN, -1};
        int32_t *lab2 = xmalloc((size_t)B * sizeof *lab2);
        for (int i = 0; i < B; i++) lab2[i] = (lab[i] + 1) % C;
        int cc2 = -1;
        const double cl2 = xent(cpu_be, x, lab2, NULL, B, C, gs, &cc2);
        int32_t *d_lab2 = dmalloc((size_t)B * sizeof *d_lab2);
        up(d_lab2, lab2, (size_t)B * sizeof *lab2);
        st_ok("softmax_xent queued",
              gpu_be->ops->softmax_xent(gpu_be, d_x, d_lab, d_d, B, C, gs, &slots[0].loss, &slots[0].correct));
        st_ok("softmax_xent queued",
              gpu_be->ops->softmax_xent(gpu_be, d_x, d_lab2, NULL, B, C, gs, &slots[1].loss, &slots[1].correct));
        st_ok("loss_wait", gpu_be->ops->loss_wait(gpu_be));
        const double rel2 = fabs(slots[1].loss - cl2) / (fabs(cl2) > 1e-30 ? fabs(cl2) : 1.0);
        check(memcmp(&slots[0].loss, &gl, sizeof gl) == 0 && slots[0].correct == gc && rel2 <= 1e-5 &&
                  slots[1].correct == cc2,
              "softmax_xent %dx%d queued into pinned memory twice, one loss_wait: %.10g (%d) and %.10g (%d), "
              "want %.10g (%d) and cpu %.10g (%d)",
              B, C, slots[0].loss, slots[0].correct, slots[1].loss, slots[1].correct, gl, gc, cl2, cc2);
        gpu_be->ops->host_free(gpu_be, slots);
        cudaFree(d_lab2);
        free(lab2);
        /* dlogits in [-gs, gs]: absolute error against gs */
        double worst = 0.0;
        size_t wi = 0;
        for (size_t i = 0; i < n; i++) {
            const double e = fabs((double)gd[i] - (double)d[i]);
            if (!(e <= worst)) worst = e, wi = i;
        }
        check(worst <= 2e-6 * gs,
              "softmax_xent %dx%d dlogits: max abs err %.3g = %.3g x grad_scale (tol 2e-06) at "
              "%zu: gpu %.9g cpu %.9g",
              B, C, worst, worst / gs, wi, gd[wi], d[wi]);
        cudaFree(d_x), cudaFree(d_d), cudaFree(d_lab);
        free(x), free(d), free(gd), free(lab);
    }
}

int main(void)
{
    const cuda_check_fn checks[] = {check_xent};
    return cuda_ops_main(NULL, checks, sizeof checks / sizeof *checks);
}
