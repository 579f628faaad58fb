/*
 * graph.cu - step graphs on the CUDA backend (kernels/backend.h, graph_begin..graph_free): a pass
 * recorded once by stream capture (cudaStreamBeginCapture) and replayed as one cudaGraphLaunch,
 * so a small model's step costs one launch of the host instead of one per kernel.
 *
 * Recording runs on a stream of its own (capture cannot run on the legacy default stream, which
 * the backend's ops use unless a caller set another): graph_begin points the ops and the cuBLAS
 * handle at it and graph_end points the ops back (cuBLAS follows them at their next GEMM). The
 * handle records with the recording stream's own workspace (each stream has a fixed one, made and
 * bound before capture), as cuBLAS asks for capture: its default workspace pool could otherwise
 * be allocated inside a recording and grow with each one. The capture is thread-local, so the
 * loader's and the communicator's threads are not bound by it, while anything this thread does
 * that cannot be recorded (a synchronizing copy, a wait) fails the recording instead of running
 * out of order. The loss's arrival is recorded as an external event node (queue_loss_result), so
 * loss_wait after a launch waits for that launch's loss, not for its whole backward.
 */
#include "kernels/cuda/cuda_internal.cuh"

static cudaStream_t g_rec_stream, g_rec_from;
static int g_recording;

int cuda_recording(void) { return g_recording; }

dt_status cuda_graph_begin(backend *be)
{
    (void)be;
    if (g_recording) return status_set_error(DT_ERR_INVALID_ARG, "cuda graph_begin: a recording is under way");
    cudaError_t e = cudaSuccess;
    if (!g_rec_stream) e = cudaStreamCreateWithFlags(&g_rec_stream, cudaStreamNonBlocking);
    TRY(cuda_err(e, "graph_begin", "making the recording stream"));
    /* Made now: nothing is created while recording. cuBLAS is bound to the recording stream, with
     * that stream's workspace, before capture begins (blas binds it to the ops' stream). */
    TRY(loss_event_ready("graph_begin"));
    g_rec_from = g_stream;
    g_stream = g_rec_stream;
    cublasHandle_t h;
    dt_status s = blas("graph_begin", &h);
    if (!s && (e = cudaStreamBeginCapture(g_rec_stream, cudaStreamCaptureModeThreadLocal)) != cudaSuccess) {
        s = cuda_err(e, "graph_begin", "cudaStreamBeginCapture");
        /* Not a sticky error: the pass runs without a graph, and its first launch check must not
         * take this one for its own. */
        cudaGetLastError();
    }
    if (s) {
        g_stream = g_rec_from;
        return s;
    }
    g_recording = 1;
    return DT_OK;
}

dt_status cuda_graph_end(backend *be, int keep, void **graph)
{
    (void)be;
    *graph = NULL;
    if (!g_recording) return status_set_error(DT_ERR_INVALID_ARG, "cuda graph_end: nothing is being recorded");
    cudaGraph_t gr = NULL;
    const cudaError_t e = cudaStreamEndCapture(g_rec_stream, &gr);
    g_recording = 0;
    g_stream = g_rec_from;
    if (e != cudaSuccess || !gr) {
        if (gr) cudaGraphDestroy(gr);
        cudaGetLastError(); /* a failed capture is not a sticky error: leave nothing for later checks */
        return status_set_error(DT_ERR_DEVICE,
                                "cuda graph_end: the recording failed: %s (%s): an op that waits or copies to "
                                "the host ran while recording",
                                cudaGetErrorName(e), cudaGetErrorString(e));
    }
    if (!keep) {
        cudaGraphDestroy(gr);
        return DT_OK;
    }
    cudaGraphExec_t ex = NULL;
    const cudaError_t ie = cudaGraphInstantiate(&ex, gr, 0);
    cudaGraphDestroy(gr);
    if (ie != cudaSuccess) cudaGetLastError(); /* as above: the pass runs without a graph */
    TRY(cuda_err(ie, "graph_end", "cudaGraphInstantiate"));
    *graph = (void *)ex;
    return DT_OK;
}

dt_status cuda_graph_launch(backend *be, void *graph)
{
    (void)be;
    if (!graph) return status_set_error(DT_ERR_INVALID_ARG, "cuda graph_launch: no graph");
    return cuda_err(cudaGraphLaunch((cudaGraphExec_t)graph, g_stream), "graph_launch", "cudaGraphLaunch");
}

void cuda_graph_free(backend *be, void *graph)
{
    (void)be;
    if (graph) cudaGraphExecDestroy((cudaGraphExec_t)graph);
}
