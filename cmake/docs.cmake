# docs.cmake - the API reference: the target `docs` (make docs) runs Doxygen over the public headers
# (docs/Doxyfile.in) into build/docs/html and fails on any warning (docs/doxygen.sh). The test
# build.docs (tests/build/test_docs.sh) does the same into a temporary directory. Included from the
# top CMakeLists.txt.
find_program(DTRAIN_DOXYGEN doxygen)
if(DTRAIN_DOXYGEN)
  execute_process(COMMAND ${DTRAIN_DOXYGEN} --version OUTPUT_VARIABLE _doxygen_version
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  message(STATUS "✓ Doxygen ${_doxygen_version}: make docs writes the API reference")
else()
  message(STATUS "✗ Doxygen not found: no API reference (apt-get install doxygen, or make deps)")
endif()

set(DTRAIN_DOCS_DIR ${CMAKE_BINARY_DIR}/docs)
# Public headers whose comments are not converted to /** */ yet, as a program includes them: their
# warnings are printed but do not fail. Remove each one as it is converted; empty, every warning fails.
set(DTRAIN_DOCS_PENDING)
configure_file(docs/Doxyfile.in ${DTRAIN_DOCS_DIR}/Doxyfile @ONLY)
# Without doxygen at configure time the script still looks on PATH (installed since), else says how.
set(_doxygen $<IF:$<BOOL:${DTRAIN_DOXYGEN}>,${DTRAIN_DOXYGEN},doxygen>)
add_custom_target(docs COMMAND ${CMAKE_COMMAND} -E env DOXYGEN=${_doxygen}
                  bash ${PROJECT_SOURCE_DIR}/docs/doxygen.sh ${DTRAIN_DOCS_DIR}/Doxyfile ${DTRAIN_DOCS_DIR}
                  ${DTRAIN_DOCS_PENDING}
                  COMMENT "API reference: Doxygen over include/dtrain.h and include/dtrain/*.h" VERBATIM)
