#include "hwtrain/train/adamw.h"

#include <cmath>
#include <map>
#include <set>

#include "hwtrain/core/error.h"
#include "hwtrain/obs/log.h"

namespace hwt {

AdamW::AdamW(std::vector<std::pair<std::string, torch::Tensor>> named_decay,
             std::vector<std::pair<std::string, torch::Tensor>> named_no_decay, AdamWOptions options)
    : options_(options), fused_(options.fused) {
  auto add = [&](auto& group, bool decay) {
    for (auto& [name, p] : group) {
      const c10::Device at = options.host_state ? c10::Device(torch::kCPU) : p.device();
      Slot s;
      s.name = name;
      s.param = p;
      s.step = torch::zeros({}, p.options().dtype(torch::kFloat32).device(at));
      s.decay = decay;
      s.quantized = options.int8_moments && p.numel() >= kMinInt8MomentElements;
      if (!options.defer_state) zero_moments(s);
      slots_.push_back(std::move(s));
    }
  };
  add(named_decay, true);
  add(named_no_decay, false);
}

void AdamW::zero_moments(Slot& s) {
  const auto moment_options = s.param.options().dtype(torch::kFloat32).device(state_device(s));
  if (s.quantized) {
    s.qm = quantize_blockwise(torch::zeros({s.param.numel()}, moment_options), /*is_signed=*/true);
    s.qv = quantize_blockwise(torch::zeros({s.param.numel()}, moment_options), /*is_signed=*/false);
  } else {
    s.exp_avg = torch::zeros_like(s.param, moment_options);
    s.exp_avg_sq = torch::zeros_like(s.param, moment_options);
  }
}

void AdamW::set_owned(const std::vector<std::string>& owned) {
  std::set<std::string> names(owned.begin(), owned.end());
  for (auto& s : slots_) {
    s.owned = names.empty() || names.count(s.name) > 0;
    if (!s.owned) {  // a shard's optimizer state lives on its owner only
      s.exp_avg = s.exp_avg_sq = torch::Tensor();
      s.qm = s.qv = BlockQuantized{};
    } else if (!s.exp_avg.defined() && !s.qm.codes.defined()) {
      zero_moments(s);
    }
  }
}

c10::Device AdamW::state_device(const Slot& s) const {
  return options_.host_state ? c10::Device(torch::kCPU) : s.param.device();
}

void AdamW::step_quantized(Slot& s, const torch::Tensor& param, const torch::Tensor& grad, double lr) {
  s.exp_avg = dequantize_blockwise(s.qm, true).view(param.sizes());
  s.exp_avg_sq = dequantize_blockwise(s.qv, false).view(param.sizes());
  step_reference(s, param, grad, lr);
  s.qm = quantize_blockwise(s.exp_avg, true);
  s.qv = quantize_blockwise(s.exp_avg_sq, false);
  s.exp_avg = s.exp_avg_sq = torch::Tensor();
}

void AdamW::step_reference(Slot& s, const torch::Tensor& param, const torch::Tensor& grad_in, double lr) {
  torch::NoGradGuard no_grad;
  auto grad = grad_in.to(torch::kFloat32);
  s.step.add_(1);
  const double t = s.step.item<double>();
  auto param32 = param.dtype() == torch::kFloat32 ? param : param.to(torch::kFloat32);
  if (s.decay && options_.weight_decay != 0) param32.mul_(1.0 - lr * options_.weight_decay);
  s.exp_avg.lerp_(grad, 1.0 - options_.beta1);
  s.exp_avg_sq.mul_(options_.beta2).addcmul_(grad, grad, 1.0 - options_.beta2);
  const double bias1 = 1.0 - std::pow(options_.beta1, t);
  const double bias2 = 1.0 - std::pow(options_.beta2, t);
  auto denom = (s.exp_avg_sq.sqrt() / std::sqrt(bias2)).add_(options_.eps);
  param32.addcdiv_(s.exp_avg, denom, -lr / bias1);
  if (param.dtype() != torch::kFloat32) param.copy_(param32);
}

void AdamW::step_fused(const std::vector<torch::Tensor>& params, const std::vector<torch::Tensor>& grads,
                       const std::vector<torch::Tensor>& exp_avgs, const std::vector<torch::Tensor>& exp_avg_sqs,
                       const std::vector<torch::Tensor>& steps, bool decay, double lr,
                       const torch::Tensor& grad_scale, const torch::Tensor& found_inf,
                       const torch::Tensor& lr_tensor) {
  // As in Python's fused AdamW: the caller counts the step, and takes it back if skipped.
  at::_foreach_add_(steps, 1);
  const double wd = decay ? options_.weight_decay : 0.0;
  const auto scale = grad_scale.defined() ? std::optional<at::Tensor>(grad_scale) : std::nullopt;
  const auto inf = found_inf.defined() ? std::optional<at::Tensor>(found_inf) : std::nullopt;
  if (lr_tensor.defined()) {
    at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps, lr_tensor, options_.beta1,
                      options_.beta2, wd, options_.eps, /*amsgrad=*/false, /*maximize=*/false, scale, inf);
  } else {
    at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps, lr, options_.beta1,
                      options_.beta2, wd, options_.eps, /*amsgrad=*/false, /*maximize=*/false, scale, inf);
  }
  if (found_inf.defined()) {
    for (const auto& t : steps) t.sub_(found_inf);
  }
}

