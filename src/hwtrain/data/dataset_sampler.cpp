#include "hwtrain/data/dataset_sampler.h"

#include <algorithm>
#include <unordered_set>

#include "hwtrain/core/error.h"
#include "hwtrain/core/strings.h"
#include "hwtrain/data/corpus.h"

namespace hwt {

namespace {
// Salts that keep the streams of one seed independent of each other.
constexpr uint64_t kShardOrderSalt = 0x5348524445524452ull;
constexpr uint64_t kWindowOrderSalt = 0x57494e444f574f52ull;
constexpr uint64_t kPhaseSalt = 0x5048415345ull;
constexpr uint64_t kRedrawSalt = 0x5245445241575353ull;
}  // namespace

SamplingMode parse_sampling_mode(const std::string& name, const std::string& key) {
  if (auto mode = enum_from_name<SamplingMode>(name)) return *mode;
  throw ConfigError(key + " = '" + name + "' is not a sampling mode" + did_you_mean(name, enum_choices<SamplingMode>()) +
                    "; valid: " + join(enum_choices<SamplingMode>()));
}

const char* sampling_mode_name(SamplingMode m) { return enum_name(m); }

IndexPermutation::IndexPermutation(uint64_t n, uint64_t key) : n_(n), key_(key) {
  int bits = 2;
  while (bits < 64 && (uint64_t{1} << bits) < n) bits += 2;
  half_bits_ = bits / 2;
  mask_ = (uint64_t{1} << half_bits_) - 1;
}

uint64_t IndexPermutation::operator()(uint64_t i) const {
  if (n_ <= 1) return i;
  uint64_t x = i;
  do {
    uint64_t left = x >> half_bits_, right = x & mask_;
    for (uint64_t round = 0; round < 4; ++round) {
      uint64_t f = counter_hash(key_, (round << 58) ^ right) & mask_;
      uint64_t next = left ^ f;
      left = right;
      right = next;
    }
    x = (left << half_bits_) | right;
  } while (x >= n_);  // cycle walking: the walk from an in-range value returns in range
  return x;
}

DatasetSampler::DatasetSampler(TokenSequence tokens, int64_t block_size, uint64_t seed, SamplingMode mode,
                               std::string what)
    : tokens_(std::move(tokens)), block_size_(block_size), seed_(seed), mode_(mode) {
  if (block_size < 1) {
    throw ConfigError("model.block_size = " + std::to_string(block_size) + " is out of range; valid: >= 1");
  }
  if (tokens_.size() < block_size + 1) {
    throw DataError(what + " has " + std::to_string(tokens_.size()) + " tokens, fewer than model.block_size+1 = " +
                    std::to_string(block_size + 1) + "; lower model.block_size or use a larger corpus");
  }
  if (mode_ == SamplingMode::kRandom) {
    windows_per_epoch_ = num_start_offsets();
  } else {
    // Phases in [0, R) with R = min(T, size - T) keep every window of every phase inside the split;
    // a fixed count per epoch (that of the last phase) makes the epoch of a draw a division.
    num_phases_ = std::min(block_size_, tokens_.size() - block_size_);
    windows_per_epoch_ = (tokens_.size() - num_phases_) / block_size_;
  }
}

int64_t DatasetSampler::uniform_offset(uint64_t h) const {
  // Lemire's multiply-shift: uniform in [0, n) without a division (as WindowSampler).
  auto n = static_cast<unsigned __int128>(num_start_offsets());
  return static_cast<int64_t>((static_cast<unsigned __int128>(h) * n) >> 64);
}

std::shared_ptr<const DatasetSampler::EpochTable> DatasetSampler::build_epoch_table(int64_t epoch) const {
  auto t = std::make_shared<EpochTable>();
  t->epoch = epoch;
  const auto e = static_cast<uint64_t>(epoch);
  t->phase = static_cast<int64_t>(counter_hash(seed_ ^ kPhaseSalt, e) % static_cast<uint64_t>(num_phases_));
  const size_t num_shards = std::max<size_t>(1, tokens_.num_pieces());
  t->order.resize(num_shards);
  for (size_t i = 0; i < num_shards; ++i) t->order[i] = static_cast<uint32_t>(i);
  for (size_t i = num_shards; i > 1; --i) {  // Fisher-Yates, seeded by (seed, epoch)
    uint64_t h = counter_hash(seed_ ^ kShardOrderSalt, e * num_shards + i);
    std::swap(t->order[i - 1], t->order[static_cast<size_t>(h % i)]);
  }
  const int64_t T = block_size_, p = t->phase, n = windows_per_epoch_;
  // Window k starts at p + k T and belongs to the shard holding that token.
  auto first_window_at_or_after = [&](int64_t offset) {
    int64_t k = offset <= p ? 0 : (offset - p + T - 1) / T;
    return std::min(k, n);
  };
  t->first_k.resize(num_shards);
  t->prefix.assign(num_shards + 1, 0);
  for (size_t q = 0; q < num_shards; ++q) {
    const size_t s = t->order[q];
    const int64_t begin = tokens_.num_pieces() == 0 ? 0 : tokens_.piece_begin(s);
    const int64_t end = tokens_.num_pieces() == 0 ? tokens_.size() : tokens_.piece_begin(s + 1);
    const int64_t k0 = first_window_at_or_after(begin), k1 = first_window_at_or_after(end);
    t->first_k[q] = k0;
    t->prefix[q + 1] = t->prefix[q] + (k1 - k0);
  }
  return t;
}

std::shared_ptr<const DatasetSampler::EpochTable> DatasetSampler::epoch_table(int64_t epoch) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& t : cache_) {
      if (t && t->epoch == epoch) return t;
    }
  }
  auto t = build_epoch_table(epoch);  // outside the lock: O(shards), other threads go on
  std::lock_guard<std::mutex> lock(mu_);
  cache_[1] = cache_[0];
  cache_[0] = t;
  return t;
}

