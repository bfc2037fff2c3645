// Block-wise 8-bit quantization of optimizer moments, as in bitsandbytes' 8-bit Adam (Dettmers et
// al. 2022, "8-bit Optimizers via Block-wise Quantization"): a tensor is cut into blocks of 2048
// elements; each block keeps its absolute maximum (fp32) and each element the index (uint8) of the
// nearest value of a 256-entry "dynamic" code of x / absmax. The dynamic code (bitsandbytes'
// create_dynamic_map, max_exponent_bits = 7) spaces its values by decades from 1e-6 to 1, so small
// moments keep their relative precision: a signed code for the first moment, an unsigned one (all
// 256 values non-negative) for the second. 2 bytes of state per parameter instead of 8.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <string>

namespace hwt {

constexpr int64_t kQuantBlockSize = 2048;

struct BlockQuantized {
  torch::Tensor codes;   // uint8, one per element (flattened)
  torch::Tensor absmax;  // fp32, one per block
  int64_t bytes() const { return codes.numel() + absmax.numel() * 4; }
};

// The 256 code values, ascending, in [-1, 1] (signed) or [0, 1] (unsigned), on the CPU.
const torch::Tensor& dynamic_code(bool is_signed);

// `x` (any shape, fp32) quantized block by block; the codes live on x's device.
BlockQuantized quantize_blockwise(const torch::Tensor& x, bool is_signed);
// Back to fp32, flattened (numel = q.codes.numel()).
torch::Tensor dequantize_blockwise(const BlockQuantized& q, bool is_signed);

// The keys 8-bit AdamW moments are saved under (train/adamw.h), in one place: moment "<m><name>"
// (m = "exp_avg.", the signed code, or "exp_avg_sq.") as its codes "<m>q8.<name>" and their block
// scales "<m>absmax.<name>". `prefix` precedes them all ("optimizer." in a checkpoint's files).
std::string eight_bit_codes_key(const std::string& moment, const std::string& name);   // moment: "exp_avg."
std::string eight_bit_scales_key(const std::string& moment, const std::string& name);
struct EightBitKey {
  bool codes = false, scales = false;  // which of the two `key` names (neither: another entry)
  bool is_signed = false;              // the first moment's
  std::string moment;                  // "<prefix><m><name>": the fp32 moment the codes stand for
  std::string scales_key;              // codes: "<prefix><m>absmax.<name>", the scales beside them
};
EightBitKey parse_eight_bit_key(const std::string& key, const std::string& prefix = "");

}  // namespace hwt
