// bench_dist_collectives: all-gather latency on Gloo (issues 16 and 18), c10d's own all-gather
// against the broadcast form (one in-place broadcast per rank into the output's slices, what
// ProcessGroup::all_gather_into uses on Gloo for ZeRO-3's units and the tensor-parallel gathers
// alike), side by side in one run: per input size, the median of R rounds, the two forms
// alternated round by round. Whether small gathers should keep c10d's form is this measurement.
//   bench_dist_collectives [--worlds 2,4] [--rounds 40] [--max-mib 64] [--zero1 1|root]
// Starts itself as the ranks of each world size (loopback, one thread each) and prints one
// "result: ..." line per world and size from rank 0.
// --zero1: instead, ZeRO-1's parameter sync after a step (dist/zero1.h) over GPT-2 124M's parameters,
// the bucketed form (dist.bucket_size_mb = 25) against one packed buffer per owner (the form before
// 2026-11-28), alternated round by round: median milliseconds and rank 0's most bytes allocated
// beside the parameters (obs/host_allocation_counter.h). --zero1 root: every parameter from rank 0,
// the start-up broadcast of the initial weights (dist/ddp.h's broadcast_tensors), whose one packed
// buffer per dtype before 2026-11-28 is the one-buffer form here.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "bench_args.h"
#include "hwtrain/dist/dist_env.h"
#include "hwtrain/dist/launcher.h"
#include "hwtrain/dist/process_group.h"
#include "hwtrain/dist/zero1.h"
#include "hwtrain/obs/host_allocation_counter.h"

using namespace hwt;
using Clock = std::chrono::steady_clock;

