/*
 * custom_loop_cuda.cu - examples/custom_loop.c on the GPU: the same two-layer perceptron
 * (input -> HID -> classes, ReLU between), trained by a loop that owns its device memory
 * (cudaMalloc), its CUDA stream (cudaStreamCreate) and its cuBLAS handle, against include/dtrain.h
 * alone.
 *
 * Everything of a step is queued on the caller's stream: the GEMMs (cuBLAS, through a row-major
 * wrapper that reads like dt_sgemm), the bias terms as rank-1 GEMMs with a vector of ones, and
 * the ReLU, the one thing cuBLAS cannot do: two small kernels below, which is why this file is
 * .cu rather than .c. The loss is dtrain's dt_softmax_xent on the host (BATCH x CLASSES floats
 * copied back and forth; the copy back of the logits waits for the forward). The gradient reducer
 * runs over the device gradient buffer with this stream: each dt_reducer_ready() right after
 * queueing a layer's gradient kernels records an event on the stream, and that layer's NCCL
 * allreduce starts on dtrain's communication stream behind the event while layer 1's kernels still
 * run, so no allreduce waits for the whole of backward. dt_reducer_wait() returns when the
 * allreduces are done (the host waits for them under the watchdog's deadline) and makes the stream
 * wait for them; the clipping reads the global norm back (the host waits again), and the SGD step
 * (cublasSscal, cublasSaxpy) then runs on the stream.
 *
 * The loop runs twice from the same start, as custom_loop.c: with the reducer, and with one
 * blocking dt_allreduce of the whole gradient after backward. On up to 2 ranks NCCL's sum of each
 * element is the same whatever the buckets (one addition), so the two must end with the same
 * parameters bit for bit; from 3 ranks NCCL may add in another order for other sizes, and the
 * difference is printed. Exits 0 when the loss fell by a quarter, dt_check_replicas agrees, the
 * reducer started allreduces in every step wherever it communicates (more than one rank, or
 * DTRAIN_COMM_WORLD1=1: the NCCL path in a world of one) and none where it does not, and, on up
 * to 2 ranks, the two runs are equal; exits 77 ("SKIP") when there is no CUDA device, before
 * dt_init and MPI start. The clipping norm, 1.0, is below the gradients' norm in many steps, so
 * the scaling runs too.
 *
 *   mpirun -np 2 ./example_custom_loop_cuda       (one GPU per rank: NCCL refuses ranks that share one)
 */
#include <dtrain.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { IN = 64, HID = 256, CLASSES = 10, BATCH = 32, STEPS = 300 };
#define LR 0.05f
#define MAX_NORM 1.0 /* under the gradients' norm in many steps: the clipping scales them then */

/* Flat parameters: W1 (HID, IN), b1 (HID), W2 (CLASSES, HID), b2 (CLASSES); gradients alike. */
enum { N_W1 = HID * IN, N_B1 = HID, N_W2 = CLASSES * HID, N_B2 = CLASSES, NP = N_W1 + N_B1 + N_W2 + N_B2 };
static const dt_range layer1 = {0, N_W1 + N_B1}, layer2 = {N_W1 + N_B1, N_W2 + N_B2};

static dt_ctx *g_ctx; /* for die(): the job is ended on every rank */

static void die(const char *what, const char *why)
{
    fprintf(stderr, "custom_loop_cuda: %s: %s\n", what, why);
    dt_abort_job(g_ctx, 1);
    exit(1);
}
#define CUDA_CHECK(call)                                                                                               \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) die(#call, cudaGetErrorString(e_));                                                     \
    } while (0)
#define CUBLAS_CHECK(call)                                                                                             \
    do {                                                                                                               \
        cublasStatus_t s_ = (call);                                                                                    \
        if (s_ != CUBLAS_STATUS_SUCCESS) die(#call, cublasGetStatusString(s_));                                        \
    } while (0)
#define TRY(call)                                                                                                      \
    do {                                                                                                               \
        if ((call) != DT_OK) die(#call, dt_last_error());                                                              \
    } while (0)

/* h = max(h, 0) in place; n elements. */
__global__ void relu_kernel(float *h, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) h[i] = h[i] > 0.0f ? h[i] : 0.0f;
}

/* dh = 0 where the ReLU's output h is 0 (its gradient there); n elements. */
__global__ void relu_backward_kernel(float *dh, const float *h, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && !(h[i] > 0.0f)) dh[i] = 0.0f;
}

