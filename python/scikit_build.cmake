# Included right after project() when pyproject.toml's build (scikit-build-core) configures the
# tree (CMAKE_PROJECT_INCLUDE): LibTorch comes from the torch of the interpreter that builds the
# wheel, which scikit-build-core passes as Python_EXECUTABLE, unless HWTRAIN_TORCH_PYTHON is given.
include_guard(GLOBAL)
if(DEFINED Python_EXECUTABLE AND NOT DEFINED CACHE{HWTRAIN_TORCH_PYTHON})
  execute_process(COMMAND ${Python_EXECUTABLE} -c "import torch" RESULT_VARIABLE _hwtrain_torch_rc
                  OUTPUT_QUIET ERROR_QUIET)
  if(NOT _hwtrain_torch_rc EQUAL 0)
    message(FATAL_ERROR "hwtrain: ${Python_EXECUTABLE}, which builds this wheel, cannot import torch. Install "
                        "into the environment that has torch==2.11.0, without pip's build isolation: "
                        "python -m pip install scikit-build-core pybind11 && python -m pip install --no-build-isolation .")
  endif()
  set(HWTRAIN_TORCH_PYTHON "${Python_EXECUTABLE}" CACHE STRING "Python interpreter whose torch package provides LibTorch")
endif()
