// AdamW with decoupled weight decay over two parameter groups (decayed / not decayed).
// Uses ATen's fused kernel (at::_fused_adamw_, CPU and CUDA in 2.x) when enabled, with the
// reference per-tensor update kept as the path it is tested against. Moments are fp32 even when
// weights are bf16, or with int8_moments block-wise 8-bit (train/blockwise_quant.h, as
// bitsandbytes' 8-bit AdamW): each such parameter's moments are dequantized, updated by the
// reference rule and quantized again; tensors under 4096 elements keep fp32 moments, as
// bitsandbytes does. The state (moments and step counts) is exposed for checkpoints and ZeRO-1.
// With host_state (optimization.optimizer_state_device = cpu, ZeRO-Offload's placement) the moments
// and an fp32 master copy of each parameter live in host memory (pinned when the parameter is on a
// GPU): a step copies the gradients to the host, updates the masters there with ATen's fused CPU
// kernel (vectorized, multi-threaded over the elements; DeepSpeed's CPU-Adam plays this part), and
// copies the masters back into the parameters. A parameter written by anyone else since (a loaded
// checkpoint, restored weights: its version counter moved) is read back into its master first.
#pragma once
#include <torch/torch.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "hwtrain/train/blockwise_quant.h"

namespace hwt {

struct AdamWOptions {
  double beta1 = 0.9, beta2 = 0.99, eps = 1e-8, weight_decay = 0.1;
  bool fused = true;
  bool int8_moments = false;  // optimization.optimizer_state_dtype = int8
  // Moments allocated at the first step, load or reset instead of at construction: a ZeRO-2/3 run
  // replaces this optimizer by one over its shards and must never hold the whole moments.
  bool defer_state = false;
  bool host_state = false;  // moments and fp32 masters in host memory, the update on the host
};

// Parameters below this many elements keep fp32 moments under int8_moments (bitsandbytes' min_8bit_size).
constexpr int64_t kMinInt8MomentElements = 4096;

class AdamW {
 public:
  // `named_decay`/`named_no_decay`: (name, parameter) pairs; names key the saved state.
  AdamW(std::vector<std::pair<std::string, torch::Tensor>> named_decay,
        std::vector<std::pair<std::string, torch::Tensor>> named_no_decay, AdamWOptions options);

  // One update at learning rate `lr`. Parameters without a gradient are skipped.
  // `grad_scale`/`found_inf` (optional, fp32 scalars on the device) let the fused kernel unscale
  // and skip in one pass, as Python's GradScaler does.
  void step(double lr, const torch::Tensor& grad_scale = {}, const torch::Tensor& found_inf = {});
  // The same update for parameter `index` (in named_parameters() order) alone: what the
  // optimizer-in-backward hook calls as each gradient completes. Equal to step() for that
  // parameter (the fused kernel treats each tensor of its lists independently).
  void step_parameter(size_t index, double lr);
  // The update read from device tensors alone, as a CUDA graph can capture it (train/cuda_graph_step.h):
  // `lr` a float32 scalar on the parameters' device (ATen's tensor-lr overload: the learning rate
  // enters the kernel as that float, where step() passes a double), `found_inf` (optional, float32,
  // on the device) skips the update where it is 1. Throws ConfigError with capture_obstacle().
  void step_on_device(const torch::Tensor& lr, const torch::Tensor& found_inf);
  // Why step_on_device cannot run ("" when it can): it needs the fused kernel over fp32 parameters
  // with fp32 moments, allocated, on their device, and no ZeRO-1 shards.
  std::string capture_obstacle() const;
  size_t num_parameters() const { return slots_.size(); }
  void zero_grad();
  // Zeroes the moments and step counts (as freshly constructed), e.g. after probe steps.
  void reset_state();

  // Restricts updates to the parameters whose names are in `owned` (ZeRO-1 shards); empty = all.
  void set_owned(const std::vector<std::string>& owned);