static void relu(float *h, int n, cudaStream_t s)
{
    relu_kernel<<<(n + 255) / 256, 256, 0, s>>>(h, n);
    CUDA_CHECK(cudaGetLastError());
}

static void relu_backward(float *dh, const float *h, int n, cudaStream_t s)
{
    relu_backward_kernel<<<(n + 255) / 256, 256, 0, s>>>(dh, h, n);
    CUDA_CHECK(cudaGetLastError());
}

/* C(M,N) = alpha op(A) op(B) + beta C, row-major, with dt_sgemm's arguments. cuBLAS is
 * column-major, where a row-major matrix reads as its transpose: C^T = op(B)^T op(A)^T, so the
 * operands swap places. */
static void gemm(cublasHandle_t h, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                 const float *b, int ldb, float beta, float *c, int ldc)
{
    CUBLAS_CHECK(cublasSgemm(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb,
                             a, lda, &beta, c, ldc));
}

/* The loop's device buffers and pinned host staging. */
typedef struct gpu_state {
    cudaStream_t stream;
    cublasHandle_t blas;
    float *g, *vel, *x, *h, *logits, *dlogits, *dh, *ones; /* device */
    float *hx, *hlogits, *hdlogits;                        /* pinned host: the batch, the loss's in and out */
    int32_t labels[BATCH];
} gpu_state;

/* Trains the device parameters p (NP floats, the same on every rank) for STEPS steps, with the
 * reducer (use_reducer 1) or one blocking dt_allreduce after backward (0). Returns the mean loss
 * of the first and last 20 steps, and with the reducer its bucket count and how many allreduces it
 * started (*starts; -1 without it). */
