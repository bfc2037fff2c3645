#include "hwtrain/train/sharded_checkpoint_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/core/json_depth.h"
#include "hwtrain/core/json_integer.h"
#include "hwtrain/dist/segments.h"
#include "hwtrain/io/checkpoint_store.h"
#include "hwtrain/train/blockwise_quant.h"
#include "hwtrain/train/sharded_checkpoint.h"

namespace hwt {

namespace fs = std::filesystem;

namespace {

constexpr int kMaxWorldSize = 1 << 16;
constexpr uint64_t kMaxManifestBytes = 64u << 20;
constexpr int64_t kMaxElements = int64_t{1} << 40;
constexpr const char* kStateKinds[] = {"exp_avg.", "exp_avg_sq.", "step."};

// A JSON integer in [lo, hi] (core/json_integer.h), or IoError naming `what`.
int64_t json_integer(const nlohmann::json& v, int64_t lo, int64_t hi, const std::string& what) {
  if (!is_json_integer_in(v, lo, hi)) {
    throw IoError(what + " is " + v.dump() + ", expected an integer in [" + std::to_string(lo) + ", " +
                  std::to_string(hi) + "]");
  }
  return v.get<int64_t>();
}

struct Manifest {
  int world_size = 0;
  std::map<std::string, std::vector<int64_t>> shapes;
};

// sharding.json, checked as untrusted input: a world size in [1, 65536], shapes of at most 8
// dimensions with at most 2^40 elements.
Manifest read_manifest(const fs::path& dir) {
  const fs::path path = dir / kShardingManifest;
  Manifest m;
  try {
    const auto j = parse_json_bounded(read_regular_file(path, kMaxManifestBytes));
    m.world_size = static_cast<int>(json_integer(j.at("world_size"), 1, kMaxWorldSize, "world_size"));
    if (!j.at("shapes").is_object()) throw IoError("shapes is not an object of name: [dims]");
    for (const auto& [name, dims] : j.at("shapes").items()) {
      if (!dims.is_array() || dims.size() > 8) throw IoError("the shape of '" + name + "' is not a list of <= 8 dims");
      std::vector<int64_t> shape;
      int64_t n = 1;
      for (const auto& dim : dims) {
        const int64_t d = json_integer(dim, 0, kMaxElements, "a dimension of '" + name + "'");
        if (d > 0 && n > kMaxElements / d) throw IoError("the shape of '" + name + "' has over 2^40 elements");
        n *= d;
        shape.push_back(d);
      }
      m.shapes[name] = std::move(shape);
    }
  } catch (const std::exception& e) {
    throw IoError(path.string() + " is malformed: " + e.what() +
                  " (expected {\"world_size\": N, \"shapes\": {name: [dims]}})");
  }
  return m;
}

// The checked header of a shard file, read with its first bytes only.
SafetensorsHeader read_header(const fs::path& path, uint64_t size) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot open " + path.string());
  std::string prefix(static_cast<size_t>(std::min<uint64_t>(size, kSafetensorsLengthBytes)), '\0');
  in.read(prefix.data(), static_cast<std::streamsize>(prefix.size()));
  const uint64_t length = check_safetensors_header_length(path, size, prefix);
  std::string text(static_cast<size_t>(length), '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(length))) throw IoError("cannot read the header of " + path.string());
  return parse_safetensors_header(path, size, text);
}

}  // namespace

ShardedCheckpointReader::ShardedCheckpointReader(fs::path dir, bool verify_on_read)
    : dir_(std::move(dir)), verify_on_read_(verify_on_read) {
  const Manifest m = read_manifest(dir_);
  world_size_ = m.world_size;
  for (const auto& [name, shape] : m.shapes) {
    const int64_t n = c10::multiply_integers(shape);
    tensors_["model." + name] = Tensor{shape, n, {}};
    for (const char* kind : kStateKinds) {
      const bool scalar = std::string(kind) == "step.";
      tensors_[std::string("optimizer.") + kind + name] = Tensor{scalar ? std::vector<int64_t>{} : shape, scalar ? 1 : n, {}};
    }
  }
  for (int r = 0; r < world_size_; ++r) index_shard(r);
  for (auto& [key, t] : tensors_) {
    std::sort(t.pieces.begin(), t.pieces.end(), [](const Piece& a, const Piece& b) { return a.offset < b.offset; });
  }
  check_tiling();
  for (const auto& entry : m.shapes) {  // parameters of no elements: no shard holds a segment of them
    const std::string& name = entry.first;
    if (std::none_of(params_.begin(), params_.end(), [&name](const auto& p) { return p.first == name; })) {
      params_.push_back(entry);
    }
  }
}

void ShardedCheckpointReader::index_shard(int rank) {
  const fs::path file = dir_ / shard_file_name(rank, world_size_);
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) {
    throw IoError("sharded checkpoint " + dir_.string() + " lacks " + file.filename().string() + " (rank " +
                  std::to_string(rank) + " of " + std::to_string(world_size_) + ")");
  }
  add_file(file.filename().string());
  const auto& entries = files_.back().entries;
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string& name = entries[i].name;
    if (name.rfind("model.", 0) != 0 && name.rfind("optimizer.", 0) != 0) continue;
    const size_t at = name.rfind('@');
    if (at == std::string::npos) {
      throw IoError(file.string() + ": entry '" + name + "' is not a segment (<name>@<offset>)");
    }
    std::string key = name.substr(0, at);
    const int64_t offset = segment_offset(name, at, file.string());
    const EightBitKey q8 = parse_eight_bit_key(key, "optimizer.");
    if (q8.scales) continue;  // read with its codes
    if (q8.codes) key = q8.moment;
    auto it = tensors_.find(key);
    if (it == tensors_.end()) throw IoError(file.string() + ": entry '" + name + "' belongs to no tensor of " + kShardingManifest);
    const int64_t numel = c10::multiply_integers(entries[i].shape);
    Piece piece{rank, i, offset, numel};
    if (q8.codes) {
      if (entries[i].dtype != torch::kUInt8) throw IoError(file.string() + ": entry '" + name + "' is not uint8 8-bit codes");
      piece.q8 = q8.is_signed ? 1 : 2;
      piece.absmax = scales_of(rank, name, numel);
    } else if (!c10::isFloatingType(entries[i].dtype)) {
      throw IoError(file.string() + ": entry '" + name + "' is " + std::string(c10::toString(entries[i].dtype)) +
                    ", expected a floating-point segment");
    }
    it->second.pieces.push_back(piece);
    if (key.rfind("model.", 0) == 0 && it->second.pieces.size() == 1) params_.emplace_back(key.substr(6), it->second.shape);
  }
}

