/*
 * fuzz_meminfo.c - the /proc/meminfo text `dtrain doctor` reads (doctor_meminfo_parse,
 * launch/doctor/memory_facts.c).
 *
 * Input: the file's bytes, NULs and all, handed over as (pointer, length) in a buffer of exactly
 * that length, so a read past the end is ASan's. Beyond ASan/UBSan/leaks: a refusal leaves both
 * outputs untouched and says why in printable text that fits any buffer size; an acceptance gives
 * 0 < MemTotal, MemAvailable <= MemTotal, both whole kB, equal to what the first "MemTotal:" and
 * "MemAvailable:" lines say by strtoull; the two values written back as a meminfo read back the same.
 */
#include "fuzz_common.h"
#include "launch/doctor/doctor_memory.h"

/* The value in kB of the first line that starts with "name:", by strtoull: an oracle apart from
 * the parser's own digit loop. -1: no such line. */
static long long first_kb(const char *text, size_t len, const char *name)
{
    const size_t nl = strlen(name);
    for (size_t at = 0; at < len;) {
        const char *line = text + at;
        const char *end = memchr(line, '\n', len - at);
        const size_t ll = end ? (size_t)(end - line) : len - at;
        at += ll + (end != NULL);
        if (ll <= nl || memcmp(line, name, nl) || line[nl] != ':') continue;
        char *buf = malloc(ll - nl);
        if (!buf) abort();
        memcpy(buf, line + nl + 1, ll - nl - 1);
        buf[ll - nl - 1] = '\0';
        const long long v = (long long)strtoull(buf, NULL, 10);
        free(buf);
        return v;
    }
    return -1;
}

static void check_error(const char *err, size_t n)
{
    const size_t len = strnlen(err, n);
    FUZZ_CHECK(len < n, "the error is not terminated within its %zu bytes", n);
    FUZZ_CHECK(n < 2 || len > 0, "a refusal without a reason");
    for (size_t i = 0; i < len; i++)
        FUZZ_CHECK(err[i] >= 0x20 && err[i] < 0x7f, "the error has byte 0x%02x: '%s'", (unsigned char)err[i], err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size ? size : 1);
    if (!text) return 0;
    memcpy(text, data, size);
    size_t total = 7, avail = 9;
    char err[160];
    memset(err, 'x', sizeof err);
    if (doctor_meminfo_parse(text, size, &total, &avail, err, sizeof err)) {
        FUZZ_CHECK(total == 7 && avail == 9, "a refusal changed the outputs to %zu, %zu", total, avail);
        check_error(err, sizeof err);
        /* A small error buffer is cut, never overrun (ASan watches the malloc'd bytes). */
        const size_t n = 1 + size % 16;
        char *small = malloc(n);
        if (small) {
            FUZZ_CHECK(doctor_meminfo_parse(text, size, &total, &avail, small, n) == -1, "accepted the second time");
            check_error(small, n);
            free(small);
        }
        free(text);
        return 0;
    }
    FUZZ_CHECK(total > 0 && avail <= total, "MemTotal %zu, MemAvailable %zu", total, avail);
    FUZZ_CHECK(total % 1024 == 0 && avail % 1024 == 0, "not whole kB: %zu, %zu", total, avail);
    const long long t = first_kb(text, size, "MemTotal"), a = first_kb(text, size, "MemAvailable");
    FUZZ_CHECK(t >= 0 && (size_t)t == total / 1024, "MemTotal %zu B but its line says %lld kB", total, t);
    FUZZ_CHECK(a >= 0 && (size_t)a == avail / 1024, "MemAvailable %zu B but its line says %lld kB", avail, a);
    char back[128];
    const int k = snprintf(back, sizeof back, "MemTotal: %zu kB\nMemAvailable: %zu kB\n", total / 1024, avail / 1024);
    size_t t2 = 0, a2 = 0;
    FUZZ_CHECK(doctor_meminfo_parse(back, (size_t)k, &t2, &a2, err, sizeof err) == 0 && t2 == total && a2 == avail,
               "'%s' read back as %zu, %zu (%s)", back, t2, a2, err);
    free(text);
    return 0;
}