void AdamW::step(double lr, const torch::Tensor& grad_scale, const torch::Tensor& found_inf) {
  torch::NoGradGuard no_grad;
  for (auto& s : slots_) {
    if (s.owned && !has_moments(s)) zero_moments(s);  // deferred until now
  }
  if (options_.host_state) {
    step_on_host(lr, grad_scale, found_inf);
    return;
  }
  update(lr, grad_scale, found_inf, /*on_host=*/false);
}

// The update of every owned parameter with a gradient, on the parameters themselves or (on_host) on
// their host masters with the staged gradients: the same kernels either way.
void AdamW::update(double lr, const torch::Tensor& grad_scale, const torch::Tensor& found_inf, bool on_host) {
  auto param_of = [on_host](Slot& s) { return on_host ? s.host : s.param; };
  auto grad_of = [on_host](Slot& s) { return on_host ? s.host_grad : s.param.grad(); };
  auto skipped = [&found_inf] { return found_inf.defined() && found_inf.item<float>() != 0.0f; };
  auto takes_part = [](const Slot& s) { return s.owned && s.param.grad().defined(); };
  if (!fused_) {
    if (skipped()) return;
    for (auto& s : slots_) {
      if (!takes_part(s)) continue;
      if (grad_scale.defined()) grad_of(s).div_(grad_scale);
      s.quantized ? step_quantized(s, param_of(s), grad_of(s), lr) : step_reference(s, param_of(s), grad_of(s), lr);
    }
    return;
  }
  for (auto& s : slots_) {  // 8-bit moments: dequantized and updated one parameter at a time
    if (!s.quantized || !takes_part(s)) continue;
    if (skipped()) return;
    if (grad_scale.defined()) grad_of(s).div_(grad_scale);
    step_quantized(s, param_of(s), grad_of(s), lr);
  }
  // The fused kernel wants lists of same-dtype tensors per call: group by (decay, param dtype).
  for (bool decay : {true, false}) {
    for (auto dtype : {torch::kFloat32, torch::kBFloat16, torch::kFloat16}) {
      std::vector<torch::Tensor> params, grads, m, v, steps;
      std::vector<Slot*> group;
      for (auto& s : slots_) {
        if (s.decay != decay || s.quantized || !takes_part(s) || param_of(s).scalar_type() != dtype) continue;
        params.push_back(param_of(s));
        grads.push_back(grad_of(s));
        m.push_back(s.exp_avg);
        v.push_back(s.exp_avg_sq);
        steps.push_back(s.step);
        group.push_back(&s);
      }
      if (params.empty()) continue;
      if (dtype != torch::kFloat32) {
        // The fused kernel requires moments of the parameter dtype; keep fp32 moments and use
        // the reference update for low-precision weights instead.
        for (Slot* s : group) {
          if (skipped()) return;
          if (grad_scale.defined()) grad_of(*s).div_(grad_scale);
          step_reference(*s, param_of(*s), grad_of(*s), lr);
        }
        continue;
      }
      step_fused(params, grads, m, v, steps, decay, lr, grad_scale, found_inf);
    }
  }
}

