/*
 * test_model_api_gpu.c - the public model API around a GPU model's queued work:
 *  - dt_model_params and dt_model_grads wait for the step the model has queued (dt_model_train_step
 *    returns once its loss is known, before backward and the optimizer have finished on the
 *    device): a copy of either buffer on the caller's own non-blocking stream, made at once, holds
 *    the values dt_model_get_params (and a copy after the device is idle) reads. Without the wait
 *    that copy runs beside backward and the optimizer, and reads values of the step before.
 *  - an optimizer freed and another made in its place between steps (malloc often hands back the
 *    same address): a step graph recorded with the first holds its state buffers and rule, and must
 *    not be replayed for the second. A model with graphs on trains bit for bit as one with graphs
 *    off through SGD with momentum, then AdamW, then plain SGD.
 *  - the memory plan (dt_model_plan_memory) of a bf16 model stepped layer by layer equals
 *    dt_model_memory after such a step (the spare 16-bit copy counted on both sides).
 *
 * Exit status: 0 passed, 1 failed, 77 skipped ("SKIP: no CUDA device") without a GPU.
 */
#include <cuda_runtime.h>

#include "dtrain.h"
#include "../mpi/mpi_check.h"
#include "gpu_skip.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { CLASSES = 10 };

/* Batch k of a run into (x, y): n samples of `in` values. */
static void batch_of(int k, int n, int in, float *x, int32_t *y)
{
    for (int i = 0; i < n; i++) {
        y[i] = (int32_t)((k * 7 + i * 3) % CLASSES);
        for (int j = 0; j < in; j++)
            x[(size_t)i * in + j] = (float)sin(0.1 * (k * 131 + i * 17 + j)) + 0.1f * (float)y[i];
    }
}

static dt_optimizer *optimizer(dt_model *m, dt_optim_kind kind, float momentum)
{
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    oc.kind = kind;
    oc.lr = kind == DT_OPTIM_ADAMW ? 2e-3f : 0.05f;
    oc.momentum = momentum;
    oc.weight_decay = 1e-3f;
    dt_optimizer *o = NULL;
    CHECK(dt_optimizer_create(&oc, dt_model_num_params(m), &o) == DT_OK, "optimizer: %s", dt_last_error());
    return o;
}

/* Copies n floats from device pointer d on the caller's non-blocking stream `own`, at once (through
 * the device buffer tmp), into host h; 0 when a CUDA call failed. */
static int copy_on_own_stream(const float *d, float *tmp, float *h, size_t n, cudaStream_t own)
{
    return cudaMemcpyAsync(tmp, d, n * sizeof *d, cudaMemcpyDeviceToDevice, own) == cudaSuccess &&
           cudaStreamSynchronize(own) == cudaSuccess &&
           cudaMemcpy(h, tmp, n * sizeof *h, cudaMemcpyDeviceToHost) == cudaSuccess;
}

static size_t differ(const float *a, const float *b, size_t n)
{
    size_t d = 0;
    for (size_t i = 0; i < n; i++) d += memcmp(&a[i], &b[i], sizeof *a) != 0;
    return d;
}

/* A model whose backward and optimizer take about a millisecond on the device after its loss is
 * known (21M parameters, batch 256, fp32; the optimizer steps layer by layer beside backward):
 * after each step one buffer is read through the API, the parameters after even steps and the
 * gradients after odd ones (the first read waits for the device, so the second would find it
 * idle whether or not it waited). */
