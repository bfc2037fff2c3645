#include "hwtrain/plan/stage_split.h"

#include <algorithm>
#include <limits>

#include "hwtrain/core/error.h"

namespace hwt {

std::vector<StageRange> balance_stages(const std::vector<double>& block_cost, double first_extra, double last_extra,
                                       int64_t stages) {
  const int64_t L = static_cast<int64_t>(block_cost.size());
  if (stages < 1 || stages > L) {
    throw ConfigError("dist.pipeline_parallel = " + std::to_string(stages) + " stages for " + std::to_string(L) +
                      " blocks (model.n_layer); valid: 1 to " + std::to_string(L));
  }
  std::vector<double> prefix(static_cast<size_t>(L + 1), 0.0);
  for (int64_t i = 0; i < L; ++i) prefix[i + 1] = prefix[i] + block_cost[static_cast<size_t>(i)];
  auto cost = [&](int64_t stage, int64_t begin, int64_t end) {
    double c = prefix[end] - prefix[begin];
    if (stage == 0) c += first_extra;
    if (stage == stages - 1) c += last_extra;
    return c;
  };
  const double inf = std::numeric_limits<double>::infinity();
  // best[s][i]: the least possible most expensive stage when stages 0..s-1 hold blocks [0, i).
  std::vector<std::vector<double>> best(static_cast<size_t>(stages + 1), std::vector<double>(L + 1, inf));
  std::vector<std::vector<int64_t>> cut(static_cast<size_t>(stages + 1), std::vector<int64_t>(L + 1, 0));
  best[0][0] = 0;
  for (int64_t s = 1; s <= stages; ++s) {
    for (int64_t i = s; i <= L - (stages - s); ++i) {
      for (int64_t j = s - 1; j < i; ++j) {
        if (best[s - 1][j] == inf) continue;
        const double worst = std::max(best[s - 1][j], cost(s - 1, j, i));
        if (worst < best[s][i]) {  // strict: ties keep the earlier cut (more blocks on later stages)
          best[s][i] = worst;
          cut[s][i] = j;
        }
      }
    }
  }
  std::vector<StageRange> out(static_cast<size_t>(stages));
  int64_t end = L;
  for (int64_t s = stages; s >= 1; --s) {
    out[static_cast<size_t>(s - 1)] = {cut[s][end], end};
    end = cut[s][end];
  }
  return out;
}

std::vector<StageRange> split_decoder(const ModelConfig& m, int64_t vocab_size, int64_t stages) {
  const double C = static_cast<double>(m.n_embd), T = static_cast<double>(m.block_size);
  const double kv = static_cast<double>(m.kv_heads() * m.head_dim()), I = static_cast<double>(m.mlp_width());
  // Forward FLOPs per token: 2 per weight of q, k, v, o and the MLP (3 matrices for SwiGLU), and
  // attention's scores and weighted sum, 4 C T under a causal mask's full-square kernels.
  const double mlp = m.is_llama() ? 3 * C * I : 2 * C * I;
  const double block = 2 * (2 * C * C + 2 * C * kv + mlp) + 4 * C * T;
  const double head = 2 * C * static_cast<double>(vocab_size);
  return balance_stages(std::vector<double>(static_cast<size_t>(m.n_layer), block), 0.0, head, stages);
}

std::string describe_stages(const std::vector<StageRange>& stages) {
  std::string out;
  for (const auto& s : stages) {
    if (!out.empty()) out += " | ";
    out += s.end - s.begin == 1 ? std::to_string(s.begin) : std::to_string(s.begin) + "-" + std::to_string(s.end - 1);
  }
  return "blocks " + out;
}

}  // namespace hwt
