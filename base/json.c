/*
 * json.c - the JSON string escaper (json.h).
 */
#include "base/json.h"

/* The length of the well-formed UTF-8 sequence at p (RFC 3629: no overlong forms, no surrogates,
 * nothing above U+10FFFF), or 0 when the bytes there are not one. Texts reach the escaper cut at a
 * byte count (a "%.200s" of a longer value) or straight from the environment, so a byte that starts
 * no character is possible and must not reach a JSON reader, which would reject the whole document. */
static int utf8_len(const unsigned char *p)
{
    if (p[0] < 0x80) return 1;
    int n;
    unsigned lo = 0x80, hi = 0xBF; /* the allowed range of the second byte */
    if (p[0] >= 0xC2 && p[0] <= 0xDF)
        n = 2;
    else if (p[0] >= 0xE0 && p[0] <= 0xEF) {
        n = 3;
        if (p[0] == 0xE0) lo = 0xA0; /* overlong below U+0800 */
        if (p[0] == 0xED) hi = 0x9F; /* U+D800..DFFF, the surrogates */
    } else if (p[0] >= 0xF0 && p[0] <= 0xF4) {
        n = 4;
        if (p[0] == 0xF0) lo = 0x90; /* overlong below U+10000 */
        if (p[0] == 0xF4) hi = 0x8F; /* above U+10FFFF */
    } else
        return 0;
    if (p[1] < lo || p[1] > hi) return 0;
    for (int i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF) return 0; /* also stops at the terminating NUL */
    return n;
}

void json_write_string(FILE *f, const char *s)
{
    if (!s) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
            case '"': fputs("\\\"", f); break;
            case '\\': fputs("\\\\", f); break;
            case '\n': fputs("\\n", f); break;
            case '\r': fputs("\\r", f); break;
            case '\t': fputs("\\t", f); break;
            default:
                if (*p < 0x20) {
                    fprintf(f, "\\u%04x", *p);
                } else if (*p < 0x80) {
                    fputc(*p, f);
                } else {
                    const int n = utf8_len(p);
                    if (n) {
                        fwrite(p, 1, (size_t)n, f);
                        p += n - 1;
                    } else {
                        fputs("\\ufffd", f); /* one replacement character per byte that starts none */
                    }
                }
        }
    }
    fputc('"', f);
}
