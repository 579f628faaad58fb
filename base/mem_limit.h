/*
 * mem_limit.h - the process's own memory limits (ulimit -v: RLIMIT_AS, the address space; ulimit
 * -d: RLIMIT_DATA, its data mappings), which make allocations fail while the node still has memory
 * free: what an out-of-memory message names so that its reader looks at the limit, not the node.
 */
#ifndef DT_BASE_MEM_LIMIT_H
#define DT_BASE_MEM_LIMIT_H

#include <stddef.h>

/* A limit in force: which (the ulimit flag and the rlimit's name), its size and this process's use
 * of what it counts (VmSize or VmData from /proc/self/status; 0 where that cannot be read). */
typedef struct mem_limit {
    char flag;        /* 'v' (RLIMIT_AS) or 'd' (RLIMIT_DATA) */
    const char *name; /* "RLIMIT_AS" or "RLIMIT_DATA" */
    size_t bytes;     /* the soft limit */
    size_t used;      /* counted against it now */
} mem_limit;

/* The limit with the least room left (RLIMIT_AS or RLIMIT_DATA) into *out: 1, or 0 when neither is
 * set (*out zeroed). */
int mem_limit_get(mem_limit *out);

/* " under ulimit -v 480000 KiB (RLIMIT_AS, the address space; 300000 KiB of it in use)" for the
 * limit in force, or "" when none is: for appending to a message. Returns buf. */
const char *mem_limit_text(char *buf, size_t n);

#endif
