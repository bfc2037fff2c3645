// The process environment that changes training speed: which allocator provides malloc (found
// by asking which loaded object defines it), the thread and kernel variables of OpenMP, MKL and
// OpenBLAS, and LibTorch's intra-/inter-op thread counts.
#pragma once
#include "hwtrain/hw/hardware_profile.h"

namespace hwt {

EnvInfo detect_env();

// Allocator from the path of the object that defines malloc ("libjemalloc.so.2", "libc.so.6").
Allocator allocator_from_library(const std::string& path);

// A thread-count variable as the runtimes read it: positive whole numbers, comma-separated for
// OpenMP's nesting levels ("8" or "8,2"), blanks around them allowed. Anything else libgomp rejects
// ("Invalid value for environment variable") and ignores, and OpenBLAS/MKL treat as unset.
bool valid_thread_count(const std::string& value);

// The first level's count of a valid thread-count variable ("4", "4,2" for nested OpenMP); 0 when
// unset or invalid (the runtimes ignore it then).
int parse_thread_count(const std::string& value);

}  // namespace hwt
