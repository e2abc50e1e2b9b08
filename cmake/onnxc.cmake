# CMake integration of onnxc: compile ONNX models at build time and link them.
#
#   include(path/to/onnxc/cmake/onnxc.cmake)     # finds the onnxc executable
#   onnxc_add_model(tiny_cnn models/tiny_cnn.onnx
#                   [NAME symbol_prefix]          # default: the target's name
#                   [SHAPES input=1,3,224,224 …]  # onnxc --shape
#                   [DIMS batch=1 …]              # onnxc --dim
#                   [OPTIONS --O0 …])             # other onnxc flags
#   target_link_libraries(app PRIVATE tiny_cnn)   # header dir, object and runtime
#
# onnxc_add_model makes a static library target holding the compiled model; linking it
# gives its header (NAME.h, with onnxc_runtime.h beside it) and links the onnxc runtime
# (the imported target onnxc::runtime, with -lm -lpthread -ldl and --gc-sections). The
# model is recompiled when it or the onnxc executable changes.
#
# The onnxc executable: ONNXC_EXECUTABLE if set, else `onnxc` on PATH or in
# ONNXC_ROOT/target/release (ONNXC_ROOT defaults to the checkout this file is in).

if(NOT ONNXC_ROOT)
  get_filename_component(ONNXC_ROOT "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
endif()
find_program(ONNXC_EXECUTABLE onnxc HINTS "${ONNXC_ROOT}/target/release" REQUIRED)

if(NOT TARGET onnxc::runtime)
  execute_process(
    COMMAND "${ONNXC_EXECUTABLE}" --print-runtime-lib
    OUTPUT_VARIABLE _onnxc_runtime_lib
    OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _onnxc_rc)
  if(NOT _onnxc_rc EQUAL 0 OR NOT EXISTS "${_onnxc_runtime_lib}")
    message(FATAL_ERROR "onnxc: cannot locate libonnxc_runtime.a (${ONNXC_EXECUTABLE} --print-runtime-lib)")
  endif()
  add_library(onnxc::runtime STATIC IMPORTED GLOBAL)
  set_target_properties(onnxc::runtime PROPERTIES
    IMPORTED_LOCATION "${_onnxc_runtime_lib}"
    INTERFACE_LINK_LIBRARIES "m;pthread;dl"
    INTERFACE_LINK_OPTIONS "LINKER:--gc-sections")
endif()

function(onnxc_add_model target model)
  cmake_parse_arguments(PARSE_ARGV 2 ARG "" "NAME" "SHAPES;DIMS;OPTIONS")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "onnxc_add_model(${target}): unknown arguments ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT ARG_NAME)
    set(ARG_NAME "${target}")
  endif()
  string(MAKE_C_IDENTIFIER "${ARG_NAME}" name)
  get_filename_component(model_path "${model}" ABSOLUTE)
  set(dir "${CMAKE_CURRENT_BINARY_DIR}/onnxc/${name}")
  set(object "${dir}/${name}.o")
  set(header "${dir}/${name}.h")
  set(flags --name "${name}")
  foreach(s IN LISTS ARG_SHAPES)
    list(APPEND flags --shape "${s}")
  endforeach()
  foreach(d IN LISTS ARG_DIMS)
    list(APPEND flags --dim "${d}")
  endforeach()
  list(APPEND flags ${ARG_OPTIONS})
  file(MAKE_DIRECTORY "${dir}")
  add_custom_command(
    OUTPUT "${object}" "${header}" "${dir}/onnxc_runtime.h"
    COMMAND "${ONNXC_EXECUTABLE}" "${model_path}" -o "${object}" ${flags}
    DEPENDS "${model_path}" "${ONNXC_EXECUTABLE}"
    COMMENT "onnxc: compiling ${model}"
    VERBATIM)
  set_source_files_properties("${object}" PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
  add_library(${target} STATIC "${object}" "${header}")
  set_target_properties(${target} PROPERTIES LINKER_LANGUAGE C)
  target_include_directories(${target} INTERFACE "${dir}")
  target_link_libraries(${target} INTERFACE onnxc::runtime)
endfunction()
