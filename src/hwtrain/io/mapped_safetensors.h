// MappedSafetensors: a safetensors file memory-mapped read-only, its header checked exactly as
// load_safetensors checks it (the same functions, io/safetensors.h) before any tensor is given,
// and each tensor given as a zero-copy CPU tensor over the mapping. Reading a model this way costs
// page cache, not anonymous memory: importing a Hugging Face directory holds the model plus at
// most one tensor's converted copy, not a whole 5 GB shard (docs/benchmarks.md, issue 17).
//
// The tensors are READ-ONLY memory (PROT_READ): copy them into memory of your own
// (`param.copy_(t)`, `t.clone()`, `t.to(dtype)` when the dtype differs) and never write into them
// or use them as the output of an in-place op: that is a segmentation fault. Each tensor keeps the
// mapping alive (a shared_ptr held by its deleter), so it stays valid after this object is gone.
// A tensor whose bytes are not aligned to its item size (legal in the format, never written by
// Python's safetensors or by hwtrain) is copied instead. A file truncated by another process while
// mapped raises SIGBUS on access, as for every mapped file; hwtrain's own checkpoints are read by
// load_safetensors (io/safetensors.h), which reads into owned memory.
// Not offered: writing, big-endian hosts, lazy header parsing.
#pragma once
#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hwtrain/io/safetensors.h"

namespace hwt {

class MappedSafetensors {
 public:
  // Maps `path` and checks its header; throws IoError naming the file and the problem (the same
  // one-line messages as load_safetensors) for a missing or unreadable file and every malformed one.
  explicit MappedSafetensors(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  // The tensors' names in file (data offset) order, as load_safetensors gives them.
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const { return index_.count(name) > 0; }

  // The tensor called `name` over the mapped bytes (read-only, see above); throws IoError naming
  // the tensor and the file if there is none.
  torch::Tensor get(const std::string& name) const;
  // Every tensor, in file order (each as get() gives it).
  NamedTensors tensors() const;

  // Drops the pages holding `name`'s bytes from this process's resident set (madvise DONTNEED; the
  // page cache keeps them). Tensors over them stay valid and read the file again if touched. Call
  // after copying a tensor, so that a shard read tensor by tensor never counts whole in the RSS.
  void release_pages(const std::string& name) const;

 private:
  class Mapping;
  const SafetensorsEntry& entry(const std::string& name) const;

  std::filesystem::path path_;
  std::shared_ptr<const Mapping> map_;
  SafetensorsHeader header_;
  std::map<std::string, size_t> index_;  // name -> position in header_.entries
};

}  // namespace hwt
