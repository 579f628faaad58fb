/*
 * custom_loop.c - a training loop a user writes in C against include/dtrain.h alone.
 *
 * The program owns its model: a two-layer perceptron (input -> HID -> classes) whose parameters it
 * keeps in one flat buffer and whose forward and backward passes it computes itself with
 * dt_sgemm. dtrain provides placement, the synthetic data, the loss, and the gradient reducer:
 * backward tells it when each layer's gradients are final (dt_reducer_ready), so layer 2's
 * allreduce runs on the communication thread while layer 1's backward is still computing, and
 * dt_reducer_wait completes the step before the optimizer. Gradient clipping and the check that
 * every rank holds the same weights come with it.
 *
 * At the end the parameters and a few bytes of the loop's own state go into a checkpoint of named
 * sections (dt_ckpt_begin, dt_ckpt_add, dt_ckpt_commit), which is read back by name and compared.
 *
 * The loop runs twice from the same start: with the reducer, and with one blocking dt_allreduce of
 * the whole gradient after backward. The reducer adds every element in rank order whatever the
 * buckets, and dt_allreduce's MPI_Allreduce does so too where Open MPI adds in rank order (up to 3
 * ranks on one node, docs/library.md), so there the two end with the same parameters bit for bit;
 * elsewhere MPI may add in another order, and the last bits differ. The program exits 0 when the
 * loss fell by at least a quarter, the named sections read back intact and the two runs agree:
 * bit for bit with --bitwise (what the tests ask at 2 and 3 ranks), else within 1e-5 of the
 * largest parameter.
 *
 *   mpirun -np 2 ./example_custom_loop [--bitwise]
 */
#include <dtrain.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { IN = 64, HID = 256, CLASSES = 10, BATCH = 32, STEPS = 300 };
#define LR 0.05f
#define MAX_NORM 1.0 /* under the gradients' norm in many steps: the clipping scales them then */

/* Flat parameters: W1 (HID, IN), b1 (HID), W2 (CLASSES, HID), b2 (CLASSES); gradients alike. */
enum { N_W1 = HID * IN, N_B1 = HID, N_W2 = CLASSES * HID, N_B2 = CLASSES, NP = N_W1 + N_B1 + N_W2 + N_B2 };
/* Each layer's slice of the buffers: layer 1 = W1, b1; layer 2 = W2, b2. */
static const dt_range layer1 = {0, N_W1 + N_B1}, layer2 = {N_W1 + N_B1, N_W2 + N_B2};

static void die(dt_ctx *ctx, const char *what)
{
    fprintf(stderr, "custom_loop: %s: %s\n", what, dt_last_error());
    dt_abort_job(ctx, 1);
    exit(1);
}

/* Trains from params p (NP floats, the same on every rank) for STEPS steps, with the reducer
 * (use_reducer 1) or one blocking allreduce after backward (0). Returns the mean loss of the first
 * and last 20 steps. */
