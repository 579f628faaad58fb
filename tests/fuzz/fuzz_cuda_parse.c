/*
 * fuzz_cuda_parse.c - the parsers of doctor's CUDA facts (launch/doctor/cuda_parse.c): the text of
 * /proc/driver/nvidia/version, a toolkit's version.json and cuda_runtime_api.h, version strings,
 * and the driver table they are looked up in.
 *
 * Input: one text, given to every parser. Beyond ASan/UBSan: a kernel module version is digits and
 * dots starting with its branch, and a failure leaves "" and 0; every version is 0 or in CUDA's
 * encoding (1000 .. 99999) and a dotted one survives cuda_version_text and back; the driver table
 * answers more CUDA for a newer branch, never less, and the oldest branch for a branch's CUDA is
 * no newer than that branch.
 */
#include "fuzz_common.h"
#include "launch/doctor/doctor_cuda.h"

#include <ctype.h>

static int in_range(int v) { return v == 0 || (v >= 1000 && v < 100000); }

static void check_table(int branch)
{
    const int here = cuda_driver_max_cuda(branch), next = cuda_driver_max_cuda(branch + 1);
    FUZZ_CHECK(in_range(here) && here <= next, "branch %d runs %d, branch %d runs %d", branch, here, branch + 1, next);
    if (here) {
        const int oldest = cuda_min_driver_branch(here);
        FUZZ_CHECK(oldest > 0 && oldest <= branch, "CUDA %d of branch %d needs branch %d", here, branch, oldest);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_str(data, size);
    char out[32];
    int branch = -7;
    if (cuda_parse_kmod(s, out, sizeof out, &branch) == 0) {
        FUZZ_CHECK(out[0] && strspn(out, "0123456789.") == strlen(out), "module version '%s'", out);
        FUZZ_CHECK(branch > 0 && atoi(out) == branch, "branch %d of '%s'", branch, out);
        check_table(branch);
    } else {
        FUZZ_CHECK(out[0] == '\0' && branch == 0, "a failure left '%s', branch %d", out, branch);
    }
    const int v = cuda_parse_version(s);
    FUZZ_CHECK(in_range(v), "version %d of '%s'", v, s);
    if (v && strchr(s, '.')) {
        char text[16];
        cuda_version_text(v, text, sizeof text);
        FUZZ_CHECK(cuda_parse_version(text) == v, "%d -> '%s' -> %d", v, text, cuda_parse_version(text));
    }
    const int j = cuda_parse_version_json(s), h = cuda_parse_runtime_header(s);
    FUZZ_CHECK(in_range(j) && in_range(h), "version.json %d, header %d", j, h);
    if (size >= 2) check_table((int)data[0] << 8 | data[1]);
    free(s);
    return 0;
}
