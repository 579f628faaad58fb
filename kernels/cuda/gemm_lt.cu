/*
 * gemm_lt.cu - the 16-bit fully connected layer's GEMMs with their epilogues fused by cuBLASLt:
 * forward y = x W^T + b rounded once into 16 bits by the GEMM itself (CUBLASLT_EPILOGUE_BIAS:
 * no fp32 result in scratch, no bias-and-round kernel reading it back), and when a relu layer
 * follows, y = max(x W^T + b, 0) (CUBLASLT_EPILOGUE_RELU_BIAS: the pass skips the relu layer's
 * kernel, a read and a write of y); backward dW = dy^T x with the bias gradient db = column sums
 * of dy from the same pass over dy (CUBLASLT_EPILOGUE_BGRADB: no column-sum kernel), and, when
 * that relu sits between two fc layers, the upper one's dx through the relu's backward from the
 * bit mask the lower one's forward kept (RELU_AUX_BIAS, then DRELU: no relu kernel either way).
 * DRELU_BGRAD would also sum the lower layer's bias gradient, but only in D's type (16 bits, which
 * an fp16 column sum of loss-scaled gradients can overflow): the lower layer's BGRADB sums it in
 * fp32 instead, from the same dx the unfused pass sums.
 *
 * The relu layer passes a NaN on (as torch.relu does) and cuBLASLt's max may make it 0, so with
 * the relu fused a NaN born in this layer's output stops there. A diverging run still stops: a
 * NaN output needs a non-finite input, weight or bias; the inputs are checked as read, and a
 * weight goes non-finite through a non-finite gradient, which comes (short of an overflow inside
 * backward, which fp16's finite check catches) from a step whose loss was non-finite already, and
 * dtrain train's check sums every step's loss. dt_model_set_fused_relu(m, 0) keeps relu
 * layers of their own where a NaN must travel to the loss (gpu.cuda_ops_amp16 notes what this
 * cuBLASLt does with one).
 *
 * Plans (the matmul descriptor, the layouts and the algorithm cuBLASLt's heuristic chose) are made
 * once per shape, type and pointer alignment and kept; making one costs tens of microseconds, a
 * lookup none. The table holds LT_PLANS; a new shape past them takes the place of the plan used
 * longest ago (a process that makes many models one after another, a sweep, would otherwise run
 * every later shape unfused: slower, and other bits than the same model in a fresh process).
 * A plan's descriptors are read by cublasLtMatmul as it queues the work and by nothing after, so
 * one may go once its last call returned (graphs recorded with it hold their kernels' arguments). A shape the heuristic has no algorithm for, a plan that cannot be
 * made while a step graph is being recorded (nothing is created then), or an Lt call that fails
 * is answered `no`, and the caller runs the unfused GEMM and kernel instead (gemm.cu), which
 * computes the same values with the summation in another order.
 */
#include "kernels/cuda/cuda_internal.cuh"

#include <cublasLt.h>

/* cuBLAS's recommended workspace on Hopper; allocated at the first plan. */
#define LT_WS_BYTES ((size_t)32 << 20)
#define LT_PLANS 128

/* Forward: bias; bias + ReLU; bias + ReLU keeping its bit mask (aux) for the backward. Backward:
 * the weight gradient with the bias gradient; the data gradient through the ReLU below (its
 * mask). */
typedef enum { LT_FWD_BIAS, LT_FWD_BIAS_RELU, LT_FWD_BIAS_RELU_AUX, LT_BWD_BGRADB, LT_BWD_DRELU } lt_kind;

typedef struct lt_key {
    lt_kind kind;
    dt_dtype t;
    int m, n, k;
    int align[5]; /* A, B, D, the bias vector and the ReLU mask: the bytes each pointer is aligned to, up to 256 */
} lt_key;

typedef struct lt_plan {
    lt_key key;
    int usable; /* 0: the heuristic had nothing (the fallback runs), kept so it is asked once */
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatmulAlgo_t algo;
    size_t ws;
    unsigned long used; /* g_tick at its last lookup: the least recent gives way to a new shape */
} lt_plan;

static cublasLtHandle_t g_lt;
/* One workspace for every plan: the Lt GEMMs run on the ops' stream, or on the recording stream
 * into graphs that launch on the ops' stream, so never two at once (the side stream runs only
 * optimizer steps). A second stream running them would need a workspace of its own, as blas()
 * gives each stream for cuBLAS. */
static void *g_lt_ws;
static lt_plan g_plans[LT_PLANS];
static int g_nplans;
static unsigned long g_tick;
/* cuBLASLt could not be set up (its handle or workspace): every GEMM takes the fallback, and the
 * setup is not tried again at each call of each step. */
static int g_lt_off;
/* GEMMs that ran with their epilogue fused, and those that took the fallback (cuda_lt_counts). */
static long g_fused, g_unfused;

