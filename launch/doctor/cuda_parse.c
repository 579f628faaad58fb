/*
 * cuda_parse.c - the pure parsers of doctor's CUDA facts (doctor_cuda.h): versions, the driver
 * table, /proc/driver/nvidia/version and a toolkit's version.json. No I/O, so the unit test and
 * tests/fuzz/fuzz_cuda_parse.c feed them any text.
 */
#include "launch/doctor/doctor_cuda.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* NVIDIA's CUDA toolkit release notes, table "CUDA Toolkit and Corresponding Driver Versions"
 * (Linux x86_64, minimum driver of each toolkit's GA): the branch a toolkit first needs. A driver
 * of a branch runs every CUDA up to the newest whose minimum it meets. 565 is the branch whose
 * cuDriverGetVersion says 12.7 (no 12.7 toolkit shipped). Ascending. */
static const struct {
    int branch, cuda;
} driver_table[] = {
    {450, 11000}, {455, 11010}, {460, 11020}, {465, 11030}, {470, 11040}, {495, 11050}, {510, 11060},
    {515, 11070}, {520, 11080}, {525, 12000}, {530, 12010}, {535, 12020}, {545, 12030}, {550, 12040},
    {555, 12050}, {560, 12060}, {565, 12070}, {570, 12080}, {575, 12090}, {580, 13000},
};
#define DRIVER_TABLE_N ((int)(sizeof driver_table / sizeof *driver_table))

void cuda_version_text(int v, char *out, size_t n)
{
    if (v <= 0)
        snprintf(out, n, "unknown");
    else
        snprintf(out, n, "%d.%d", v / 1000, (v % 1000) / 10);
}

int cuda_driver_max_cuda(int branch)
{
    int best = 0;
    for (int i = 0; i < DRIVER_TABLE_N && driver_table[i].branch <= branch; i++) best = driver_table[i].cuda;
    return best;
}

int cuda_min_driver_branch(int v)
{
    for (int i = 0; i < DRIVER_TABLE_N; i++)
        if (driver_table[i].cuda >= v) return driver_table[i].branch;
    return 0;
}

/* Digits at s into *x; returns how many, 0 when none or more than 7 (no overflow, and no CUDA
 * version or driver branch is that long). */
static int digits(const char *s, int *x)
{
    int k = 0;
    *x = 0;
    while (k < 7 && isdigit((unsigned char)s[k])) *x = *x * 10 + (s[k++] - '0');
    return isdigit((unsigned char)s[k]) ? 0 : k;
}

int cuda_parse_kmod(const char *text, char *out, size_t n, int *branch)
{
    if (n) out[0] = '\0';
    *branch = 0;
    const char *p = text ? strstr(text, "Kernel Module") : NULL;
    if (!p) return -1;
    p += strlen("Kernel Module");
    while (*p == ' ' || *p == '\t') p++;
    /* "535.104.05": digits and dots, starting with the branch. */
    int b = 0, k = digits(p, &b);
    if (k == 0 || p[k] != '.' || b <= 0) return -1;
    size_t len = strspn(p, "0123456789.");
    if (len >= n) return -1;
    snprintf(out, n, "%.*s", (int)len, p);
    *branch = b;
    return 0;
}

int cuda_parse_version(const char *s)
{
    int major = 0, minor = 0;
    int k = s ? digits(s, &major) : 0;
    if (k == 0) return 0;
    if (s[k] == '\0') return major >= 1000 && major < 100000 ? major : 0; /* already 12020 */
    if (s[k] != '.') return 0;
    int k2 = digits(s + k + 1, &minor);
    if (k2 == 0 || major < 1 || major > 99 || minor > 99) return 0;
    const char after = s[k + 1 + k2];
    if (after != '\0' && after != '.') return 0;
    return major * 1000 + minor * 10;
}

int cuda_parse_version_json(const char *text)
{
    /* Not a JSON parser: the file is NVIDIA's, flat, and the first "version" after "cuda" is its
     * component's. Anything else answers 0 (the toolkit row then says the version is unknown). */
    const char *p = text ? strstr(text, "\"cuda\"") : NULL;
    if (!p) return 0;
    const char *end = strchr(p, '}');
    const char *v = strstr(p, "\"version\"");
    if (!v || (end && v > end)) return 0;
    v += strlen("\"version\"");
    while (*v == ' ' || *v == '\t' || *v == '\n' || *v == '\r') v++;
    if (*v++ != ':') return 0;
    while (*v == ' ' || *v == '\t' || *v == '\n' || *v == '\r') v++;
    if (*v++ != '"') return 0;
    char ver[32];
    size_t len = strcspn(v, "\"");
    if (len == 0 || len >= sizeof ver || v[len] != '"') return 0;
    memcpy(ver, v, len);
    ver[len] = '\0';
    /* "12.2.20230823": the patch part may be long; keep major.minor. */
    char *dot = strchr(ver, '.');
    if (dot && (dot = strchr(dot + 1, '.'))) *dot = '\0';
    return cuda_parse_version(ver);
}

int cuda_parse_runtime_header(const char *text)
{
    const char *p = text ? strstr(text, "#define CUDART_VERSION") : NULL;
    if (!p) return 0;
    p += strlen("#define CUDART_VERSION");
    if (*p != ' ' && *p != '\t') return 0;
    while (*p == ' ' || *p == '\t') p++;
    int v = 0, k = digits(p, &v);
    if (k == 0 || (p[k] && !isspace((unsigned char)p[k]))) return 0;
    return v >= 1000 && v < 100000 ? v : 0;
}