static void check_buffers_wait(dt_ctx *ctx)
{
    enum { IN = 1024, BATCH = 256, STEPS = 4 };
    dt_model *m = NULL;
    CHECK(dt_model_create(ctx, "fc:4096,relu,fc:4096,relu,fc:10", "1024", 3, BATCH, &m) == DT_OK, "model: %s",
          dt_last_error());
    if (!m) return;
    dt_optimizer *o = optimizer(m, DT_OPTIM_SGD, 0.9f);
    const size_t n = dt_model_num_params(m);
    float *x = malloc((size_t)BATCH * IN * sizeof *x), *own_h = malloc(n * sizeof *own_h),
          *idle_h = malloc(n * sizeof *idle_h), *tmp = NULL;
    int32_t *y = malloc(BATCH * sizeof *y);
    cudaStream_t own = NULL;
    const int ready = x && own_h && idle_h && y &&
                      cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking) == cudaSuccess &&
                      cudaMalloc((void **)&tmp, n * sizeof *tmp) == cudaSuccess;
    CHECK(ready, "buffers of %zu floats", n);
    for (int k = 0; ready && k < STEPS; k++) {
        batch_of(k, BATCH, IN, x, y);
        dt_step_result r;
        CHECK(dt_model_train_step(m, o, NULL, x, y, BATCH, 1.0f / BATCH, &r) == DT_OK, "step %d: %s", k,
              dt_last_error());
        const int params = k % 2 == 0;
        const float *d = params ? dt_model_params(m) : dt_model_grads(m);
        CHECK(d && copy_on_own_stream(d, tmp, own_h, n, own), "step %d: the copy on the caller's stream", k);
        /* What the step left, read once the device is idle. */
        const int idle = params ? dt_model_get_params(m, idle_h) == DT_OK
                                : cudaDeviceSynchronize() == cudaSuccess &&
                                      cudaMemcpy(idle_h, d, n * sizeof *idle_h, cudaMemcpyDeviceToHost) == cudaSuccess;
        CHECK(idle, "step %d: the copy once idle", k);
        const size_t diff = differ(own_h, idle_h, n);
        CHECK(diff == 0, "step %d: a copy of %s on the caller's stream at once: %zu of %zu values are not the step's",
              k, params ? "dt_model_params()" : "dt_model_grads()", diff, n);
    }
    printf("ok: dt_model_params and dt_model_grads wait for the queued step (%zu parameters, %d steps)\n", n, STEPS);
    if (own) cudaStreamDestroy(own);
    cudaFree(tmp);
    free(x), free(own_h), free(idle_h), free(y);
    dt_optimizer_free(o);
    dt_model_free(m);
}

/* The memory plan of a bf16 model stepped layer by layer on one rank (21M parameters: the spare
 * 16-bit copy, 8 bytes a parameter in params) against dt_model_memory after such a step, kind by
 * kind; what the device lost meanwhile is printed beside the plan's total (cuBLAS's workspaces
 * and the allocator's rounding are not the model's, so it is a note, not a check). */
static void check_plan_after_layered_step(dt_ctx *ctx)
{
    enum { IN = 1024, BATCH = 256 };
    const char *spec = "fc:4096,relu,fc:4096,relu,fc:10";
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    dt_memory_plan_config pc;
    dt_memory_plan_defaults(&pc);
    pc.spec = spec, pc.input = "1024", pc.batch = BATCH, pc.compute = DT_BF16, pc.optim = &oc;
    dt_memory_plan plan;
    CHECK(dt_model_plan_memory(ctx, &pc, &plan) == DT_OK, "plan: %s", dt_last_error());
    size_t free0 = 0, free1 = 0, total = 0;
    cudaDeviceSynchronize();
    cudaMemGetInfo(&free0, &total);
    dt_model *m = NULL;
    dt_optimizer *o = NULL;
    CHECK(dt_model_create(ctx, spec, "1024", 5, BATCH, &m) == DT_OK &&
              dt_model_set_precision(m, DT_BF16, DT_F32) == DT_OK &&
              dt_optimizer_create(&oc, dt_model_num_params(m), &o) == DT_OK,
          "model: %s", dt_last_error());
    float *x = malloc((size_t)BATCH * IN * sizeof *x);
    int32_t *y = malloc(BATCH * sizeof *y);
    if (m && o && x && y) {
        batch_of(0, BATCH, IN, x, y);
        dt_step_result r;
        CHECK(dt_model_train_step(m, o, NULL, x, y, BATCH, 1.0f / BATCH, &r) == DT_OK, "step: %s", dt_last_error());
        CHECK(dt_model_step_overlapped(m) == DT_STEP_OVERLAP_ON, "the step was overlapped layer by layer");
        dt_memory_summary real;
        dt_model_memory(m, o, &real);
        const dt_memory_summary *p = &plan.kinds;
        CHECK(p->params == real.params && p->grads == real.grads && p->optimizer == real.optimizer &&
                  p->activations == real.activations && p->workspace == real.workspace && p->pool == real.pool,
              "plan == dt_model_memory after a layer-by-layer bf16 step: params %zu/%zu (%.1f bytes a parameter), "
              "grads %zu/%zu, optimizer %zu/%zu, activations %zu/%zu, workspace %zu/%zu, pool %zu/%zu",
              p->params, real.params, (double)real.params / (double)dt_model_num_params(m), p->grads, real.grads,
              p->optimizer, real.optimizer, p->activations, real.activations, p->workspace, real.workspace, p->pool,
              real.pool);
        cudaDeviceSynchronize();
        cudaMemGetInfo(&free1, &total);
        printf("note: the plan's total %.1f MiB; the device lost %.1f MiB from before the model to after its "
               "first step\n",
               (double)plan.total / 1048576.0, ((double)free0 - (double)free1) / 1048576.0);
    }
    free(x), free(y);
    dt_optimizer_free(o);
    dt_model_free(m);
}

