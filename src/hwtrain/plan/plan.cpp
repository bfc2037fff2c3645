#include "hwtrain/plan/plan.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>

#include "hwtrain/core/error.h"
#include "hwtrain/core/strings.h"
#include "hwtrain/model/attention.h"

namespace hwt {

const char* precision_name(Precision p) { return enum_name(p); }

namespace {
// A mode read back from plan.json; ConfigError naming the field and the valid names.
template <class E>
E plan_mode(const std::string& s, const char* field) {
  if (auto v = enum_from_name<E>(s)) return *v;
  throw ConfigError(std::string("plan: ") + field + " '" + s + "' is not valid: expected one of " +
                    join(enum_choices<E>()));
}

Precision precision_from_name(const std::string& s) { return plan_mode<Precision>(s, "precision"); }
const char* state_device_name(StateDevice d) { return enum_name(d); }
StateDevice state_device_from_name(const std::string& s) {
  return plan_mode<StateDevice>(s, "optimizer_state_device");
}
}  // namespace

const char* sharding_name(Sharding s) { return enum_name(s); }

Sharding sharding_from_name(const std::string& s) { return plan_mode<Sharding>(s, "sharding"); }

std::string ParallelLayout::name() const {
  return "tp" + std::to_string(tensor_parallel) + " x pp" + std::to_string(pipeline_parallel) + " x dp" +
         std::to_string(data_parallel);
}

std::string ParallelLayout::summary() const {
  return name() + ", " + sharding_name(sharding) + ", micro-batch " + std::to_string(micro_batch_size) + " x " +
         std::to_string(num_micro_batches) +
         (checkpoint_every == 0   ? std::string(", no recomputation")
          : checkpoint_every == 1 ? std::string(", recompute every block")
                                  : ", recompute every " + std::to_string(checkpoint_every) + " blocks") +
         (pipeline_chunks > 1 ? ", " + std::to_string(pipeline_chunks) + " chunks per stage" : std::string());
}

namespace {

nlohmann::ordered_json layout_to_json(const ParallelLayout& l) {
  return {{"tensor_parallel", l.tensor_parallel},
          {"pipeline_parallel", l.pipeline_parallel},
          {"pipeline_chunks", l.pipeline_chunks},
          {"data_parallel", l.data_parallel},
          {"sharding", sharding_name(l.sharding)},
          {"micro_batch_size", l.micro_batch_size},
          {"num_micro_batches", l.num_micro_batches},
          {"checkpoint_every", l.checkpoint_every},
          {"predicted_peak_bytes", l.predicted_peak_bytes},
          {"predicted_step_seconds", l.predicted_step_seconds},
          {"predicted_mfu", l.predicted_mfu}};
}

ParallelLayout layout_from_json(const nlohmann::json& j) {
  ParallelLayout l;
  l.tensor_parallel = j.at("tensor_parallel");
  l.pipeline_parallel = j.at("pipeline_parallel");
  l.pipeline_chunks = j.value("pipeline_chunks", int64_t{1});
  l.data_parallel = j.at("data_parallel");
  l.sharding = sharding_from_name(j.at("sharding"));
  l.micro_batch_size = j.at("micro_batch_size");
  l.num_micro_batches = j.at("num_micro_batches");
  l.checkpoint_every = j.at("checkpoint_every");
  l.predicted_peak_bytes = j.value("predicted_peak_bytes", 0.0);
  l.predicted_step_seconds = j.value("predicted_step_seconds", 0.0);
  l.predicted_mfu = j.value("predicted_mfu", 0.0);
  return l;
}

}  // namespace

std::string Plan::to_text() const {
  size_t name_width = 0, value_width = 0;
  for (const auto& d : decisions) {
    name_width = std::max(name_width, d.name.size());
    value_width = std::max(value_width, d.value.size());
  }
  std::string out;
  for (const auto& d : decisions) {
    out += "  " + d.name + std::string(name_width - d.name.size() + 2, ' ') + d.value +
           std::string(value_width - d.value.size() + 2, ' ') + "(" + d.reason + ")\n";
  }
  for (const auto& w : warnings) out += "  warning: " + w + "\n";
  return out;
}

std::string Plan::layouts_text() const {
  if (layouts_considered.empty()) return "";
  std::string out = layout ? "parallel layout: " + layout->summary() + "\n" : std::string();
  out += "layouts considered (best variant of each tp x pp; memory per rank, predicted step time and MFU):\n";
  char line[256];
  std::snprintf(line, sizeof line, "  %-20s %-6s %-11s %-9s %11s %9s %5s  %s\n", "layout", "zero", "micro x m",
                "recompute", "memory", "step", "MFU", "verdict");
  out += line;
  for (const LayoutOption& o : layouts_considered) {
    const ParallelLayout& l = o.layout;
    const std::string micro = std::to_string(l.micro_batch_size) + " x " + std::to_string(l.num_micro_batches);
    const std::string step = l.predicted_step_seconds > 0 ? format_seconds(l.predicted_step_seconds) : "-";
    const std::string mfu = l.predicted_mfu > 0 ? format_number("%.0f%%", 100.0 * l.predicted_mfu) : "-";
    const std::string memory = l.predicted_peak_bytes > 0 ? format_bytes(l.predicted_peak_bytes) : "-";
    std::snprintf(line, sizeof line, "  %-20s %-6s %-11s %-9s %11s %9s %5s  ", l.name().c_str(),
                  sharding_name(l.sharding), micro.c_str(), l.checkpoint_every > 0 ? "on" : "off", memory.c_str(),
                  step.c_str(), mfu.c_str());
    out += line + o.verdict + "\n";
  }
  return out;
}

std::string Plan::to_json() const {
  nlohmann::ordered_json j;
  j["device"] = device.str();
  j["precision"] = precision_name(precision);
  j["pure_bf16_weights"] = pure_bf16_weights;
  j["autocast"] = {{"cast_inputs", autocast.cast_inputs}, {"cast_outputs", autocast.cast_outputs},
                   {"cache", autocast.cache}};
  j["attention"] = to_string(attention);
  j["checkpoint_every"] = checkpoint_every;
  j["fused_lm_head_loss"] = fused_lm_head_loss;
  j["micro_batch_size"] = micro_batch_size;
  j["grad_accum_steps"] = grad_accum_steps;
  j["world_size"] = world_size;
  j["global_batch_size"] = global_batch_size();
  j["intra_op_threads"] = intra_op_threads;
  j["num_workers"] = num_workers;
  j["prefetch_factor"] = prefetch_factor;
  j["pin_memory"] = pin_memory;
  j["allow_tf32"] = allow_tf32;
  j["cudnn_benchmark"] = cudnn_benchmark;
  j["deterministic"] = deterministic;
  j["fused_optimizer"] = fused_optimizer;
  j["optimizer_in_backward"] = optimizer_in_backward();
  j["hardware_bf16"] = hardware_bf16;
  j["hardware_fp16"] = hardware_fp16;
  j["cuda_graphs"] = cuda_graphs;
  j["sharding"] = sharding_name(sharding);
  j["gradient_reduce"] = enum_name(gradient_reduce);
  j["deferred_init"] = deferred_init;
  if (layout) j["parallel_layout"] = layout_to_json(*layout);  // multi-GPU plans only
  j["auto_batch_size"] = auto_batch_size;
  j["optimizer_state_device"] = state_device_name(optimizer_state_device);
  j["optimizer_state_dtype"] = enum_name(optimizer_state_dtype);
  j["memory_budget_bytes"] = memory_budget_bytes;
  j["predicted_peak_bytes"] = predicted_peak_bytes;
  j["peak_flops"] = peak_flops;
  j["loss_scaling"] = {{"dynamic", loss_scaling.dynamic},
                       {"init_scale", loss_scaling.init_scale},
                       {"growth_factor", loss_scaling.growth_factor},
                       {"backoff_factor", loss_scaling.backoff_factor},
                       {"growth_interval", loss_scaling.growth_interval},
                       {"nonfinite_fallback_steps", loss_scaling.nonfinite_fallback_steps},
                       {"min_scale", loss_scaling.min_scale},
                       {"max_scale", loss_scaling.max_scale}};
  auto& ds = j["decisions"] = nlohmann::ordered_json::array();
  for (const auto& d : decisions) ds.push_back({{"decision", d.name}, {"value", d.value}, {"reason", d.reason}});
  j["warnings"] = warnings;
  return j.dump(2);
}

Plan Plan::from_json(const std::string& text) {
  Plan p;
  try {
    auto j = nlohmann::json::parse(text);
    p.device = c10::Device(j.at("device").get<std::string>());
    p.precision = precision_from_name(j.at("precision"));
    p.pure_bf16_weights = j.value("pure_bf16_weights", false);
    if (j.contains("autocast")) {
      const auto& a = j.at("autocast");
      p.autocast = {a.at("cast_inputs").get<bool>(), a.at("cast_outputs").get<bool>(), a.at("cache").get<bool>()};
    }
    p.attention = parse_attention_kernel(j.at("attention"));
    p.checkpoint_every = j.at("checkpoint_every");
    p.fused_lm_head_loss = j.value("fused_lm_head_loss", false);
    p.micro_batch_size = j.at("micro_batch_size");
    p.grad_accum_steps = j.at("grad_accum_steps");
    p.world_size = j.value("world_size", 1);
    p.intra_op_threads = j.at("intra_op_threads");
    p.num_workers = j.at("num_workers");
    p.prefetch_factor = j.value("prefetch_factor", 2);
    p.pin_memory = j.value("pin_memory", false);
    p.allow_tf32 = j.value("allow_tf32", false);
    p.cudnn_benchmark = j.value("cudnn_benchmark", false);
    p.deterministic = j.value("deterministic", false);
    p.fused_optimizer = j.value("fused_optimizer", true);
    p.optimizer_step = j.value("optimizer_in_backward", false) ? OptimizerStep::InBackward : OptimizerStep::AfterBackward;
    p.hardware_bf16 = j.value("hardware_bf16", false);
    p.hardware_fp16 = j.value("hardware_fp16", false);
    p.cuda_graphs = j.value("cuda_graphs", false);
    p.sharding = j.contains("sharding") ? sharding_from_name(j.value("sharding", "none"))
                 : j.value("zero1", false)   ? Sharding::Zero1  // plan.json before dist.sharding
                                             : Sharding::None;
    p.gradient_reduce = plan_mode<ReduceDtype>(j.value("gradient_reduce", "fp32"), "gradient_reduce");
    p.deferred_init = j.value("deferred_init", false);
    if (j.contains("parallel_layout")) p.layout = layout_from_json(j.at("parallel_layout"));
    p.auto_batch_size = j.value("auto_batch_size", false);
    p.optimizer_state_device = state_device_from_name(j.value("optimizer_state_device", "device"));
    const std::string dtype = j.value("optimizer_state_dtype", "fp32");
    if (dtype != "fp32" && dtype != "int8") {
      throw ConfigError("plan: optimizer_state_dtype '" + dtype + "' is not valid: expected fp32 or int8");
    }
    p.optimizer_state_dtype = dtype == "int8" ? StateDtype::Int8 : StateDtype::Fp32;
    p.memory_budget_bytes = j.value("memory_budget_bytes", 0.0);
    p.predicted_peak_bytes = j.value("predicted_peak_bytes", 0.0);
    p.peak_flops = j.value("peak_flops", 0.0);
    if (j.contains("loss_scaling")) {  // plans written before it was recorded take the defaults
      const auto& l = j.at("loss_scaling");
      p.loss_scaling.dynamic = l.at("dynamic");
      p.loss_scaling.init_scale = l.at("init_scale");
      p.loss_scaling.growth_factor = l.at("growth_factor");
      p.loss_scaling.backoff_factor = l.at("backoff_factor");
      p.loss_scaling.growth_interval = l.at("growth_interval");
      p.loss_scaling.nonfinite_fallback_steps = l.at("nonfinite_fallback_steps");
      p.loss_scaling.min_scale = l.value("min_scale", 0.0);  // absent before the bounds existed
      p.loss_scaling.max_scale = l.value("max_scale", 0.0);
    }
    for (const auto& d : j.at("decisions")) p.decisions.push_back({d.at("decision"), d.at("value"), d.at("reason")});
    p.warnings = j.value("warnings", std::vector<std::string>{});
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(std::string("plan.json is malformed: ") + e.what());
  } catch (const c10::Error& e) {  // a device string LibTorch cannot parse
    throw ConfigError(std::string("plan.json: device is not valid: ") + e.what_without_backtrace());
  }
  return p;
}

}  // namespace hwt
