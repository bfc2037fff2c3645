#include "hwtrain/run/run_bindings.h"

#include "hwtrain/data/dataset_sampler.h"

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
  if (o.mixed_precision_dtype) {
    p.dtype = o.mixed_precision_dtype;
    p.source = "optimization.mixed_precision_dtype = " + enum_name(o.mixed_precision_dtype);
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
  w.autocast = {o.cast_inputs, o.cast_outputs, o.autocast_cache};
  w.loss_scaling = {o.dynamic_loss_scale,        o.loss_scale_init,           o.loss_scale_growth_factor,
                    o.loss_scale_backoff_factor, o.loss_scale_growth_interval, o.nonfinite_fallback_steps,
                    o.min_loss_scale,            o.max_loss_scale};
  if (c.is_set("optimization.intra_op_threads") && o.intra_op_threads > 0) w.intra_op_threads = o.intra_op_threads;
  w.attention = c.model.attention;
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
  w.optimizer_state_device = o.optimizer_state_device;
  w.optimizer_state_dtype = o.optimizer_state_dtype;
  w.sharding = c.dist.sharding;
  w.deferred_init = c.dist.deferred_init;
  w.reduce_dtype = c.dist.reduce_dtype;
  // "auto" (empty) leaves a size to the layout search, which then keeps the other one as configured;
  // otherwise a size counts only when set (`hwtrain plan --gpus` searches what the user left open).
  w.search_layout = !c.dist.tensor_parallel || !c.dist.pipeline_parallel || !c.dist.pipeline_chunks;
  if (w.search_layout || c.is_set("dist.tensor_parallel")) w.tensor_parallel = c.dist.tensor_parallel;
  if (w.search_layout || c.is_set("dist.pipeline_parallel")) w.pipeline_parallel = c.dist.pipeline_parallel;
  if (w.search_layout || c.is_set("dist.pipeline_chunks")) w.pipeline_chunks = c.dist.pipeline_chunks;
  w.sequence_parallel = c.dist.sequence_parallel;
  if (o.num_workers >= 0) w.num_workers = o.num_workers;
  w.prefetch_factor = o.prefetch_factor;
  w.pin_memory = o.pin_memory;
  w.allow_tf32 = o.allow_tf32;
  w.cudnn_benchmark = o.cudnn_benchmark;
  w.cuda_graphs = o.cuda_graphs;
  w.deterministic = o.deterministic;
  return w;
}

Plan make_plan(const HardwareProfile& hw, const RunConfig& config, const PlanContext& context) {
  return make_plan(hw, plan_intent(config), context);
}

c10::Device plan_device(const HardwareProfile& hw, const RunConfig& config, const PlanContext& context) {
  return plan_device(hw, plan_intent(config), context);
}

TrainerOptions trainer_options(const RunConfig& config) {
  TrainerOptions o;
  o.train = config.train;
  o.checkpoint = config.checkpoint;
  o.sampling = config.data.sampling;
  o.tokenizer = config.data.tokenizer;
  o.max_batch_size = config.optimization.max_batch_size;
  o.config_toml = config.to_toml();
  return o;
}

}  // namespace hwt
