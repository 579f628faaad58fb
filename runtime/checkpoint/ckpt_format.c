/*
 * ckpt_format.c - the pieces of the checkpoint format that writer, reader and tests share: the
 * CRC, the file-name rule, and the test hook that re-seals a crafted image (see ckpt_format.h).
 */
#include "ckpt_format.h"

#include <stdio.h>
#include <string.h>
#include <zlib.h>

uint32_t ckpt_crc(const void *p, size_t bytes)
{
    uLong c = crc32(0L, Z_NULL, 0);
    const unsigned char *b = p;
    while (bytes > 0) { /* crc32 takes a uInt length */
        uInt chunk = bytes > (1u << 30) ? (1u << 30) : (uInt)bytes;
        c = crc32(c, b, chunk);
        b += chunk;
        bytes -= chunk;
    }
    return (uint32_t)c;
}

int ckpt_name_step(const char *name, long *step)
{
    /* Digits only: sscanf("%ld") would take signs, blanks and overflow ("ckpt-+5.dtc",
     * "ckpt-99999999999999999999.dtc") and make two names one step. */
    if (strncmp(name, "ckpt-", 5) != 0) return 0;
    const char *d = name + 5;
    long v = 0;
    int nd = 0;
    while (d[nd] >= '0' && d[nd] <= '9') {
        if (nd == CKPT_MAX_STEP_DIGITS) return 0;
        v = v * 10 + (d[nd] - '0');
        nd++;
    }
    if (nd == 0 || strcmp(d + nd, ".dtc") != 0) return 0;
    /* One name per step, the one the writer gives it: then "resumed from DIR/ckpt-<step>.dtc" is
     * always the file that was read, and two files can never claim one step. */
    char canon[64];
    snprintf(canon, sizeof canon, "ckpt-%010ld.dtc", v);
    if (strcmp(canon, name) != 0) return 0;
    *step = v;
    return 1;
}

void ckpt_seal(void *buf, size_t len)
{
    unsigned char *b = buf;
    ckpt_header h;
    if (len < sizeof h) return;
    memcpy(&h, b, sizeof h);
    size_t off = sizeof h;
    if (h.version >= 2 && len >= off + sizeof(ckpt_scaler)) {
        ckpt_scaler cs;
        memcpy(&cs, b + off, sizeof cs);
        cs.crc = 0;
        cs.crc = ckpt_crc(&cs, sizeof cs);
        memcpy(b + off, &cs, sizeof cs);
        off += sizeof cs;
    }
    if (h.version >= 3 && len >= off + sizeof(ckpt_data)) {
        ckpt_data cd;
        memcpy(&cd, b + off, sizeof cd);
        const size_t floats = 2 * (size_t)cd.channels;
        if (cd.channels <= CKPT_MAX_CHANNELS && floats * sizeof(float) <= len - off - sizeof cd) {
            cd.crc = 0;
            uint32_t c = (uint32_t)crc32(0L, (const Bytef *)&cd, sizeof cd);
            c = (uint32_t)crc32(c, b + off + sizeof cd, (uInt)(floats * sizeof(float)));
            cd.crc = c;
            memcpy(b + off, &cd, sizeof cd);
            off += sizeof cd + floats * sizeof(float);
        }
    }
    for (int i = 0; i < 3; i++) {
        /* Sections the image holds in full get their CRC; the rest keep the header's value. */
        uint64_t n = h.section_n[i];
        if (n > (len - off) / sizeof(float)) break;
        h.section_crc[i] = ckpt_crc(b + off, (size_t)n * sizeof(float));
        off += (size_t)n * sizeof(float);
    }
    h.header_crc = 0;
    h.header_crc = ckpt_crc(&h, sizeof h);
    memcpy(b, &h, sizeof h);
}
