# install.cmake - what `cmake --install build --prefix P` (and `make install PREFIX=P`) puts under P,
# so that other projects build against dtrain as they would against NCCL or hwloc:
#
#   P/include/dtrain.h, P/include/dtrain/*.h    the public API, nothing internal
#   P/lib/libdtrain.so.0.2 (.so.0.2.0, .so)     the shared library (soname libdtrain.so.0.<minor>
#                                               while the major is 0, then libdtrain.so.<major>)
#   P/lib/libdtrain.a                           the static library
#   P/bin/dtrain                                the command
#   P/share/dtrain/slurm/*.sbatch               the sbatch templates, pointing at P/bin/dtrain
#   P/lib/cmake/dtrain/                         find_package(dtrain): dtrain::dtrain, dtrain::dtrain_static
#   P/lib/pkgconfig/dtrain.pc                   pkg-config --cflags --libs dtrain
#
# (lib is CMAKE_INSTALL_LIBDIR, which GNUInstallDirs sets when CMake configures, from the prefix
# then: lib for the default /usr/local or any other, lib/x86_64-linux-gnu on Debian only for a build
# configured with -DCMAKE_INSTALL_PREFIX=/usr. A later --prefix does not change it. A directory given
# as an absolute path, -DCMAKE_INSTALL_LIBDIR=/opt/x/lib64, is used as it is, outside P.)
# tests/package/test_package.sh installs into a temporary prefix and builds a program against it both
# ways. Included from the top CMakeLists.txt once the targets exist.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
# Every file is in the component "dtrain". A plain install (all components) writes the list of what
# it installed to BUILD/install_manifest.txt, which uninstalling reads (docs/library-guide.md); the
# test build.package installs with --component dtrain, so that its own list goes to
# install_manifest_dtrain.txt and the user's is left as it was.
set(CMAKE_INSTALL_DEFAULT_COMPONENT_NAME dtrain)

set(DTRAIN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/dtrain)

# The installed library and command find the CUDA toolkit and NCCL without LD_LIBRARY_PATH: their
# RUNPATH names the directories of those two that the loader would not search by itself (the
# toolkit in /usr/local/cuda/lib64, NCCL beside it or under NCCL_ROOT), and nothing else. The other
# dependencies (MPI, hwloc, OpenBLAS, zlib, TurboJPEG, libpng) are left to the loader: on Debian
# /usr/lib/x86_64-linux-gnu holds each one's soname, and OpenBLAS's is the alternatives link
# (update-alternatives picks the BLAS), which a RUNPATH to openblas-pthread/ would bypass. A build
# against a dependency the loader does not find (an MPI in /opt) adds its directory with
# -DCMAKE_INSTALL_RPATH=/opt/mpi/lib, which is appended. The command links libdtrain.a, so it needs
# no path to libdtrain.so. tests/package/test_package.sh checks with ld.so --inhibit-cache that both
# load without the cache, and that their RUNPATH holds nothing but CUDA and NCCL directories.
# DTRAIN_INSTALL_RPATH also goes into dtrain.pc's Libs.private for programs that link libdtrain.a.
set(DTRAIN_INSTALL_RPATH)
if(DTRAIN_HAVE_CUDA)
  list(APPEND DTRAIN_INSTALL_RPATH ${CUDAToolkit_LIBRARY_DIR})
endif()
if(DTRAIN_HAVE_NCCL)
  get_filename_component(_dtrain_nccl_dir "${NCCL_LIBRARY}" DIRECTORY)
  list(APPEND DTRAIN_INSTALL_RPATH ${_dtrain_nccl_dir})
endif()
# The loader's own directories (/lib, /usr/lib and their multiarch ones, as CMake knows them).
set(_dtrain_default_dirs)
foreach(_dir IN LISTS CMAKE_PLATFORM_IMPLICIT_LINK_DIRECTORIES CMAKE_C_IMPLICIT_LINK_DIRECTORIES)
  get_filename_component(_dir "${_dir}" REALPATH)
  list(APPEND _dtrain_default_dirs "${_dir}")
