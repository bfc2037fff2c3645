#include "hwtrain/plan/plan_intent.h"

namespace hwt {

namespace {

DeviceIntent device_intent(const std::string& text) {
  DeviceIntent d;
  d.text = text;
  if (text == "cpu") {
    d.kind = DeviceIntent::Kind::Cpu;
  } else if (text.rfind("cuda", 0) == 0) {  // the config validated "cuda" | "cuda:N"
    d.kind = DeviceIntent::Kind::Cuda;
    if (text.size() > 5) d.index = std::stoi(text.substr(5));
  }
  return d;
}

PrecisionIntent precision_intent(const OptimizationConfig& o) {
  PrecisionIntent p;
  if (o.mixed_precision_dtype != "auto") {
    p.dtype = o.mixed_precision_dtype == "bf16"   ? Precision::Bf16
              : o.mixed_precision_dtype == "fp16" ? Precision::Fp16
                                                  : Precision::Fp32;
    p.source = "optimization.mixed_precision_dtype = " + o.mixed_precision_dtype;
  }
  return p;
}

}  // namespace

PlanIntent plan_intent(const RunConfig& c) {
  const OptimizationConfig& o = c.optimization;
  PlanIntent w;
  w.model = c.model;
  w.device = device_intent(c.train.device);
  w.precision = precision_intent(o);
  w.pure_bf16_weights = o.pure_bf16_weights;
  w.loss_scaling = {o.dynamic_loss_scale,        o.loss_scale_init,           o.loss_scale_growth_factor,
                    o.loss_scale_backoff_factor, o.loss_scale_growth_interval, o.nonfinite_fallback_steps};
  if (c.is_set("optimization.intra_op_threads") && o.intra_op_threads > 0) w.intra_op_threads = o.intra_op_threads;
  if (c.model.attention != "auto") w.attention = parse_attention_kernel(c.model.attention);
  if (c.is_set("optimization.fused_lm_head_loss")) w.fused_lm_head_loss = o.fused_lm_head_loss;
  if (o.checkpoint_every >= 0) w.checkpoint_every = o.checkpoint_every;
  if (c.is_set("train.micro_batch_size")) w.micro_batch_size = c.train.micro_batch_size;
  if (c.is_set("train.grad_accum_steps") && o.target_batch_size == 0) w.grad_accum_steps = c.train.grad_accum_steps;
  w.target_batch_size = o.target_batch_size;
  w.rows_per_rank = c.train.micro_batch_size * c.train.grad_accum_steps;
  w.max_batch_size = o.max_batch_size;
  w.memory_threshold = o.memory_threshold;
  w.auto_batch_size = o.auto_batch_size;
  w.optimizer_step = o.optimizer_in_backward ? OptimizerStep::InBackward : OptimizerStep::AfterBackward;
  w.clips_by_global_norm = c.train.grad_clip > 0;
  if (c.is_set("optimization.fused_optimizer")) w.fused_optimizer = o.fused_optimizer;
  if (o.optimizer_state_device != "auto") {
    w.optimizer_state_device = o.optimizer_state_device == "cpu" ? StateDevice::Host : StateDevice::Device;
  }
  if (o.optimizer_state_dtype != "auto") {
    w.optimizer_state_dtype = o.optimizer_state_dtype == "int8" ? StateDtype::Int8 : StateDtype::Fp32;
  }
  w.snapshots_weights = c.early_stopping.enabled && c.early_stopping.restore_best_weights;
  if (c.dist.sharding != "auto") w.sharding = sharding_from_name(c.dist.sharding);
  if (o.num_workers >= 0) w.num_workers = o.num_workers;
  w.prefetch_factor = o.prefetch_factor;
  w.pin_memory = o.pin_memory;
  w.allow_tf32 = o.allow_tf32;
  w.cudnn_benchmark = o.cudnn_benchmark;
  w.cuda_graphs = o.cuda_graphs;
  w.deterministic = o.deterministic;
  return w;
}

}  // namespace hwt