static void train(dt_ctx *ctx, dt_dataset *data, int use_reducer, float *p, double *first, double *last)
{
    const int rank = dt_rank(ctx), world = dt_world_size(ctx);
    float *g = calloc(NP, sizeof *g), *vel = calloc(NP, sizeof *vel);
    float *x = malloc(BATCH * IN * sizeof *x), *h = malloc(BATCH * HID * sizeof *h);
    float *logits = malloc(BATCH * CLASSES * sizeof *logits), *dlogits = malloc(BATCH * CLASSES * sizeof *dlogits);
    float *dh = malloc(BATCH * HID * sizeof *dh);
    int32_t labels[BATCH];
    if (!g || !vel || !x || !h || !logits || !dlogits || !dh) {
        fprintf(stderr, "custom_loop: out of memory\n");
        dt_abort_job(ctx, 1);
        exit(1);
    }
    float *W1 = p, *b1 = p + N_W1, *W2 = b1 + N_B1, *b2 = W2 + N_W2;
    float *gW1 = g, *gb1 = g + N_W1, *gW2 = gb1 + N_B1, *gb2 = gW2 + N_W2;

    /* The reducer over g: the layers in the order backward finishes them (layer 2 first), and caps
     * small enough that each layer is its own bucket, so layer 2's allreduce starts at once. */
    dt_reducer *red = NULL;
    if (use_reducer) {
        const dt_range ranges[2] = {layer2, layer1};
        dt_reducer_config rc;
        dt_reducer_defaults(&rc); /* host memory, fp32, the mean over ranks */
        rc.first_bucket_mb = rc.bucket_mb = 0.001;
        if (dt_reducer_create(ctx, g, NP, ranges, 2, &rc, &red)) die(ctx, "dt_reducer_create");
    }

    *first = *last = 0;
    for (int step = 0; step < STEPS; step++) {
        if (dt_dataset_batch(data, step, rank, world, BATCH, x, labels)) die(ctx, "dt_dataset_batch");
        /* h = relu(x W1^T + b1) */
        for (int i = 0; i < BATCH; i++) memcpy(h + i * HID, b1, HID * sizeof *h);
        dt_sgemm(0, 1, BATCH, HID, IN, 1.0f, x, IN, W1, IN, 1.0f, h, HID);
        for (int i = 0; i < BATCH * HID; i++) h[i] = h[i] > 0 ? h[i] : 0;
        /* logits = h W2^T + b2 */
        for (int i = 0; i < BATCH; i++) memcpy(logits + i * CLASSES, b2, CLASSES * sizeof *logits);
        dt_sgemm(0, 1, BATCH, CLASSES, HID, 1.0f, h, HID, W2, HID, 1.0f, logits, CLASSES);
        int correct;
        /* NaN: a label outside 0..CLASSES-1 (dt_last_error() says which) or logits that diverged. */
        double loss = dt_softmax_xent(logits, labels, dlogits, BATCH, CLASSES, 1.0f / BATCH, &correct) / BATCH;
        if (isnan(loss)) die(ctx, "dt_softmax_xent");

        /* Backward of layer 2: gW2 = dlogits^T h, gb2 = sum dlogits. Then its gradients are final. */
        dt_sgemm(1, 0, CLASSES, HID, BATCH, 1.0f, dlogits, CLASSES, h, HID, 0.0f, gW2, HID);
        memset(gb2, 0, N_B2 * sizeof *gb2);
        for (int i = 0; i < BATCH; i++)
            for (int c = 0; c < CLASSES; c++) gb2[c] += dlogits[i * CLASSES + c];
        if (red && dt_reducer_ready(red, layer2.offset, layer2.count)) die(ctx, "dt_reducer_ready(layer 2)");
        /* Backward of layer 1 (while layer 2's allreduce runs): dh = dlogits W2 (masked), gW1 = dh^T x. */
        dt_sgemm(0, 0, BATCH, HID, CLASSES, 1.0f, dlogits, CLASSES, W2, HID, 0.0f, dh, HID);
        for (int i = 0; i < BATCH * HID; i++) dh[i] = h[i] > 0 ? dh[i] : 0;
        memset(gb1, 0, N_B1 * sizeof *gb1);
        for (int i = 0; i < BATCH; i++)
            for (int j = 0; j < HID; j++) gb1[j] += dh[i * HID + j];
        dt_sgemm(1, 0, HID, IN, BATCH, 1.0f, dh, HID, x, IN, 0.0f, gW1, IN);

        /* The gradients averaged over the ranks, then clipped to a global norm of MAX_NORM. */
        if (red) {
            if (dt_reducer_ready(red, layer1.offset, layer1.count)) die(ctx, "dt_reducer_ready(layer 1)");
            if (dt_reducer_wait(red)) die(ctx, "dt_reducer_wait");
            if (dt_reducer_clip_grad_norm(red, MAX_NORM, NULL)) die(ctx, "dt_reducer_clip_grad_norm");
        } else {
            double norm;
            if (dt_allreduce(ctx, g, NP, DT_F32, DT_AVG)) die(ctx, "dt_allreduce");
            if (dt_buffer_norm(ctx, g, NP, DT_F32, DT_MEMORY_HOST, 0, &norm)) die(ctx, "dt_buffer_norm");
            const float coef = (float)(MAX_NORM / (norm + 1e-6));
            if (isfinite(norm) && coef < 1.0f && dt_buffer_scale(g, NP, DT_F32, DT_MEMORY_HOST, coef))
                die(ctx, "dt_buffer_scale");
        }
        for (size_t i = 0; i < NP; i++) {
            vel[i] = 0.9f * vel[i] + g[i];
            p[i] -= LR * vel[i];
        }
        float l = (float)loss;
        if (dt_allreduce(ctx, &l, 1, DT_F32, DT_AVG)) die(ctx, "dt_allreduce(loss)");
        if (step < 20) *first += l / 20;
        if (step >= STEPS - 20) *last += l / 20;
        if (rank == 0 && (step + 1) % 100 == 0)
            printf("%s step %d loss %.4f acc %.2f\n", red ? "reducer " : "blocking", step + 1, l,
                   (double)correct / BATCH);
    }
    if (red && rank == 0) {
        dt_reducer_stats st;
        dt_reducer_get_stats(red, &st);
        printf("reducer: %d buckets, %ld allreduces, %ld started during backward, %.3f s waiting\n",
               dt_reducer_num_buckets(red), st.starts, st.overlapped, st.wait_s);
    }
    dt_reducer_free(red);
    free(g), free(vel), free(x), free(h), free(logits), free(dlogits), free(dh);
}

