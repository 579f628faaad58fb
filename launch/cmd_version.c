/*
 * cmd_version.c - `dtrain version`: this build's version and the MPI, NCCL and CUDA it runs with,
 * without starting MPI (a login node can answer).
 */
#include "launch/cli.h"
#include "collectives/coll.h"

#include <stdio.h>

int cmd_version(int argc, char **argv)
{
    dt_config cfg;
    int rc = cli_parse_common(argc, argv, "version", &cfg);
    if (rc) return rc;
    char mpi[128], nccl[128], cuda[128];
    dt_versions(mpi, nccl, cuda, sizeof mpi);
    /* Before MPI starts a CUDA-built Open MPI can only say that it was built so. */
    const int aware = coll_mpi_cuda_aware();
    printf("dtrain %s\nMPI: %s (%s)\nNCCL: %s\nCUDA: %s\n", dt_version_string(), mpi,
           aware > 0   ? "CUDA-aware"
           : aware < 0 ? "CUDA-aware build"
                       : "not CUDA-aware",
           nccl, cuda);
    return EXIT_OK;
}
