// Where a pipeline cuts the decoder: contiguous ranges of blocks, one per stage, every stage at
// least one block, chosen to make the most expensive stage as cheap as possible (its time bounds
// the pipeline's). A block costs its forward FLOPs per token (the matrices plus attention's scores);
// the first stage also pays the embedding lookup, the last one the final norm, LM head and loss
// (2 C V per token: on a small model that is several blocks' worth, which is why the last stage
// gets fewer blocks). Exact: dynamic programming over the cut points (L blocks, p stages: L^2 p).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "hwtrain/model/model_config.h"

namespace hwt {

struct StageRange {
  int64_t begin = 0, end = 0;  // blocks [begin, end)
};

// block_cost: each block's cost; first_extra / last_extra: the first and last stages' other work.
// Throws ConfigError when there are more stages than blocks.
std::vector<StageRange> balance_stages(const std::vector<double>& block_cost, double first_extra, double last_extra,
                                       int64_t stages);

// The decoder's cut for `stages` stages, from its shape (vocab_size resolved).
std::vector<StageRange> split_decoder(const ModelConfig& model, int64_t vocab_size, int64_t stages);

// "blocks 0-6 | 7-11" for logs.
std::string describe_stages(const std::vector<StageRange>& stages);

}  // namespace hwt
