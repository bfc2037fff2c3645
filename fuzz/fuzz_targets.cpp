#include "fuzz_targets.h"

#include <nlohmann/json.hpp>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>

#include "hwtrain/run/run_config.h"
#include "hwtrain/run/sweep_binding.h"
#include "hwtrain/sweep/study_store.h"
#include "hwtrain/sweep/sweep_components.h"
#include "hwtrain/core/crc32c.h"
#include "hwtrain/core/error.h"
#include "hwtrain/data/manifest.h"
#include "hwtrain/data/token_file.h"
#include "hwtrain/data/tokenizer_files.h"
#include "hwtrain/hw/hardware_profile.h"
#include "hwtrain/interop/hf_directory.h"
#include "hwtrain/model/gpt.h"
#include "hwtrain/io/checkpoint_store.h"
#include "hwtrain/io/mapped_safetensors.h"
#include "hwtrain/io/safetensors.h"
#include "hwtrain/train/sharded_checkpoint.h"
#include "hwtrain/train/trainer_state_file.h"

namespace hwt::fuzz {

namespace fs = std::filesystem;

namespace {

// A private directory for the files the targets read, made once per process.
const fs::path& scratch_dir() {
  static const fs::path dir = [] {
    std::string pattern = (fs::temp_directory_path() / "hwtrain-fuzz-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("cannot create a scratch directory");
    return fs::path(pattern);
  }();
  return dir;
}

fs::path write_input(const std::string& name, const uint8_t* data, size_t size) {
  const fs::path path = scratch_dir() / name;
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                                static_cast<std::streamsize>(size));
  return path;
}

template <class F>
void expecting_errors(F&& f) {
  try {
    f();
  } catch (const Error&) {
    // A rejection with its one-line message: what untrusted input should get.
  }
}

// JSON the product would parse; malformed JSON is the parser library's rejection, not a finding.
bool parse_json(const uint8_t* data, size_t size, nlohmann::json* out) {
  *out = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  return !out->is_discarded();
}

}  // namespace

// Both readers run the same header checks (io/safetensors.h); they must accept the same files and
// give the same bytes, or the disagreement escapes as a finding.
void safetensors_file(const uint8_t* data, size_t size) {
  const fs::path file = write_input("model.safetensors", data, size);
  std::optional<SafetensorsFile> loaded;
  std::optional<MappedSafetensors> mapped;
  expecting_errors([&] { loaded = load_safetensors(file); });
  expecting_errors([&] { mapped.emplace(file); });
  if (loaded.has_value() != mapped.has_value()) {
    throw std::logic_error(std::string("load_safetensors ") + (loaded ? "accepts" : "rejects") +
                           " a file that MappedSafetensors " + (mapped ? "accepts" : "rejects"));
  }
  if (!loaded) return;
  const NamedTensors views = mapped->tensors();
  if (views.size() != loaded->tensors.size() || mapped->metadata() != loaded->metadata) {
    throw std::logic_error("the two safetensors readers disagree on the tensors or metadata");
  }
  for (size_t i = 0; i < views.size(); ++i) {
    const torch::Tensor& a = loaded->tensors[i].second;
    const torch::Tensor& b = views[i].second;
    if (views[i].first != loaded->tensors[i].first || a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes() ||
        (a.nbytes() > 0 && std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) != 0)) {
      throw std::logic_error("the two safetensors readers disagree on tensor '" + views[i].first + "'");
    }
  }
}

void trainer_state(const uint8_t* data, size_t size) {
  nlohmann::json j;
  if (!parse_json(data, size, &j)) return;
  expecting_errors([&] { parse_trainer_state(j, "trainer_state.json"); });
}

void tokenizer_json(const uint8_t* data, size_t size) {
  const fs::path dir = scratch_dir() / "tokenizer";
  fs::create_directories(dir);
  write_input("tokenizer/tokenizer.json", data, size);
  expecting_errors([&] { load_tokenizer(dir); });
}

void dataset_manifest(const uint8_t* data, size_t size) {
  const fs::path dir = scratch_dir() / "dataset";
  fs::create_directories(dir);
  write_input("dataset/manifest.json", data, size);
  expecting_errors([&] { read_manifest(dir); });
}

void shard_header(const uint8_t* data, size_t size) {
  // As a reader sees a shard: these bytes are the start of a file whose size is claimed by them
  // or not; both the true size and a size the header might agree with are tried.
  expecting_errors([&] { decode_token_file_header(data, size, size, "train-00000.hwt"); });
  expecting_errors([&] { decode_token_file_header(data, size, uint64_t{1} << 40, "train-00000.hwt"); });
  // The header checksum stops almost every mutation at the first check; with it made right (the
  // CRC32C of the header with its field zeroed, at byte 76: data/token_file.cpp), the fields'
  // own checks are fuzzed too.
  constexpr size_t kCrcOffset = 76;
  if (size < kTokenFileHeaderSize) return;
  std::string header(reinterpret_cast<const char*>(data), kTokenFileHeaderSize);
  std::memset(&header[kCrcOffset], 0, 4);
  const uint32_t crc = crc32c(header.data(), header.size());
  std::memcpy(&header[kCrcOffset], &crc, 4);
  expecting_errors([&] { decode_token_file_header(header.data(), header.size(), size, "train-00000.hwt"); });
}