namespace {

using bench::arg;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// c10d's all-gather: Gloo receives into a whole-size buffer of its own and copies it out.
ProcessGroup::WorkPtr native_gather(ProcessGroup& g, torch::Tensor& out, torch::Tensor& in) {
  c10d::AllgatherOptions o;
  o.timeout = g.timeout();
  return g.backend()._allgather_base(out, in, o);
}

int worker(int rounds, int64_t max_bytes) {
  DistConfig config;
  config.timeout = 120;
  ProcessGroup g(read_dist_env(), config);
  for (int64_t bytes = 256; bytes <= max_bytes; bytes *= 4) {
    const int64_t n = bytes / 4;
    torch::Tensor in = torch::full({n}, static_cast<float>(g.rank()));
    torch::Tensor out = torch::empty({n * g.world_size()});
    std::vector<double> native_us, bcast_us;
    for (int r = -2; r < rounds; ++r) {  // two warm-up rounds
      for (int form = 0; form < 2; ++form) {
        torch::Tensor sync = torch::zeros({1});
        g.wait(g.all_reduce_sum(sync), "aligning the ranks");
        const auto t0 = Clock::now();
        auto work = form == 0 ? native_gather(g, out, in) : g.all_gather_into(out, in);  // on Gloo: broadcasts
        g.wait(work, "the all-gather");
        const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
        if (r >= 0) (form == 0 ? native_us : bcast_us).push_back(us);
      }
    }
    const torch::Tensor want = torch::arange(g.world_size(), torch::kFloat).repeat_interleave(n);
    if (!torch::equal(out, want)) {
      std::fprintf(stderr, "the broadcast form gathered wrong values at %lld bytes\n", static_cast<long long>(bytes));
      return 1;
    }
    if (g.rank() == 0) {
      const double a = median(native_us), b = median(bcast_us);
      std::printf("result: world=%d bytes_per_rank=%lld c10d_us=%.1f broadcast_us=%.1f broadcast/c10d=%.2f\n",
                  g.world_size(), static_cast<long long>(bytes), a, b, b / a);
      std::fflush(stdout);
    }
  }
  g.shutdown();
  return 0;
}

// GPT-2 124M's parameters (tied head), in the model's order.
NamedTensors gpt2_parameters() {
  NamedTensors p;
  const int64_t c = 768;
  p.emplace_back("wte", torch::zeros({50257, c}));
  p.emplace_back("wpe", torch::zeros({1024, c}));
  for (int b = 0; b < 12; ++b) {
    const std::string h = "h." + std::to_string(b) + ".";
    const std::vector<std::pair<std::string, std::vector<int64_t>>> shapes = {
        {"ln_1.weight", {c}}, {"ln_1.bias", {c}}, {"attn.c_attn.weight", {c, 3 * c}}, {"attn.c_attn.bias", {3 * c}},
        {"attn.c_proj.weight", {c, c}}, {"attn.c_proj.bias", {c}}, {"ln_2.weight", {c}}, {"ln_2.bias", {c}},
        {"mlp.c_fc.weight", {c, 4 * c}}, {"mlp.c_fc.bias", {4 * c}}, {"mlp.c_proj.weight", {4 * c, c}},
        {"mlp.c_proj.bias", {c}}};
    for (const auto& [name, shape] : shapes) p.emplace_back(h + name, torch::zeros(shape));
  }
  p.emplace_back("ln_f.weight", torch::zeros({c}));
  p.emplace_back("ln_f.bias", torch::zeros({c}));
  return p;
}

int zero1_worker(int rounds, bool from_root) {
  install_host_allocation_counter();
  DistConfig config;
  config.timeout = 120;
  ProcessGroup g(read_dist_env(), config);
  NamedTensors params = gpt2_parameters();
  Zero1Ownership o = assign_zero1_owners(params, g.world_size());
  if (from_root) {  // the start-up broadcast: rank 0 owns everything
    o.owner.assign(params.size(), 0);
    o.numel_per_rank.assign(static_cast<size_t>(g.world_size()), 0);
  }
  const int64_t forms[2] = {std::numeric_limits<int64_t>::max(), int64_t{25} << 20};  // one buffer per owner; buckets
  std::vector<double> ms[2];
  int64_t most[2] = {0, 0};
  for (int r = -2; r < rounds; ++r) {
    for (int form = 0; form < 2; ++form) {
      for (size_t i = 0; i < params.size(); ++i) params[i].second.fill_(o.owner[i] == g.rank() ? r + form : -1);
      torch::Tensor sync = torch::zeros({1});
      g.wait(g.all_reduce_sum(sync), "aligning the ranks");
      const int64_t before = host_allocation().current_bytes;
      reset_host_allocation_peak();
      const auto t0 = Clock::now();
      sync_parameters_after_step(params, o, g, forms[form]);
      const double t = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      most[form] = std::max(most[form], host_allocation().peak_bytes - before);
      if (r >= 0) ms[form].push_back(t);
      for (const auto& [name, p] : params) {
        if (!torch::equal(p, torch::full_like(p, r + form))) {
          std::fprintf(stderr, "the ZeRO-1 sync left %s stale\n", name.c_str());
          return 1;
        }
      }
    }
  }
  if (g.rank() == 0) {
    const double a = median(ms[0]), b = median(ms[1]);
    std::printf("result: %s, world=%d one_buffer_ms=%.1f bucketed_ms=%.1f bucketed/one=%.2f "
                "most_allocated_mib one_buffer=%.1f bucketed=%.1f\n",
                from_root ? "broadcast from rank 0" : "zero1 sync", g.world_size(), a, b, b / a, static_cast<double>(most[0]) / (1 << 20),
                static_cast<double>(most[1]) / (1 << 20));
    std::fflush(stdout);
  }
  g.shutdown();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = std::stoi(arg(argc, argv, "--rounds", "40"));
  const int64_t max_bytes = std::stoll(arg(argc, argv, "--max-mib", "64")) << 20;
  const std::string mode = arg(argc, argv, "--zero1", "0");
  const bool zero1 = mode != "0";
  if (std::getenv("HWT_BENCH_RANK") != nullptr) {
    return zero1 ? zero1_worker(rounds, mode == "root") : worker(rounds, max_bytes);
  }
  std::stringstream worlds(arg(argc, argv, "--worlds", "2,4"));
  for (std::string w; std::getline(worlds, w, ',');) {
    LaunchOptions o;
    o.nproc_per_node = std::stoi(w);
    o.master_port = 29700 + o.nproc_per_node;
    o.command = {"/proc/self/exe", "--rounds", std::to_string(rounds), "--max-mib", std::to_string(max_bytes >> 20),
                 "--zero1", mode};
    o.env = {{"HWT_BENCH_RANK", "1"}, {"OMP_NUM_THREADS", "1"}};
    const LaunchResult r = launch(o);
    if (r.exit_code != 0) {
      std::fprintf(stderr, "world %s failed: %s\n", w.c_str(), r.reason.c_str());
      return 1;
    }
  }
  return 0;
}
