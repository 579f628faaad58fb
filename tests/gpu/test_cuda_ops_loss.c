/*
 * test_cuda_ops_loss.c - the CUDA table's softmax cross-entropy against the CPU table: one
 * class, tied and all-equal rows, batches of 1 to 1000, without dlogits, rerun, and queued into
 * pinned memory behind more work until loss_wait; and the 16-bit layer entry, fused, against the
 * unfused ops (bit for bit) and the CPU.
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

/* The host values of one queued loss, as the model keeps them: the count right after the sum,
 * which the CUDA backend copies back in one copy (xent above passes separate variables). */
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

/* The 16-bit layer entry (layer_loss of a bf16/fp16 pass) reads the 16-bit logits and writes the
 * 16-bit gradient in one kernel: the bits of the same GPU widening the logits (cast_to32), taking
 * softmax_xent in fp32 and rounding the gradient (cast_to16), as the CPU's layer_loss is made; and
 * within a rounding of the CPU's (expf differs by up to 2 ulp). */
static void check_layer_loss16(void)
{
    const struct {
        int batch, classes;
    } cfg[] = {{256, 10}, {3, 37}, {64, 1000}, {5, 1}};
    for (int bf = 0; bf <= 1; bf++) {
        const dt_dtype t = bf ? DT_BF16 : DT_F16;
        for (size_t z = 0; z < sizeof cfg / sizeof *cfg; z++) {
            const int B = cfg[z].batch, C = cfg[z].classes;
            const size_t n = (size_t)B * C;
            const float gs = 1024.0f / (float)B; /* a loss scale's multiple, as fp16 passes take */
            float *x = fmalloc(n), *cd = fmalloc(n), *w = fmalloc(n), *gw = fmalloc(n);
            uint16_t *x16 = xmalloc(n * 2), *cd16 = xmalloc(n * 2), *g16 = xmalloc(n * 2), *u16 = xmalloc(n * 2);
            int32_t *lab = xmalloc((size_t)B * sizeof *lab);
            fill(x, n, 8.0f);
            cpu_cast_f32_to_16(t, x, x16, n);
            for (int i = 0; i < B; i++) lab[i] = (int32_t)(rng_next() % (uint64_t)C);
            /* CPU: its layer entry on the 16-bit logits (scratch: fp32 of the logits and gradient). */
            float *csy = fmalloc(n), *csdy = fmalloc(n);
            pass_args ca = {.prec = t, .grad_t = DT_F32, .sy = csy, .sdy = csdy};
            double cl = NAN;
            int cc = -1;
            CPU(layer_loss, &ca, x16, lab, cd16, B, C, gs, &cl, &cc);
            st_ok("loss_wait (cpu)", cpu_be->ops->loss_wait(cpu_be));
            /* GPU: the fused entry, then the unfused ops on the same values. */
            uint16_t *d_x16 = dmalloc(n * 2), *d_g16 = dmalloc(n * 2), *d_u16 = dmalloc(n * 2);
            up(d_x16, x16, n * 2);
            float *d_sy = dfloats(n), *d_sdy = dfloats(n);
            int32_t *d_lab = dmalloc((size_t)B * sizeof *d_lab);
            up(d_lab, lab, (size_t)B * sizeof *lab);
            pass_args ga = {.prec = t, .grad_t = DT_F32, .sy = d_sy, .sdy = d_sdy};
            double gl = NAN, ul = NAN;
            int gc = -1, uc = -1;
            GPU(layer_loss, &ga, d_x16, d_lab, d_g16, B, C, gs, &gl, &gc);
            st_ok("loss_wait", gpu_be->ops->loss_wait(gpu_be));
            GPU(cast_to32, t, d_x16, d_sy, n);
            GPU(softmax_xent, d_sy, d_lab, d_sdy, B, C, gs, &ul, &uc);
            GPU(cast_to16, t, d_sdy, d_u16, n);
            st_ok("loss_wait", gpu_be->ops->loss_wait(gpu_be));
            ops_ok("layer_loss16");
            down(g16, d_g16, n * 2);
            down(u16, d_u16, n * 2);
            const char *tn = bf ? "bf16" : "fp16";
            check(memcmp(&gl, &ul, sizeof gl) == 0 && gc == uc && memcmp(g16, u16, n * 2) == 0,
                  "layer_loss %s %dx%d: fused == cast + softmax_xent + cast bit for bit (loss %.17g vs %.17g, "
                  "correct %d vs %d, gradient %s)",
                  tn, B, C, gl, ul, gc, uc, memcmp(g16, u16, n * 2) ? "differs" : "equal");
            const double rel = fabs(gl - cl) / (fabs(cl) > 1e-30 ? fabs(cl) : 1.0);
            cpu_cast_16_to_f32(t, cd16, w, n);
            cpu_cast_16_to_f32(t, g16, gw, n);
            double worst = 0.0;
            for (size_t i = 0; i < n; i++) {
                const double e = fabs((double)gw[i] - (double)w[i]);
                if (!(e <= worst)) worst = e;
            }
            const double tol = (bf ? 8e-3 : 1e-3) * gs;
            check(rel <= 1e-5 && gc == cc && worst <= tol,
                  "layer_loss %s %dx%d against the CPU: loss rel err %.3g (tol 1e-05), correct %d vs %d, gradient "
                  "max abs err %.3g (tol %.3g)",
                  tn, B, C, rel, gc, cc, worst, tol);
            cudaFree(d_x16), cudaFree(d_g16), cudaFree(d_u16), cudaFree(d_sy), cudaFree(d_sdy), cudaFree(d_lab);
            free(x), free(cd), free(w), free(gw), free(x16), free(cd16), free(g16), free(u16), free(lab), free(csy),
                free(csdy);
        }
    }
}

int main(void)
{
    const cuda_check_fn checks[] = {check_xent, check_layer_loss16};
    return cuda_ops_main(NULL, checks, sizeof checks / sizeof *checks);
}
