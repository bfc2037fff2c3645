// Calibration of the planner's memory model (plan/memory_model.h) against measurement on this
// machine. For each configuration (model x precision x activation checkpointing) it builds the
// model and the fused AdamW, runs two training steps, and compares the memory training added to
// the process (peak resident set over the steps minus the resident set before the model was built)
// with estimate_memory(). It links jemalloc as the hwtrain binary does; run it with the binary's
// options: MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1 build/bench/bench_memory_model_bench
// (with glibc's malloc the same steps measure about twice as much: freed activation blocks are
// not reused in place). Arguments: [a part of the configurations' names] [fp32|bf16] select some.
// Output: one line per configuration with predicted, measured and the error, and what the
// training step alone adds on top of the resident weights and optimizer moments (activations,
// gradients, temporaries): the figure activation checkpointing shrinks.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "hwtrain/model/gpt.h"
#include "hwtrain/obs/host_allocation_counter.h"
#include "hwtrain/obs/memory_meter.h"
#include "hwtrain/obs/monitor.h"
#include "hwtrain/plan/memory_model.h"
#include "hwtrain/train/adamw.h"
#include "hwtrain/train/autocast.h"
#include "hwtrain/train/optimizer_in_backward.h"

using namespace hwt;

namespace {

struct Case {
  std::string name;
  int64_t n_layer, n_head, n_embd, block, micro;
  int64_t vocab = 256;
  bool fused_lm_head_loss = false;  // model/lm_head_loss.h instead of linear + cross_entropy
  std::string attention = "sdpa";   // the kernel: sdpa | gemm | math
  bool optimizer_in_backward = false;  // AdamW per parameter in backward (train/optimizer_in_backward.h)
  int64_t n_kv_head = 0;               // > 0: the llama family with this many key/value heads
};

// Returns the memory training added to the process; *step_added: what the second step alone
// added on top of the resident state (weights and moments) at its start; *step_allocated: the
// peak of live tensor bytes in that step above those at its start (what CUDA's peak statistics
// would say; the resident set adds what the malloc keeps cached or cannot reuse).
double measure(const Case& c, Precision precision, int64_t checkpoint_every, double* predicted,
               double* step_added = nullptr, double* step_allocated = nullptr) {
  ModelConfig m;
  m.n_layer = c.n_layer;
  m.n_head = c.n_head;
  m.n_embd = c.n_embd;
  m.block_size = c.block;
  m.vocab_size = c.vocab;
  m.dropout = 0.0;
  if (c.n_kv_head > 0) {
    m.architecture = Architecture::kLlama;
    m.n_kv_head = c.n_kv_head;
  }
  MemoryQuery q;
  q.model = m;
  q.micro_batch_size = c.micro;
  q.precision = precision;
  q.checkpoint_every = checkpoint_every;
  q.fused_lm_head_loss = c.fused_lm_head_loss;
  q.attention = parse_attention_kernel(c.attention);
  q.optimizer_in_backward = c.optimizer_in_backward;
  *predicted = estimate_memory(q).total();

  release_free_host_memory();
  const double rss0 = process_rss_bytes();
  reset_process_peak_rss();
  double peak = 0;
  {
    torch::manual_seed(1);
    GPT model(m, m.vocab_size, parse_attention_kernel(c.attention));
    model->set_activation_checkpointing(checkpoint_every);
    model->set_fused_lm_head_loss(c.fused_lm_head_loss);
    std::vector<std::pair<std::string, torch::Tensor>> d, n;
    model->named_decay_and_no_decay(d, n);
    AdamW opt(d, n, AdamWOptions{});
    std::unique_ptr<OptimizerInBackward> in_backward;
    if (c.optimizer_in_backward) in_backward = std::make_unique<OptimizerInBackward>(opt);
    auto x = torch::randint(c.vocab, {c.micro, c.block}, torch::kInt64);
    auto y = torch::randint(c.vocab, {c.micro, c.block}, torch::kInt64);
    const auto dtype = precision == Precision::Bf16 ? torch::kBFloat16 : torch::kFloat32;
    double before_step = 0;
    int64_t allocated_before_step = 0;
    for (int step = 0; step < 2; ++step) {
      if (step == 1) {
        peak = process_peak_rss_bytes();
        release_free_host_memory();
        before_step = process_rss_bytes();
        reset_process_peak_rss();
        reset_host_allocation_peak();
        allocated_before_step = host_allocation().current_bytes;
      }
      torch::Tensor loss;
      {
        AutocastGuard autocast(torch::kCPU, dtype);
        loss = model->forward_loss(x, y);
      }
      if (in_backward) in_backward->begin_step(1e-4);
      loss.backward();
      if (!in_backward) opt.step(1e-4);
      opt.zero_grad();
    }
    const double step_peak = process_peak_rss_bytes();
    if (step_added) *step_added = step_peak - before_step;
    if (step_allocated) *step_allocated = static_cast<double>(host_allocation().peak_bytes - allocated_before_step);
    peak = std::max(peak, step_peak);
  }
  return peak - rss0;
}

}  // namespace

