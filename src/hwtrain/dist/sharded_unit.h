// The private state of one unit of ShardedParameters (dist/sharded_parameters.h), shared by its two
// source files: the buffers, the shard, and the collectives in flight. Not part of the API.
#pragma once
#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

#include "hwtrain/dist/sharded_parameters.h"

namespace hwt {

struct ShardedParameters::Unit {
  std::string name;
  std::vector<std::string> names;
  std::vector<torch::Tensor> params;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<int64_t> offsets;  // of each parameter in the flat buffer
  int64_t numel = 0, shard = 0;  // shard = elements per rank; the buffer has world_size x shard
  torch::Tensor flat;            // compute dtype; the parameters are views of it
  torch::Tensor master;          // fp32 [shard]: this rank's slice
  torch::Tensor grad;            // fp32 [shard]: this step's gradient shard; undefined before any
  enum class State { Sharded, Gathering, Gathered } state = State::Gathered;
  ProcessGroup::WorkPtr gather_work;
  torch::Tensor gather_input;
  std::vector<std::pair<size_t, int64_t>> segments;  // (index in segments_, first element in master)
  bool released = false;  // passed to release() (not after_forward()): backward needs no gather
  size_t pending = 0;  // parameters whose gradient is not final yet in this backward
  bool reduce_launched = false;  // this backward's reduction of the unit (its parameters' gradients) started
};

// A reduce-scatter in flight: the whole unit's gradients (input) and this rank's shard (output; on
// Gloo a view of the input, all-reduced in place: dist/process_group.h). Or, where the reduce-scatter
// is an all-reduce anyway (Gloo on the CPU), the unit's gradients all-reduced where they are: the
// large ones in place, the small ones packed (pieces: offset in the unit's flat layout, elements).
struct ShardedParameters::Reduction {
  Unit* unit = nullptr;
  ProcessGroup::WorkPtr work;
  torch::Tensor input, output;
  std::vector<std::pair<int64_t, torch::Tensor>> pieces;
  int64_t bytes = 0;  // held by it
  bool output_views_input() const { return output.storage().is_alias_of(input.storage()); }
};

}  // namespace hwt
