// The language-model loss alone, forward and backward, side by side in one process: the cast-first
// reference (cross_entropy of the logits cast to fp32) against hwtrain's token_cross_entropy (on
// CUDA: log-softmax reading fp16 logits, the chunked loss for bf16; model/token_loss.h) and the
// chunked loss called directly (on any device). For each: the median seconds of `reps` timed runs
// after one warm-up, and the peak of memory allocated above the logits, in fp32 copies of the
// logits (N x V x 4 bytes): CUDA's allocator statistics on a GPU, live CPU tensor bytes
// (obs/host_allocation_counter.h) on the CPU.
// Usage: bench_token_loss_bench [N=16384] [V=50304] [bf16|fp16] [reps=10]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <torch/torch.h>
#include <vector>

#include "hwtrain/model/token_loss.h"
#include "hwtrain/obs/host_allocation_counter.h"
#include "hwtrain/obs/memory_meter.h"

namespace {

using hwt::chunked_cross_entropy;
using Loss = std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)>;

struct Result {
  double seconds = 0, peak_copies = 0;
};

double allocated(bool cuda) {
  return cuda ? hwt::device_memory(0).allocated_bytes : static_cast<double>(hwt::host_allocation().current_bytes);
}

double peak(bool cuda) {
  return cuda ? hwt::device_memory(0).peak_bytes : static_cast<double>(hwt::host_allocation().peak_bytes);
}

void reset_peak(bool cuda) {
  if (cuda) {
    hwt::reset_device_peak(0);
  } else {
    hwt::reset_host_allocation_peak();
  }
}

void sync(bool cuda) {
  if (cuda) torch::cuda::synchronize();
}

Result measure(const Loss& loss, const torch::Tensor& logits, const torch::Tensor& targets, int reps) {
  const bool cuda = logits.is_cuda();
  const double copy = static_cast<double>(logits.numel()) * 4.0;
  std::vector<double> times;
  Result r;
  for (int i = 0; i <= reps; ++i) {
    auto x = logits.detach().requires_grad_(true);
    sync(cuda);
    const double before = allocated(cuda);
    reset_peak(cuda);
    const auto start = std::chrono::steady_clock::now();
    loss(x, targets).backward();
    sync(cuda);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r.peak_copies = std::max(r.peak_copies, (peak(cuda) - before) / copy);
    if (i > 0) times.push_back(seconds);  // the first is the warm-up
  }
  std::sort(times.begin(), times.end());
  r.seconds = times[times.size() / 2];
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 16384, v = argc > 2 ? std::atoll(argv[2]) : 50304;
  const std::string dtype_name = argc > 3 ? argv[3] : "bf16";
  const int reps = argc > 4 ? std::atoi(argv[4]) : 10;
  if (n <= 0 || v <= 0 || reps <= 0 || (dtype_name != "bf16" && dtype_name != "fp16")) {
    std::fprintf(stderr, "usage: bench_token_loss_bench [N>0] [V>0] [bf16|fp16] [reps>0]\n");
    return 2;
  }
  const bool cuda = torch::cuda::is_available();
  if (!cuda && !hwt::install_host_allocation_counter()) {
    std::fprintf(stderr, "cannot count CPU allocations (c10 kept another allocator)\n");
    return 1;
  }
  const torch::Dtype dtype = dtype_name == "bf16" ? torch::kBFloat16 : torch::kHalf;
  const torch::Device device = cuda ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  torch::manual_seed(0);
  const torch::Tensor logits = (3.0 * torch::randn({n, v})).to(device, dtype);
  torch::Tensor targets = torch::randint(v, {n}, torch::kLong);
  targets.index_put_({torch::arange(0, n, 50)}, -1);  // a few ignored positions
  targets = targets.to(device);
  const std::vector<std::pair<std::string, Loss>> losses = {
      {"cast first (reference)", hwt::token_cross_entropy_reference},
      {"token_cross_entropy", hwt::token_cross_entropy},
      {"chunked", [](const torch::Tensor& x, const torch::Tensor& t) { return chunked_cross_entropy(x, t); }},
  };
  std::printf("== token loss, %s, %lld x %lld %s logits, median of %d; peak allocated above the logits in fp32 copies\n",
              cuda ? "CUDA" : "CPU", static_cast<long long>(n), static_cast<long long>(v), dtype_name.c_str(), reps);
  double reference = 0;
  for (const auto& [name, loss] : losses) {
    const Result r = measure(loss, logits, targets, reps);
    if (reference == 0) reference = r.seconds;
    std::printf("%-24s %9.3f ms  (%.2fx the reference's time)  peak %.2f copies\n", name.c_str(), r.seconds * 1e3,
                r.seconds / reference, r.peak_copies);
  }
  return 0;
}
