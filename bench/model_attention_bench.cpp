// Attention kernels head to head: forward + backward of one layer's causal attention, for the
// shapes of issue 4's workloads, in fp32 and bf16 (autocast), with each kernel the model offers.
// The kernels alternate call by call, so the shared machine's drift falls on all of them alike.
// Output: median milliseconds per layer (forward + backward) per shape, dtype and kernel.
// Usage: bench_model_attention_bench [rounds]   (default 15)
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "hwtrain/model/attention.h"
#include "hwtrain/model/autocast_state.h"

using namespace hwt;

namespace {

struct Shape {
  const char* name;
  int64_t B, H, T, C;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::stoi(argv[1]) : 15;
  const std::vector<Shape> shapes = {{"W1 (B=12, H=6, T=256, C=384)", 12, 6, 256, 384},
                                     {"W2 (B=4, H=12, T=256, C=768)", 4, 12, 256, 768}};
  const std::vector<AttentionKernel> kernels = {AttentionKernel::Sdpa, AttentionKernel::Gemm, AttentionKernel::Math};
  std::printf("%d intra-op threads, %d rounds\n", torch::get_num_threads(), rounds);
  for (const Shape& s : shapes) {
    for (bool bf16 : {false, true}) {
      torch::manual_seed(0);
      auto cache = std::make_shared<CausalMaskCache>();
      // The module's own kernels, without its projections: q, k, v as the model makes them.
      auto make = [&] { return torch::randn({s.B, s.T, s.H, s.C / s.H}).transpose(1, 2).requires_grad_(); };
      auto q = make(), k = make(), v = make();
      CausalSelfAttention attn(CausalSelfAttentionOptions{s.C, s.H, 0.0, true}, cache);
      std::vector<std::vector<double>> ms(kernels.size());
      AutocastState state;
      state.cpu_enabled = bf16;
      AutocastStateGuard autocast(state);
      for (int round = -2; round < rounds; ++round) {  // two warm-up rounds
        for (size_t i = 0; i < kernels.size(); ++i) {
          attn->set_kernel(kernels[i]);
          const auto t0 = std::chrono::steady_clock::now();
          auto y = attn->attend(q, k, v);
          y.backward(torch::ones_like(y));
          const double elapsed = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
          if (round >= 0) ms[i].push_back(elapsed);
          q.mutable_grad().reset();
          k.mutable_grad().reset();
          v.mutable_grad().reset();
        }
      }
      std::printf("%-30s %-5s", s.name, bf16 ? "bf16" : "fp32");
      for (size_t i = 0; i < kernels.size(); ++i) std::printf("  %s %7.2f ms", to_string(kernels[i]), median(ms[i]));
      std::printf("  gemm/sdpa %.2fx faster\n", median(ms[0]) / median(ms[1]));
    }
  }
  return 0;
}