void AdamW::step_parameter(size_t index, double lr) {
  TORCH_CHECK(index < slots_.size(), "AdamW::step_parameter: index ", index, " of ", slots_.size());
  torch::NoGradGuard no_grad;
  Slot& s = slots_[index];
  if (options_.host_state) {  // the planner refuses this pair; a step per gradient would stall on each copy
    throw ConfigError("optimization.optimizer_in_backward cannot run with optimization.optimizer_state_device = cpu");
  }
  if (!s.owned || !s.param.grad().defined()) return;
  if (!has_moments(s)) zero_moments(s);
  if (s.quantized) {
    step_quantized(s, lr);
    return;
  }
  if (!fused_ || s.param.scalar_type() != torch::kFloat32) {
    step_reference(s, lr);
    return;
  }
  step_fused({s.param}, {s.param.grad()}, {s.exp_avg}, {s.exp_avg_sq}, {s.step}, s.decay, lr, {}, {});
}

std::string AdamW::capture_obstacle() const {
  if (!fused_) return "optimization.fused_optimizer = false";
  if (options_.host_state) return "optimizer state in host memory";
  for (const auto& s : slots_) {
    if (s.quantized) return "8-bit moments (parameter '" + s.name + "')";
    if (!s.owned) return "ZeRO-1 shards";
    if (s.param.scalar_type() != torch::kFloat32) return "parameter '" + s.name + "' is not fp32";
    if (!has_moments(s)) return "moments of '" + s.name + "' not allocated yet";
  }
  return "";
}

void AdamW::step_on_device(const torch::Tensor& lr, const torch::Tensor& found_inf) {
  const std::string obstacle = capture_obstacle();
  if (!obstacle.empty()) throw ConfigError("AdamW cannot update from device tensors alone: " + obstacle);
  torch::NoGradGuard no_grad;
  for (bool decay : {true, false}) {
    std::vector<torch::Tensor> params, grads, m, v, steps;
    for (auto& s : slots_) {
      if (s.decay != decay || !s.param.grad().defined()) continue;
      params.push_back(s.param);
      grads.push_back(s.param.grad());
      m.push_back(s.exp_avg);
      v.push_back(s.exp_avg_sq);
      steps.push_back(s.step);
    }
    if (!params.empty()) step_fused(params, grads, m, v, steps, decay, 0.0, {}, found_inf, lr);
  }
}

void AdamW::reset_state() {
  torch::NoGradGuard no_grad;
  for (auto& s : slots_) {
    if (!s.owned) continue;
    zero_moments(s);
    s.step.zero_();
  }
}

void AdamW::zero_grad() {
  for (auto& s : slots_) {
    if (s.param.grad().defined()) s.param.mutable_grad() = torch::Tensor();
  }
}

std::vector<std::pair<std::string, torch::Tensor>> AdamW::state(bool fp32_moments) const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& s : slots_) {
    if (!s.owned || !has_moments(s)) continue;
    if (s.quantized && fp32_moments) {
      out.emplace_back("exp_avg." + s.name, dequantize_blockwise(s.qm, true).view(s.param.sizes()));
      out.emplace_back("exp_avg_sq." + s.name, dequantize_blockwise(s.qv, false).view(s.param.sizes()));
    } else if (s.quantized) {
      out.emplace_back(eight_bit_codes_key("exp_avg.", s.name), s.qm.codes);
      out.emplace_back(eight_bit_scales_key("exp_avg.", s.name), s.qm.absmax);
      out.emplace_back(eight_bit_codes_key("exp_avg_sq.", s.name), s.qv.codes);
      out.emplace_back(eight_bit_scales_key("exp_avg_sq.", s.name), s.qv.absmax);
    } else {
      out.emplace_back("exp_avg." + s.name, s.exp_avg);
      out.emplace_back("exp_avg_sq." + s.name, s.exp_avg_sq);
    }
    out.emplace_back("step." + s.name, s.step);
  }
  return out;
}

