/*
 * fuzz_net_env.c - doctor's net.env row (doctor_net_collect, launch/doctor/net_env.c): the
 * transport variables of Open MPI, UCX and NCCL (OMPI_MCA_btl, the *_if_include lists, UCX_TLS,
 * UCX_NET_DEVICES, NCCL_SOCKET_IFNAME, NCCL_IB_*, NCCL_DEBUG) as a rank sees them before MPI_Init.
 *
 * Input: lines NAME=VALUE, the whole environment for the call (fuzz_env_set).
 * Beyond ASan/UBSan/leaks: the row is collected, PASS with no fix or WARN with one, both texts
 * terminated; a WARN names what is wrong (however long the values before it); an OMPI_MCA_btl of self alone warns, one that lists tcp
 * or vader does not warn of the btl; NCCL_DEBUG=INFO or TRACE (any case) warns of it.
 */
#include "fuzz_common.h"

#include "launch/doctor/doctor.h"
#include "launch/doctor/doctor_net.h"

#include <strings.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_env e;
    fuzz_env_set(&e, data, size, NULL);
    doctor_net_facts f;
    memset(&f, 'x', sizeof f);
    doctor_net_collect(&f);
    const char *btl = fuzz_env_get(&e, "OMPI_MCA_btl"), *dbg = fuzz_env_get(&e, "NCCL_DEBUG");

    FUZZ_CHECK(f.collected == 1, "not collected");
    FUZZ_CHECK(memchr(f.seen, '\0', sizeof f.seen) && memchr(f.fix, '\0', sizeof f.fix), "a text not terminated");
    FUZZ_CHECK(f.level == DOC_PASS || f.level == DOC_WARN, "level %d", f.level);
    FUZZ_CHECK((f.level == DOC_WARN) == (f.fix[0] != '\0'), "level %d with fix '%s'", f.level, f.fix);
    FUZZ_CHECK(f.level == DOC_PASS || strstr(f.seen, "leaves no transport between ranks") ||
                   strstr(f.seen, ", not an interface of this node") || strstr(f.seen, "prints on every rank"),
               "a warning that names nothing: '%s'", f.seen);
    /* From the fix, which holds no value of the environment: the row's text echoes the variables,
     * whose names and values may spell any phrase. */
    const int btl_warned = strstr(f.fix, "unset OMPI_MCA_btl") != NULL;
    if (btl && !strcmp(btl, "self")) FUZZ_CHECK(btl_warned, "OMPI_MCA_btl=self passed: '%s'", f.seen);
    if (btl && (!strcmp(btl, "self,tcp") || !strcmp(btl, "vader,self") || !strcmp(btl, "^openib")))
        FUZZ_CHECK(!btl_warned, "OMPI_MCA_btl=%s warned: '%s'", btl, f.seen);
    if (dbg && (!strcasecmp(dbg, "INFO") || !strcasecmp(dbg, "TRACE")))
        FUZZ_CHECK(f.level == DOC_WARN, "NCCL_DEBUG=%s passed", dbg);
    fuzz_env_restore(&e);
    return 0;
}