static int align_of(const void *p)
{
    const uintptr_t u = (uintptr_t)p;
    int a = 1;
    while (a < 256 && !(u & (uintptr_t)a)) a <<= 1;
    return a;
}

static int key_equal(const lt_key *x, const lt_key *y) { return !memcmp(x, y, sizeof *x); }

static void plan_destroy(lt_plan *p)
{
    if (p->a) cublasLtMatrixLayoutDestroy(p->a);
    if (p->b) cublasLtMatrixLayoutDestroy(p->b);
    if (p->d) cublasLtMatrixLayoutDestroy(p->d);
    if (p->op) cublasLtMatmulDescDestroy(p->op);
    p->a = p->b = p->d = NULL;
    p->op = NULL;
}

/* The ReLU bit mask's leading dimension, in bits (one a value): the rows of D (m) rounded up to
 * the 128 that cuBLASLt asks for. */
static int64_t mask_ld(int m) { return ((int64_t)m + 127) / 128 * 128; }

/* Fills p for its key: descriptors, layouts (column-major, as cuBLAS sees our row-major
 * matrices) and the heuristic's first algorithm; p->usable 0 when there is none. bias and mask:
 * pointers of the key's alignment (the heuristic reads their alignment, never their memory). */
static void plan_make(lt_plan *p, const void *bias, const void *mask)
{
    const lt_key *k = &p->key;
    const cudaDataType_t t16 = k->t == DT_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    const int fwd = k->kind <= LT_FWD_BIAS_RELU_AUX, wgrad = k->kind == LT_BWD_BGRADB;
    const int aux = k->kind == LT_FWD_BIAS_RELU_AUX || k->kind == LT_BWD_DRELU, has_bias = k->kind != LT_BWD_DRELU;
    /* Forward, row-major y(B,OUT) = x(B,IN) W(OUT,IN)^T: column-major D(OUT,B) = op(A) B with A the
     * memory of W as (IN,OUT) transposed, B the memory of x as (IN,B). m OUT, n B, k IN.
     * Weight gradient, row-major dW(OUT,IN) = dy(B,OUT)^T x(B,IN): column-major D(IN,OUT) =
     * A op(B) with A the memory of x as (IN,B), B the memory of dy as (OUT,B) transposed. m IN,
     * n OUT, k B. Data gradient, row-major dx(B,IN) = dy(B,OUT) W(OUT,IN): column-major D(IN,B) =
     * A B with A the memory of W as (IN,OUT), B the memory of dy as (OUT,B). m IN, n B, k OUT: the
     * shape of the forward D of the layer below (OUT_below = IN), whose mask it reads. */
    const cublasOperation_t ta = fwd ? CUBLAS_OP_T : CUBLAS_OP_N, tb = wgrad ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasLtEpilogue_t ep = k->kind == LT_FWD_BIAS            ? CUBLASLT_EPILOGUE_BIAS
                                  : k->kind == LT_FWD_BIAS_RELU     ? CUBLASLT_EPILOGUE_RELU_BIAS
                                  : k->kind == LT_FWD_BIAS_RELU_AUX ? CUBLASLT_EPILOGUE_RELU_AUX_BIAS
                                  : k->kind == LT_BWD_DRELU         ? CUBLASLT_EPILOGUE_DRELU
                                                                    : CUBLASLT_EPILOGUE_BGRADB;
    /* The bias is D's type (the forward's 16 bits; the weight gradient's fp32), as cuBLASLt's
     * table of types asks. */
    const int32_t bias_t = fwd ? (int32_t)t16 : (int32_t)CUDA_R_32F;
    const cudaDataType_t dt = wgrad ? CUDA_R_32F : t16;
    const int64_t ald = mask_ld(k->m);
    const uint64_t ws = LT_WS_BYTES;
    cublasLtMatmulPreference_t pref = NULL;
    int n_found = 0;
    cublasLtMatmulHeuristicResult_t res;
    memset(&res, 0, sizeof res);
    p->usable = 0;
    int ok =
        cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep) == CUBLAS_STATUS_SUCCESS;
    if (ok && has_bias)
        ok = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_t, sizeof bias_t) ==
                 CUBLAS_STATUS_SUCCESS &&
             cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias) ==
                 CUBLAS_STATUS_SUCCESS;
    if (ok && aux)
        ok = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &mask, sizeof mask) ==
                 CUBLAS_STATUS_SUCCESS &&
             cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ald, sizeof ald) ==
                 CUBLAS_STATUS_SUCCESS;
    /* Stored shapes, before op: A is (k, m) when transposed, else (m, k); B is (n, k) when
     * transposed, else (k, n). */
    if (ok)
        ok = (fwd ? cublasLtMatrixLayoutCreate(&p->a, t16, (uint64_t)k->k, (uint64_t)k->m, (int64_t)k->k)
                  : cublasLtMatrixLayoutCreate(&p->a, t16, (uint64_t)k->m, (uint64_t)k->k, (int64_t)k->m)) ==
                 CUBLAS_STATUS_SUCCESS &&
             (wgrad ? cublasLtMatrixLayoutCreate(&p->b, t16, (uint64_t)k->n, (uint64_t)k->k, (int64_t)k->n)
                    : cublasLtMatrixLayoutCreate(&p->b, t16, (uint64_t)k->k, (uint64_t)k->n, (int64_t)k->k)) ==
                 CUBLAS_STATUS_SUCCESS &&
             cublasLtMatrixLayoutCreate(&p->d, dt, (uint64_t)k->m, (uint64_t)k->n, (int64_t)k->m) ==
                 CUBLAS_STATUS_SUCCESS;
    if (ok) {
        const uint32_t aa = (uint32_t)k->align[0], ab = (uint32_t)k->align[1], ad = (uint32_t)k->align[2];
        ok = cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS &&
             cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws) ==
                 CUBLAS_STATUS_SUCCESS &&
             cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aa, sizeof aa) ==
                 CUBLAS_STATUS_SUCCESS &&
             cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ab, sizeof ab) ==
                 CUBLAS_STATUS_SUCCESS &&
             cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ad, sizeof ad) ==
                 CUBLAS_STATUS_SUCCESS &&
             cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ad, sizeof ad) ==
                 CUBLAS_STATUS_SUCCESS;
    }
    if (ok)
        ok = cublasLtMatmulAlgoGetHeuristic(g_lt, p->op, p->a, p->b, p->d, p->d, pref, 1, &res, &n_found) ==
                 CUBLAS_STATUS_SUCCESS &&
             n_found > 0 && res.state == CUBLAS_STATUS_SUCCESS && res.workspaceSize <= LT_WS_BYTES;
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (!ok) {
        plan_destroy(p);
        return;
    }
    p->algo = res.algo;
    p->ws = res.workspaceSize;
    p->usable = 1;
}

