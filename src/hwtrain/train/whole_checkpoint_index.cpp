// ShardedCheckpointReader over a one-process checkpoint (open_whole): model.safetensors and
// optimizer.safetensors indexed by their headers, each weight and moment one piece of its file, so
// that a ZeRO-2/3 rank resuming it reads its own ranges only (train/sharded_checkpoint_reader.h).
#include <cstring>
#include <vector>

#include "hwtrain/train/blockwise_quant.h"
#include "hwtrain/train/sharded_checkpoint_reader.h"

namespace hwt {

namespace fs = std::filesystem;

namespace {

constexpr const char* kStateKinds[] = {"exp_avg.", "exp_avg_sq.", "step."};

// What read() returns without rounding: fp32, bf16 and fp16 (a library model's fp64 is read whole).
bool read_exactly_as_fp32(c10::ScalarType t) { return t == torch::kFloat || t == torch::kBFloat16 || t == torch::kHalf; }

}  // namespace

ShardedCheckpointReader::ShardedCheckpointReader(fs::path dir, bool verify_on_read, bool whole)
    : dir_(std::move(dir)), verify_on_read_(verify_on_read), world_size_(1), whole_(whole) {}

std::shared_ptr<ShardedCheckpointReader> ShardedCheckpointReader::open_whole(const fs::path& dir, bool verify_on_read) {
  std::shared_ptr<ShardedCheckpointReader> r(new ShardedCheckpointReader(dir, verify_on_read, true));
  if (!r->index_whole()) return nullptr;
  r->check_tiling();
  return r;
}

// model.safetensors' entries are the weights; optimizer.safetensors' "exp_avg.", "exp_avg_sq." and
// "step." entries of a weight, floating-point and of its shape (a scalar step), or its 8-bit
// moments' codes and scales, its AdamW state.
bool ShardedCheckpointReader::index_whole() {
  add_file("model.safetensors");
  for (size_t i = 0; i < files_[0].entries.size(); ++i) {
    const SafetensorsEntry& e = files_[0].entries[i];
    if (!read_exactly_as_fp32(e.dtype)) return false;
    const int64_t n = c10::multiply_integers(e.shape);
    tensors_["model." + e.name] = Tensor{e.shape, n, {Piece{0, i, 0, n}}};
    params_.emplace_back(e.name, e.shape);
  }
  add_file("optimizer.safetensors");
  std::vector<size_t> scales;  // 8-bit block scales: read with their codes, or other entries if those are
  for (size_t i = 0; i < files_[1].entries.size(); ++i) {
    if (parse_eight_bit_key(files_[1].entries[i].name).scales) {
      scales.push_back(i);
      continue;
    }
    if (index_whole_eight_bit(i)) continue;
    const SafetensorsEntry& e = files_[1].entries[i];
    bool state = false;
    for (const char* kind : kStateKinds) {
      if (e.name.rfind(kind, 0) != 0) continue;
      auto weight = tensors_.find("model." + e.name.substr(std::strlen(kind)));
      const bool scalar = std::string(kind) == "step.";
      state = weight != tensors_.end() && read_exactly_as_fp32(e.dtype) &&
              (scalar ? c10::multiply_integers(e.shape) == 1 : e.shape == weight->second.shape);
      if (state) {
        const int64_t n = c10::multiply_integers(e.shape);
        tensors_["optimizer." + e.name] = Tensor{scalar ? std::vector<int64_t>{} : e.shape, n, {Piece{1, i, 0, n}}};
      }
    }
    if (!state) others_.push_back(i);
  }
  for (size_t i : scales) {
    auto moment = tensors_.find("optimizer." + parse_eight_bit_key(files_[1].entries[i].name).moment);
    const bool read_with_codes = moment != tensors_.end() && moment->second.pieces.front().q8 != 0 &&
                                 moment->second.pieces.front().absmax == i;
    if (!read_with_codes) others_.push_back(i);  // codes of no weight of the model: kept as they are
  }
  for (const auto& [name, shape] : params_) {  // every weight's three, else the moments are in another form
    for (const char* kind : kStateKinds) {
      if (!tensors_.count(std::string("optimizer.") + kind + name)) return false;
    }
  }
  return true;
}

// 8-bit AdamW moments ("exp_avg.q8.<weight>", uint8, one per element, beside "exp_avg.absmax.<weight>",
// one fp32 scale per block): a piece of the moment, dequantized by the blocks a read touches; the
// scales are read with their codes (IoError naming the file when they are missing or malformed).
bool ShardedCheckpointReader::index_whole_eight_bit(size_t entry) {
  const SafetensorsEntry& e = files_[1].entries[entry];
  const EightBitKey q8 = parse_eight_bit_key(e.name);
  if (!q8.codes || e.dtype != torch::kUInt8) return false;
  const std::string weight_name = q8.moment.substr(q8.moment.find('.') + 1);  // after "exp_avg." / "exp_avg_sq."
  auto weight = tensors_.find("model." + weight_name);
  const int64_t n = c10::multiply_integers(e.shape);
  if (weight == tensors_.end() || weight->second.numel != n) return false;
  Piece piece{1, entry, 0, n};
  piece.q8 = q8.is_signed ? 1 : 2;
  piece.absmax = scales_of(1, e.name, n, /*prefix=*/"");
  tensors_["optimizer." + q8.moment] = Tensor{weight->second.shape, n, {piece}};
  return true;
}

std::vector<std::pair<std::string, torch::Tensor>> ShardedCheckpointReader::other_entries() {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  if (!whole_) return out;
  for (size_t i : others_) {
    const SafetensorsEntry& e = files_[1].entries[i];
    const int64_t n = c10::multiply_integers(e.shape);
    torch::Tensor t = torch::empty({n}, torch::TensorOptions().dtype(e.dtype));
    read_raw(Piece{1, i, 0, n}, 0, n, t);
    out.emplace_back(e.name, t.view(e.shape));
  }
  return out;
}

}  // namespace hwt
