/*
 * placement_allreduce.c - the smallest program embedding dtrain through include/dtrain.h alone:
 * initialize, print where this rank runs, allreduce a buffer and check the sum, finalize.
 *
 *   mpirun -np 2 ./example_placement
 */
#include <dtrain.h>

#include <stdio.h>
#include <stdlib.h>

int main(void)
{
    dt_config cfg;
    dt_config_defaults(&cfg);
    dt_status s = dt_config_from_env(&cfg);
    cfg.device = DT_DEVICE_CPU; /* the buffer below is host memory */
    dt_ctx *ctx = NULL;
    if (s == DT_OK) s = dt_init(&cfg, &ctx);
    if (s != DT_OK) {
        fprintf(stderr, "example: dt_init failed: %s (%s)\n", dt_last_error(), dt_strerror(s));
        dt_abort_job(NULL, 1);
        return 1;
    }

    dt_placement p;
    dt_get_placement(ctx, &p);
    printf("rank %d/%d local %d/%d node %d (%s) host %s launcher %s device %s cores %s\n", p.rank, p.world_size,
           p.local_rank, p.local_size, p.node, dt_node_name(ctx, p.node), p.hostname, dt_launcher_name(p.launcher),
           dt_device_kind_name(p.device), p.cores);

    /* Each rank contributes rank+1 in every element; the sum is n(n+1)/2 everywhere. This example
     * keeps its buffer in host memory, which is why it asked for the CPU device. */
    enum { N = 1000 };
    float *buf = malloc(N * sizeof *buf);
    int bad = 0;
    if (!buf) {
        fprintf(stderr, "example: out of memory\n");
        dt_abort_job(ctx, 1);
        return 1;
    }
    for (int i = 0; i < N; i++) buf[i] = (float)(p.rank + 1);
    s = dt_allreduce(ctx, buf, N, DT_F32, DT_SUM);
    if (s != DT_OK) {
        fprintf(stderr, "example: dt_allreduce failed: %s\n", dt_last_error());
        dt_abort_job(ctx, 1);
        return 1;
    }
    float want = (float)p.world_size * (float)(p.world_size + 1) / 2.0f;
    for (int i = 0; i < N; i++)
        if (buf[i] != want) bad++;
    printf("rank %d: allreduce of %d floats via %s: %s (each %g, expected %g)\n", p.rank, N, dt_backend_name(ctx),
           bad ? "WRONG" : "ok", (double)buf[0], (double)want);
    free(buf);
    dt_finalize(ctx);
    return bad ? 1 : 0;
}
