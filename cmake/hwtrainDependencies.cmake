# The packages hwtrain's installed targets need, found as hwtrain's own CMakeLists.txt finds them.
# Included by hwtrainConfig.cmake (installed beside it); on a missing dependency it sets
# hwtrain_FOUND to FALSE with hwtrain_NOT_FOUND_MESSAGE saying which one and how to provide it.
include(CMakeFindDependencyMacro)

# ---- LibTorch, from the torch package of HWTRAIN_TORCH_PYTHON ------------------------------------
if(NOT DEFINED HWTRAIN_INSTALLED_TORCH_PYTHON)
  set(HWTRAIN_INSTALLED_TORCH_PYTHON python3)
endif()
set(HWTRAIN_TORCH_PYTHON "${HWTRAIN_INSTALLED_TORCH_PYTHON}" CACHE STRING
    "Python interpreter whose torch package provides LibTorch (\"\": find Torch through CMAKE_PREFIX_PATH)")
if(HWTRAIN_TORCH_PYTHON AND NOT Torch_FOUND)
  execute_process(
    COMMAND "${HWTRAIN_TORCH_PYTHON}" -c "import torch;print(torch.utils.cmake_prefix_path);print(torch.__version__)"
    OUTPUT_VARIABLE _hwtrain_torch_out RESULT_VARIABLE _hwtrain_torch_rc
    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT _hwtrain_torch_rc EQUAL 0)
    string(CONCAT hwtrain_NOT_FOUND_MESSAGE "'${HWTRAIN_TORCH_PYTHON}' cannot import torch: set HWTRAIN_TORCH_PYTHON to "
        "a python with torch ${HWTRAIN_INSTALLED_TORCH_VERSION} (hwtrain was built with "
        "${HWTRAIN_INSTALLED_TORCH_PYTHON}), or to \"\" and Torch_DIR to LibTorch's share/cmake/Torch")
    set(hwtrain_FOUND FALSE)
    return()
  endif()
  string(REPLACE "\n" ";" _hwtrain_torch_out "${_hwtrain_torch_out}")
  list(GET _hwtrain_torch_out 0 _hwtrain_torch_prefix)
  list(GET _hwtrain_torch_out 1 _hwtrain_torch_version)
  if(NOT _hwtrain_torch_version STREQUAL HWTRAIN_INSTALLED_TORCH_VERSION)
    message(WARNING "hwtrain was built with torch ${HWTRAIN_INSTALLED_TORCH_VERSION}; "
                    "${HWTRAIN_TORCH_PYTHON} has ${_hwtrain_torch_version}")
  endif()
  list(APPEND CMAKE_PREFIX_PATH "${_hwtrain_torch_prefix}")
endif()
# The wheel is CUDA-enabled; its CMake config needs the CUDA toolkit and an architecture list.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED TORCH_CUDA_ARCH_LIST)
  set(TORCH_CUDA_ARCH_LIST "8.0;9.0")
endif()
find_dependency(Torch)

# ---- the system packages ------------------------------------------------------------------------
find_dependency(tomlplusplus)
find_dependency(fmt)
find_dependency(spdlog)
find_dependency(nlohmann_json)
find_dependency(SQLite3)
find_dependency(Threads)

# SentencePiece, PCRE2 (8-bit) and ICU (icu-uc) through pkg-config where it is installed, otherwise
# by header and library under CMAKE_PREFIX_PATH; the targets are named as in hwtrain's build.
find_package(PkgConfig QUIET)
# _hwtrain_pkg(<NAME> <pkg-config module> <header> <library>...): defines PkgConfig::<NAME>.
macro(_hwtrain_pkg name module header)
  if(NOT TARGET PkgConfig::${name})
    if(PkgConfig_FOUND)
      pkg_check_modules(${name} QUIET IMPORTED_TARGET ${module})
    endif()
    if(NOT TARGET PkgConfig::${name})
      find_path(HWTRAIN_${name}_INCLUDE_DIR ${header})
      set(_hwtrain_libs "")
      foreach(_hwtrain_lib ${ARGN})
        find_library(HWTRAIN_${name}_${_hwtrain_lib}_LIB ${_hwtrain_lib})
        if(NOT HWTRAIN_${name}_${_hwtrain_lib}_LIB)
          set(HWTRAIN_${name}_INCLUDE_DIR HWTRAIN_${name}_INCLUDE_DIR-NOTFOUND)
        endif()
        list(APPEND _hwtrain_libs "${HWTRAIN_${name}_${_hwtrain_lib}_LIB}")
      endforeach()
      if(NOT HWTRAIN_${name}_INCLUDE_DIR)
        string(CONCAT hwtrain_NOT_FOUND_MESSAGE "${module} not found (pkg-config module ${module}, or ${header} and "
            "the libraries ${ARGN} under CMAKE_PREFIX_PATH); on Debian: scripts/install-deps.sh")
        set(hwtrain_FOUND FALSE)
        return()
      endif()
      add_library(PkgConfig::${name} INTERFACE IMPORTED)
      set_target_properties(PkgConfig::${name} PROPERTIES
        INTERFACE_INCLUDE_DIRECTORIES "${HWTRAIN_${name}_INCLUDE_DIR}"
        INTERFACE_LINK_LIBRARIES "${_hwtrain_libs}")
    endif()
  endif()
endmacro()
_hwtrain_pkg(SENTENCEPIECE sentencepiece sentencepiece_processor.h sentencepiece_train sentencepiece)
_hwtrain_pkg(PCRE2 libpcre2-8 pcre2.h pcre2-8)
_hwtrain_pkg(ICU icu-uc unicode/normalizer2.h icuuc)
