// The planner's memory model against a real training step on this machine, with a loose bound
// (the tight ±15% calibration lives in bench/memory_model_bench.cpp: allocators and machines
// differ, a unit test must not). A model that forgets a term, or counts one twice, fails here.
#include <gtest/gtest.h>

#include "hwtrain/model/gpt.h"
#include "hwtrain/obs/memory_meter.h"
#include "hwtrain/obs/monitor.h"
#include "hwtrain/plan/memory_model.h"
#include "hwtrain/train/adamw.h"

namespace hwt {
namespace {

double measured_step_memory(const ModelConfig& m, int64_t micro, int64_t checkpoint_every) {
  release_free_host_memory();
  const double rss0 = process_rss_bytes();
  if (!reset_process_peak_rss()) return -1;
  torch::manual_seed(1);
  GPT model(m, m.vocab_size);
  model->set_activation_checkpointing(checkpoint_every);
  std::vector<std::pair<std::string, torch::Tensor>> d, n;
  model->named_decay_and_no_decay(d, n);
  AdamW opt(d, n, AdamWOptions{});
  auto x = torch::randint(m.vocab_size, {micro, m.block_size}, torch::kInt64);
  for (int step = 0; step < 2; ++step) {
    model->loss(model->forward(x), x).backward();
    opt.step(1e-4);
    opt.zero_grad();
  }
  return process_peak_rss_bytes() - rss0;
}

TEST(MemoryModelCheck, PredictsAMeasuredStepWithinALooseBound) {
  ModelConfig m;
  m.n_layer = 4;
  m.n_head = 4;
  m.n_embd = 256;
  m.block_size = 256;
  m.vocab_size = 256;
  m.dropout = 0;
  measured_step_memory(m, 2, 0);  // one-time costs of the first steps in this process
  for (int64_t ckpt : {0, 1}) {
    const double measured = measured_step_memory(m, 16, ckpt);
    if (measured < 0) GTEST_SKIP() << "this kernel refuses /proc/self/clear_refs";
    MemoryQuery q;
    q.model = m;
    q.micro_batch_size = 16;
    q.checkpoint_every = ckpt;
    const double predicted = estimate_memory(q).total();
    EXPECT_NEAR(predicted / measured, 1.0, 0.35) << "checkpointing " << ckpt << ": predicted " << predicted / 1048576
                                                 << " MiB, measured " << measured / 1048576 << " MiB";
  }
}

}  // namespace
}  // namespace hwt
