// The trainer on a CUDA device (skipped without one; scripts/gpu-check.sh runs them on the GPU
// machines): bitwise resume with deterministic kernels, batch k+1's copy on a side stream during
// step k and the flash SDPA kernel (both read from a profile), a real OOM under a memory cap, the
// step replayed from a CUDA graph (the eager step's losses, bit for bit) and its logged fallback.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "hwtrain/core/files.h"
#include "hwtrain/run/hardware_aware_optimizer.h"
#include "hwtrain/train/torch_profiler.h"
#include "hwtrain/train/process_settings.h"
#include "trainer_fixture.h"
#include "trainer_test_seam.h"

#ifdef HWTRAIN_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace hwt {
namespace {

#define SKIP_WITHOUT_CUDA() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device"

// The fixture's tiny model and data, planned for cuda:0 in bf16 with pinned batches.
void plan_for_cuda(TrainerFixture& f, bool deterministic) {
  f.plan.device = torch::Device("cuda:0");
  f.plan.precision = Precision::Bf16;
  f.plan.hardware_bf16 = true;
  f.plan.pin_memory = true;
  f.plan.allow_tf32 = true;
  f.plan.deterministic = deterministic;
}

std::unique_ptr<Trainer> make_on_device(TrainerFixture& f, const std::string& run) {
  apply_process_settings(f.plan);
  torch::manual_seed(f.config.train.seed);  // seeds the CUDA generators too
  GPT model(f.config.model, f.config.model.vocab_size);
  model->to(f.plan.device);
  return std::make_unique<Trainer>(trainer_options(f.config), f.plan, model, f.data, f.dir / run);
}

struct ResetProcessSettings {
  ~ResetProcessSettings() { apply_process_settings(Plan{}); }
};

TEST(CudaTrainer, ResumeGivesBitwiseIdenticalLossesWithDropout) {
  SKIP_WITHOUT_CUDA();
  ResetProcessSettings reset;
  TrainerFixture f;
  plan_for_cuda(f, /*deterministic=*/true);
  auto full = make_on_device(f, "full");
  full->fit();
  auto again = make_on_device(f, "again");
  again->fit();
  EXPECT_EQ(again->loss_history(), full->loss_history()) << "two runs of the same seed differ";

  f.config.train.max_steps = 3;
  auto first = make_on_device(f, "part");
  first->fit();
  auto ckpt = first->save_checkpoint();
  f.config.train.max_steps = 6;
  auto second = make_on_device(f, "part");
  second->resume_from(ckpt);
  second->fit();
  ASSERT_EQ(second->loss_history().size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(second->loss_history()[i], full->loss_history()[3 + i]) << "step " << 4 + i;
}

struct KinetoEvent {
  std::string cat, name;
  double ts = 0, dur = 0;
  int64_t stream = -1, correlation = -1;
};

std::vector<KinetoEvent> read_trace(const std::filesystem::path& path) {
  auto j = nlohmann::json::parse(read_file(path));
  std::vector<KinetoEvent> out;
  for (const auto& e : j.at("traceEvents")) {
    if (e.value("ph", "") != "X") continue;
    KinetoEvent t;
    t.cat = e.value("cat", "");
    t.name = e.value("name", "");
    t.ts = e.value("ts", 0.0);
    t.dur = e.value("dur", 0.0);
    if (e.contains("args")) {
      t.stream = e["args"].value("stream", int64_t{-1});
      t.correlation = e["args"].value("correlation", int64_t{-1});
    }
    out.push_back(t);
  }
  return out;
}

TEST(CudaTrainer, NextBatchCopiesOnASideStreamDuringTheStepAndFlashAttentionRuns) {
  SKIP_WITHOUT_CUDA();
  ResetProcessSettings reset;
  TrainerFixture f;
  plan_for_cuda(f, /*deterministic=*/false);
  f.config.model.block_size = 128;  // copies and kernels long enough to show on the timeline
  f.config.model.n_embd = 128;
  f.plan.micro_batch_size = 16;
  f.plan.grad_accum_steps = 1;
  auto t = make_on_device(f, "profiled");
  for (int i = 0; i < 2; ++i) TrainerTestSeam::step(*t);  // warm-up
  TorchProfiler profiler(TorchProfilerOptions{false, false, true});
  ASSERT_TRUE(profiler.start());
  for (int64_t s = 0; s < 4; ++s) {
    profiler.begin_step(s);
    TrainerTestSeam::step(*t);
  }
  torch::cuda::synchronize();
  const auto trace = f.dir / "trace.json";
  ASSERT_TRUE(profiler.stop_and_save(trace));
  const auto events = read_trace(trace);

  std::map<int64_t, double> launch_ts;  // correlation -> CPU time of the runtime call
  std::map<int64_t, int64_t> kernels_per_stream;
  std::vector<std::pair<double, double>> steps;  // CPU ranges of ProfilerStep#0..3
  bool flash = false;
  for (const auto& e : events) {
    if (e.cat == "cuda_runtime" || e.cat == "cuda_driver") launch_ts[e.correlation] = e.ts;
    if (e.cat == "kernel") {
      ++kernels_per_stream[e.stream];
      std::string lower = e.name;
      std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
      flash = flash || lower.find("flash") != std::string::npos;
    }
    if (e.cat == "user_annotation" && e.name.rfind("ProfilerStep#", 0) == 0) steps.emplace_back(e.ts, e.ts + e.dur);
  }
  ASSERT_EQ(steps.size(), 4u);
  std::sort(steps.begin(), steps.end());
  ASSERT_FALSE(kernels_per_stream.empty());
  const int64_t compute = std::max_element(kernels_per_stream.begin(), kernels_per_stream.end(),
                                           [](auto& a, auto& b) { return a.second < b.second; })->first;
  auto step_of = [&](double cpu_ts) {
    for (size_t k = 0; k < steps.size(); ++k)
      if (cpu_ts >= steps[k].first && cpu_ts <= steps[k].second) return static_cast<int>(k);
    return -1;
  };
  // The end of the GPU work each step launched on the compute stream.
  std::vector<double> step_gpu_end(steps.size(), 0);
  for (const auto& e : events) {
    if (e.cat != "kernel" || e.stream != compute || !launch_ts.count(e.correlation)) continue;
    const int k = step_of(launch_ts[e.correlation]);
    if (k >= 0) step_gpu_end[k] = std::max(step_gpu_end[k], e.ts + e.dur);
  }
  int side_copies = 0, overlapping = 0;
  std::string seen;
  for (const auto& e : events) {
    if (e.cat != "gpu_memcpy" || e.name.find("HtoD") == std::string::npos) continue;
    const int k = launch_ts.count(e.correlation) ? step_of(launch_ts[e.correlation]) : -1;
    seen += e.name + " stream " + std::to_string(e.stream) + " step " + std::to_string(k) + "; ";
    if (e.stream == compute || k < 0) continue;
    ++side_copies;
    if (e.ts < step_gpu_end[k]) ++overlapping;  // copied while that step's kernels still ran
  }
  EXPECT_GE(side_copies, 8) << "x and y of batches 1..4 on a stream other than compute (" << compute
                            << "): " << seen;
  EXPECT_GE(overlapping, 8) << "copies that ran before their step's kernels ended: " << seen;
  EXPECT_TRUE(flash) << "no flash-attention kernel in the profile";
}

TEST(CudaTrainer, RealOutOfMemoryHalvesTheMicroBatchWithTheGlobalBatchExact) {
  SKIP_WITHOUT_CUDA();
#ifdef HWTRAIN_CUDA
  namespace alloc = c10::cuda::CUDACachingAllocator;
  ResetProcessSettings reset;
  TrainerFixture f;
  plan_for_cuda(f, /*deterministic=*/true);
  f.config.model.dropout = 0;
  f.config.model.block_size = 256;  // the fixture's validation split holds 400 tokens
  f.config.model.n_embd = 384;
  f.config.model.n_head = 6;
  f.config.model.n_layer = 4;
  f.config.train.max_steps = 2;
  f.plan.micro_batch_size = 2;
  f.plan.grad_accum_steps = 8;
  torch::zeros({1}, torch::Device("cuda:0"));  // initializes the caching allocator for the device
  alloc::emptyCache();
  alloc::resetPeakStats(0);
  auto reference = make_on_device(f, "ref");
  reference->fit();
  const auto reserved_peak = alloc::getDeviceStats(0).reserved_bytes[0].peak;
  reference.reset();
  alloc::emptyCache();
  // Room for twice what micro-batch 2 reserved: micro-batch 16 cannot fit, 2 can.
  const double total = static_cast<double>(at::cuda::getDeviceProperties(0)->totalGlobalMem);
  alloc::setMemoryFraction(2.0 * static_cast<double>(reserved_peak) / total, 0);
  f.plan.micro_batch_size = 16;
  f.plan.grad_accum_steps = 1;
  auto recovering = make_on_device(f, "oom");
  TrainResult r;
  EXPECT_NO_THROW(r = recovering->fit());
  alloc::setMemoryFraction(1.0, 0);
  EXPECT_GE(r.oom_recoveries, 1);
  EXPECT_LT(recovering->micro_batch_size(), 16);
  EXPECT_EQ(recovering->micro_batch_size() * recovering->grad_accum_steps(), 16);
  EXPECT_EQ(r.tokens_seen, 2 * 16 * 256);  // the global batch did not change
  ASSERT_EQ(recovering->loss_history().size(), 2u);
  EXPECT_NEAR(recovering->loss_history()[0], 4.2, 0.5);  // ln 64 = 4.16: a sane first loss
#endif
}

// Ten steps of two micro-batches with clipping, at a constant learning rate a float holds exactly
// (the graph's AdamW reads the rate as a float tensor, the eager one as a double).
std::vector<double> graphed_losses(TrainerFixture& f, bool graphs, const std::string& run,
                                   const std::function<torch::Tensor(const torch::Tensor&)>& hook,
                                   std::unique_ptr<Trainer>* keep, double dropout = 0) {
  plan_for_cuda(f, /*deterministic=*/true);
  f.config.model.dropout = dropout;
  f.config.train.max_steps = 10;
  f.config.train.warmup_steps = 0;
  f.config.train.lr_schedule = LrSchedule::kConstant;
  f.config.train.lr = 1.0 / 128;
  f.config.train.grad_clip = 0.5;
  f.plan.micro_batch_size = 4;
  f.plan.grad_accum_steps = 2;
  f.plan.cuda_graphs = graphs;
  auto t = make_on_device(f, run);
  if (hook) TrainerTestSeam::set_loss_hook(*t, hook);
  t->fit();
  std::vector<double> losses = t->loss_history();
  if (keep) *keep = std::move(t);
  return losses;
}

TEST(CudaTrainer, CudaGraphStepsGiveTheEagerStepsLossesBitForBit) {
  SKIP_WITHOUT_CUDA();
  ResetProcessSettings reset;
  TrainerFixture f;
  const auto eager = graphed_losses(f, false, "eager", nullptr, nullptr);
  std::unique_ptr<Trainer> t;
  const auto graphed = graphed_losses(f, true, "graphed", nullptr, &t);
  ASSERT_NE(t->cuda_graph(), nullptr);
  EXPECT_TRUE(t->cuda_graph()->captured()) << t->cuda_graph()->stop_reason();
  EXPECT_EQ(t->cuda_graph()->replays(), 10 - kCudaGraphWarmupSteps);
  ASSERT_EQ(graphed.size(), eager.size());
  double worst = 0;
  for (size_t i = 0; i < eager.size(); ++i) worst = std::max(worst, std::abs(graphed[i] - eager[i]));
  EXPECT_EQ(graphed, eager) << "largest difference " << worst;
  EXPECT_LT(eager.back(), eager.front());
}

// The graph registers the default CUDA generator: each replay draws the dropout masks the eager
// step would (the generator's offset advanced per replay), not the captured step's again.
TEST(CudaTrainer, CudaGraphStepsDrawTheEagerStepsDropoutMasks) {
  SKIP_WITHOUT_CUDA();
  ResetProcessSettings reset;
  TrainerFixture f;
  const auto eager = graphed_losses(f, false, "eager", nullptr, nullptr, 0.2);
  std::unique_ptr<Trainer> t;
  const auto graphed = graphed_losses(f, true, "graphed", nullptr, &t, 0.2);
  EXPECT_TRUE(t->cuda_graph()->captured()) << t->cuda_graph()->stop_reason();
  EXPECT_EQ(graphed, eager);
}

TEST(CudaTrainer, AFailedCaptureIsLoggedAndTheStepsRunEagerly) {
  SKIP_WITHOUT_CUDA();
  ResetProcessSettings reset;
  TrainerFixture f;
  // A loss hook that reads the device from the host: fine eagerly, impossible inside a capture.
  auto host_read = [](const torch::Tensor& loss) {
    (void)loss.item<float>();
    return loss;
  };
  // With dropout: the failed capture must leave the CUDA generator drawing as before it.
  const auto eager = graphed_losses(f, false, "eager", host_read, nullptr, 0.2);
  std::unique_ptr<Trainer> t;
  const auto fallback = graphed_losses(f, true, "fallback", host_read, &t, 0.2);
  ASSERT_NE(t->cuda_graph(), nullptr);
  EXPECT_FALSE(t->cuda_graph()->captured());
  EXPECT_EQ(t->cuda_graph()->replays(), 0);
  EXPECT_NE(t->cuda_graph()->stop_reason().find("capturing step 4 failed"), std::string::npos)
      << t->cuda_graph()->stop_reason();
  EXPECT_EQ(fallback, eager);  // the failed step ran eagerly on the same data, and all after it
}

// Moments offloaded to host memory are where the plan put them, not a misplaced tensor (the
// placement check refused them on the GPU before: found by bench/offload_bench.sh on an H100).
TEST(CudaTrainer, OffloadedMomentsInHostMemoryAreNotAPlacementError) {
  SKIP_WITHOUT_CUDA();
  ResetProcessSettings reset;
  TrainerFixture f;
  plan_for_cuda(f, /*deterministic=*/false);
  f.plan.optimizer_state_device = StateDevice::Host;
  f.config.train.max_steps = 2;
  std::unique_ptr<Trainer> t;
  ASSERT_NO_THROW(t = make_on_device(f, "offload"));
  ASSERT_TRUE(t->optimizer().options().host_state);
  t->fit();
  EXPECT_EQ(t->loss_history().size(), 2u);
}

}  // namespace
}  // namespace hwt