/* The loop's state as named sections: the parameters, the step it reached, and each rank's own
 * seed (a per-rank section). Saved atomically, then opened as the newest sound checkpoint of the
 * directory and read back by name; returns 1 when every byte came back. */
static int checkpoint_round_trip(dt_ctx *ctx, const float *p)
{
    /* One directory name for every rank: rank 0's process id, broadcast as bytes (DT_U8). */
    long id = dt_rank(ctx) == 0 ? (long)getpid() : 0;
    if (dt_broadcast(ctx, &id, sizeof id, DT_U8, 0)) die(ctx, "dt_broadcast");
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/dtrain-custom-loop-%ld", id);
    const long step = STEPS;
    const uint64_t seed = 1000u + (uint64_t)dt_rank(ctx);
    uint64_t seed_back = 0;
    dt_ckpt_writer *w = NULL;
    if (dt_ckpt_begin(ctx, dir, step, &w) || dt_ckpt_add(w, "params", p, NP * sizeof *p) ||
        dt_ckpt_add(w, "step", &step, sizeof step) || dt_ckpt_add_per_rank(w, "seed", &seed, sizeof seed))
        die(ctx, "dt_ckpt_add");
    if (dt_ckpt_commit(w)) die(ctx, "dt_ckpt_commit");
    dt_ckpt_reader *r = NULL;
    long at = -1, step_back = -1;
    float *p_back = malloc(NP * sizeof *p_back);
    if (!p_back) die(ctx, "out of memory");
    if (dt_ckpt_open_latest(ctx, dir, &r, &at) || !r) die(ctx, "dt_ckpt_open_latest");
    if (dt_ckpt_read(r, "params", p_back, NP * sizeof *p_back) ||
        dt_ckpt_read(r, "step", &step_back, sizeof step_back) ||
        dt_ckpt_read_rank(r, "seed", &seed_back, sizeof seed_back))
        die(ctx, "dt_ckpt_read");
    const int ok = at == step && step_back == step && seed_back == seed && !memcmp(p, p_back, NP * sizeof *p);
    if (dt_rank(ctx) == 0) { /* only rank 0 touches the directory */
        char path[128];
        snprintf(path, sizeof path, "%s", dt_ckpt_path(r));
        unlink(path);
        rmdir(dir);
    }
    dt_ckpt_close(r);
    free(p_back);
    return ok;
}

/* The largest difference between a and b over the largest magnitude in a (0 when equal). */
static double max_rel_diff(const float *a, const float *b, size_t n)
{
    double diff = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - (double)b[i]), m = fabs((double)a[i]);
        diff = d > diff || d != d ? d : diff; /* a NaN difference stays */
        scale = m > scale ? m : scale;
    }
    return scale > 0 ? diff / scale : diff;
}

