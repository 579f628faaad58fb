/*
 * printable.c - control characters out of text bound for a terminal (printable.h).
 */
#include "base/printable.h"

#include <stdio.h>
#include <string.h>

/* The length of the well-formed UTF-8 sequence that starts at p (2 to 4), or 0 where none does: a
 * stray continuation byte, a lead byte short of its continuation bytes, an overlong form, a UTF-16
 * surrogate or a code point past U+10FFFF (the table of RFC 3629). Reads no further than the first
 * byte that fails, so never past the string's end. */
static size_t utf8_sequence(const unsigned char *p)
{
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf; /* the second byte's range */
    if (p[0] >= 0xc2 && p[0] <= 0xdf)
        len = 2;
    else if (p[0] >= 0xe0 && p[0] <= 0xef)
        len = 3, lo = p[0] == 0xe0 ? 0xa0 : 0x80, hi = p[0] == 0xed ? 0x9f : 0xbf;
    else if (p[0] >= 0xf0 && p[0] <= 0xf4)
        len = 4, lo = p[0] == 0xf0 ? 0x90 : 0x80, hi = p[0] == 0xf4 ? 0x8f : 0xbf;
    else
        return 0;
    if (p[1] < lo || p[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if (p[i] < 0x80 || p[i] > 0xbf) return 0;
    return len;
}

void text_escape_controls(const char *in, char *out, size_t n)
{
    if (!n) return;
    size_t k = 0;
    for (const unsigned char *p = (const unsigned char *)(in ? in : ""); *p;) {
        /* A byte of no well-formed sequence is escaped too: a terminal in an 8-bit mode takes a
         * lone 0x9b for CSI, and a file name in Latin-1 reads unambiguously as \xe9. */
        const size_t seq = *p >= 0x80 ? utf8_sequence(p) : 1;
        const int c1 = seq == 2 && p[0] == 0xc2 && p[1] <= 0x9f;
        char esc[9] = "";
        if (*p == '\n')
            snprintf(esc, sizeof esc, "\\n");
        else if (*p == '\t')
            snprintf(esc, sizeof esc, "\\t");
        else if (*p == '\r')
            snprintf(esc, sizeof esc, "\\r");
        else if (*p < 0x20 || *p == 0x7f || seq == 0)
            snprintf(esc, sizeof esc, "\\x%02x", *p);
        else if (c1)
            snprintf(esc, sizeof esc, "\\x%02x\\x%02x", p[0], p[1]);
        const size_t in_len = seq ? seq : 1, len = esc[0] ? strlen(esc) : in_len;
        if (k + len >= n) break; /* cut at a whole character or escape */
        memcpy(out + k, esc[0] ? esc : (const char *)p, len);
        k += len;
        p += in_len;
    }
    out[k] = '\0';
}