/* Two models from one seed, step graphs on and off, through four optimizers in turn, each freed
 * before the next is made: 8 steps each, of which at least the last 6 run as graphs on the first
 * model (each graph key's first pass runs as usual, its second records). */
static void check_optimizer_replaced(dt_ctx *ctx)
{
    enum { IN = 20, BATCH = 16, PHASE = 8 };
    static const struct {
        dt_optim_kind kind;
        float momentum;
    } phases[] = {{DT_OPTIM_SGD, 0.9f}, {DT_OPTIM_ADAMW, 0.0f}, {DT_OPTIM_SGD, 0.0f}, {DT_OPTIM_SGD, 0.9f}};
    dt_model *m[2] = {NULL, NULL};
    for (int g = 0; g < 2; g++) {
        CHECK(dt_model_create(ctx, "fc:48,relu,fc:32,relu,fc:10", "20", 7, BATCH, &m[g]) == DT_OK, "model: %s",
              dt_last_error());
        if (m[g]) dt_model_set_graphs(m[g], g ? DT_GRAPHS_OFF : DT_GRAPHS_ON);
    }
    if (!m[0] || !m[1]) return;
    const size_t n = dt_model_num_params(m[0]);
    float x[BATCH * IN], *pa = malloc(n * sizeof *pa), *pb = malloc(n * sizeof *pb);
    int32_t y[BATCH];
    dt_optimizer *o[2] = {NULL, NULL};
    int same_address = 0;
    for (size_t ph = 0; ph < sizeof phases / sizeof *phases && pa && pb; ph++) {
        for (int g = 0; g < 2; g++) {
            const uintptr_t was = (uintptr_t)o[g];
            dt_optimizer_free(o[g]);
            o[g] = optimizer(m[g], phases[ph].kind, phases[ph].momentum);
            same_address += g == 0 && (uintptr_t)o[g] == was;
        }
        int replayed = 0;
        for (int k = 0; k < PHASE; k++) {
            batch_of((int)ph * PHASE + k, BATCH, IN, x, y);
            for (int g = 0; g < 2; g++) {
                dt_step_result r;
                CHECK(dt_model_train_step(m[g], o[g], NULL, x, y, BATCH, 1.0f / BATCH, &r) == DT_OK,
                      "phase %zu step %d: %s", ph, k, dt_last_error());
            }
            replayed += dt_model_graphed(m[0]) == DT_GRAPHS_ON;
        }
        CHECK(dt_model_get_params(m[0], pa) == DT_OK && dt_model_get_params(m[1], pb) == DT_OK, "params");
        const size_t diff = differ(pa, pb, n);
        CHECK(diff == 0 && replayed >= PHASE - 2,
              "optimizer %zu (%s, momentum %g): graphs on == off bit for bit (%zu of %zu differ), %d of %d steps "
              "as graphs",
              ph, phases[ph].kind == DT_OPTIM_ADAMW ? "AdamW" : "SGD", phases[ph].momentum, diff, n, replayed, PHASE);
    }
    printf("note: a new optimizer came back at the freed one's address %d of %zu times\n", same_address,
           sizeof phases / sizeof *phases - 1);
    free(pa), free(pb);
    for (int g = 0; g < 2; g++) {
        dt_optimizer_free(o[g]);
        dt_model_free(m[g]);
    }
}

int main(void)
{
    if (!gpu_devices_or_skip()) return 77;
    dt_config cfg;
    dt_config_defaults(&cfg);
    cfg.device = DT_DEVICE_CUDA;
    dt_ctx *ctx = mpi_check_init_config("test_model_api_gpu", &cfg);
    check_buffers_wait(ctx);
    check_optimizer_replaced(ctx);
    check_plan_after_layered_step(ctx);
    const int rc = mpi_check_finish(ctx, "test_model_api_gpu");
    dt_finalize(ctx);
    return rc;
}