int main(int argc, char **argv)
{
    const int bitwise = argc == 2 && !strcmp(argv[1], "--bitwise");
    if (argc > 2 || (argc == 2 && !bitwise)) {
        fprintf(stderr, "usage: %s [--bitwise]\n", argv[0]);
        return 2;
    }
    dt_config cfg;
    dt_config_defaults(&cfg);
    if (dt_config_from_env(&cfg) != DT_OK) die(NULL, "dt_config_from_env"); /* DTRAIN_TIMEOUT, ... */
    cfg.device = DT_DEVICE_CPU;                                             /* the buffers here are host memory */
    dt_ctx *ctx = NULL;
    if (dt_init(&cfg, &ctx) != DT_OK) die(NULL, "dt_init");
    const int rank = dt_rank(ctx), world = dt_world_size(ctx);

    /* Rank 0 initializes; everyone starts from its parameters. */
    float *init = calloc(NP, sizeof *init), *p_red = malloc(NP * sizeof *p_red), *p_blk = malloc(NP * sizeof *p_blk);
    if (!init || !p_red || !p_blk) die(ctx, "out of memory");
    if (rank == 0) {
        srand(42);
        for (size_t i = 0; i < N_W1; i++) init[i] = ((float)rand() / RAND_MAX * 2 - 1) / sqrtf(IN);
        for (size_t i = 0; i < N_W2; i++) init[layer2.offset + i] = ((float)rand() / RAND_MAX * 2 - 1) / sqrtf(HID);
    }
    dt_dataset *data = NULL;
    if (dt_broadcast(ctx, init, NP, DT_F32, 0)) die(ctx, "dt_broadcast");
    if (dt_synthetic_create(IN, 1, 1, CLASSES, 100000, 3, &data)) die(ctx, "dt_synthetic_create");

    double first, last, first_b, last_b;
    memcpy(p_red, init, NP * sizeof *init);
    memcpy(p_blk, init, NP * sizeof *init);
    train(ctx, data, 1, p_red, &first, &last);
    train(ctx, data, 0, p_blk, &first_b, &last_b);

    /* Every rank applied the same averaged gradients, so every rank must hold the same parameters:
     * the check names any rank that drifted (it would, had the reduction been left out). */
    if (dt_check_replicas(ctx, p_red, NP * sizeof *p_red, NULL, NULL)) die(ctx, "dt_check_replicas");
    uint64_t sum_red, sum_blk;
    if (dt_buffer_checksum(p_red, NP * sizeof *p_red, DT_MEMORY_HOST, &sum_red) ||
        dt_buffer_checksum(p_blk, NP * sizeof *p_blk, DT_MEMORY_HOST, &sum_blk))
        die(ctx, "dt_buffer_checksum");
    const int same = memcmp(p_red, p_blk, NP * sizeof *p_red) == 0, learned = last < 0.75 * first;
    const double rel = max_rel_diff(p_red, p_blk, NP);
    const int agree = same || (!bitwise && rel <= 1e-5);
    const int restored = checkpoint_round_trip(ctx, p_red);
    if (rank == 0) {
        printf("custom_loop: %d ranks, loss %.4f -> %.4f: %s\n", world, first, last,
               learned ? "learned" : "DID NOT LEARN");
        if (same)
            printf("custom_loop: reducer vs blocking allreduce: parameters equal bit for bit (checksum %016llx)\n",
                   (unsigned long long)sum_red);
        else
            printf("custom_loop: reducer vs blocking allreduce: parameters %s: largest difference %.3g of the largest "
                   "parameter (checksums %016llx, %016llx; MPI_Allreduce added in another order than the reducer)\n",
                   agree ? "agree" : "DIFFER", rel, (unsigned long long)sum_red, (unsigned long long)sum_blk);
        printf("custom_loop: checkpoint of named sections: %s\n", restored ? "read back intact" : "DIFFERS");
    }
    dt_dataset_free(data);
    free(init), free(p_red), free(p_blk);
    dt_finalize(ctx);
    return agree && learned && restored ? 0 : 1;
}
