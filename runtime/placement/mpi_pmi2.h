/*
 * mpi_pmi2.h - whether the MPI library in this process can join tasks that srun started through
 * PMI-2 (srun --mpi=pmi2), asked before MPI_Init: Open MPI 5 starts only through PMIx, and an Open
 * MPI 4 built without PMI-2 (Debian's) aborts inside MPI_Init with a message about SLURM support
 * that names neither the cause nor the fix.
 */
#ifndef DT_RUNTIME_PLACEMENT_MPI_PMI2_H
#define DT_RUNTIME_PLACEMENT_MPI_PMI2_H

#include <stddef.h>

/* 1 when this MPI surely cannot start under PMI-2, with why (n bytes: the library and what it
 * lacks); 0 when it can or when that cannot be told (another MPI, an Open MPI whose components are
 * built into the library): nothing is refused on a guess. */
int mpi_lacks_pmi2(char *why, size_t n);

#endif