void toml_config(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  expecting_errors([&] {
    RunConfig c;
    c.apply_toml(text, "fuzz.toml");
    c.validate();
  });
}

void hardware_json(const uint8_t* data, size_t size) {
  nlohmann::json j;
  if (!parse_json(data, size, &j)) return;
  expecting_errors([&] { hardware_from_json(j, "hardware.json"); });
}

void checkpoint_list(const uint8_t* data, size_t size) {
  const fs::path dir = scratch_dir() / "step_00000001";
  fs::create_directories(dir);
  write_input("step_00000001/COMPLETE", data, size);
  expecting_errors([&] { read_checkpoint_manifest(dir); });
}

void hf_config_json(const uint8_t* data, size_t size) {
  const fs::path dir = scratch_dir() / "hf_model";
  fs::create_directories(dir);
  write_input("hf_model/config.json", data, size);
  expecting_errors([&] {
    ModelConfig m = read_hf_model_config(dir, ModelConfig{});
    read_hf_context_length(dir);
    if (m.n_layer * m.n_embd <= (1 << 16) && m.vocab_size <= (1 << 16)) GPT(m, m.vocab_size);  // small ones build
  });
}

// A Hugging Face directory's model.safetensors.index.json beside one fixed shard holding "w" and
// "b": the index must name files inside the directory, each present and holding what it lists.
void hf_weight_index(const uint8_t* data, size_t size) {
  const fs::path dir = scratch_dir() / "hf_index";
  static const bool shard_written = [&] {
    fs::create_directories(dir);
    save_safetensors(dir / "model-00001-of-00001.safetensors", {{"w", torch::ones({2, 3})}, {"b", torch::zeros({3})}});
    return true;
  }();
  (void)shard_written;
  write_input("hf_index/model.safetensors.index.json", data, size);
  expecting_errors([&] { read_hf_weights(dir); });
}

// sharding.json beside two fixed shard files of a tensor "w" (2 x 3) split at element 3.
void sharding_manifest(const uint8_t* data, size_t size) {
  const fs::path dir = scratch_dir() / "sharded";
  static const bool shards_written = [&] {
    fs::create_directories(dir);
    for (int r = 0; r < 2; ++r) {
      const std::string seg = "w@" + std::to_string(3 * r);
      save_safetensors(dir / shard_file_name(r, 2), {{"model." + seg, torch::full({3}, r + 1.0f)},
                                                     {"optimizer.exp_avg." + seg, torch::zeros({3})},
                                                     {"optimizer.exp_avg_sq." + seg, torch::zeros({3})},
                                                     {"optimizer.step." + seg, torch::full({}, 2.0f)}});
    }
    save_safetensors(dir / "optimizer.safetensors", {{"rng.cpu", torch::zeros({4}, torch::kUInt8)}});
    return true;
  }();
  (void)shards_written;
  write_input("sharded/sharding.json", data, size);
  expecting_errors([&] {
    read_checkpoint_weights(dir);
    read_checkpoint_optimizer(dir);
  });
}

// A sweep file as `hwtrain sweep --config` reads it: parsed, its space's values tried on the
// default run config, its sampler and pruner built.
void sweep_file(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  expecting_errors([&] {
    const sweep::SweepConfig c = sweep::parse_sweep_config(text, scratch_dir() / "sweep.toml", {}, sweep_key_checks());
    check_space_values(c, RunConfig{});
    sweep::make_sampler(c);
    sweep::make_pruner(c);
  });
}

// A study file as a resumed sweep opens it: its meta checked, every trial read, one more claimed.
void study_file(const uint8_t* data, size_t size) {
  const fs::path file = write_input("study.db", data, size);
  expecting_errors([&] {
    sweep::StudyInfo info{"sweep", "train.lr=loguniform[0.001,0.01]", "min", "val_loss", ""};
    auto store = sweep::StudyStore::open(file.string(), info);
    store.trials();
    store.claim([](const std::vector<sweep::Trial>&) { return sweep::Params{{"train.lr", 0.002}}; }, 1000);
  });
}

const std::vector<NamedTarget>& all_targets() {
  static const std::vector<NamedTarget> targets = {
      {"safetensors_file", safetensors_file}, {"trainer_state", trainer_state},
      {"tokenizer_json", tokenizer_json},     {"dataset_manifest", dataset_manifest},
      {"shard_header", shard_header},         {"toml_config", toml_config},
      {"hardware_json", hardware_json},       {"checkpoint_list", checkpoint_list},
      {"hf_config_json", hf_config_json},     {"hf_weight_index", hf_weight_index},
      {"sharding_manifest", sharding_manifest},
      {"sweep_file", sweep_file},             {"study_file", study_file}};
  return targets;
}

}  // namespace hwt::fuzz
