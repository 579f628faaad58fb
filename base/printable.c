/*
 * printable.c - control characters out of text bound for a terminal (printable.h).
 */
#include "base/printable.h"

#include <stdio.h>
#include <string.h>

void text_escape_controls(const char *in, char *out, size_t n)
{
    if (!n) return;
    size_t k = 0;
    for (const unsigned char *p = (const unsigned char *)(in ? in : ""); *p; p++) {
        const int c1 = *p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f;
        char esc[9] = "";
        if (*p == '\n')
            snprintf(esc, sizeof esc, "\\n");
        else if (*p == '\t')
            snprintf(esc, sizeof esc, "\\t");
        else if (*p == '\r')
            snprintf(esc, sizeof esc, "\\r");
        else if (*p < 0x20 || *p == 0x7f)
            snprintf(esc, sizeof esc, "\\x%02x", *p);
        else if (c1)
            snprintf(esc, sizeof esc, "\\x%02x\\x%02x", p[0], p[1]);
        const size_t len = esc[0] ? strlen(esc) : 1;
        if (k + len >= n) break; /* cut at a whole character or escape */
        if (esc[0])
            memcpy(out + k, esc, len);
        else
            out[k] = (char)*p;
        k += len;
        if (c1) p++;
    }
    out[k] = '\0';
}
