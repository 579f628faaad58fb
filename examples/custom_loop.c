/*
 * custom_loop.c - a training loop a user writes in C against include/dtrain.h alone.
 *
 * The program owns its model: a two-layer perceptron (input -> 64 -> classes) whose parameters it
 * keeps in one flat buffer and whose forward and backward passes it computes itself with
 * dt_sgemm. dtrain provides placement, the synthetic data, the loss, the gradient averaging
 * across ranks and the check that the ranks' parameters stayed identical. Exits 0 when the loss
 * fell by at least a quarter.
 *
 *   mpirun -np 2 ./example_custom_loop
 */
#include <dtrain.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { IN = 64, HID = 64, CLASSES = 10, BATCH = 32, STEPS = 300 };

int main(void)
{
    dt_config cfg;
    dt_config_defaults(&cfg);
    cfg.device = DT_DEVICE_CPU; /* the buffers below are host memory */
    dt_ctx *ctx = NULL;
    dt_status s = dt_init(&cfg, &ctx);
    if (s != DT_OK) {
        fprintf(stderr, "custom_loop: %s\n", dt_last_error());
        dt_abort_job(NULL, 1);
        return 1;
    }
    const int rank = dt_rank(ctx), world = dt_world_size(ctx);

    /* Flat parameters: W1 (HID, IN), b1 (HID), W2 (CLASSES, HID), b2 (CLASSES); grads alike. */
    const size_t n_w1 = HID * IN, n_b1 = HID, n_w2 = CLASSES * HID, n_b2 = CLASSES;
    const size_t np = n_w1 + n_b1 + n_w2 + n_b2;
    float *p = calloc(np, sizeof *p), *g = calloc(np, sizeof *g), *vel = calloc(np, sizeof *vel);
    float *x = malloc(BATCH * IN * sizeof *x), *h = malloc(BATCH * HID * sizeof *h);
    float *logits = malloc(BATCH * CLASSES * sizeof *logits), *dlogits = malloc(BATCH * CLASSES * sizeof *dlogits);
    float *dh = malloc(BATCH * HID * sizeof *dh);
    int32_t labels[BATCH];
    if (!p || !g || !vel || !x || !h || !logits || !dlogits || !dh) {
        fprintf(stderr, "custom_loop: out of memory\n");
        dt_abort_job(ctx, 1);
        return 1;
    }
    float *W1 = p, *b1 = p + n_w1, *W2 = b1 + n_b1, *b2 = W2 + n_w2;
    float *gW1 = g, *gb1 = g + n_w1, *gW2 = gb1 + n_b1, *gb2 = gW2 + n_w2;

    /* Rank 0 initializes; everyone starts from its parameters. */
    if (rank == 0) {
        srand(42);
        for (size_t i = 0; i < n_w1; i++) W1[i] = ((float)rand() / RAND_MAX * 2 - 1) / sqrtf(IN);
        for (size_t i = 0; i < n_w2; i++) W2[i] = ((float)rand() / RAND_MAX * 2 - 1) / sqrtf(HID);
    }
    dt_dataset *data = NULL;
    if ((s = dt_broadcast(ctx, p, np, DT_F32, 0)) || (s = dt_synthetic_create(IN, 1, 1, CLASSES, 100000, 3, &data))) {
        fprintf(stderr, "custom_loop: %s\n", dt_last_error());
        dt_abort_job(ctx, 1);
        return 1;
    }

    double first = 0, last = 0;
    for (int step = 0; step < STEPS; step++) {
        dt_dataset_batch(data, step, rank, world, BATCH, x, labels);
        /* h = relu(x W1^T + b1) */
        for (int i = 0; i < BATCH; i++) memcpy(h + i * HID, b1, HID * sizeof *h);
        dt_sgemm(0, 1, BATCH, HID, IN, 1.0f, x, IN, W1, IN, 1.0f, h, HID);
        for (int i = 0; i < BATCH * HID; i++) h[i] = h[i] > 0 ? h[i] : 0;
        /* logits = h W2^T + b2 */
        for (int i = 0; i < BATCH; i++) memcpy(logits + i * CLASSES, b2, CLASSES * sizeof *logits);
        dt_sgemm(0, 1, BATCH, CLASSES, HID, 1.0f, h, HID, W2, HID, 1.0f, logits, CLASSES);
        int correct;
        double loss = dt_softmax_xent(logits, labels, dlogits, BATCH, CLASSES, 1.0f / BATCH, &correct) / BATCH;
        /* Backward: gW2 = dlogits^T h, gb2 = sum dlogits, dh = dlogits W2 (masked), gW1 = dh^T x. */
        dt_sgemm(1, 0, CLASSES, HID, BATCH, 1.0f, dlogits, CLASSES, h, HID, 0.0f, gW2, HID);
        memset(gb2, 0, n_b2 * sizeof *gb2);
        memset(gb1, 0, n_b1 * sizeof *gb1);
        for (int i = 0; i < BATCH; i++)
            for (int c = 0; c < CLASSES; c++) gb2[c] += dlogits[i * CLASSES + c];
        dt_sgemm(0, 0, BATCH, HID, CLASSES, 1.0f, dlogits, CLASSES, W2, HID, 0.0f, dh, HID);
        for (int i = 0; i < BATCH * HID; i++) dh[i] = h[i] > 0 ? dh[i] : 0;
        for (int i = 0; i < BATCH; i++)
            for (int j = 0; j < HID; j++) gb1[j] += dh[i * HID + j];
        dt_sgemm(1, 0, HID, IN, BATCH, 1.0f, dh, HID, x, IN, 0.0f, gW1, IN);

        /* The one call that makes it data-parallel: average the flat gradient over the ranks. */
        if ((s = dt_allreduce(ctx, g, np, DT_F32, DT_AVG))) {
            fprintf(stderr, "custom_loop: %s\n", dt_last_error());
            dt_abort_job(ctx, 1);
            return 1;
        }
        for (size_t i = 0; i < np; i++) {
            vel[i] = 0.9f * vel[i] + g[i];
            p[i] -= 0.05f * vel[i];
        }
        float l = (float)loss;
        dt_allreduce(ctx, &l, 1, DT_F32, DT_AVG);
        if (step < 20) first += l / 20;
        if (step >= STEPS - 20) last += l / 20;
        if (rank == 0 && (step + 1) % 50 == 0) printf("step %d loss %.4f acc %.2f\n", step + 1, l, (double)correct / BATCH);
    }
    /* Every rank applied the same averaged gradients, so every rank must hold the same parameters:
     * the check names any rank that drifted (it would, had the allreduce above been left out). */
    if ((s = dt_check_replicas(ctx, p, np * sizeof *p, NULL, NULL))) {
        fprintf(stderr, "custom_loop: %s\n", dt_last_error());
        dt_abort_job(ctx, 1);
        return 1;
    }
    int ok = last < 0.75 * first;
    if (rank == 0)
        printf("custom_loop: %d ranks, loss %.4f -> %.4f: %s\n", world, first, last, ok ? "learned" : "DID NOT LEARN");
    dt_dataset_free(data);
    free(p), free(g), free(vel), free(x), free(h), free(logits), free(dlogits), free(dh);
    dt_finalize(ctx);
    return ok ? 0 : 1;
}
