# install.cmake - what `cmake --install build --prefix P` (and `make install PREFIX=P`) puts under P,
# so that other projects build against dtrain as they would against NCCL or hwloc:
#
#   P/include/dtrain.h, P/include/dtrain/*.h    the public API, nothing internal
#   P/lib/libdtrain.so.0 (.so.0.1.0, .so)       the shared library (soname libdtrain.so.<major>)
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

set(DTRAIN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/dtrain)

# The installed library and command find what they link outside the system directories (the CUDA
# toolkit in /usr/local/cuda, NCCL) without LD_LIBRARY_PATH. The command links libdtrain.a, so it
# needs no path to libdtrain.so. INSTALL_RPATH_USE_LINK_PATH adds the directories of the libraries
# linked by path, but not the implicit link directories of an enabled language: the CUDA toolkit's
# library directory is one of CUDA's (nvcc links from it anyway), so the toolkit, and NCCL where it
# sits beside it, would be found only through /etc/ld.so.conf. Their directories are named here.
# tests/package/test_package.sh checks with ld.so --inhibit-cache that both load without the cache.
set(_dtrain_rpath)
if(DTRAIN_HAVE_CUDA)
  list(APPEND _dtrain_rpath ${CUDAToolkit_LIBRARY_DIR})
endif()
if(DTRAIN_HAVE_NCCL)
  get_filename_component(_dtrain_nccl_dir "${NCCL_LIBRARY}" DIRECTORY)
  list(APPEND _dtrain_rpath ${_dtrain_nccl_dir})
endif()
list(REMOVE_DUPLICATES _dtrain_rpath)
set_target_properties(dtrain dtrain_cmd PROPERTIES INSTALL_RPATH "${_dtrain_rpath}" INSTALL_RPATH_USE_LINK_PATH ON)

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
# SameMajorVersion, the promise the soname already makes (SOVERSION = the major version): every
# 0.x.y with x.y at least the one asked for is accepted, as libdtrain.so.0 of any 0.x may replace
# another. AnyNewerVersion would also accept 1.0, whose soname (libdtrain.so.1) says it is not
# compatible. A 0.x release that breaks the API must raise SOVERSION, and then this, together.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/dtrainConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
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
list(JOIN _pc_libs " " DTRAIN_PC_LIBS_PRIVATE)
# The prefix is known only when `cmake --install --prefix P` runs: the install script below writes the
# files that name it (the .pc, the sbatch templates' default path to the command).
set(DTRAIN_PC_PREFIX "@DTRAIN_INSTALL_PREFIX@")
# libdir and includedir under ${prefix}, unless configured as absolute paths (then as they are).
foreach(_dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${_dir}}")
    set(DTRAIN_PC_${_dir} "${CMAKE_INSTALL_${_dir}}")
  else()
    set(DTRAIN_PC_${_dir} "\${prefix}/${CMAKE_INSTALL_${_dir}}")
  endif()
endforeach()
configure_file(cmake/dtrain.pc.in ${CMAKE_CURRENT_BINARY_DIR}/dtrain.pc.in @ONLY)
set(DTRAIN_SBATCH ${DTRAIN_SBATCH_TEMPLATES}) # cmake/sources.cmake
list(TRANSFORM DTRAIN_SBATCH PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/)
configure_file(cmake/install_prefixed.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/install_prefixed.cmake @ONLY)
install(SCRIPT ${CMAKE_CURRENT_BINARY_DIR}/install_prefixed.cmake)
