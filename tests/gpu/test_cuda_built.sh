#!/usr/bin/env bash
# The CUDA sources are compiled and linked into libdtrain for every architecture CMake asked for,
# even on a machine without a GPU (where the gpu-labelled tests can only SKIP): the library has a
# CUDA fat binary, it holds code for each of ARCHS (sm_80 sm_90 by default), and the kernels of
# every CUDA source are in it. Reads the library as bytes (no GPU, no cuobjdump needed).
# Usage: test_cuda_built.sh LIBDTRAIN "80;90"
here=$(dirname "$0"); source "$here/../mpi/lib.sh"
LIB=$1 ARCHS=$2

readelf -S "$LIB" | grep -q '\.nv_fatbin' && ok "$(basename "$LIB") has a CUDA fat binary (.nv_fatbin)" ||
    bad "$(basename "$LIB") has no .nv_fatbin section: the CUDA sources were not linked"
strings -a "$LIB" >"$tmp/strings"
for a in ${ARCHS//;/ }; do
    a=${a%-real}; a=${a%-virtual}
    grep -q "sm_$a" "$tmp/strings" && ok "code for sm_$a" || bad "no code for sm_$a in the fat binary"
done
# One kernel of each source file; their names are in the fat binary's symbol tables.
for k in cast_to16_kernel:kernels/cuda/elementwise.cu im2col_kernel:kernels/cuda/conv.cu \
         xent_rows_kernel:kernels/cuda/loss.cu relu16_fwd_kernel:kernels/cuda/elementwise.cu; do
    grep -q "${k%%:*}" "$tmp/strings" && ok "${k#*:}: ${k%%:*} built" || bad "${k#*:}: ${k%%:*} missing"
done
echo "CUDA sources compiled and linked here for sm ${ARCHS//;/, }; they run only where a GPU is visible (ctest -L gpu)"
finish
