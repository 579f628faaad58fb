# Layers the build enforces. Every internal #include names its layer ("base/status.h",
# "collectives/engine.h"), and a layer's sources are compiled with an include root that holds only
# its own folder and the folders of the layers below it: build/layers/<layer>/ contains symbolic
# links to those folders and nothing else. An include of a higher layer then fails to compile
# ("runtime/model/model.h: No such file or directory") instead of quietly creating a cycle.
#
#   base <- kernels <- collectives <- runtime <- launch (the command) and tests (everything)

set(DTRAIN_LAYERS base kernels collectives runtime launch)

# dtrain_layer_root(<layer> <out-var>): creates the include root of <layer> and returns its path.
function(dtrain_layer_root layer out)
  set(root ${PROJECT_BINARY_DIR}/layers/${layer})
  file(MAKE_DIRECTORY ${root})
  foreach(l ${DTRAIN_LAYERS})
    if(NOT EXISTS ${root}/${l})
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${l} ${root}/${l} SYMBOLIC)
    endif()
    if(l STREQUAL layer)
      break()
    endif()
  endforeach()
  set(${out} ${root} PARENT_SCOPE)
endfunction()

# dtrain_layer(<layer> <sources>...): the object library dtrain_<layer>, compiled with the layer's
# include root (PRIVATE: it does not leak to whoever links it) and the shared build settings.
function(dtrain_layer layer)
  add_library(dtrain_${layer} OBJECT ${ARGN})
  dtrain_layer_root(${layer} root)
  target_include_directories(dtrain_${layer} PRIVATE ${root})
  target_link_libraries(dtrain_${layer} PUBLIC dtrain_build)
  set_target_properties(dtrain_${layer} PROPERTIES POSITION_INDEPENDENT_CODE ON C_VISIBILITY_PRESET hidden
                        CUDA_VISIBILITY_PRESET hidden)
  target_compile_options(dtrain_${layer} PRIVATE $<$<COMPILE_LANGUAGE:C>:${DTRAIN_WARNINGS}>)
endfunction()
