/*
 * sampler.c - the data position of a step and the samples it holds (sampler.h).
 */
#include "runtime/data/sampler.h"
#include "base/rng.h"
#include "base/status.h"

#include <limits.h>
#include <stdlib.h>

/* The stream of the epoch orders; the synthetic dataset used it before there were formats, so
 * its sample order is unchanged. */
#define STREAM_PERM 0x7065726dull

dt_status sampler_init(ds_sampler *s, size_t n, uint64_t seed, int shuffle, int drop_last)
{
    *s = (ds_sampler){.n = n, .seed = seed, .shuffle = shuffle, .drop_last = drop_last, .perm_epoch = -1};
    if (n < 1 || n > UINT32_MAX + (size_t)1)
        return status_set_error(DT_ERR_INVALID_ARG, "a dataset of %zu samples: the sampler takes 1 to 2^32", n);
    if (shuffle && !(s->perm = malloc(n * sizeof *s->perm)))
        return status_set_error(DT_ERR_NOMEM, "out of memory for the order of %zu samples (%zu MiB)", n,
                                n * sizeof *s->perm >> 20);
    return DT_OK;
}

void sampler_free(ds_sampler *s)
{
    free(s->perm);
    s->perm = NULL;
}

size_t sampler_steps_per_epoch(const ds_sampler *s, size_t g) { return s->drop_last ? s->n / g : (s->n + g - 1) / g; }

/* Steps left in an epoch from offset o. */
static size_t steps_left(const ds_sampler *s, size_t o, size_t g)
{
    if (o >= s->n) return 0;
    const size_t rest = s->n - o;
    return s->drop_last ? rest / g : (rest + g - 1) / g;
}

dt_status sampler_locate(const ds_sampler *s, long step, size_t g, long *epoch, size_t *offset)
{
    if (g < 1 || (s->drop_last && s->n < g))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "the dataset of %zu samples is smaller than one global batch of %zu: "
                                "use a smaller --batch or fewer ranks%s",
                                s->n, g, s->drop_last ? ", or drop --drop-last" : "");
    if (step < s->s0)
        return status_set_error(DT_ERR_INVALID_ARG, "step %ld comes before the data position's anchor at step %ld",
                                step, s->s0);
    size_t d = (size_t)(step - s->s0);
    const size_t r = steps_left(s, s->o0, g);
    if (d < r) {
        *epoch = s->e0;
        *offset = s->o0 + d * g;
        return DT_OK;
    }
    d -= r;
    const size_t per = sampler_steps_per_epoch(s, g), more = d / per;
    /* An anchor's epoch comes from a checkpoint file or the caller: a crafted one near LONG_MAX
     * would overflow here (undefined behaviour, then a negative epoch seeding the order). */
    if (more >= (size_t)(LONG_MAX - s->e0))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "step %ld is past the last epoch a long can count from the data position's epoch "
                                "%ld: the position is not one a run reached (start a new --checkpoint-dir, or "
                                "anchor at a real epoch)",
                                step, s->e0);
    *epoch = s->e0 + 1 + (long)more;
    *offset = (d % per) * g;
    return DT_OK;
}

dt_status sampler_set_anchor(ds_sampler *s, long step, long epoch, size_t offset)
{
    if (step < 0 || epoch < 0 || offset >= s->n)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "data position epoch %ld offset %zu at step %ld does not fit a dataset "
                                "of %zu samples: the checkpoint was taken on other data (use the same --data, or start "
                                "a new --checkpoint-dir)",
                                epoch, offset, step, s->n);
    s->s0 = step, s->e0 = epoch, s->o0 = offset;
    return DT_OK;
}

static void make_order(ds_sampler *s, long epoch)
{
    for (size_t i = 0; i < s->n; i++) s->perm[i] = (uint32_t)i;
    for (size_t i = s->n - 1; i > 0; i--) {
        size_t j = (size_t)(rng_at(s->seed, STREAM_PERM + (uint64_t)epoch, i) % (i + 1));
        uint32_t t = s->perm[i];
        s->perm[i] = s->perm[j];
        s->perm[j] = t;
    }
    s->perm_epoch = epoch;
}

uint32_t sampler_at(ds_sampler *s, long epoch, size_t p)
{
    p %= s->n;
    if (!s->shuffle) return (uint32_t)p;
    if (epoch != s->perm_epoch) make_order(s, epoch);
    return s->perm[p];
}

dt_status sampler_batch(ds_sampler *s, long step, int rank, int world, int batch, uint32_t *idx, long *epoch)
{
    if (step < 0 || world < 1 || rank < 0 || rank >= world || batch < 1)
        return status_set_error(DT_ERR_INVALID_ARG, "bad step %ld, rank %d of %d or batch %d", step, rank, world,
                                batch);
    size_t off;
    dt_status st = sampler_locate(s, step, (size_t)world * (size_t)batch, epoch, &off);
    if (st) return st;
    const size_t p0 = off + (size_t)rank * (size_t)batch;
    for (int j = 0; j < batch; j++) idx[j] = sampler_at(s, *epoch, p0 + (size_t)j);
    return DT_OK;
}
