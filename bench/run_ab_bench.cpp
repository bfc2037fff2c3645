// One training setting against another, step by step in one process (issue 4's "measured side by
// side in one run"): bf16 autocast vs fp32, two attention kernels, checkpointing vs none, or the
// optimizer step after backward vs inside it.
// Trains a workload through the normal Trainer with the default plan and switches the setting
// between steps (e.g. Trainer::disable_mixed_precision / enable_mixed_precision), so every step of
// one setting has a neighbour of the other a second away. Runs of a minute each, as in cpu_speed.sh,
// let the shared machine's drift (10-20% over minutes here) into a ratio; adjacent steps do not.
// Output: median step time of each setting, and the median of the ratios of adjacent pairs.
// Usage: bench_run_ab_bench DATA.hwt [W1|W2] [pairs]
//            [precision|attention[:KERNEL]|checkpointing|optimizer_in_backward] [key=value...]
//        (defaults: W1, 15 pairs, precision; "attention:KERNEL" compares the plan's attention kernel
//        with KERNEL = sdpa | gemm | math under the plan's precision; "attention" alone: math;
//        "checkpointing": the plan (no recomputation) vs activation checkpointing of every block;
//        "optimizer_in_backward": AdamW after backward vs in backward, both with train.grad_clip = 0;
//        key=value: config overrides, e.g. optimization.mixed_precision_dtype=fp32)
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "hwtrain/data/sharded_dataset.h"
#include "hwtrain/run/run_bindings.h"
#include "hwtrain/run/hardware_aware_optimizer.h"
#include "hwtrain/train/trainer.h"

using namespace hwt;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// After each step: note how long it took in the setting it ran in, then switch for the next.
// Mode "precision": the plan's autocast vs fp32. Mode "attention": under the plan's precision,
// the plan's attention kernel vs another one. Mode "checkpointing": none vs every block. Mode
// "optimizer_in_backward": AdamW after backward vs inside it.
enum class Mode { Precision, Attention, Checkpointing, OptimizerInBackward };
class AlternateSetting : public Callback {
 public:
  AlternateSetting(Trainer** trainer, GPT model, Mode mode, AttentionKernel planned, AttentionKernel other)
      : trainer_(trainer), model_(std::move(model)), mode_(mode), planned_kernel_(planned), other_kernel_(other) {}
  std::string name() const override { return "alternate_setting"; }
  void on_step_end(TrainerControl&, const StepMetrics& m) override {
    (next_planned_ ? planned_ : other_).push_back(m.step_seconds);
    next_planned_ = !next_planned_;
    if (mode_ == Mode::Attention) {
      model_->set_attention_kernel(next_planned_ ? planned_kernel_ : other_kernel_);
    } else if (mode_ == Mode::Checkpointing) {
      model_->set_activation_checkpointing(next_planned_ ? 0 : 1);
    } else if (mode_ == Mode::OptimizerInBackward) {
      (*trainer_)->set_optimizer_in_backward(!next_planned_);
    } else if (next_planned_) {
      (*trainer_)->enable_mixed_precision();
    } else {
      (*trainer_)->disable_mixed_precision();
    }
  }
  std::vector<double> planned_, other_;  // step seconds, in the order run

