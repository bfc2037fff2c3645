// The safetensors file format, written and read without an external library: an 8-byte
// little-endian header length N, N bytes of JSON (padded with spaces to a multiple of 8), then the
// raw tensor bytes. The JSON maps each tensor name to {"dtype", "shape", "data_offsets"} (offsets
// relative to the start of the data) plus an optional "__metadata__" string -> string map.
// Files written here load in Python's `safetensors` and vice versa. Loading validates the header
// strictly (IoError naming the file and the problem) before any tensor data is read.
// Not offered: memory-mapping, lazy loading, big-endian hosts.
#pragma once
#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace hwt {

namespace fs = std::filesystem;

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// Writes `tensors` (any device or layout; copied to contiguous CPU memory) and `metadata` to
// `path` atomically: temp file in the same directory, fsync, rename. The bytes are those Python's
// safetensors writes for the same input (tensors ordered by dtype, widest first, then by name), so
// every tensor starts at a multiple of its item size. Throws IoError for duplicate or reserved names, dtypes
// safetensors cannot store, or a failed write.
void save_safetensors(const fs::path& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// The contents of a loaded safetensors file. Tensors are on the CPU, in file (data offset) order.
struct SafetensorsFile {
  fs::path path;
  NamedTensors tensors;
  std::map<std::string, std::string> metadata;

  bool contains(const std::string& name) const;
  // The tensor called `name`; throws IoError naming the tensor and the file if there is none.
  torch::Tensor get(const std::string& name) const;
};

// Reads and validates a safetensors file. Throws IoError naming the file and the problem for
// every malformed input: short file, bad header length, invalid JSON, unknown dtype, bad shape or
// offsets, sizes that disagree with the shape, overlapping tensors or holes, trailing bytes,
// duplicate names, or a "__metadata__" that is not a string -> string map.
SafetensorsFile load_safetensors(const fs::path& path);

// The safetensors dtype name for a torch dtype ("F32", "BF16", ...); throws IoError if safetensors
// has none.
std::string safetensors_dtype_name(torch::ScalarType dtype);

}  // namespace hwt
