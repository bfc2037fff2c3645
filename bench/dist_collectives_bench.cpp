// bench_dist_collectives: all-gather latency on Gloo (issues 16 and 18), c10d's own all-gather
// against the broadcast form (one in-place broadcast per rank into the output's slices, what
// ProcessGroup::all_gather_into uses on Gloo for ZeRO-3's units and the tensor-parallel gathers
// alike), side by side in one run: per input size, the median of R rounds, the two forms
// alternated round by round. Whether small gathers should keep c10d's form is this measurement.
//   bench_dist_collectives [--worlds 2,4] [--rounds 40] [--max-mib 64]
// Starts itself as the ranks of each world size (loopback, one thread each) and prints one
// "result: ..." line per world and size from rank 0.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "bench_args.h"
#include "hwtrain/dist/dist_env.h"
#include "hwtrain/dist/launcher.h"
#include "hwtrain/dist/process_group.h"

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

}  // namespace

int main(int argc, char** argv) {
  const int rounds = std::stoi(arg(argc, argv, "--rounds", "40"));
  const int64_t max_bytes = std::stoll(arg(argc, argv, "--max-mib", "64")) << 20;
  if (std::getenv("HWT_BENCH_RANK") != nullptr) return worker(rounds, max_bytes);
  std::stringstream worlds(arg(argc, argv, "--worlds", "2,4"));
  for (std::string w; std::getline(worlds, w, ',');) {
    LaunchOptions o;
    o.nproc_per_node = std::stoi(w);
    o.master_port = 29700 + o.nproc_per_node;
    o.command = {"/proc/self/exe", "--rounds", std::to_string(rounds), "--max-mib", std::to_string(max_bytes >> 20)};
    o.env = {{"HWT_BENCH_RANK", "1"}, {"OMP_NUM_THREADS", "1"}};
    const LaunchResult r = launch(o);
    if (r.exit_code != 0) {
      std::fprintf(stderr, "world %s failed: %s\n", w.c_str(), r.reason.c_str());
      return 1;
    }
  }
  return 0;
}