// The entry of the block scales beside 8-bit codes `name` of `numel` elements in `file`, checked:
// one fp32 scale per block of kQuantBlockSize (`prefix`: "optimizer." in a shard, none in a
// one-process optimizer.safetensors).
size_t ShardedCheckpointReader::scales_of(int file, const std::string& name, int64_t numel, const std::string& prefix) const {
  const auto& entries = files_[static_cast<size_t>(file)].entries;
  const std::string where = (dir_ / file_names_[static_cast<size_t>(file)]).string();
  const std::string scales = parse_eight_bit_key(name, prefix).scales_key;  // "...absmax.<param>@<offset>"
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].name != scales) continue;
    const int64_t blocks = (numel + kQuantBlockSize - 1) / kQuantBlockSize;
    if (entries[i].dtype != torch::kFloat || c10::multiply_integers(entries[i].shape) != blocks) {
      throw IoError(where + ": entry '" + scales + "' must hold " + std::to_string(blocks) + " fp32 block scales");
    }
    return i;
  }
  throw IoError(where + ": the 8-bit codes '" + name + "' lack their block scales '" + scales + "'");
}

void ShardedCheckpointReader::add_file(const std::string& name) {
  const fs::path file = dir_ / name;
  std::error_code ec;
  const uint64_t size = fs::file_size(file, ec);
  if (ec) throw IoError("cannot read the size of " + file.string() + ": " + ec.message());
  files_.push_back(read_header(file, size));
  file_names_.push_back(name);
}