int main(int argc, char** argv) {
  // Optional argument: run only the configurations whose name contains it.
  const std::string only = argc > 1 ? argv[1] : "";
  const std::string precision_only = argc > 2 ? argv[2] : "";  // fp32 or bf16; both by default
  if (!install_host_allocation_counter()) std::fprintf(stderr, "warning: CPU allocation counter not installed\n");
  const std::vector<Case> cases = {
      {"tiny (2L 64w, B=16)", 2, 2, 64, 64, 16},
      {"char-small (6L 384w, B=12)", 6, 6, 384, 256, 12},
      {"50M (7L 768w, B=4)", 7, 12, 768, 256, 4},
      {"held out: small (4L 256w, B=16)", 4, 4, 256, 256, 16},  // not used to fit the constants
      {"held out: W2 (12L 768w, B=4)", 12, 12, 768, 256, 4},
      // GPT-2's own vocabulary: the logits outweigh the activations; the fused head removes them.
      {"GPT-2 124M, vocab 50257 (B=4)", 12, 12, 768, 256, 4, 50257, false},
      {"GPT-2 124M, vocab 50257, fused head", 12, 12, 768, 256, 4, 50257, true},
      // The CPU plan's attention kernel since it exists: probabilities kept per layer.
      {"char-small (6L 384w, B=12), gemm attn", 6, 6, 384, 256, 12, 256, false, "gemm"},
      {"W2 (12L 768w, B=4), gemm attn", 12, 12, 768, 256, 4, 256, false, "gemm"},
      // The optimizer in backward frees each gradient as it is made.
      {"char-small (6L 384w, B=12), gemm, in-bwd", 6, 6, 384, 256, 12, 256, false, "gemm", true},
      {"W2 (12L 768w, B=4), gemm, in-bwd", 12, 12, 768, 256, 4, 256, false, "gemm", true},
      // The llama family (RMSNorm, rotary, SwiGLU at 8/3 width, GQA, untied head): counted, not fitted.
      {"llama (6L 384w, GQA 6:2, B=12)", 6, 6, 384, 256, 12, 256, false, "sdpa", false, 2},
      {"llama (12L 768w, GQA 12:4, B=4)", 12, 12, 768, 256, 4, 256, false, "sdpa", false, 4},
      {"llama (12L 768w, GQA 12:4, B=4), gemm", 12, 12, 768, 256, 4, 256, false, "gemm", false, 4},
  };
  // One-time costs of the first training step in a process (thread pools, oneDNN kernel caches)
  // are not the model's: pay them before measuring.
  double unused = 0;
  measure(cases[0], Precision::Fp32, 0, &unused);
  measure(cases[0], Precision::Bf16, 1, &unused);
  std::printf("%-38s %-5s %-5s %12s %12s %8s %14s %14s\n", "model", "prec", "ckpt", "predicted", "measured", "error",
              "step adds", "step tensors");
  double worst = 0;
  for (const auto& c : cases) {
    if (c.name.find(only) == std::string::npos) continue;
    for (Precision p : {Precision::Fp32, Precision::Bf16}) {
      if (!precision_only.empty() && precision_only != precision_name(p)) continue;
      for (int64_t ckpt : {0, 1}) {
        double predicted = 0, step_added = 0, step_allocated = 0;
        const double measured = measure(c, p, ckpt, &predicted, &step_added, &step_allocated);
        const double err = (predicted - measured) / measured;
        worst = std::max(worst, std::fabs(err));
        std::printf("%-38s %-5s %-5s %9.1f MiB %9.1f MiB %+7.1f%% %10.1f MiB %10.1f MiB\n", c.name.c_str(),
                    precision_name(p), ckpt ? "all" : "none", predicted / 1048576.0, measured / 1048576.0,
                    100.0 * err, step_added / 1048576.0, step_allocated / 1048576.0);
        std::fflush(stdout);
      }
    }
  }
  std::printf("worst |error| %.1f%%\n", 100.0 * worst);
  return 0;
}