endforeach()
set(_dtrain_dirs ${DTRAIN_INSTALL_RPATH})
set(DTRAIN_INSTALL_RPATH)
foreach(_dir IN LISTS _dtrain_dirs)
  get_filename_component(_real "${_dir}" REALPATH)
  if(NOT _real IN_LIST _dtrain_default_dirs)
    list(APPEND DTRAIN_INSTALL_RPATH "${_dir}")
  endif()
endforeach()
list(APPEND DTRAIN_INSTALL_RPATH ${CMAKE_INSTALL_RPATH})
list(REMOVE_DUPLICATES DTRAIN_INSTALL_RPATH)
set_target_properties(dtrain dtrain_cmd PROPERTIES INSTALL_RPATH "${DTRAIN_INSTALL_RPATH}")

# The exported targets carry only the public include directory; the internal library of the command
# and the tests (dtrain_internal) is not installed.
# nvcc compiles the host side of kernels/cuda with g++, so libdtrain.a needs the C++ runtime. In the
# tree CMake links its users with the CUDA linker, which adds it; a consumer that enables only C does
# not, so the installed target names it.
if(DTRAIN_HAVE_CUDA)
  target_link_libraries(dtrain_static INTERFACE $<INSTALL_INTERFACE:stdc++>)
endif()
install(TARGETS dtrain dtrain_static EXPORT dtrainTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS dtrain_cmd RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES include/dtrain.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/dtrain DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")

# ---------------------------------------------------------------- CMake package
install(EXPORT dtrainTargets NAMESPACE dtrain:: DESTINATION ${DTRAIN_CMAKE_DIR})
# Hints for the consumer's find_dependency: where this build found the CUDA toolkit and NCCL.
if(DTRAIN_HAVE_CUDA)
  get_filename_component(DTRAIN_CUDA_ROOT "${CUDAToolkit_BIN_DIR}" DIRECTORY)
endif()
if(DTRAIN_HAVE_NCCL)
  get_filename_component(DTRAIN_NCCL_ROOT "${NCCL_INCLUDE_DIR}" DIRECTORY)
endif()
configure_package_config_file(cmake/dtrainConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/dtrainConfig.cmake
                              INSTALL_DESTINATION ${DTRAIN_CMAKE_DIR})
# The promise the soname makes (CMakeLists.txt, DTRAIN_SOVERSION): while the major is 0 only the
# same 0.MINOR is compatible (SameMinorVersion: find_package(dtrain 0.2) takes 0.2.x, x at least the
# one asked for, and refuses 0.1 and 0.3), from 1.0 on the same major (SameMajorVersion).
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(_dtrain_compat SameMinorVersion)
else()
  set(_dtrain_compat SameMajorVersion)
endif()
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/dtrainConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY ${_dtrain_compat})
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/dtrainConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/dtrainConfigVersion.cmake
        DESTINATION ${DTRAIN_CMAKE_DIR})
if(DTRAIN_HAVE_NCCL)
  # NCCL ships no CMake config: dtrainConfig.cmake finds it with the same module the build used.
  install(FILES collectives/cmake/FindNCCL.cmake DESTINATION ${DTRAIN_CMAKE_DIR})
endif()

# ---------------------------------------------------------------- pkg-config
# Libs.private: what a static link adds after libdtrain.a (pkg-config --static), the libraries the
# build linked, by full path, as dtrain::dtrain_static does. Not Requires.private: pkg-config would
# then add the private dependencies of those modules too (hwloc's -ludev, OpenBLAS's -lgfortran), as
# if they were static as well, and fail where their development files are absent; MPI has no one .pc
# name across implementations either. Cflags needs none of them: dtrain.h includes no other header.
# The documented static link is `cc app.c $(pkg-config --cflags dtrain) -Wl,-Bstatic
# $(pkg-config --static --libs dtrain)` (docs/library-guide.md): -Bstatic makes -ldtrain take
# libdtrain.a, and Libs.private opens with -Wl,-Bdynamic so that what follows (-lstdc++, -lm and
# the user's own -l options) links as usual. It also carries the RUNPATH of libdtrain.so itself
# (DTRAIN_INSTALL_RPATH), so that such a program finds the CUDA toolkit and NCCL as the library does.
set(_pc_libs ${MPI_C_LIBRARIES} ${HWLOC_LINK_LIBRARIES} ${OPENBLAS_LINK_LIBRARIES} ${ZLIB_LIBRARIES}
    ${TURBOJPEG_LINK_LIBRARIES} ${PNG_LINK_LIBRARIES})