void AdamW::load_state(const std::vector<std::pair<std::string, torch::Tensor>>& state) {
  std::map<std::string, torch::Tensor> by_name(state.begin(), state.end());
  torch::NoGradGuard no_grad;
  for (auto& s : slots_) {
    if (!s.owned) continue;
    load_moments(s, by_name);
    auto it = by_name.find("step." + s.name);
    if (it == by_name.end()) throw IoError("optimizer state lacks 'step." + s.name + "'");
    if (it->second.numel() != 1) throw IoError("optimizer state 'step." + s.name + "' is not a scalar");
    s.step.copy_(it->second.reshape({}));
  }
}

namespace {

const torch::Tensor& state_entry(const std::map<std::string, torch::Tensor>& by_name, const std::string& key,
                                 int64_t numel) {
  auto it = by_name.find(key);
  if (it == by_name.end()) throw IoError("optimizer state lacks '" + key + "'");
  if (it->second.numel() != numel) {
    throw IoError("optimizer state '" + key + "' has " + std::to_string(it->second.numel()) + " elements, the model needs " +
                  std::to_string(numel));
  }
  return it->second;
}

}  // namespace

// A moment saved in either form (fp32, or 8-bit codes with their scales) into this slot's form.
void AdamW::load_moments(Slot& s, const std::map<std::string, torch::Tensor>& by_name) {
  if (!has_moments(s)) zero_moments(s);
  const int64_t n = s.param.numel(), blocks = (n + kQuantBlockSize - 1) / kQuantBlockSize;
  for (const bool first : {true, false}) {
    const std::string key = first ? "exp_avg." : "exp_avg_sq.";
    torch::Tensor whole;  // the fp32 moment, when it must be (de)quantized
    const bool saved_q8 = by_name.count(eight_bit_codes_key(key, s.name)) > 0;
    if (saved_q8) {
      BlockQuantized q{
          state_entry(by_name, eight_bit_codes_key(key, s.name), n).to(torch::kUInt8).reshape(-1).to(state_device(s)),
          state_entry(by_name, eight_bit_scales_key(key, s.name), blocks).to(torch::kFloat32).reshape(-1).to(state_device(s))};
      if (s.quantized) {
        (first ? s.qm : s.qv) = q;
        continue;
      }
      whole = dequantize_blockwise(q, first);
    } else {
      whole = state_entry(by_name, key + s.name, n).to(torch::kFloat32);
    }
    if (s.quantized) {
      (first ? s.qm : s.qv) = quantize_blockwise(whole.to(state_device(s)), first);
    } else {
      (first ? s.exp_avg : s.exp_avg_sq).copy_(whole.reshape(s.param.sizes()));
    }
  }
}

std::vector<std::pair<std::string, torch::Tensor>> AdamW::named_parameters() const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& s : slots_) out.emplace_back(s.name, s.param);
  return out;
}

bool AdamW::has_state() const {
  for (const auto& s : slots_) {
    if (has_moments(s)) return true;
  }
  return false;
}

bool AdamW::decays(const std::string& name) const {
  for (const auto& s : slots_) {
    if (s.name == name) return s.decay;
  }
  throw ConfigError("AdamW has no parameter named '" + name + "'");
}

int64_t AdamW::state_bytes_of(const Slot& s) {
  int64_t bytes = 0;
  if (s.quantized) bytes += s.qm.bytes() + s.qv.bytes();
  if (s.exp_avg.defined()) bytes += 2 * s.exp_avg.numel() * static_cast<int64_t>(sizeof(float));
  return bytes;
}

int64_t AdamW::state_bytes() const {
  int64_t bytes = 0;
  for (const auto& s : slots_) {
    if (s.owned) bytes += state_bytes_of(s);
  }
  return bytes;
}

}  // namespace hwt
