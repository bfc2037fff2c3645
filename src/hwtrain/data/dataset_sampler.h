// DatasetSampler: which window of a split each draw gets. Draw d is the d-th window of a run;
// a window is the block_size + 1 tokens at an offset of a TokenSequence (across shards).
//   random:     offset = a counter-based hash of (seed, d), uniform over all start offsets; the
//               same stream as WindowSampler for the same seed.
//   sequential: epochs = passes over non-overlapping windows (stride block_size). Each epoch has
//               its own start phase, its own order of shards, and its own order of windows inside
//               each shard (a seeded bijection), so every window of the epoch comes once and reads
//               stay within one shard at a time.
// Both are pure functions of (seed, d): any thread can compute any draw, and the whole state of a
// run is the number of draws (epoch, position). group_offsets() makes the windows of one step
// distinct, so ranks that take disjoint rows of a step never see the same window.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hwtrain/data/data_config.h"
#include "hwtrain/data/token_sequence.h"

namespace hwt {

// "random" | "sequential"; ConfigError naming `key` otherwise.
SamplingMode parse_sampling_mode(const std::string& name, const std::string& key = "data.sampling");
const char* sampling_mode_name(SamplingMode mode);

// A seeded bijection of [0, n): a Feistel network on the smallest even bit width covering n,
// cycle-walking values >= n back into range (on average fewer than 4 rounds of walking).
class IndexPermutation {
 public:
  IndexPermutation(uint64_t n, uint64_t key);
  uint64_t operator()(uint64_t i) const;

 private:
  uint64_t n_, key_, mask_;
  int half_bits_;
};

class DatasetSampler {
 public:
  // DataError naming `what` when the tokens hold fewer than block_size + 1.
  DatasetSampler(TokenSequence tokens, int64_t block_size, uint64_t seed, SamplingMode mode,
                 std::string what = "training split");

  // Start offset of draw `draw` (x = tokens[o, o + T), y = tokens[o + 1, o + T + 1)).
  int64_t window_offset(int64_t draw) const;
  // Offsets of draws [first_draw, first_draw + count) into out[0..count). Within the group they
  // are distinct when the split has at least `count` start offsets: a repeat is replaced by a
  // seeded redraw (rare: random draws colliding, or a sequential group crossing an epoch end).
  void group_offsets(int64_t first_draw, int64_t count, int64_t* out) const;

  // Windows in one epoch: all start offsets (random), or non-overlapping windows (sequential).
  int64_t windows_per_epoch() const { return windows_per_epoch_; }
  int64_t num_start_offsets() const { return tokens_.size() - block_size_; }
  int64_t block_size() const { return block_size_; }
  uint64_t seed() const { return seed_; }
  SamplingMode mode() const { return mode_; }
  const TokenSequence& tokens() const { return tokens_; }

 private:
  struct EpochTable {
    int64_t epoch = -1, phase = 0;
    std::vector<uint32_t> order;    // shard visited at each position
    std::vector<int64_t> first_k;   // first window index (k) of that shard
    std::vector<int64_t> prefix;    // windows before each position, num_shards + 1 entries
  };
  std::shared_ptr<const EpochTable> epoch_table(int64_t epoch) const;
  std::shared_ptr<const EpochTable> build_epoch_table(int64_t epoch) const;
  int64_t sequential_offset(const EpochTable& table, int64_t index_in_epoch) const;
  int64_t uniform_offset(uint64_t hash) const;

  TokenSequence tokens_;
  int64_t block_size_;
  uint64_t seed_;
  SamplingMode mode_;
  int64_t windows_per_epoch_ = 0, num_phases_ = 1;
  mutable std::mutex mu_;
  mutable std::shared_ptr<const EpochTable> cache_[2];  // the two most recent epochs
};

}  // namespace hwt