int64_t DatasetSampler::sequential_offset(const EpochTable& t, int64_t j) const {
  const size_t q = static_cast<size_t>(std::upper_bound(t.prefix.begin(), t.prefix.end(), j) - t.prefix.begin()) - 1;
  const int64_t local = j - t.prefix[q], count = t.prefix[q + 1] - t.prefix[q];
  const uint64_t key = counter_hash(seed_ ^ kWindowOrderSalt,
                                    static_cast<uint64_t>(t.epoch) * (t.order.size() + 1) + t.order[q]);
  const int64_t k = t.first_k[q] + static_cast<int64_t>(IndexPermutation(static_cast<uint64_t>(count), key)(
                                       static_cast<uint64_t>(local)));
  return t.phase + k * block_size_;
}

int64_t DatasetSampler::window_offset(int64_t draw) const {
  if (mode_ == SamplingMode::kRandom) return uniform_offset(counter_hash(seed_, static_cast<uint64_t>(draw)));
  return sequential_offset(*epoch_table(draw / windows_per_epoch_), draw % windows_per_epoch_);
}

void DatasetSampler::group_offsets(int64_t first_draw, int64_t count, int64_t* out) const {
  if (mode_ == SamplingMode::kRandom) {
    for (int64_t i = 0; i < count; ++i) out[i] = uniform_offset(counter_hash(seed_, static_cast<uint64_t>(first_draw + i)));
  } else {
    std::shared_ptr<const EpochTable> t;  // fetched once per epoch the group touches, not per draw
    for (int64_t i = 0; i < count; ++i) {
      const int64_t draw = first_draw + i, epoch = draw / windows_per_epoch_;
      if (!t || t->epoch != epoch) t = epoch_table(epoch);
      out[i] = sequential_offset(*t, draw % windows_per_epoch_);
    }
  }
  if (count < 2 || count > num_start_offsets()) return;
  std::vector<int64_t> sorted(out, out + count);
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end()) return;
  // Rare: keep the first occurrence of each offset, redraw later ones until unused.
  std::unordered_set<int64_t> used;
  used.reserve(static_cast<size_t>(2 * count));
  for (int64_t i = 0; i < count; ++i) {
    uint64_t attempt = 0;
    while (!used.insert(out[i]).second) {
      out[i] = uniform_offset(counter_hash(seed_ ^ kRedrawSalt, static_cast<uint64_t>(first_draw + i) * 64 + attempt++));
    }
  }
}

}  // namespace hwt
