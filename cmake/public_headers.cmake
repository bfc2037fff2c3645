# hwtrain's public headers: the documented entry headers and every hwtrain header they include,
# directly or not. The closure follows quoted `#include "hwtrain/..."` lines (every hwtrain header
# names its neighbours that way), including those inside #if blocks, so the set is never too small.
# Included from cmake/install.cmake at configure time (the count) and again by the install step,
# so that `cmake --install` installs what the headers include then, without a reconfigure.

# The API entry headers. Optional ones are installed once they exist.
set(HWTRAIN_PUBLIC_ENTRY_HEADERS
  hwtrain/run/hardware_aware_optimizer.h  # the seeds' facade: plan, autocast, scaled step
  hwtrain/run/run_config.h                # RunConfig: every area's options struct
  hwtrain/run/run_bindings.h              # RunConfig -> PlanIntent, TrainerOptions, callbacks
  hwtrain/train/trainer.h
  hwtrain/train/callback.h
  hwtrain/train/early_stopping.h
  hwtrain/train/model_checkpoint.h
  hwtrain/train/lr_plateau.h
  hwtrain/plan/planner.h
  hwtrain/hw/hardware_profile.h           # detect_hardware(), HardwareProfile
  hwtrain/hw/hardware_preset.h            # described machines (h100-80gb, ...)
  hwtrain/hw/doctor.h                     # findings that slow training, with their fixes
  hwtrain/model/gpt.h
  hwtrain/data/sharded_dataset.h
  hwtrain/data/tokenizer.h
  hwtrain/data/example_source.h           # a user's map-style dataset
  hwtrain/model/trainable_model.h         # the model interface: a user's module in a few lines
  hwtrain/model/gpt_model.h               # the built-in families through that interface
  hwtrain/train/training_data.h           # token windows or a user's examples, for the Trainer
  hwtrain/run/train_model.h)              # the seeds' one-call train_model
set(HWTRAIN_PUBLIC_OPTIONAL_ENTRY_HEADERS)

# hwtrain_public_header_closure(<out-var> <src-dir>): the public headers, as paths relative to
# <src-dir> (hwtrain/<area>/<name>.h), sorted. A required entry header that is missing, or an
# include of a hwtrain header that does not exist, is a fatal error naming the file.
function(hwtrain_public_header_closure out_var src_dir)
  set(_pending "")
  foreach(_h IN LISTS HWTRAIN_PUBLIC_ENTRY_HEADERS)
    if(NOT EXISTS "${src_dir}/${_h}")
      message(FATAL_ERROR "hwtrain: public entry header ${src_dir}/${_h} does not exist; "
                          "update HWTRAIN_PUBLIC_ENTRY_HEADERS in cmake/public_headers.cmake")
    endif()
    list(APPEND _pending "${_h}")
  endforeach()
  foreach(_h IN LISTS HWTRAIN_PUBLIC_OPTIONAL_ENTRY_HEADERS)
    if(EXISTS "${src_dir}/${_h}")
      list(APPEND _pending "${_h}")
    endif()
  endforeach()
  set(_seen "")
  while(_pending)
    list(POP_FRONT _pending _h)
    list(FIND _seen "${_h}" _index)  # not IN_LIST: `cmake --install` runs this without policies
    if(NOT _index EQUAL -1)
      continue()
    endif()
    if(NOT EXISTS "${src_dir}/${_h}")
      message(FATAL_ERROR "hwtrain: a public header includes \"${_h}\", which is not in ${src_dir}")
    endif()
    list(APPEND _seen "${_h}")
    file(STRINGS "${src_dir}/${_h}" _lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"hwtrain/[^\"]+\"")
    foreach(_line IN LISTS _lines)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"(hwtrain/[^\"]+)\".*$" "\\1" _inc "${_line}")
      list(APPEND _pending "${_inc}")
    endforeach()
  endwhile()
  list(SORT _seen)
  set(${out_var} "${_seen}" PARENT_SCOPE)
endfunction()

# hwtrain_install_public_headers(<src-dir> <include-destination>): run by `cmake --install`;
# copies the closure into <include-destination>/hwtrain/<area>/ (DESTDIR is honoured by
# file(INSTALL), and the files go into install_manifest.txt).
function(hwtrain_install_public_headers src_dir destination)
  hwtrain_public_header_closure(_headers "${src_dir}")
  foreach(_h IN LISTS _headers)
    get_filename_component(_dir "${_h}" DIRECTORY)
    file(INSTALL DESTINATION "${destination}/${_dir}" TYPE FILE FILES "${src_dir}/${_h}")
  endforeach()
endfunction()
