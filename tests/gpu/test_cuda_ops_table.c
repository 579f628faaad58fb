/*
 * test_cuda_ops_table.c - the CUDA table itself: every entry set, its capabilities, the
 * workspace sizes, the memory plan on it and the no-op cases (all without a GPU, before the device
 * is looked for), then on
 * a GPU the stream the ops run on (and that switching it takes cuBLAS along only for GEMMs) and the
 * statuses the entries return.
 *
 * Tolerances: none; every check is exact.
 */
#include "cuda_ops_fixture.h"
#include "base/status.h"
#include "runtime/test_hooks.h"

#include <sched.h>
#include <stdatomic.h>

/* ---------------------------------------------------------------- checks without a GPU */

static void check_no_gpu(void)
{
    const backend_ops *k = backend_cuda_ops();
    check(k != NULL && k->name != NULL && strcmp(k->name, "cuda") == 0,
          "backend_cuda_ops() returns the \"cuda\" table");
    if (!k) return;
    check(!k->host_memory && k->keeps_params16 && !k->grads16,
          "the CUDA table's capabilities: device memory, a 16-bit parameter copy, fp32 gradients");
    int listed = 0;
    const int want = cuda_table_size(), missing = cuda_table_missing(k, &listed);
    check(missing == 0 && listed == want, "all %d entries of the CUDA table are set (%d NULL, %d of them checked)",
          want, missing, listed);
    check(k->stream(NULL) == NULL, "the ops start on the default stream");

    /* Workspace sizes are host arithmetic: they must cover the group of images the ops use (and
     * at most 16 bytes that align its second region) and never shrink as the batch grows (a
     * workspace for a batch serves every smaller one). */
    conv_shape s = {.batch = 8, .c_in = 64, .h = 64, .w = 64, .c_out = 64, .k = 3, .stride = 1, .pad = 1};
    size_t prev = 0;
    int monotone = 1, covers = 1;
    for (int b = 1; b <= 16; b++) {
        s.batch = b;
        if (conv_shape_init(&s) != DT_OK) {
            check(0, "conv_shape_init: %s", dt_last_error());
            return;
        }
        const size_t ws = k->conv_ws_floats(NULL, &s);
        const size_t one = (size_t)s.h_out * s.w_out * ((size_t)s.c_in * s.k * s.k + s.c_out);
        monotone &= ws >= prev;
        covers &= ws >= one && ws % one <= 4;
        prev = ws;
    }
    check(monotone && covers,
          "conv_ws_floats grows with the batch and holds whole images, 16 bytes of padding at most (%zu floats at "
          "16)",
          prev);

    /* The fused ReLU's bit mask: a bit a value, rows of the layer's outputs rounded up to 128 bits
     * (cuBLASLt's leading dimension), per sample; none for an empty layer. */
    check(k->fc_relu_mask_bytes(256, 1024) == 32768 && k->fc_relu_mask_bytes(3, 10) == 48 &&
              k->fc_relu_mask_bytes(2, 129) == 64 && k->fc_relu_mask_bytes(0, 10) == 0,
          "fc_relu_mask_bytes: 128-bit rows a sample (32768 bytes for 256 x 1024)");

    /* The fp32 scratch of 16-bit passes (sy): an fc layer's forward without its epilogue writes B
     * x out there and a pointwise convolution's GEMMs write B x max(in, out); a 3x3 convolution
     * rounds as it scatters and col2im, and asks for none however large its activations. */
    const size_t B = 32;
    scratch_sizes z = {0};
    const layer_need conv3 = {.kind = BE_LAYER_CONV, .in_n = 64 * 32 * 32, .out_n = 64 * 32 * 32, .np = 36928};
    k->scratch16(NULL, &conv3, (int)B, &z);
    const size_t conv3_sy = z.sy;
    const layer_need fc = {.kind = BE_LAYER_FC, .in_n = 4096, .out_n = 128, .fc_in = 4096, .fc_out = 128};
    k->scratch16(NULL, &fc, (int)B, &z);
    const size_t fc_sy = z.sy;
    const layer_need conv1 = {.kind = BE_LAYER_CONV, .in_n = 64 * 8 * 8, .out_n = 256 * 8 * 8, .pointwise = 1};
    k->scratch16(NULL, &conv1, (int)B, &z);
    check(conv3_sy == 0 && fc_sy == B * 128 && z.sy == B * 256 * 8 * 8,
          "scratch16's fp32 scratch: none for a 3x3 conv, B x out for fc, B x max(in, out) pointwise (%zu, %zu, %zu)",
          conv3_sy, fc_sy, z.sy);

    /* The memory plan on this table: a bf16 model of 8M parameters or more, stepped layer by layer
     * on one rank, holds a spare 16-bit parameter copy too (model_overlap.c: 8 bytes a parameter
     * with the fp32 master and the copy); not among other ranks (they step by bucket), not in
     * fp16 (its loss scaler steps after backward), not under 8M parameters. */
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    dt_memory_plan_config pc;
    dt_memory_plan_defaults(&pc);
    pc.spec = "fc:4096,relu,fc:4096,relu,fc:10";
    pc.input = "1024";
    pc.batch = 64;
    pc.compute = DT_BF16;
    pc.optim = &oc;
    const size_t np = 1024 * 4096 + 4096 + 4096 * 4096 + 4096 + 4096 * 10 + 10; /* 21,020,682 */
    dt_memory_plan alone, among, fp16, mlp;
    dt_status ps = model_test_plan_memory(k, 1, &pc, &alone);
    if (!ps) ps = model_test_plan_memory(k, 0, &pc, &among);
    pc.compute = DT_F16;
    if (!ps) ps = model_test_plan_memory(k, 1, &pc, &fp16);
    pc.compute = DT_BF16;
    pc.spec = "fc:1024,relu,fc:1024,relu,fc:10";
    pc.input = "784";
    if (!ps) ps = model_test_plan_memory(k, 1, &pc, &mlp);
    const size_t mlp_np = 784 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 10 + 10;
    int named = 0;
    for (int i = 0; i < alone.n_top; i++) named |= strstr(alone.top[i].what, "spare 16-bit parameter copy") != NULL;
    check(ps == DT_OK && alone.kinds.params == 8 * np && among.kinds.params == 6 * np && fp16.kinds.params == 6 * np &&
              mlp.kinds.params == 6 * mlp_np && alone.total == among.total + 2 * np && named,
          "the plan holds the spare 16-bit copy for bf16 at 8M+ parameters on one rank only (params %zu, %zu among "
          "ranks, %zu fp16, %zu for %zu parameters)",
          alone.kinds.params, among.kinds.params, fp16.kinds.params, mlp.kinds.params, mlp_np);

    /* No-op cases return before touching the device. */
    int correct = -1;
    double loss = -1;
    size_t bad1 = 1, bad2 = 1;
    const dt_status s1 = k->softmax_xent(NULL, NULL, NULL, NULL, 0, 10, 1.0f, &loss, &correct);
    check(s1 == DT_OK && loss == 0.0 && correct == 0, "softmax_xent with batch 0 returns 0 and correct 0");
    const dt_status s2 = k->scale_count(NULL, DT_F32, NULL, 0, 1.0f, &bad1);
    const dt_status s3 = k->scale_count(NULL, DT_F32, NULL, 0, 2.0f, &bad2);
    check(s2 == DT_OK && s3 == DT_OK && bad1 == 0 && bad2 == 0, "the non-finite counters return 0 for n = 0");
}