  bool fused() const { return fused_; }
  const AdamWOptions& options() const { return options_; }
  // State tensors named "exp_avg.<param>", "exp_avg_sq.<param>", "step.<param>"; 8-bit moments as
  // "exp_avg.q8.<param>" / "exp_avg_sq.q8.<param>" (uint8 codes, flattened) with their per-block
  // scales "exp_avg.absmax.<param>" / "exp_avg_sq.absmax.<param>". load_state converts between the
  // two forms, so a run may resume with the other state dtype. fp32_moments: 8-bit moments
  // dequantized, in their parameters' shapes (for a model-parallel checkpoint, which cuts and joins
  // them as it does fp32 moments).
  std::vector<std::pair<std::string, torch::Tensor>> state(bool fp32_moments = false) const;
  // Loads what state() saved; throws IoError naming a missing or mis-shaped entry.
  void load_state(const std::vector<std::pair<std::string, torch::Tensor>>& state);
  // All (name, parameter) pairs, decayed first.
  std::vector<std::pair<std::string, torch::Tensor>> named_parameters() const;
  int64_t state_bytes() const;  // bytes of moment tensors this rank holds
  // Bytes of optimizer tensors (moments, masters, gradient staging) on the parameters' device, and
  // in host memory apart from the parameters: where host_state moved them.
  int64_t device_state_bytes() const;
  int64_t host_state_bytes() const;
  // host_state: how often a master was read from its parameter (first steps, and a parameter written
  // by someone else since); each read is a device-to-host copy.
  int64_t master_reads() const { return master_reads_; }
  bool decays(const std::string& name) const;  // whether parameter `name` is in the decayed group
  bool has_state() const;  // whether any moments exist yet (see AdamWOptions::defer_state)

 private:
  struct Slot {
    std::string name;
    torch::Tensor param, exp_avg, exp_avg_sq, step;  // step: fp32 scalar tensor (fused API)
    bool decay = false;
    bool owned = true;
    bool quantized = false;       // 8-bit moments in qm / qv; exp_avg and exp_avg_sq are undefined
    BlockQuantized qm, qv;
    // host_state: the fp32 master and gradient staging in host memory, and the parameter's
    // version counter when the master was last copied into it (-1: never).
    torch::Tensor host, host_grad;
    int64_t host_version = -1;
  };
  // The reference rule on `param` with gradient `grad` (s.param and its .grad(), or the host copies).
  void step_reference(Slot& s, const torch::Tensor& param, const torch::Tensor& grad, double lr);
  void step_reference(Slot& s, double lr) { step_reference(s, s.param, s.param.grad(), lr); }
  void step_quantized(Slot& s, const torch::Tensor& param, const torch::Tensor& grad, double lr);
  void step_quantized(Slot& s, double lr) { step_quantized(s, s.param, s.param.grad(), lr); }
  void update(double lr, const torch::Tensor& grad_scale, const torch::Tensor& found_inf, bool on_host);
  // host_state's step (train/adamw_offload.cpp): gradients to the host, the update there, masters back.
  void step_on_host(double lr, const torch::Tensor& grad_scale, const torch::Tensor& found_inf);
  void stage_on_host(Slot& s);     // master current, gradient copied (asynchronously from a GPU)
  void copy_back_from_host(Slot& s);
  c10::Device state_device(const Slot& s) const;  // where the moments live
  static int64_t state_bytes_of(const Slot& s);   // its moments' bytes
  void zero_moments(Slot& s);
  static bool has_moments(const Slot& s) { return s.quantized ? s.qm.codes.defined() : s.exp_avg.defined(); }
  void load_moments(Slot& s, const std::map<std::string, torch::Tensor>& by_name);
  // One at::_fused_adamw_ call over same-dtype lists of one decay group; counts their steps.
  void step_fused(const std::vector<torch::Tensor>& params, const std::vector<torch::Tensor>& grads,
                  const std::vector<torch::Tensor>& exp_avgs, const std::vector<torch::Tensor>& exp_avg_sqs,
                  const std::vector<torch::Tensor>& steps, bool decay, double lr, const torch::Tensor& grad_scale,
                  const torch::Tensor& found_inf, const torch::Tensor& lr_tensor = {});
  std::vector<Slot> slots_;
  int64_t master_reads_ = 0;
  AdamWOptions options_;
  bool fused_;
};

}  // namespace hwt
