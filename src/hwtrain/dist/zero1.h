// ZeRO-1 (optimizer state sharding, Rajbhandari et al. 2020, stage 1) as functions over named
// parameter lists, so that the optimizer (train/adamw.h, above this area) stays where it is:
// every parameter is owned by one rank (greedy balance by element count); each rank keeps
// optimizer state for, and updates, only what it owns (AdamW::set_owned); after the optimizer
// step the owners broadcast their updated parameters, so all ranks hold the same weights.
// Gradients are still averaged in full by DataParallel. For checkpoints, rank 0 gathers the
// shards of the optimizer state. Optimizer memory per rank drops to about 1/world_size.
#pragma once
#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

#include "hwtrain/dist/process_group.h"

namespace hwt {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

struct Zero1Ownership {
  int world_size = 1;
  std::vector<std::string> names;       // the parameters, in the order given
  std::vector<int> owner;               // owner[i] owns names[i]
  std::vector<int64_t> numel_per_rank;  // elements owned by each rank

  std::vector<std::string> owned_by(int rank) const;
  int owner_of(const std::string& name) const;  // -1 when unknown
};

// Assigns parameters to ranks, largest first, each to the least loaded rank (ties: lowest rank).
// Deterministic: every rank computes the same assignment from the same list.
Zero1Ownership assign_zero1_owners(const NamedTensors& params, int world_size);

// The names `rank` owns: what to pass to AdamW::set_owned.
std::vector<std::string> owned_parameter_names(const NamedTensors& params, int rank, int world_size);

// After the optimizer step on the owned shard: every rank receives the other shards' updated
// values: per owner and dtype, broadcasts of a parameter alone (in place) or of several packed into
// a bucket of at most `bucket_bytes`, two in flight, so the sync holds at most two buckets beside
// the parameters (one whole-model copy until 2026-11-28).
void sync_parameters_after_step(const NamedTensors& params, const Zero1Ownership& ownership, ProcessGroup& group,
                                int64_t bucket_bytes = int64_t{25} << 20);

// Gathers every rank's `local_state` (its shard of the optimizer state, e.g. AdamW::state()) on
// rank 0, which returns the union (its own entries first, then rank 1's, ...), on the CPU; the
// other ranks return an empty list. Names must be unique across ranks. Collective: all ranks call it.
NamedTensors gather_optimizer_state(const NamedTensors& local_state, ProcessGroup& group);

// "optimizer state per rank (ZeRO-1, 2 ranks): rank 0 47.2 MiB, rank 1 47.1 MiB (DDP: 94.3 MiB)".
// `bytes_per_element`: optimizer state bytes per parameter element (AdamW's fp32 moments: 8).
std::string describe_zero1_memory(const Zero1Ownership& ownership, int64_t bytes_per_element = 8);

}  // namespace hwt