if(DTRAIN_HAVE_CUDA)
  # nvcc's objects in libdtrain.a call into the C++ runtime (as above).
  list(APPEND _pc_libs ${CUDA_cublas_LIBRARY} ${CUDA_cublasLt_LIBRARY} ${CUDA_cudart_LIBRARY} -lstdc++)
endif()
if(DTRAIN_HAVE_NCCL)
  list(APPEND _pc_libs ${NCCL_LIBRARY})
endif()
list(APPEND _pc_libs ${CMAKE_THREAD_LIBS_INIT} -lm)
list(REMOVE_DUPLICATES _pc_libs)
list(TRANSFORM DTRAIN_INSTALL_RPATH PREPEND "-Wl,-rpath," OUTPUT_VARIABLE _pc_rpath)
list(JOIN _pc_libs " " DTRAIN_PC_LIBS_PRIVATE)
list(JOIN _pc_rpath " " _pc_rpath)
string(STRIP "-Wl,-Bdynamic ${_pc_rpath} ${DTRAIN_PC_LIBS_PRIVATE}" DTRAIN_PC_LIBS_PRIVATE)
string(REPLACE "  " " " DTRAIN_PC_LIBS_PRIVATE "${DTRAIN_PC_LIBS_PRIVATE}")
# The prefix relative to the .pc file's own directory (${pcfiledir}, which pkg-config sets), so that
# an installed prefix that is moved or copied elsewhere still works, as the CMake package does. Only
# a libdir configured as an absolute path (-DCMAKE_INSTALL_LIBDIR=/opt/x/lib64, outside the prefix)
# leaves the prefix to be named in full when cmake --install runs (the install script below).
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(DTRAIN_PC_PREFIX "@DTRAIN_INSTALL_PREFIX@")
else()
  file(RELATIVE_PATH _pc_up "/P/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/P")
  string(REGEX REPLACE "/$" "" _pc_up "${_pc_up}")
  set(DTRAIN_PC_PREFIX "\${pcfiledir}/${_pc_up}")
endif()
# libdir and includedir under ${prefix}, unless configured as absolute paths (then as they are).
foreach(_dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${_dir}}")
    set(DTRAIN_PC_${_dir} "${CMAKE_INSTALL_${_dir}}")
  else()
    set(DTRAIN_PC_${_dir} "\${prefix}/${CMAKE_INSTALL_${_dir}}")
  endif()
endforeach()
set(DTRAIN_PC_SONAME libdtrain.so.${DTRAIN_SOVERSION})
# What a program built against this version may run on, for the .pc's comment (the soname's rule).
if(PROJECT_VERSION_MAJOR EQUAL 0)
  math(EXPR _pc_next "${PROJECT_VERSION_MINOR} + 1")
  set(DTRAIN_PC_COMPAT "only the same 0.${PROJECT_VERSION_MINOR} is compatible while the major is 0: \
pkg-config 'dtrain >= 0.${PROJECT_VERSION_MINOR}' 'dtrain < 0.${_pc_next}'")
else()
  math(EXPR _pc_next "${PROJECT_VERSION_MAJOR} + 1")
  set(DTRAIN_PC_COMPAT "the same major is compatible: \
pkg-config 'dtrain >= ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}' 'dtrain < ${_pc_next}'")
endif()
configure_file(cmake/dtrain.pc.in ${CMAKE_CURRENT_BINARY_DIR}/dtrain.pc.in @ONLY)
set(DTRAIN_SBATCH ${DTRAIN_SBATCH_TEMPLATES}) # cmake/sources.cmake
list(TRANSFORM DTRAIN_SBATCH PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/)
configure_file(cmake/install_prefixed.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/install_prefixed.cmake @ONLY)
install(SCRIPT ${CMAKE_CURRENT_BINARY_DIR}/install_prefixed.cmake)