static void train(dt_ctx *ctx, dt_dataset *data, gpu_state *st, int use_reducer, float *p, double *first, double *last,
                  int *buckets, long *starts)
{
    const int rank = dt_rank(ctx), world = dt_world_size(ctx);
    cudaStream_t s = st->stream;
    cublasHandle_t bl = st->blas;
    float *W1 = p, *b1 = p + N_W1, *W2 = b1 + N_B1, *b2 = W2 + N_W2;
    float *gW1 = st->g, *gb1 = st->g + N_W1, *gW2 = gb1 + N_B1, *gb2 = gW2 + N_W2;
    CUDA_CHECK(cudaMemsetAsync(st->vel, 0, NP * sizeof(float), s));

    /* The reducer over the device gradients, on this loop's stream: the layers in the order
     * backward finishes them, each its own bucket, so layer 2's allreduce starts at once. */
    dt_reducer *red = NULL;
    if (use_reducer) {
        const dt_range ranges[2] = {layer2, layer1};
        dt_reducer_config rc;
        dt_reducer_defaults(&rc);
        rc.memory = DT_MEMORY_DEVICE;
        rc.stream = (void *)s;
        rc.first_bucket_mb = rc.bucket_mb = 0.001;
        TRY(dt_reducer_create(ctx, st->g, NP, ranges, 2, &rc, &red));
    }

    *first = *last = 0;
    for (int step = 0; step < STEPS; step++) {
        TRY(dt_dataset_batch(data, step, rank, world, BATCH, st->hx, st->labels));
        CUDA_CHECK(cudaMemcpyAsync(st->x, st->hx, BATCH * IN * sizeof(float), cudaMemcpyHostToDevice, s));
        /* h = relu(x W1^T + b1): the bias as ones (BATCH, 1) x b1 (1, HID), then the product added. */
        gemm(bl, 0, 0, BATCH, HID, 1, 1.0f, st->ones, 1, b1, HID, 0.0f, st->h, HID);
        gemm(bl, 0, 1, BATCH, HID, IN, 1.0f, st->x, IN, W1, IN, 1.0f, st->h, HID);
        relu(st->h, BATCH * HID, s);
        /* logits = h W2^T + b2 */
        gemm(bl, 0, 0, BATCH, CLASSES, 1, 1.0f, st->ones, 1, b2, CLASSES, 0.0f, st->logits, CLASSES);
        gemm(bl, 0, 1, BATCH, CLASSES, HID, 1.0f, st->h, HID, W2, HID, 1.0f, st->logits, CLASSES);
        /* The loss on the host: the step's one wait for the device. */
        CUDA_CHECK(
            cudaMemcpyAsync(st->hlogits, st->logits, BATCH * CLASSES * sizeof(float), cudaMemcpyDeviceToHost, s));
        CUDA_CHECK(cudaStreamSynchronize(s));
        int correct;
        double loss =
            dt_softmax_xent(st->hlogits, st->labels, st->hdlogits, BATCH, CLASSES, 1.0f / BATCH, &correct) / BATCH;
        if (isnan(loss)) die("dt_softmax_xent", dt_last_error()); /* a bad label, or diverged logits */
        CUDA_CHECK(
            cudaMemcpyAsync(st->dlogits, st->hdlogits, BATCH * CLASSES * sizeof(float), cudaMemcpyHostToDevice, s));

        /* Backward of layer 2: gW2 = dlogits^T h, gb2 = dlogits^T ones. Queued, then marked ready:
         * the allreduce follows these kernels on the device, the host goes straight on. */
        gemm(bl, 1, 0, CLASSES, HID, BATCH, 1.0f, st->dlogits, CLASSES, st->h, HID, 0.0f, gW2, HID);
        gemm(bl, 1, 0, CLASSES, 1, BATCH, 1.0f, st->dlogits, CLASSES, st->ones, 1, 0.0f, gb2, 1);
        if (red) TRY(dt_reducer_ready(red, layer2.offset, layer2.count));
        /* Backward of layer 1 (while layer 2's allreduce runs): dh = dlogits W2 through the ReLU,
         * gW1 = dh^T x, gb1 = dh^T ones. */
        gemm(bl, 0, 0, BATCH, HID, CLASSES, 1.0f, st->dlogits, CLASSES, W2, HID, 0.0f, st->dh, HID);
        relu_backward(st->dh, st->h, BATCH * HID, s);
        gemm(bl, 1, 0, HID, IN, BATCH, 1.0f, st->dh, HID, st->x, IN, 0.0f, gW1, IN);
        gemm(bl, 1, 0, HID, 1, BATCH, 1.0f, st->dh, HID, st->ones, 1, 0.0f, gb1, 1);

        /* The gradients averaged over the ranks, then clipped to a global norm of MAX_NORM. */
        if (red) {
            TRY(dt_reducer_ready(red, layer1.offset, layer1.count));
            TRY(dt_reducer_wait(red));
            TRY(dt_reducer_clip_grad_norm(red, MAX_NORM, NULL));
        } else {
            /* dt_allreduce runs on dtrain's own stream, which does not wait for this one: the
             * gradients must be complete before it is called. */
            CUDA_CHECK(cudaStreamSynchronize(s));
            TRY(dt_allreduce(ctx, st->g, NP, DT_F32, DT_AVG));
            double norm;
            TRY(dt_buffer_norm(ctx, st->g, NP, DT_F32, DT_MEMORY_DEVICE, 0, &norm));
            const float coef = (float)(MAX_NORM / (norm + 1e-6));
            if (isfinite(norm) && coef < 1.0f) TRY(dt_buffer_scale(st->g, NP, DT_F32, DT_MEMORY_DEVICE, coef));
        }
        /* SGD with momentum on the stream: vel = 0.9 vel + g, p -= LR vel. */
        const float mom = 0.9f, one = 1.0f, neg_lr = -LR;
        CUBLAS_CHECK(cublasSscal(bl, NP, &mom, st->vel, 1));
        CUBLAS_CHECK(cublasSaxpy(bl, NP, &one, st->g, 1, st->vel, 1));
        CUBLAS_CHECK(cublasSaxpy(bl, NP, &neg_lr, st->vel, 1, p, 1));
        float l = (float)loss;
        TRY(dt_allreduce(ctx, &l, 1, DT_F32, DT_AVG)); /* host memory: through MPI */
        if (step < 20) *first += l / 20;
        if (step >= STEPS - 20) *last += l / 20;
        if (rank == 0 && (step + 1) % 100 == 0)
            printf("%s step %d loss %.4f acc %.2f\n", red ? "reducer " : "blocking", step + 1, l,
                   (double)correct / BATCH);
    }
    CUDA_CHECK(cudaStreamSynchronize(s));
    *buckets = 0;
    *starts = -1;
    if (red) {
        dt_reducer_stats rs;
        dt_reducer_get_stats(red, &rs);
        *buckets = dt_reducer_num_buckets(red);
        *starts = rs.starts;
        if (rank == 0)
            printf("reducer: %d buckets, %ld allreduces, %ld started during backward, %.3f s waiting\n", *buckets,
                   rs.starts, rs.overlapped, rs.wait_s);
    }
    dt_reducer_free(red);
}

