# `cmake --install <build> --prefix <prefix>`: hwtrain as a CMake package.
#   <prefix>/lib/libhwtrain_<area>.a         one static library per area (-fPIC)
#   <prefix>/include/hwtrain/<area>/*.h      the public headers only (cmake/public_headers.cmake)
#   <prefix>/lib/cmake/hwtrain/              hwtrainConfig.cmake, its version file, the exported
#                                            targets and hwtrainDependencies.cmake
# A consumer does find_package(hwtrain) and links hwtrain::hwtrain (examples/find_package).
# Included last by the top CMakeLists.txt; it only adds install rules and makes the usage
# requirements of hwtrain_options exportable: every value it had stays, wrapped in
# $<BUILD_INTERFACE:...>, so this tree compiles and links exactly as before.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
include(${CMAKE_CURRENT_LIST_DIR}/public_headers.cmake)

set(HWTRAIN_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/hwtrain CACHE STRING
    "Where `cmake --install` puts hwtrainConfig.cmake, relative to the prefix")

# ---- usage requirements as an installed consumer sees them ---------------------------------------
# _hwtrain_build_only(<property> [<value>...]): the listed values of hwtrain_options' <property>
# (all of them when none is listed) apply in this build tree only.
function(_hwtrain_build_only property)
  get_target_property(_values hwtrain_options ${property})
  if(NOT _values)
    return()
  endif()
  set(_out "")
  foreach(_v IN LISTS _values)
    if(NOT ARGN OR _v IN_LIST ARGN)
      list(APPEND _out "$<BUILD_INTERFACE:${_v}>")
    else()
      list(APPEND _out "${_v}")
    endif()
  endforeach()
  set_property(TARGET hwtrain_options PROPERTY ${property} "${_out}")
endfunction()
# Source and build-tree include directories (src/, the fmt include-first link): installed
# consumers get <prefix>/include instead, and hwtrainConfig.cmake makes their own fmt link.
_hwtrain_build_only(INTERFACE_INCLUDE_DIRECTORIES)
set_property(TARGET hwtrain_options APPEND PROPERTY
  INTERFACE_INCLUDE_DIRECTORIES "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>")
# Our warning flags are for our sources, not for a consumer's.
_hwtrain_build_only(INTERFACE_COMPILE_OPTIONS)
# LibTorch's libraries name files of this configure's torch wheel: hwtrainConfig.cmake links the
# ${TORCH_LIBRARIES} of the torch it finds instead (HWTRAIN_TORCH_PYTHON there).
_hwtrain_build_only(INTERFACE_LINK_LIBRARIES ${TORCH_LIBRARIES})
# This tree sets CMAKE_CXX_STANDARD 17; a consumer is told that the headers need it.
set_property(TARGET hwtrain_options APPEND PROPERTY
  INTERFACE_COMPILE_FEATURES "$<INSTALL_INTERFACE:cxx_std_17>")
# Sanitized static libraries need the sanitizer runtime where they are linked (scripts/sanitize.sh).
if(HWTRAIN_SANITIZE)
  set_property(TARGET hwtrain_options APPEND PROPERTY
    INTERFACE_LINK_OPTIONS "$<INSTALL_INTERFACE:-fsanitize=${HWTRAIN_SANITIZE}>")
endif()
# Kept as they are: the compile definitions (HWTRAIN_VERSION, HWTRAIN_COMPILER, HWTRAIN_CUDA; no
# public header tests any of them) and the link option that names libstdc++ before libtorch.

# ---- targets, headers, package files ------------------------------------------------------------
install(TARGETS hwtrain hwtrain_options ${HWTRAIN_AREA_TARGETS}
  EXPORT hwtrainTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})  # the include directory comes with hwtrain_options
install(EXPORT hwtrainTargets NAMESPACE hwtrain:: DESTINATION ${HWTRAIN_INSTALL_CMAKEDIR})

# The header closure is computed again when installing, from the sources as they are then.
hwtrain_public_header_closure(_hwtrain_public_headers ${CMAKE_SOURCE_DIR}/src)
list(LENGTH _hwtrain_public_headers _hwtrain_num_public_headers)
message(STATUS "hwtrain: ${_hwtrain_num_public_headers} public headers (installed by cmake --install)")
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(_hwtrain_include_dest "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(_hwtrain_include_dest "\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
install(CODE "include(\"${CMAKE_CURRENT_LIST_DIR}/public_headers.cmake\")
hwtrain_install_public_headers(\"${CMAKE_SOURCE_DIR}/src\" \"${_hwtrain_include_dest}\")")

# Recorded defaults for finding the dependencies: the python whose torch this tree was built with.
set(HWTRAIN_INSTALLED_TORCH_PYTHON "${HWTRAIN_TORCH_PYTHON}")
if(NOT IS_ABSOLUTE "${HWTRAIN_INSTALLED_TORCH_PYTHON}")
  find_program(_hwtrain_python_path "${HWTRAIN_TORCH_PYTHON}" NO_CACHE)
  if(_hwtrain_python_path)
    set(HWTRAIN_INSTALLED_TORCH_PYTHON "${_hwtrain_python_path}")
  endif()
endif()
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/hwtrainConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/hwtrainConfig.cmake
  INSTALL_DESTINATION ${HWTRAIN_INSTALL_CMAKEDIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/hwtrainConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)  # 0.x: a minor version may break the API
install(FILES
  ${CMAKE_CURRENT_BINARY_DIR}/hwtrainConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/hwtrainConfigVersion.cmake
  ${CMAKE_CURRENT_LIST_DIR}/hwtrainDependencies.cmake
  DESTINATION ${HWTRAIN_INSTALL_CMAKEDIR})
