/*
 * fuzz_params.c - the --init-params reader and the --dump-params writer (launch/train/params_io.c,
 * #included for its static read_params).
 *
 * Input: a mode byte, a 16-bit little-endian parameter count n, then the file. Mode bit 0: n is
 * the file's whole number of floats instead (so the size check passes and the reader reaches the
 * values).
 * Beyond ASan/UBSan: the file is accepted exactly when it holds 4*n bytes of finite little-endian
 * fp32 (decided here from the bytes); an accepted file gives those floats bit for bit, and writing
 * them back with params_dump gives the same bytes, read again the same floats; a refused one
 * gives a message that names --init-params and the file.
 */
#include "fuzz_common.h"

#include "launch/train/params_io.c"

static int same_file(const char *path, const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    int same = 1;
    for (size_t i = 0; same && i < size; i++) same = fgetc(f) == data[i];
    same = same && fgetc(f) == EOF;
    fclose(f);
    return same;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char dir[64], in[96], out[96];
    if (size < 3) return 0;
    if (!dir[0]) {
        fuzz_scratch_dir(dir, sizeof dir, "params");
        snprintf(in, sizeof in, "%s/in.bin", dir);
        snprintf(out, sizeof out, "%s/out.bin", dir);
    }
    const uint8_t mode = data[0];
    const uint8_t *file = data + 3;
    const size_t fsize = size - 3;
    const size_t n = mode & 1 ? fsize / 4 : (size_t)data[1] | (size_t)data[2] << 8;
    fuzz_write_file(in, file, fsize);

    /* What the reader must decide, from the bytes alone. */
    int want = fsize == 4 * n;
    for (size_t i = 0; want && i < n; i++) {
        uint32_t u = (uint32_t)file[4 * i] | (uint32_t)file[4 * i + 1] << 8 | (uint32_t)file[4 * i + 2] << 16 |
                     (uint32_t)file[4 * i + 3] << 24;
        want = (u & 0x7f800000u) != 0x7f800000u; /* not inf or nan */
    }

    float *p = malloc(n * sizeof *p + 1);
    FUZZ_CHECK(p, "out of memory");
    char why[1024] = "";
    const int got = read_params(in, p, n, why, sizeof why) == 0;
    FUZZ_CHECK(got == want, "the reader %s a file of %zu bytes for %zu parameters", got ? "accepted" : "refused", fsize,
               n);
    if (!got) {
        FUZZ_CHECK(strstr(why, "--init-params") && strstr(why, in), "the refusal does not name the file: %s", why);
    } else {
        FUZZ_CHECK(n == 0 || memcmp(p, file, 4 * n) == 0, "the floats read are not the file's bytes");
        FUZZ_CHECK(params_dump(out, p, n) == EXIT_OK, "params_dump of %zu accepted parameters failed", n);
        FUZZ_CHECK(same_file(out, file, fsize), "params_dump did not write back the bytes that were read");
        float *q = malloc(n * sizeof *q + 1);
        FUZZ_CHECK(q, "out of memory");
        FUZZ_CHECK(read_params(out, q, n, why, sizeof why) == 0, "the dumped file is refused: %s", why);
        FUZZ_CHECK(n == 0 || memcmp(p, q, 4 * n) == 0, "the dumped file reads back other floats");
        free(q);
        unlink(out);
    }
    free(p);
    unlink(in);
    return 0;
}
