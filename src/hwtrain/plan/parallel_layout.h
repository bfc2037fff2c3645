// The planner's 3D layout search: for a model and a cluster, every (data x pipeline x tensor) layout
// with its ZeRO stage, micro-batch and recomputation, its per-GPU memory and step time predicted by
// plan/layout_cost.h, the fastest that fits the memory budget chosen, and the runners-up kept with
// why each lost ("tp4 x pp8 x dp2: 1.23x slower (bubble 18%)", "does not fit: 97 GiB > 60 GiB").
// Enumerated: tensor parallel dividing the node's GPUs, the heads, the key/value heads and the MLP
// width (a tensor group stays on one node); pipeline parallel up to the number of blocks (uneven
// stages allowed, and costed); data parallel the rest, none/zero1/zero2/zero3 over it; micro-batches
// that divide the replica's batch; interleaved 1F1B with 1, 2, 4 or 8 chunks per stage (each chunk a
// block at least, micro-batches in groups of pp); recomputation off or every block. Values the user
// fixed are kept. Not searched: context parallelism, selective recomputation.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "hwtrain/plan/layout_cost.h"

namespace hwt {

struct LayoutSearch {
  std::optional<LayoutOption> chosen;  // empty when no layout fits the memory budget
  // Per (tensor, pipeline) pair its best variant: the best few, then one example of each other
  // reason for losing (slower by bubble, by communication, ..., does not fit, batch not divisible).
  std::vector<LayoutOption> table;
  std::string searched;  // what was enumerated, and which values the user fixed
};

LayoutSearch search_parallel_layouts(const LayoutProblem& problem);

// Why `layout` loses to (or ties) `winner` on this problem, as the table says it: "1.02x slower
// (stage imbalance +7%)", "does not fit: ...". Both layouts must be valid; their predictions are redone.
std::string compare_layouts(const LayoutProblem& problem, const ParallelLayout& layout, const ParallelLayout& winner);

// Tensor-parallel sizes the search tries on this model and cluster (ascending).
std::vector<int64_t> tensor_parallel_choices(const ModelConfig& model, int64_t num_gpus, int64_t gpus_per_node);

// ConfigError, one line naming the keys and the valid values, when sizes the user set cannot cut the
// model or the cluster: tensor x pipeline must divide the GPUs, tensor parallel must divide the heads,
// the key/value heads and the MLP width (dist/device_mesh.h's checks, shared with real runs) and fit
// in one node, pipeline parallel (times the chunks per stage) may not exceed the blocks.
void check_layout_request(const ModelConfig& model, int64_t num_gpus, int64_t gpus_per_node,
                          std::optional<int64_t> tensor_parallel, std::optional<int64_t> pipeline_parallel,
                          std::optional<int64_t> pipeline_chunks = std::nullopt);

}  // namespace hwt