/* The plan for key (made now if new; NULL when none can be used). */
static lt_plan *plan_for(const lt_key *key, const void *bias, const void *mask)
{
    g_tick++;
    for (int i = 0; i < g_nplans; i++)
        if (key_equal(&g_plans[i].key, key)) {
            g_plans[i].used = g_tick;
            return g_plans[i].usable ? &g_plans[i] : NULL;
        }
    /* Nothing is created (or given way) while a step graph (ours, or a caller's capture of the
     * stream) is being recorded. */
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    if (g_lt_off || cuda_recording() || cudaStreamIsCapturing(g_stream, &cap) != cudaSuccess ||
        cap != cudaStreamCaptureStatusNone)
        return NULL;
    if (!g_lt && cublasLtCreate(&g_lt) != CUBLAS_STATUS_SUCCESS) {
        g_lt = NULL;
        g_lt_off = 1;
        return NULL;
    }
    if (!g_lt_ws) {
        /* An error already pending is an earlier op's, for its own check to report: not cleared
         * here, and no allocation tried behind it. */
        if (cudaPeekAtLastError() != cudaSuccess) return NULL;
        if (cudaMalloc(&g_lt_ws, LT_WS_BYTES) != cudaSuccess) {
            cudaGetLastError(); /* no workspace: the unfused path, which needs none */
            g_lt_ws = NULL;
            g_lt_off = 1;
            return NULL;
        }
    }
    lt_plan *p;
    if (g_nplans < LT_PLANS) {
        p = &g_plans[g_nplans++];
    } else {
        p = &g_plans[0];
        for (int i = 1; i < LT_PLANS; i++)
            if (g_plans[i].used < p->used) p = &g_plans[i];
        plan_destroy(p);
    }
    memset(p, 0, sizeof *p);
    p->key = *key;
    p->used = g_tick;
    plan_make(p, bias, mask);
    return p->usable ? p : NULL;
}

/* Runs plan p (bias NULL: a plan without one); 0 when cuBLASLt refused (the plan is then dropped
 * for the fallback, and the error cleared: nothing was queued). An error already pending is an
 * earlier op's, for its own check to report: nothing runs behind it, and it is not cleared. */
static int plan_run(lt_plan *p, const void *a, const void *b, void *d, const void *bias, const void *mask)
{
    const float one = 1.0f, zero = 0.0f;
    if (cudaPeekAtLastError() != cudaSuccess) return 0;
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    if (bias) st = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    if (st == CUBLAS_STATUS_SUCCESS && mask)
        st = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &mask, sizeof mask);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmul(g_lt, p->op, &one, a, p->a, b, p->b, &zero, d, p->d, d, p->d, &p->algo, g_lt_ws, p->ws,
                            g_stream);
    if (st == CUBLAS_STATUS_SUCCESS) return 1;
    /* A failure while recording may be the recording's (a capture another op invalidated): the
     * plan stays for the passes outside graphs, and the recording fails on its own. */
    if (!cuda_recording()) p->usable = 0;
    cudaGetLastError();
    return 0;
}

