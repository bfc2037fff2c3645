// The fuzzing targets of issue 19: one function per parser of untrusted input, each feeding the
// bytes to the product's own entry point the way a file on disk reaches it. Expected rejections
// (hwt::Error: ConfigError, DataError, IoError, HardwareError, each with a one-line message) are
// swallowed; anything else escapes — another exception type, a crash, a sanitizer report, a hang
// or an outsized allocation — and is a finding. Used by the libFuzzer binaries (fuzz/, built by
// scripts/fuzz.sh) and by the CI test that replays fuzz/corpus (tests/cli/fuzz_corpus_test.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hwt::fuzz {

using Target = void (*)(const uint8_t* data, size_t size);

void safetensors_file(const uint8_t* data, size_t size);  // io/: load_safetensors and MappedSafetensors agree
void trainer_state(const uint8_t* data, size_t size);     // train/trainer_state_file: parse_trainer_state
void tokenizer_json(const uint8_t* data, size_t size);    // data/tokenizer_files: load_tokenizer
void dataset_manifest(const uint8_t* data, size_t size);  // data/manifest: read_manifest
void shard_header(const uint8_t* data, size_t size);      // data/token_file: decode_token_file_header
void toml_config(const uint8_t* data, size_t size);       // config/run_config: apply_toml + validate
void hardware_json(const uint8_t* data, size_t size);     // hw/hardware_json: hardware_from_json
void checkpoint_list(const uint8_t* data, size_t size);   // io/checkpoint_store: read_checkpoint_manifest
void hf_config_json(const uint8_t* data, size_t size);    // interop/hf_directory: read_hf_model_config
void hf_weight_index(const uint8_t* data, size_t size);   // interop/hf_directory: read_hf_weights (sharded index)
void sharding_manifest(const uint8_t* data, size_t size); // train/sharded_checkpoint: read_checkpoint_weights/optimizer
void sweep_file(const uint8_t* data, size_t size);        // sweep/sweep_config: parse_sweep_config (+ space values)
void study_file(const uint8_t* data, size_t size);        // sweep/study_store: open, trials, claim

struct NamedTarget {
  const char* name;  // also its corpus folder: fuzz/corpus/<name>
  Target run;
};
const std::vector<NamedTarget>& all_targets();

}  // namespace hwt::fuzz
