// The process environment that changes training speed: which allocator provides malloc (found
// by asking which loaded object defines it), the thread and kernel variables of OpenMP, MKL and
// OpenBLAS, and LibTorch's intra-/inter-op thread counts.
#pragma once
#include "hwtrain/hw/hardware_profile.h"

namespace hwt {

EnvInfo detect_env();

// Allocator from the path of the object that defines malloc ("libjemalloc.so.2", "libc.so.6").
Allocator allocator_from_library(const std::string& path);

// First integer of a thread-count variable ("4", "4,2" for nested OpenMP); 0 when unset/invalid.
int parse_thread_count(const std::string& value);

}  // namespace hwt
