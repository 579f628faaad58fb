/*
 * hash.h - FNV-1a, the one non-cryptographic hash of dtrain: model fingerprints in checkpoints,
 * bucket-plan fingerprints compared across ranks, and buffer checksums (dt_buffer_checksum,
 * dt_check_replicas). Integers are fed least significant byte first, so a fingerprint does not
 * depend on the machine's byte order.
 */
#ifndef DT_BASE_HASH_H
#define DT_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define FNV1A_OFFSET 1469598103934665603ull
#define FNV1A_PRIME 1099511628211ull

/* h advanced over the `bytes` low bytes of v, least significant first. */
static inline uint64_t fnv1a_int(uint64_t h, uint64_t v, int bytes)
{
    for (int b = 0; b < bytes; b++) {
        h ^= (v >> (8 * b)) & 0xff;
        h *= FNV1A_PRIME;
    }
    return h;
}

/* A buffer's checksum: FNV-1a over its 8-byte words (one multiply per word keeps a check of a
 * few hundred MiB well under a second), then the tail bytes, finished with a shift-xor. Seeded
 * with the length, so buffers that differ only in trailing zeros differ. */
static inline uint64_t fnv1a_buffer(const void *buf, size_t bytes)
{
    const unsigned char *b = buf;
    uint64_t h = FNV1A_OFFSET ^ (uint64_t)bytes;
    size_t i = 0;
    for (; i + 8 <= bytes; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = (h ^ w) * FNV1A_PRIME;
    }
    for (; i < bytes; i++) h = (h ^ b[i]) * FNV1A_PRIME;
    return h ^ (h >> 29);
}

#endif