/* ---------------------------------------------------------------- the stream */

/* cuda_ops_main has made the backend and set its stream: the table reports that stream. */
static void check_set_stream(void)
{
    check(gpu_be->ops->stream(gpu_be) == (void *)stream,
          "backend_cuda and set_stream: the ops run on the test's stream");
}

/* A host function queued on a stream holds everything queued behind it until *go is set. */
static void CUDART_CB hold_until(void *go)
{
    while (!atomic_load((atomic_int *)go)) sched_yield();
}

/* Switching the ops' stream is free until a GEMM runs there: twelve streams that only cast (as a
 * reducer's casts run on each caller's stream) take none of cuBLAS's eight stream workspaces, so
 * switching to each succeeds and each casts; a GEMM afterwards, on the test's stream and on one of
 * the twelve, runs on the stream set: held behind a host function there, its product is not in
 * memory until the stream is let go. Before cuBLAS followed lazily, the seventh switch failed with
 * "cuBLAS has followed 8 streams". */
static void check_streams_without_gemms(void)
{
    enum { STREAMS = 12, N = 4096 };
    cudaStream_t s[STREAMS];
    float *x = dfloats(N), *back = dfloats(N), *host = malloc(N * sizeof *host), *got = malloc(N * sizeof *got);
    uint16_t *x16 = dmalloc(N * sizeof *x16);
    for (int i = 0; i < N && host; i++) host[i] = (float)(i % 97) * 0.25f; /* exact in bf16 */
    GPU(to_device, x, host, N * sizeof *host);
    st_ok("sync", gpu_be->ops->sync(gpu_be)); /* the other streams read x */
    int made = 0, switched = 0, exact = 1;
    for (; made < STREAMS; made++)
        if (cudaStreamCreateWithFlags(&s[made], cudaStreamNonBlocking) != cudaSuccess) break;
    for (int i = 0; i < made && host && got; i++) {
        if (gpu_be->ops->set_stream(gpu_be, s[i]) != DT_OK) {
            printf("  set_stream to stream %d: %s\n", i + 1, dt_last_error());
            break;
        }
        switched++;
        /* NaN bits first, so a cast that did nothing shows. */
        cuda_ok(cudaMemsetAsync(back, 0xff, N * sizeof *back, s[i]), "cudaMemsetAsync");
        GPU(cast_to16, DT_BF16, x, x16, N);
        GPU(cast_to32, DT_BF16, x16, back, N);
        cuda_ok(cudaStreamSynchronize(s[i]), "cudaStreamSynchronize");
        cuda_ok(cudaMemcpy(got, back, N * sizeof *got, cudaMemcpyDeviceToHost), "cudaMemcpy");
        exact &= memcmp(got, host, N * sizeof *got) == 0;
    }
    check(made == STREAMS && switched == STREAMS && exact,
          "the ops switch to %d of %d streams that run no GEMM, and cast exactly on each", switched, STREAMS);

    /* A 2x2x2 product on the test's stream, then on the first of the twelve, twice: the first
     * time makes each stream's workspace, the second (behind a held host function) checks that the
     * handle moved back and forth with no allocation, which could wait for the held stream. */
    float *m = dfloats(12);
    const float ab[8] = {1, 2, 3, 4, 5, 6, 7, 8}, want[4] = {19, 22, 43, 50}, none[4] = {0};
    for (int k = 0; k < 4 && made == STREAMS; k++) {
        const cudaStream_t on = k & 1 ? s[0] : stream;
        const int hold = k >= 2;
        st_ok("set_stream", gpu_be->ops->set_stream(gpu_be, on));
        cuda_ok(cudaMemcpy(m, ab, sizeof ab, cudaMemcpyHostToDevice), "cudaMemcpy");
        cuda_ok(cudaMemset(m + 8, 0, 4 * sizeof *m), "cudaMemset");
        /* Both may return before the device has them; the non-blocking streams do not wait. */
        cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        atomic_int go;
        atomic_init(&go, 0);
        if (hold) cuda_ok(cudaLaunchHostFunc(on, hold_until, &go), "cudaLaunchHostFunc");
        GPU(gemm, 0, 0, 2, 2, 2, 1.0f, m, 2, m + 4, 2, 0.0f, m + 8, 2);
        float held[4] = {0}, c[4] = {0};
        if (hold) {
            /* Every other stream the GEMM could have gone to has finished when these return (the
             * legacy stream's copy below waits for none of the non-blocking ones). */
            if (on != stream) cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
            for (int i = on == s[0]; i < STREAMS; i++) cuda_ok(cudaStreamSynchronize(s[i]), "cudaStreamSynchronize");
            cuda_ok(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize");
            cuda_ok(cudaMemcpy(held, m + 8, sizeof held, cudaMemcpyDeviceToHost), "cudaMemcpy");
            atomic_store(&go, 1);
        }
        cuda_ok(cudaStreamSynchronize(on), "cudaStreamSynchronize");
        cuda_ok(cudaMemcpy(c, m + 8, sizeof c, cudaMemcpyDeviceToHost), "cudaMemcpy");
        check(memcmp(held, none, sizeof held) == 0 && memcmp(c, want, sizeof c) == 0,
              "a GEMM after the switches runs on %s%s (%g %g %g %g while held): %g %g %g %g",
              k & 1 ? "a stream that only cast before" : "the test's stream", hold ? ", behind its held work" : "",
              held[0], held[1], held[2], held[3], c[0], c[1], c[2], c[3]);
    }
    st_ok("set_stream back to the test's stream", gpu_be->ops->set_stream(gpu_be, stream));
    for (int i = 0; i < made; i++) cuda_ok(cudaStreamDestroy(s[i]), "cudaStreamDestroy");
    cudaFree(m);
    cudaFree(x);
    cudaFree(back);
    cudaFree(x16);
    free(host);
    free(got);
}

/* host_alloc gives page-locked host memory (the loader's batches): the runtime sees it as host
 * memory, an asynchronous copy from it arrives whole, and host_free takes it back (and NULL). */
static void check_host_alloc(void)
{
    enum { N = 1 << 18 };
    float *h = NULL, *back = malloc(N * sizeof *back);
    float *d = dfloats(N);
    st_ok("host_alloc", gpu_be->ops->host_alloc(gpu_be, N * sizeof *h, "a test batch", (void **)&h));
    if (!h || !back || !d) {
        check(0, "host_alloc of %zu bytes gave memory", (size_t)N * sizeof *h);
        free(back);
        cudaFree(d);
        return;
    }
    struct cudaPointerAttributes a;
    const int pinned = cudaPointerGetAttributes(&a, h) == cudaSuccess && a.type == cudaMemoryTypeHost;
    check(pinned && !backend_is_device_ptr(h), "host_alloc memory is pinned host memory, not device memory");
    for (int i = 0; i < N; i++) h[i] = (float)i * 0.5f;
    GPU(to_device_async, d, h, N * sizeof *h);
    st_ok("sync", gpu_be->ops->sync(gpu_be));
    GPU(to_host, back, d, N * sizeof *back);
    check(memcmp(h, back, N * sizeof *h) == 0, "an asynchronous copy from host_alloc memory arrives whole");
    gpu_be->ops->host_free(gpu_be, h);
    gpu_be->ops->host_free(gpu_be, NULL);
    free(back);
    cudaFree(d);
}

/* An allocation that fails for another reason than memory is not reported as out of memory (whose
 * advice, a smaller --batch, would not help): cudaMalloc while a step graph records is refused by
 * CUDA (an unsafe call under thread-local capture), and alloc names the call. The recording is
 * then ended and dropped, and nothing is left behind for later checks. */
static void check_alloc_errors(void)
{
    st_ok("graph_begin", gpu_be->ops->graph_begin(gpu_be));
    void *p = NULL;
    const dt_status st = gpu_be->ops->alloc(gpu_be, (size_t)1 << 20, "a test buffer", &p);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", st ? dt_last_error() : "");
    void *graph = NULL;
    (void)gpu_be->ops->graph_end(gpu_be, 0, &graph);
    status_clear_error();
    check(st != DT_ERR_NOMEM && (st == DT_OK || (st == DT_ERR_DEVICE && strstr(msg, "cudaMalloc") != NULL)),
          "an allocation refused while recording is the device's error naming cudaMalloc, not out of memory: %d, "
          "\"%s\"",
          (int)st, msg);
    if (p) gpu_be->ops->free(gpu_be, p);
    check(gpu_be->ops->last_status(gpu_be) == DT_OK, "a refused allocation leaves no error behind for later calls");
    p = NULL;
    st_ok("alloc after the recording", gpu_be->ops->alloc(gpu_be, (size_t)1 << 20, "a test buffer", &p));
    if (p) gpu_be->ops->free(gpu_be, p);
}

/* ---------------------------------------------------------------- error recording */

/* cuBLAS prints "** On entry to SGEMM parameter number 10 had an illegal value" to stderr here:
 * that is the expected rejection. */
static void check_errors(void)
{
    float *d = dfloats(64);
    /* lda 0 for a 4x4x4 product: cuBLAS rejects it before touching memory, and the entry says so */
    const dt_status st = gpu_be->ops->gemm(gpu_be, 0, 0, 4, 4, 4, 1.0f, d, 0, d + 16, 4, 0.0f, d + 32, 4);
    check(st == DT_ERR_DEVICE && strstr(dt_last_error(), "cublasSgemm") != NULL,
          "a rejected GEMM returns its status: %d, \"%s\"", (int)st, dt_last_error());
    cuda_ok(cudaStreamSynchronize(stream), "sync");
    check(gpu_be->ops->last_status(gpu_be) == DT_OK, "a rejected call leaves no error behind for later calls");
    cudaFree(d);
}

int main(void)
{
    const cuda_check_fn checks[] = {check_set_stream, check_streams_without_gemms, check_host_alloc, check_alloc_errors,
                                    check_errors};
    return cuda_ops_main(check_no_gpu, checks, sizeof checks / sizeof *checks);
}