static void key_init(lt_key *k, lt_kind kind, dt_dtype t, int m, int n, int kk, const void *a, const void *b,
                     const void *d, const void *bias, const void *mask)
{
    memset(k, 0, sizeof *k); /* the padding too: keys are compared with memcmp */
    k->kind = kind;
    k->t = t;
    k->m = m;
    k->n = n;
    k->k = kk;
    k->align[0] = align_of(a);
    k->align[1] = align_of(b);
    k->align[2] = align_of(d);
    k->align[3] = bias ? align_of(bias) : 0;
    k->align[4] = mask ? align_of(mask) : 0;
}

/* Whether the forward that last wrote each ReLU mask ran with its epilogue keeping the mask (a
 * fallback or a plain ReLU epilogue left it unwritten): a data gradient reads a mask only then.
 * The forward of a pass always comes before the backward that reads its mask, so the entry is
 * that pass's. A new mask takes the oldest entry's place (the masks of freed models stay until
 * then): one pushed out before its backward is only not read (the unfused kernels run). */
#define LT_MASKS 64
static struct {
    const void *mask;
    int kept;
} g_masks[LT_MASKS];
static int g_mask_next; /* the entry a new mask takes */

static void mask_note(const void *mask, int kept)
{
    for (int i = 0; i < LT_MASKS; i++)
        if (g_masks[i].mask == mask) {
            g_masks[i].kept = kept;
            return;
        }
    if (!kept) return; /* not listed reads as not kept */
    g_masks[g_mask_next].mask = mask;
    g_masks[g_mask_next].kept = 1;
    g_mask_next = (g_mask_next + 1) % LT_MASKS;
}

static int mask_kept(const void *mask)
{
    for (int i = 0; mask && i < LT_MASKS; i++)
        if (g_masks[i].mask == mask) return g_masks[i].kept;
    return 0;
}

/* The bias (and bias gradient) vectors are read and written in 16-byte pieces by the epilogues;
 * a vector less aligned takes the fallback. */
static int bias_aligned(const void *p) { return align_of(p) >= 16; }

static int counted(int fused)
{
    if (fused)
        g_fused++;
    else
        g_unfused++;
    return fused;
}

size_t cuda_fc_relu_mask_bytes(int batch, int out)
{
    return batch > 0 && out > 0 ? (size_t)mask_ld(out) / 8 * (size_t)batch : 0;
}

int cuda_lt_fc_fwd16(dt_dtype t, const uint16_t *x16, const uint16_t *w16, const uint16_t *b16, uint16_t *y, int relu,
                     void *mask, int batch, int in, int out)
{
    const void *keep = relu ? mask : NULL;
    int fused = 0;
    if (batch > 0 && in > 0 && out > 0 && b16 && bias_aligned(b16)) {
        lt_key key;
        key_init(&key,
                 keep   ? LT_FWD_BIAS_RELU_AUX
                 : relu ? LT_FWD_BIAS_RELU
                        : LT_FWD_BIAS,
                 t, out, batch, in, w16, x16, y, b16, keep);
        lt_plan *p = plan_for(&key, b16, keep);
        fused = p && plan_run(p, w16, x16, y, b16, keep);
    }
    if (keep) mask_note(keep, fused);
    return counted(fused);
}

int cuda_lt_fc_wgrad16(dt_dtype t, const uint16_t *x16, const uint16_t *dy16, float *dw, float *db, int batch, int in,
                       int out)
{
    if (batch <= 0 || in <= 0 || out <= 0 || !db || !bias_aligned(db)) return counted(0);
    lt_key key;
    key_init(&key, LT_BWD_BGRADB, t, in, out, batch, x16, dy16, dw, db, NULL);
    lt_plan *p = plan_for(&key, db, NULL);
    return counted(p && plan_run(p, x16, dy16, dw, db, NULL));
}

int cuda_lt_fc_dgrad_relu16(dt_dtype t, const uint16_t *dy16, const uint16_t *w16, uint16_t *dx, const void *mask,
                            int batch, int in, int out)
{
    if (batch <= 0 || in <= 0 || out <= 0 || !mask_kept(mask)) return counted(0);
    lt_key key;
    key_init(&key, LT_BWD_DRELU, t, in, batch, out, w16, dy16, dx, NULL, mask);
    lt_plan *p = plan_for(&key, NULL, mask);
    return counted(p && plan_run(p, w16, dy16, dx, NULL, mask));
}

void cuda_lt_counts(long *fused, long *unfused)
{
    *fused = g_fused;
    *unfused = g_unfused;
}