int main(void)
{
    /* Line by line: the verdict reaches a file or mpirun's pipe even if the teardown below hangs
     * or crashes. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* No GPU: skip before dt_init, which with device cuda would fail, and before MPI starts. */
    int ndev = 0;
    const cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        printf("SKIP: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found 0");
        return 77;
    }
    dt_config cfg;
    dt_config_defaults(&cfg);
    /* The DTRAIN_* variables, DTRAIN_COMM_WORLD1 among them (the NCCL bucket path at one rank). */
    if (dt_config_from_env(&cfg) != DT_OK) die("dt_config_from_env", dt_last_error());
    cfg.device = DT_DEVICE_CUDA; /* dt_init picks this rank's GPU and makes it current */
    if (dt_init(&cfg, &g_ctx) != DT_OK) die("dt_init", dt_last_error());
    dt_ctx *ctx = g_ctx;
    const int rank = dt_rank(ctx), world = dt_world_size(ctx);

    gpu_state st;
    memset(&st, 0, sizeof st);
    CUDA_CHECK(cudaStreamCreate(&st.stream));
    CUBLAS_CHECK(cublasCreate(&st.blas));
    CUBLAS_CHECK(cublasSetStream(st.blas, st.stream));
    float *p_red, *p_blk;
    CUDA_CHECK(cudaMalloc((void **)&p_red, NP * sizeof(float)));
    CUDA_CHECK(cudaMalloc((void **)&p_blk, NP * sizeof(float)));
    CUDA_CHECK(cudaMalloc((void **)&st.g, NP * sizeof(float)));
    CUDA_CHECK(cudaMalloc((void **)&st.vel, NP * sizeof(float)));
    CUDA_CHECK(cudaMalloc((void **)&st.x, BATCH * IN * sizeof(float)));
    CUDA_CHECK(cudaMalloc((void **)&st.h, BATCH * HID * sizeof(float)));
    CUDA_CHECK(cudaMalloc((void **)&st.dh, BATCH * HID * sizeof(float)));
    CUDA_CHECK(cudaMalloc((void **)&st.logits, BATCH * CLASSES * sizeof(float)));
    CUDA_CHECK(cudaMalloc((void **)&st.dlogits, BATCH * CLASSES * sizeof(float)));
    CUDA_CHECK(cudaMalloc((void **)&st.ones, BATCH * sizeof(float)));
    CUDA_CHECK(cudaMallocHost((void **)&st.hx, BATCH * IN * sizeof(float)));
    CUDA_CHECK(cudaMallocHost((void **)&st.hlogits, BATCH * CLASSES * sizeof(float)));
    CUDA_CHECK(cudaMallocHost((void **)&st.hdlogits, BATCH * CLASSES * sizeof(float)));

    /* Rank 0 initializes on the host; everyone starts from its parameters, copied to the GPU. */
    float *init = (float *)calloc(NP, sizeof(float)), *back = (float *)malloc(2 * NP * sizeof(float));
    if (!init || !back) die("main", "out of memory");
    for (int i = 0; i < BATCH; i++) back[i] = 1.0f;
    CUDA_CHECK(cudaMemcpy(st.ones, back, BATCH * sizeof(float), cudaMemcpyHostToDevice));
    if (rank == 0) {
        srand(42);
        for (size_t i = 0; i < N_W1; i++) init[i] = ((float)rand() / RAND_MAX * 2 - 1) / sqrtf(IN);
        for (size_t i = 0; i < N_W2; i++) init[layer2.offset + i] = ((float)rand() / RAND_MAX * 2 - 1) / sqrtf(HID);
    }
    TRY(dt_broadcast(ctx, init, NP, DT_F32, 0));
    CUDA_CHECK(cudaMemcpy(p_red, init, NP * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(p_blk, init, NP * sizeof(float), cudaMemcpyHostToDevice));
    dt_dataset *data = NULL;
    TRY(dt_synthetic_create(IN, 1, 1, CLASSES, 100000, 3, &data));

    double first, last, first_b, last_b;
    int buckets, unused_b;
    long starts, unused_s;
    train(ctx, data, &st, 1, p_red, &first, &last, &buckets, &starts);
    train(ctx, data, &st, 0, p_blk, &first_b, &last_b, &unused_b, &unused_s);
    /* The reducer's path was the one asked for: allreduces in every step wherever it communicates
     * (one a bucket on NCCL; one a step where MPI takes the whole buffer at the wait), none in a
     * world of one without DTRAIN_COMM_WORLD1. */
    const int sends = world > 1 || cfg.comm_world1;

    /* Every rank must hold the same parameters (device memory: hashed on the host by dtrain). */
    TRY(dt_check_replicas(ctx, p_red, NP * sizeof(float), NULL, NULL));
    CUDA_CHECK(cudaMemcpy(back, p_red, NP * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(back + NP, p_blk, NP * sizeof(float), cudaMemcpyDeviceToHost));
    double worst = 0;
    for (size_t i = 0; i < NP; i++) worst = fmax(worst, fabs((double)back[i] - back[NP + i]));
    const int same = memcmp(back, back + NP, NP * sizeof(float)) == 0, learned = last < 0.75 * first;
    const int must_equal = world <= 2,
              path_ok = sends ? starts >= STEPS && starts <= (long)buckets * STEPS : starts == 0;
    if (rank == 0 && !path_ok)
        printf("custom_loop_cuda: the reducer started %ld allreduces in %d steps of %d buckets, expected %s\n", starts,
               STEPS, buckets, sends ? "one a step or one a bucket and step" : "none in a world of one");
    if (rank == 0) {
        printf("custom_loop_cuda: %d rank%s on %s, loss %.4f -> %.4f: %s\n", world, world == 1 ? "" : "s",
               dt_backend_name(ctx), first, last, learned ? "learned" : "DID NOT LEARN");
        printf("custom_loop_cuda: reducer vs blocking allreduce: parameters %s (largest difference %.3g)%s\n",
               same ? "equal bit for bit" : "differ", worst,
               same || must_equal ? "" : " - NCCL may sum 3+ ranks in another order for other sizes");
    }
    dt_dataset_free(data);
    free(init), free(back);
    cudaFree(p_red), cudaFree(p_blk), cudaFree(st.g), cudaFree(st.vel), cudaFree(st.x), cudaFree(st.h);
    cudaFree(st.dh), cudaFree(st.logits), cudaFree(st.dlogits), cudaFree(st.ones);
    cudaFreeHost(st.hx), cudaFreeHost(st.hlogits), cudaFreeHost(st.hdlogits);
    cublasDestroy(st.blas);
    cudaStreamDestroy(st.stream);
    dt_finalize(ctx);
    return learned && path_ok && (same || !must_equal) ? 0 : 1;
}
