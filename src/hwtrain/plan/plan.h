// Plan: how a run trains on this hardware. Every decision carries a one-line reason; the plan is
// printed at the start of each run and saved with every checkpoint. Produced by plan/planner.h,
// consumed by the trainer, which never decides these things itself.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace hwt {

enum class Precision { Fp32, Bf16, Fp16 };
const char* precision_name(Precision p);  // "fp32" | "bf16" | "fp16"

struct Decision {
  std::string name;    // "precision"
  std::string value;   // "bf16 autocast"
  std::string reason;  // "CPU has AVX512_BF16 and bf16 GEMM measured 2.9x fp32"
};

struct Plan {
  std::string device = "cpu";  // "cpu" | "cuda:N"
  Precision precision = Precision::Fp32;
  bool pure_bf16_weights = false;  // bf16 weights with fp32 optimizer moments
  bool hardware_bf16 = false;      // the device runs bf16 natively (for the precision status)
  bool hardware_fp16 = false;
  std::string attention = "sdpa";  // "sdpa" | "gemm" | "math"
  int64_t checkpoint_every = 0;    // activation checkpointing: 0 = none, k = every k-th block
  bool fused_lm_head_loss = false; // chunked LM head + cross-entropy (model/lm_head_loss.h)
  int64_t micro_batch_size = 1;
  int64_t grad_accum_steps = 1;
  int64_t world_size = 1;
  int64_t intra_op_threads = 1;
  int64_t num_workers = 1;         // data loader threads
  int64_t prefetch_factor = 2;
  bool pin_memory = false;
  bool allow_tf32 = false;
  bool cudnn_benchmark = false;
  bool fused_optimizer = true;
  bool optimizer_in_backward = false;  // AdamW per parameter inside backward; gradients freed as made
  bool cuda_graphs = false;
  bool zero1 = false;
  bool auto_batch_size = false;    // probe the largest micro-batch before training
  std::string optimizer_state_device = "device";
  double memory_budget_bytes = 0;     // memory_threshold x available memory
  double predicted_peak_bytes = 0;    // memory model's estimate for the chosen settings
  double peak_flops = 0;              // hardware peak at the chosen precision (for MFU)
  std::vector<Decision> decisions;    // in the order they were made
  std::vector<std::string> warnings;  // user settings overridden or impossible, with the fallback

  int64_t global_batch_size() const { return micro_batch_size * grad_accum_steps * world_size; }
  void decide(const std::string& name, const std::string& value, const std::string& reason) {
    decisions.push_back({name, value, reason});
  }
  std::string to_text() const;  // aligned "name  value  (reason)" lines
  std::string to_json() const;
  static Plan from_json(const std::string& json);  // throws ConfigError on malformed input
};

}  // namespace hwt