void ShardedCheckpointReader::check_tiling() const {
  const std::string what = "sharded checkpoint " + dir_.string();
  auto shown = [](const std::string& key) { return key.substr(key.find('.') + 1); };  // without "model."/"optimizer."
  int64_t held = 0;
  std::string first_missing;
  for (const std::string prefix : {"model.", "optimizer."}) {  // the weights' first: what eval and export need
    for (const auto& [key, t] : tensors_) {
      if (key.rfind(prefix, 0) != 0) continue;
      const bool empty_param = t.numel == 0 || (key.rfind("optimizer.step.", 0) == 0 && numel_of_param(key) == 0);
      if (!t.pieces.empty() || empty_param) ++held;  // a parameter of no elements has no segments
      else if (first_missing.empty()) first_missing = shown(key);
    }
  }
  if (!first_missing.empty()) {
    throw IoError(what + ": its shards hold " + std::to_string(held) + " of the " + std::to_string(tensors_.size()) +
                  " tensors " + kShardingManifest + " implies; first missing: '" + first_missing + "'");
  }
  for (const auto& [key, t] : tensors_) {
    std::string gap;
    std::vector<std::pair<int64_t, int64_t>> spans;
    for (const Piece& p : t.pieces) {
      if (t.shape.empty() && p.numel != 1) gap = "a segment of " + std::to_string(p.numel) + " elements for a scalar";
      if (t.shape.empty() || !gap.empty()) continue;
      if (p.offset > t.numel || p.numel > t.numel - p.offset) {
        gap = "a segment at " + std::to_string(p.offset) + " of " + std::to_string(p.numel) + " elements runs past its end";
      }
      spans.emplace_back(p.offset, p.offset + p.numel);
    }
    if (gap.empty() && !t.shape.empty()) gap = segment_tiling_error(spans, t.numel);
    if (!gap.empty()) {
      throw IoError(what + ": '" + shown(key) + "' (" + std::to_string(t.numel) + " elements): " + gap +
                    " (a shard missing, repeated or from another run)");
    }
  }
}

// The elements of the parameter a "optimizer.step.<param>" key counts the steps of.
int64_t ShardedCheckpointReader::numel_of_param(const std::string& step_key) const {
  const std::string param = step_key.substr(std::string("optimizer.step.").size());
  auto it = tensors_.find("model." + param);
  return it == tensors_.end() ? -1 : it->second.numel;
}

const ShardedCheckpointReader::Tensor& ShardedCheckpointReader::find(const std::string& key) const {
  auto it = tensors_.find(key);
  if (it == tensors_.end()) throw IoError("checkpoint " + dir_.string() + " holds no tensor '" + key + "'");
  return it->second;
}

torch::Tensor ShardedCheckpointReader::read(const std::string& key, int64_t offset, int64_t count) {
  const Tensor& t = find(key);
  if (t.shape.empty()) {  // every segment repeats it: the last at or before `offset`, in the file of its moments
    if (t.pieces.empty()) return torch::zeros({}, torch::kFloat);  // a parameter of no elements has no segments
    auto it = std::upper_bound(t.pieces.begin(), t.pieces.end(), offset,
                               [](int64_t at, const Piece& p) { return at < p.offset; });
    torch::Tensor out = torch::empty({1}, torch::kFloat);
    read_piece(it == t.pieces.begin() ? t.pieces.front() : *std::prev(it), 0, 1, out);
    return out.reshape({});
  }
  if (offset < 0 || count < 0 || offset > t.numel || count > t.numel - offset) {
    throw IoError("sharded checkpoint " + dir_.string() + ": elements " + std::to_string(offset) + ".." +
                  std::to_string(offset + count) + " are outside '" + key + "' (" + std::to_string(t.numel) + ")");
  }
  torch::Tensor out = torch::empty({count}, torch::kFloat);
  for (const Piece& p : t.pieces) {  // they tile the tensor: every element of out is written once
    const int64_t from = std::max(offset, p.offset), to = std::min(offset + count, p.offset + p.numel);
    if (from < to) read_piece(p, from - p.offset, to - p.offset, out.narrow(0, from - offset, to - from));
  }
  return out;
}

std::optional<std::pair<torch::Tensor, torch::Tensor>> ShardedCheckpointReader::eight_bit(const std::string& key,
                                                                                         int64_t offset, int64_t count) {
  for (const Piece& p : find(key).pieces) {
    if (p.q8 == 0 || p.offset != offset || p.numel != count) continue;
    const int64_t blocks = (count + kQuantBlockSize - 1) / kQuantBlockSize;
    torch::Tensor codes = torch::empty({count}, torch::kUInt8), scales = torch::empty({blocks}, torch::kFloat);
    read_raw(p, 0, count, codes);
    read_raw(Piece{p.file, p.absmax, 0, blocks}, 0, blocks, scales);
    return std::make_pair(codes, scales);
  }
  return std::nullopt;
}

