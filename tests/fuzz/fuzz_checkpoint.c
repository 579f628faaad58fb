/*
 * fuzz_checkpoint.c - dt_model's checkpoint reader (runtime/checkpoint/ckpt_read.c for format
 * versions 1-3, ckpt_read4.c and ckpt_file.c for version 4, ckpt_load.c): a file from outside,
 * read into a 9-parameter model (fc:3 on 2 inputs).
 *
 * Input: one mode byte, then the file's bytes. Mode bit 0: recompute every CRC of the image first
 * (ckpt_seal), so the fuzzer reaches the field checks behind them instead of stopping at the CRC;
 * bits 1-2: the optimizer the file is read for (AdamW, SGD with momentum, SGD without, none =
 * weights only); bit 3: with a loss scaler; bit 4: through dt_checkpoint_load_latest on the
 * directory (name listing and fallback) instead of ckpt_read_file; bit 5: also read the version 3
 * data block, for data of 3 channels (a block of other channels is refused, one that is accepted
 * gives finite figures and std >= 0).
 * Beyond ASan/UBSan (a copy past the parameter buffer, a huge allocation: -malloc_limit_mb), the
 * reader must keep its promises: a file it accepts gives finite parameters and the step of its
 * name; a file it refuses leaves the parameters untouched; a loss scaler loaded from one holds a
 * window of recent overflows (the "scaler.window" section) of flags 0 or 1, no longer than its
 * configured window nor its updates, with no more overflows than its skipped steps.
 */
#include "fuzz_common.h"
#include "runtime/checkpoint/ckpt_format.h"
#include "runtime/model/model.h"
#include "dtrain.h"

#include <math.h>
#include <unistd.h>

static dt_model *model;
static dt_optimizer *optims[3];
static dt_scaler *scaler;
static float baseline[9];
static char dir[64], path[128];

static void setup(void)
{
    fuzz_scratch_dir(dir, sizeof dir, "ckpt");
    snprintf(path, sizeof path, "%s/ckpt-0000000007.dtc", dir);
    FUZZ_CHECK(dt_model_create(NULL, "fc:3", "2", 1, 2, &model) == DT_OK, "%s", dt_last_error());
    FUZZ_CHECK(dt_model_num_params(model) == 9, "model size");
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    oc.kind = DT_OPTIM_ADAMW;
    FUZZ_CHECK(dt_optimizer_create(&oc, 9, &optims[0]) == DT_OK, "adamw");
    oc.kind = DT_OPTIM_SGD;
    FUZZ_CHECK(dt_optimizer_create(&oc, 9, &optims[1]) == DT_OK, "sgd");
    oc.momentum = 0;
    FUZZ_CHECK(dt_optimizer_create(&oc, 9, &optims[2]) == DT_OK, "sgd without momentum");
    dt_scaler_config scc;
    dt_scaler_defaults(&scc);
    FUZZ_CHECK(dt_scaler_create(&scc, &scaler) == DT_OK, "scaler");
    memcpy(baseline, dt_model_params(model), sizeof baseline);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!model) setup();
    if (size < 1) return 0;
    const int mode = data[0];
    size_t len = size - 1;
    unsigned char *img = malloc(len ? len : 1);
    FUZZ_CHECK(img, "out of memory");
    memcpy(img, data + 1, len);
    if (mode & 1) ckpt_seal(img, len);
    /* The name carries the header's step when it has one a name can carry, so the fuzzer is not
     * stopped by the name check either. */
    long name_step = 7;
    int64_t hstep = -1;
    uint32_t version = 0;
    if (len >= 16) memcpy(&version, img + 8, sizeof version);
    if (version == 4 && len >= sizeof(ckpt4_header))
        memcpy(&hstep, img + offsetof(ckpt4_header, step), sizeof hstep);
    else if (version != 4 && len >= sizeof(ckpt_header))
        memcpy(&hstep, img + offsetof(ckpt_header, step), sizeof hstep);
    if (hstep >= 0 && hstep <= CKPT_MAX_STEP) name_step = (long)hstep;
    snprintf(path, sizeof path, "%s/ckpt-%010ld.dtc", dir, name_step);
    fuzz_write_file(path, img, len);
    free(img);

    const int which = (mode >> 1) & 3;
    dt_optimizer *o = which < 3 ? optims[which] : NULL;
    dt_scaler *sc = (mode & 8) ? scaler : NULL;
    memcpy(dt_model_params(model), baseline, sizeof baseline);
    long step = -1;
    int world = -1;
    float stats[6] = {0};
    dt_ckpt_data cd = {.channels = 3, .mean = stats, .std = stats + 3};
    dt_ckpt_data *want_data = (mode & 32) ? &cd : NULL;
    dt_status s;
    if (mode & 16)
        s = dt_checkpoint_load_latest(NULL, dir, model, o, sc, want_data, &step);
    else
        s = ckpt_read_file_data(path, name_step, model, o, sc, want_data, &step, &world, NULL);
    if (s == DT_OK && want_data && cd.present) {
        FUZZ_CHECK(cd.epoch >= 0 && cd.offset >= 0, "accepted data position %ld, %ld", cd.epoch, cd.offset);
        for (int i = 0; i < 6; i++)
            FUZZ_CHECK(isfinite(stats[i]) && (i < 3 || stats[i] >= 0), "accepted figure %d = %g", i, (double)stats[i]);
    }
    const float *p = dt_model_params(model);
    /* The directory load says step 0 both when it found nothing loadable (the model untouched) and
     * when it loaded a sound checkpoint of step 0 (dt_checkpoint_save takes step 0): the latter
     * is an acceptance like any other. */
    const int nothing_loaded = (mode & 16) && step == 0 && memcmp(p, baseline, sizeof baseline) == 0;
    if (s == DT_OK && !nothing_loaded) {
        FUZZ_CHECK(step == name_step, "accepted step %ld from a file named for step %ld", step, name_step);
        for (int i = 0; i < 9; i++) FUZZ_CHECK(isfinite(p[i]), "accepted parameter %d = %g", i, (double)p[i]);
        if (!(mode & 16)) FUZZ_CHECK(world >= 1, "accepted world %d", world);
        if (sc) {
            static unsigned char flags[1 << 16];
            dt_scaler_state ss;
            dt_scaler_get_state(sc, &ss);
            const int n = scaler_window_get(sc, flags, (int)sizeof flags), len = scaler_window_len(sc);
            long ones = 0;
            for (int i = 0; i < n; i++) {
                FUZZ_CHECK(flags[i] <= 1, "window flag %d is %u", i, flags[i]);
                ones += flags[i];
            }
            FUZZ_CHECK(n == len && n >= 0 && n <= 100 && n <= ss.updates && ones <= ss.skipped,
                       "a window of %d (len %d) flags, %ld overflows, after %ld updates (%ld skipped)", n, len, ones,
                       ss.updates, ss.skipped);
        }
    } else {
        /* Refused, or (the directory load) nothing loadable: the model is as it was. */
        FUZZ_CHECK(memcmp(p, baseline, sizeof baseline) == 0, "status %d, yet the parameters changed", (int)s);
        FUZZ_CHECK(s != DT_OK || step == 0, "nothing loaded but step %ld", step);
    }
    unlink(path);
    return 0;
}
