# The areas of the hwtrain library, bottom to top. Each area's sources are every .cpp in its
# folder; an area may link only areas listed above it, which keeps data flowing one way:
# config + hardware -> plan -> model/data/optimizer -> trainer -> sinks. Each area owns its options
# struct; `run` (last) aggregates them into the RunConfig.
function(hwtrain_area_glob name)
  cmake_parse_arguments(A "" "" "DEPS" ${ARGN})
  file(GLOB _srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/hwtrain/${name}/*.cpp)
  if(_srcs)
    hwtrain_area(${name} SOURCES ${_srcs} DEPS ${A_DEPS})
  else()
    add_library(hwtrain_${name} INTERFACE)
    target_link_libraries(hwtrain_${name} INTERFACE hwtrain_options ${A_DEPS})
  endif()
  set(HWTRAIN_AREA_TARGETS ${HWTRAIN_AREA_TARGETS} hwtrain_${name} PARENT_SCOPE)
endfunction()

hwtrain_area_glob(core)                                    # errors, files, checksums, strings
hwtrain_area_glob(obs    DEPS hwtrain_core)                # logging, metrics, sinks, monitor, report
hwtrain_area_glob(sweep  DEPS hwtrain_obs SQLite::SQLite3 tomlplusplus::tomlplusplus)  # hyperparameter search: space, samplers, pruners, study store, report
hwtrain_area_glob(hw     DEPS hwtrain_obs)                 # hardware detection, doctor findings
hwtrain_area_glob(io     DEPS hwtrain_core)                # safetensors, checkpoint directories
hwtrain_area_glob(model  DEPS hwtrain_core)                # GPT, attention, generation
hwtrain_area_glob(interop DEPS hwtrain_model hwtrain_io)  # Hugging Face names, weights and configs
hwtrain_area_glob(data   DEPS hwtrain_core hwtrain_obs PkgConfig::SENTENCEPIECE PkgConfig::PCRE2 PkgConfig::ICU)  # tokenizers, shards, loader
hwtrain_area_glob(dist   DEPS hwtrain_core hwtrain_obs hwtrain_model)  # c10d process groups, DDP, ZeRO-1/2/3, launcher
hwtrain_area_glob(plan   DEPS hwtrain_hw hwtrain_model hwtrain_dist)  # planner, memory model
hwtrain_area_glob(train  DEPS hwtrain_plan hwtrain_data hwtrain_io hwtrain_dist hwtrain_obs)  # precision, trainer, callbacks
# The run as a whole, above every area it aggregates: RunConfig (each area's options struct, bound
# to TOML and --set), its reading into typed inputs (PlanIntent, TrainerOptions, callbacks), and the
# seeds' HardwareAwareOptimizer facade.
hwtrain_area_glob(run    DEPS hwtrain_train hwtrain_sweep tomlplusplus::tomlplusplus)

# The torch wheel ships ProcessGroupGloo.hpp but not the gloo headers it includes; dist/gloo_shim
# declares the few gloo types that header names (see its README).
if(TARGET hwtrain_dist AND EXISTS ${CMAKE_SOURCE_DIR}/src/hwtrain/dist/gloo_shim)
  get_target_property(_dist_type hwtrain_dist TYPE)
  if(NOT _dist_type STREQUAL "INTERFACE_LIBRARY")
    target_include_directories(hwtrain_dist PRIVATE ${CMAKE_SOURCE_DIR}/src/hwtrain/dist/gloo_shim)
  endif()
endif()
