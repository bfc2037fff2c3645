// trainer_state.json, the trainer's part of a checkpoint (step, tokens seen, loader position, LR
// scale, batch geometry, dataset identity, precision fallback), read with every field type- and
// range-checked. Writing it is Trainer::save_checkpoint's (trainer_state.cpp); this file only
// turns the JSON back into values that a resume may trust.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "hwtrain/data/batch_loader.h"

namespace hwt {

// Bounds: far beyond any real run, low enough that step * batch * block_size cannot overflow.
inline constexpr int64_t kMaxResumeStep = 1'000'000'000'000;   // 1e12 optimizer steps
inline constexpr int64_t kMaxResumeTokens = int64_t{1} << 60;  // tokens seen
inline constexpr int64_t kMaxResumeBatch = 1 << 24;            // micro-batch, accumulation, ranks

struct TrainerStateFile {
  int64_t step = 0;
  int64_t tokens_seen = 0;
  double elapsed_seconds = 0;
  std::optional<LoaderState> loader;       // absent in checkpoints of the WindowSampler era...
  int64_t sampler_position = 0;            // ...which saved a count of windows drawn instead
  double lr_scale = 1.0;
  int64_t micro_batch_size = 1, grad_accum_steps = 1, world_size = 1;
  std::string dataset_tokenizer;
  int64_t dataset_vocab_size = 0;
  uint64_t dataset_fingerprint = 0;
  std::string precision_fallback_reason;  // "" unless the run had fallen back to fp32
  // Each callback's state by name (train/callback.h's CallbackState): at most kMaxCallbackStates
  // callbacks of as many finite numbers each, names and keys of at most 256 characters.
  std::map<std::string, std::map<std::string, double>> callbacks;
};

inline constexpr size_t kMaxCallbackStates = 64;

// Parses the JSON of `file`; IoError with one line naming the file, the key, the value found and
// what would be valid for a missing, ill-typed or out-of-range field.
TrainerStateFile parse_trainer_state(const nlohmann::json& j, const std::filesystem::path& file);

}  // namespace hwt
