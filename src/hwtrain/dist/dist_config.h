// DistConfig: data-parallel options. World size and rank come from the environment (torchrun,
// Slurm or `hwtrain launch`), not from here. Header-only plain struct.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "hwtrain/core/option_checks.h"

namespace hwt {

struct DistConfig {
  // Each option is described once, by its visit() line below (printed by --help-config).
  std::string backend = "auto";
  double bucket_size_mb = 25.0;
  std::string sharding = "auto";
  double timeout = 60.0;

  void validate() const {
    check_positive("dist.bucket_size_mb", bucket_size_mb);
    if (!(timeout > 0)) option_range_error("dist.timeout", option_text(timeout), "must be > 0 seconds");
  }

  template <class V>
  void visit(V& v) {
    v("backend", backend, "process group backend: auto (nccl on CUDA, gloo on CPU), gloo or nccl",
      std::vector<std::string>{"auto", "gloo", "nccl"});
    v("bucket_size_mb", bucket_size_mb, "gradient all-reduce bucket size in MB");
    v("sharding", sharding,
      "what data-parallel ranks shard: none, zero1 (AdamW moments), zero2 (moments, fp32 master weights and "
      "gradients), zero3 (also the parameters, gathered a block at a time) or auto (the planner's choice by memory)",
      std::vector<std::string>{"none", "zero1", "zero2", "zero3", "auto"});
    v("timeout", timeout, "seconds before a dead or hung rank fails the run");
  }
};

}  // namespace hwt