torch::Tensor ShardedCheckpointReader::whole(const std::string& key) {
  const Tensor& t = find(key);
  return t.shape.empty() ? read(key, 0, 1) : read(key, 0, t.numel).view(t.shape);
}

// Elements [from, to) of piece p into `out` (fp32, to - from elements); 8-bit codes with the scales
// of the blocks they fall in, dequantized.
void ShardedCheckpointReader::read_piece(const Piece& p, int64_t from, int64_t to, torch::Tensor out) {
  if (p.q8 == 0) return read_raw(p, from, to, out);
  const int64_t b0 = from / kQuantBlockSize, b1 = (to - 1) / kQuantBlockSize + 1;  // blocks [b0, b1)
  const int64_t c0 = b0 * kQuantBlockSize, c1 = std::min(p.numel, b1 * kQuantBlockSize);
  torch::Tensor codes = torch::empty({c1 - c0}, torch::kUInt8), scales = torch::empty({b1 - b0}, torch::kFloat);
  read_raw(Piece{p.file, p.entry, p.offset, p.numel}, c0, c1, codes);
  read_raw(Piece{p.file, p.absmax, 0, b1}, b0, b1, scales);
  out.copy_(dequantize_blockwise({codes, scales}, p.q8 == 1).narrow(0, from - c0, to - from));
}

// The same into `out` of any dtype (converted from the file's).
void ShardedCheckpointReader::read_raw(const Piece& p, int64_t from, int64_t to, torch::Tensor out) {
  const std::string& name = file_names_[static_cast<size_t>(p.file)];
  const fs::path path = dir_ / name;
  const SafetensorsEntry& e = files_[p.file].entries[p.entry];
  const int64_t item = static_cast<int64_t>(c10::elementSize(e.dtype));
  torch::Tensor raw = e.dtype == out.scalar_type() ? out : torch::empty({to - from}, torch::TensorOptions().dtype(e.dtype));
  const uint64_t start = files_[p.file].data_start + e.begin + static_cast<uint64_t>(from * item);
  const size_t bytes = static_cast<size_t>((to - from) * item);
  if (verify_on_read_) verify_range(p.file, start, start + bytes);
  read_.insert(p.file);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IoError("cannot open " + path.string() + ": " + std::strerror(errno));
  size_t done = 0;
  auto* dst = static_cast<char*>(raw.data_ptr());
  while (done < bytes) {
    const ssize_t n = ::pread(fd, dst + done, bytes - done, static_cast<off_t>(start + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      throw IoError(path.string() + ": cannot read '" + e.name + "' (" + (n < 0 ? std::strerror(err) : "the file is shorter than its header says: changed since it was opened") + ")");
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  bytes_read_ += static_cast<int64_t>(bytes);
  if (!raw.is_same(out)) out.copy_(raw);
}

// The chunks of `file` holding bytes [from, to), and the first time also its header's (which placed
// every piece), against COMPLETE's checksums.
void ShardedCheckpointReader::verify_range(int file, uint64_t from, uint64_t to) {
  auto it = verifiers_.find(file);
  if (it == verifiers_.end()) {
    if (!manifest_) manifest_ = read_checkpoint_manifest(dir_);
    const std::string& name = file_names_[static_cast<size_t>(file)];
    const auto listed = std::find_if(manifest_->files.begin(), manifest_->files.end(),
                                     [&](const CheckpointFile& f) { return f.path == name; });
    if (listed == manifest_->files.end()) {
      throw IoError("checkpoint " + dir_.string() + " is corrupt: " + name + " is not listed in its COMPLETE marker");
    }
    it = verifiers_.emplace(file, RangeVerifier(dir_, *listed)).first;
    it->second.check(0, files_[static_cast<size_t>(file)].data_start);
  }
  it->second.check(from, to);
}

int64_t ShardedCheckpointReader::bytes_checked() const {
  int64_t n = 0;
  for (const auto& [file, v] : verifiers_) n += static_cast<int64_t>(v.bytes_checked());
  return n;
}

std::vector<std::string> ShardedCheckpointReader::files_read() const {
  std::vector<std::string> out;
  for (int r : read_) out.push_back(file_names_[static_cast<size_t>(r)]);
  return out;
}

}  // namespace hwt
