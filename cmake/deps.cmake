# deps.cmake - the libraries libdtrain needs, found once for the main build and for the fuzz
# harnesses' own build (tests/fuzz/CMakeLists.txt), so the two lists cannot drift.
find_package(MPI REQUIRED COMPONENTS C)
find_package(PkgConfig REQUIRED)
pkg_check_modules(HWLOC REQUIRED IMPORTED_TARGET hwloc)
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
find_package(Threads REQUIRED)
find_package(ZLIB REQUIRED)
pkg_check_modules(TURBOJPEG REQUIRED IMPORTED_TARGET libturbojpeg)
pkg_check_modules(PNG REQUIRED IMPORTED_TARGET libpng)
