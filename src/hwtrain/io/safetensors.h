// The safetensors file format, written and read without an external library: an 8-byte
// little-endian header length N, N bytes of JSON (padded with spaces to a multiple of 8), then the
// raw tensor bytes. The JSON maps each tensor name to {"dtype", "shape", "data_offsets"} (offsets
// relative to the start of the data) plus an optional "__metadata__" string -> string map.
// Files written here load in Python's `safetensors` and vice versa. Loading validates the header
// strictly (IoError naming the file and the problem) before any tensor data is read; the checks
// are the functions at the end of this file, which io/mapped_safetensors.h (the memory-mapped,
// zero-copy reader Hugging Face directories are imported through) calls as well.
// Not offered here: memory-mapping (io/mapped_safetensors.h), big-endian hosts.
#pragma once
#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
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

// Reads and validates a safetensors file into memory of its own (the tensors are writable; the
// peak is the whole file): for hwtrain's own files (checkpoints). A Hugging Face model directory is
// read through MappedSafetensors (io/mapped_safetensors.h) instead. Throws IoError naming the file
// and the problem for every malformed input: short file, bad header length, invalid JSON, unknown
// dtype, bad shape or offsets, sizes that disagree with the shape, overlapping tensors or holes,
// trailing bytes, duplicate names, or a "__metadata__" that is not a string -> string map.
SafetensorsFile load_safetensors(const fs::path& path);

// The safetensors dtype name for a torch dtype ("F32", "BF16", ...); throws IoError if safetensors
// has none.
std::string safetensors_dtype_name(torch::ScalarType dtype);

// ---- The header checks, one implementation for load_safetensors and MappedSafetensors ----------

// Bytes of the little-endian header length that starts every file.
constexpr uint64_t kSafetensorsLengthBytes = 8;

// One tensor as a checked header describes it; [begin, end) is relative to the data section.
struct SafetensorsEntry {
  std::string name;
  torch::ScalarType dtype = torch::kFloat32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// A checked header: the tensors in data-offset order, their ranges tiling the data section exactly
// (no overlap, no hole, no trailing byte), every size equal to shape x item size.
struct SafetensorsHeader {
  uint64_t data_start = 0;  // file offset of the data section: 8 + the header length
  std::vector<SafetensorsEntry> entries;
  std::map<std::string, std::string> metadata;
};

// The header length of `path`, a file of `file_size` bytes whose first bytes are `prefix` (its
// first 8, or all of them when the file is shorter): checked against the 100 MB limit and the file
// size. Throws IoError naming the file, as load_safetensors does.
uint64_t check_safetensors_header_length(const fs::path& path, uint64_t file_size, std::string_view prefix);

// Parses and checks `header_text` (the header-length bytes after the first 8) of `path`, a file of
// `file_size` bytes: JSON object, no duplicate key, known dtypes, shapes, offsets inside the file,
// sizes, tiling, "__metadata__". Throws IoError naming the file and the problem.
SafetensorsHeader parse_safetensors_header(const fs::path& path, uint64_t file_size, std::string_view header_text);

}  // namespace hwt