 private:
  Trainer** trainer_;
  GPT model_;
  Mode mode_;
  AttentionKernel planned_kernel_, other_kernel_;
  bool next_planned_ = true;  // the plan's setting runs first
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s DATA.hwt [W1|W2] [pairs] [precision|attention[:KERNEL]|checkpointing|"
                 "optimizer_in_backward] [key=value...]\n",
                 argv[0]);
    return 2;
  }
  const std::string workload = argc > 2 ? argv[2] : "W1";
  const int64_t pairs = argc > 3 ? std::stoll(argv[3]) : 15;
  const std::string mode_arg = argc > 4 ? argv[4] : "precision";
  const Mode mode = mode_arg.rfind("attention", 0) == 0    ? Mode::Attention
                    : mode_arg == "checkpointing"           ? Mode::Checkpointing
                    : mode_arg == "optimizer_in_backward"   ? Mode::OptimizerInBackward
                                                            : Mode::Precision;
  const AttentionKernel other_kernel =
      parse_attention_kernel(mode == Mode::Attention && mode_arg.size() > 10 ? mode_arg.substr(10) : "math");
  const int64_t warmup_pairs = 2;
  auto data = std::make_shared<const ShardedDataset>(argv[1]);

  RunConfig config;
  if (workload == "W1") {
    config.apply_override("model.preset=char-small");
    config.apply_override("train.micro_batch_size=12");
  } else {
    config.apply_override("model.preset=gpt2");
    config.apply_override("model.block_size=256");
    config.apply_override("train.micro_batch_size=4");
  }
  config.apply_override("train.max_steps=" + std::to_string(2 * (pairs + warmup_pairs)));
  config.apply_override("train.eval_interval=0");
  config.apply_override("train.time_budget=0");
  if (mode == Mode::OptimizerInBackward) config.apply_override("train.grad_clip=0");  // for both settings
  for (int i = 5; i < argc; ++i) config.apply_override(argv[i]);
  config.model.vocab_size = resolve_vocab_size(config.model, data->vocab_size());
  HardwareAwareOptimizer optimizer(config);
  const Plan& plan = optimizer.plan();
  std::printf("%s: %s, plan precision %s, micro-batch %lld, %lld threads\n", workload.c_str(),
              config.model.preset.c_str(), precision_name(plan.precision),
              static_cast<long long>(plan.micro_batch_size), static_cast<long long>(plan.intra_op_threads));
  if (mode == Mode::Precision && plan.precision == Precision::Fp32) {
    std::printf("the plan is fp32 on this machine: nothing to compare\n");
    return 0;
  }

  GPT model = optimizer.build_model();
  Trainer* trainer_ptr = nullptr;
  const AttentionKernel planned_kernel = plan.attention;
  auto alternate = std::make_shared<AlternateSetting>(&trainer_ptr, model, mode, planned_kernel, other_kernel);
  const auto run_dir = std::filesystem::temp_directory_path() / ("hwtrain-train-ab-" + std::to_string(getpid()));
  {
    Trainer trainer(trainer_options(config), plan, model, data, run_dir);
    trainer_ptr = &trainer;
    trainer.add_callback(alternate);
    trainer.fit();
  }
  std::filesystem::remove_all(run_dir);

  const auto& planned = alternate->planned_;
  const auto& other = alternate->other_;
  std::vector<double> planned_timed(planned.begin() + warmup_pairs, planned.end());
  std::vector<double> other_timed(other.begin() + warmup_pairs, other.end());
  std::vector<double> ratios;
  for (size_t i = warmup_pairs; i < std::min(planned.size(), other.size()); ++i) ratios.push_back(other[i] / planned[i]);
  const double tokens = static_cast<double>(plan.global_batch_size() * config.model.block_size);
  const char* a_name = mode == Mode::Attention             ? to_string(planned_kernel)
                       : mode == Mode::Checkpointing       ? "none"
                       : mode == Mode::OptimizerInBackward ? "after"
                                                           : precision_name(plan.precision);
  const char* b_name = mode == Mode::Attention             ? to_string(other_kernel)
                       : mode == Mode::Checkpointing       ? "ckpt"
                       : mode == Mode::OptimizerInBackward ? "in-bwd"
                                                           : "fp32";
  std::printf("%-6s %10s s %10s s %8s/%s\n", "pair", a_name, b_name, b_name, a_name);
  for (size_t i = 0; i < ratios.size(); ++i) {
    std::printf("%-6zu %12.3f %12.3f %9.3fx\n", i + 1, planned[i + warmup_pairs], other[i + warmup_pairs], ratios[i]);
  }
  std::printf("median step: %s %.3f s (%.0f tokens/s), %s %.3f s (%.0f tokens/s); %zu adjacent pairs after %lld "
              "warm-up pairs: median speed-up %.3fx (min %.3fx, max %.3fx)\n",
              a_name, median(planned_timed), tokens / median(planned_timed), b_name, median(other_timed),
              tokens / median(other_timed), ratios.size(), static_cast<long long>(warmup_pairs), median(ratios),
              *std::min_element(ratios.begin(), ratios.end()), *std::max_element(ratios.begin(), ratios.end()));
  return 0;
}
