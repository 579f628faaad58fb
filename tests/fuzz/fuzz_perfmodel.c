/*
 * fuzz_perfmodel.c - the files and values `dtrain model-perf` reads: `bench step --profile` output
 * (pm_read_step_profile, launch/perfmodel/perfmodel_input.c; through a file, mp_model_load's
 * --profile PATH[:MS], which builds the profiled model from the grammar), `bench allreduce` output
 * (pm_read_allreduce, and mp_read_allreduce's ring fit pm_fit_ring, perfmodel.c) and
 * `--synthetic NAME:PARAMS_M:LAYERS:COMPUTE_MS` (model_source.c).
 *
 * Input: a mode byte (0: the profile text, 1: the allreduce text, 2: --synthetic, 3: --profile of a
 * file holding the text, with --input 4 when bit 2 is set), then the text.
 * Beyond ASan/UBSan/leaks: a refusal says why; an accepted profile has a header of >= 1 rank and
 * batch, one profiled row of fp32, bf16 or fp16, at most PM_MAX_LAYERS layers; accepted allreduce
 * rows are 1..PM_MAX_ROWS under a header of >= 1 rank, and a ring fitted to them has a latency >= 0
 * and a positive bandwidth; a model loaded has 1..PM_MAX_LAYERS layers whose gradient slices lie
 * in [0, count), and a finite time >= 0 for each (model-perf's table would read inf and nan).
 */
#include "fuzz_common.h"

#include "base/status.h"
#include "launch/perfmodel/model_source.h"
#include "launch/perfmodel/perfmodel.h"
#include "launch/perfmodel/perfmodel_input.h"

#include <math.h>

static char dir[64], path[128];

static void check_model(const mp_model *m)
{
    FUZZ_CHECK(m->nlayers >= 1 && m->nlayers <= PM_MAX_LAYERS, "%d layers", m->nlayers);
    FUZZ_CHECK(memchr(m->name, '\0', sizeof m->name), "the name is not terminated");
    for (int i = 0; i < m->nlayers; i++) {
        const pm_layer *l = &m->layers[i];
        FUZZ_CHECK(l->off <= m->count && l->n <= m->count - l->off, "layer %d: [%zu, +%zu) of %zu", i, l->off, l->n,
                   m->count);
        FUZZ_CHECK(l->bwd_s >= 0 && isfinite(l->bwd_s), "layer %d: backward %g s", i, l->bwd_s);
    }
    FUZZ_CHECK(m->forward_s >= 0 && m->after_s >= 0 && isfinite(m->forward_s) && isfinite(m->after_s),
               "forward %g s, after %g s", m->forward_s, m->after_s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    if (!dir[0]) {
        fuzz_scratch_dir(dir, sizeof dir, "perfmodel");
        snprintf(path, sizeof path, "%s/profile.txt", dir);
    }
    const int mode = data[0] & 3;
    char *text = fuzz_str(data + 1, size - 1);
    dt_status s;
    if (mode == 0) {
        pm_profile *p = malloc(sizeof *p);
        FUZZ_CHECK(p, "out of memory");
        s = pm_read_step_profile(text, p);
        if (!s) {
            FUZZ_CHECK(p->ranks >= 1 && p->batch >= 1, "accepted %d ranks x batch %d", p->ranks, p->batch);
            FUZZ_CHECK(!strcmp(p->precision, "fp32") || !strcmp(p->precision, "bf16") || !strcmp(p->precision, "fp16"),
                       "precision '%.16s'", p->precision);
            FUZZ_CHECK(p->nlayers >= 0 && p->nlayers <= PM_MAX_LAYERS, "%d layers", p->nlayers);
            FUZZ_CHECK(memchr(p->model, '\0', sizeof p->model) && memchr(p->input, '\0', sizeof p->input),
                       "a text not terminated");
        }
        free(p);
    } else if (mode == 1) {
        pm_allreduce_rows *r = malloc(sizeof *r);
        FUZZ_CHECK(r, "out of memory");
        s = pm_read_allreduce(text, r);
        if (!s) {
            FUZZ_CHECK(r->ranks >= 1 && r->n >= 1 && r->n <= PM_MAX_ROWS, "%d ranks, %d rows", r->ranks, r->n);
            pm_link link;
            if (!pm_fit_ring(r->ranks, r->bytes, r->secs, r->n, &link))
                FUZZ_CHECK(link.alpha_s >= 0 && link.busbw > 0, "fitted alpha %g s, busbw %g", link.alpha_s,
                           link.busbw);
            else
                FUZZ_CHECK(dt_last_error()[0], "a ring fit refused without a reason");
        }
        free(r);
    } else {
        mp_model *m = malloc(sizeof *m);
        FUZZ_CHECK(m, "out of memory");
        const mp_flops fl = {.input = (data[0] & 4) ? "4" : NULL, .batch = 1, .tflops = 1};
        if (mode == 3) fuzz_write_file(path, data + 1, size - 1);
        s = mp_model_load(mode == 3 ? path : text, mode == 3 ? MP_PROFILE : MP_SYNTHETIC, &fl, m);
        if (!s) check_model(m);
        free(m);
    }
    if (s) FUZZ_CHECK(dt_last_error()[0], "status %d without a reason", (int)s);
    free(text);
    return 0;
}
