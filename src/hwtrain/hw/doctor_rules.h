// The rules behind diagnose(), grouped by what they look at. Internal to hw/doctor*.cpp.
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "hwtrain/hw/doctor.h"

namespace hwt::doctor {

using Findings = std::vector<Finding>;

void check_blas_and_gemm(const HardwareProfile& p, Findings* out);
void check_threads(const HardwareProfile& p, Findings* out);
void check_allocator_and_memory(const HardwareProfile& p, Findings* out);
void check_gpus(const HardwareProfile& p, Findings* out);

// True when LibTorch can train on a GPU here, so CPU speed findings matter less.
bool has_usable_gpu(const HardwareProfile& p);

// printf-style formatting for messages.
template <typename... Args>
std::string fmt(const char* f, Args... args) {
  char buf[512];
  std::snprintf(buf, sizeof(buf), f, args...);
  return buf;
}

}  // namespace hwt::doctor
