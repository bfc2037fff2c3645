#include "hwtrain/train/blockwise_quant.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace hwt {

namespace {

// bitsandbytes' create_dynamic_map(signed, max_exponent_bits = 7, total_bits = 8): for decade i
// (0..6), the midpoints of linspace(0.1, 1, f + 1) scaled by 10^(i - 6), with f = 2^i values per
// sign (signed) or 2^(i + 1) (unsigned); then 0 and 1.
torch::Tensor make_dynamic_code(bool is_signed) {
  std::vector<float> data;
  for (int i = 0; i < 7; ++i) {
    const int64_t f = is_signed ? (int64_t{1} << i) : (int64_t{1} << (i + 1));
    const double scale = std::pow(10.0, i - 6);
    for (int64_t k = 0; k < f; ++k) {
      const double lo = 0.1 + 0.9 * static_cast<double>(k) / static_cast<double>(f);
      const double hi = 0.1 + 0.9 * static_cast<double>(k + 1) / static_cast<double>(f);
      const double mean = scale * (lo + hi) / 2.0;
      data.push_back(static_cast<float>(mean));
      if (is_signed) data.push_back(static_cast<float>(-mean));
    }
  }
  data.push_back(0.0f);
  data.push_back(1.0f);
  std::sort(data.begin(), data.end());
  return torch::tensor(data, torch::kFloat32);
}

// Boundaries between consecutive code values: bucketize against them gives the nearest code.
const torch::Tensor& code_midpoints(bool is_signed) {
  static const torch::Tensor s = [] {
    const torch::Tensor& c = dynamic_code(true);
    return ((c.slice(0, 0, -1) + c.slice(0, 1)) / 2).contiguous();
  }();
  static const torch::Tensor u = [] {
    const torch::Tensor& c = dynamic_code(false);
    return ((c.slice(0, 0, -1) + c.slice(0, 1)) / 2).contiguous();
  }();
  return is_signed ? s : u;
}

}  // namespace

const torch::Tensor& dynamic_code(bool is_signed) {
  static const torch::Tensor s = make_dynamic_code(true), u = make_dynamic_code(false);
  return is_signed ? s : u;
}

BlockQuantized quantize_blockwise(const torch::Tensor& x, bool is_signed) {
  torch::NoGradGuard no_grad;
  const torch::Tensor flat = x.detach().reshape(-1).to(torch::kFloat32);
  const int64_t n = flat.numel(), blocks = (n + kQuantBlockSize - 1) / kQuantBlockSize;
  torch::Tensor padded = torch::constant_pad_nd(flat, {0, blocks * kQuantBlockSize - n}).view({blocks, kQuantBlockSize});
  BlockQuantized q;
  q.absmax = std::get<0>(padded.abs().max(1));
  const torch::Tensor scale = torch::where(q.absmax > 0, q.absmax, torch::ones_like(q.absmax)).unsqueeze(1);
  const torch::Tensor normalized = (padded / scale).clamp(is_signed ? -1.0 : 0.0, 1.0);
  const torch::Tensor mids = code_midpoints(is_signed).to(x.device());
  q.codes = torch::bucketize(normalized, mids).to(torch::kUInt8).reshape(-1).narrow(0, 0, n).contiguous();
  return q;
}

torch::Tensor dequantize_blockwise(const BlockQuantized& q, bool is_signed) {
  torch::NoGradGuard no_grad;
  const int64_t n = q.codes.numel(), blocks = q.absmax.numel();
  const torch::Tensor code = dynamic_code(is_signed).to(q.codes.device());
  torch::Tensor values = code.index({q.codes.to(torch::kLong)});
  values = torch::constant_pad_nd(values, {0, blocks * kQuantBlockSize - n}).view({blocks, kQuantBlockSize});
  return (values * q.absmax.unsqueeze(1)).reshape(-1).narrow(0, 0, n);
}

std::string eight_bit_codes_key(const std::string& moment, const std::string& name) { return moment + "q8." + name; }

std::string eight_bit_scales_key(const std::string& moment, const std::string& name) {
  return moment + "absmax." + name;
}

EightBitKey parse_eight_bit_key(const std::string& key, const std::string& prefix) {
  EightBitKey out;
  if (key.rfind(prefix, 0) != 0) return out;
  const std::string rest = key.substr(prefix.size());
  for (const std::string m : {"exp_avg.", "exp_avg_sq."}) {
    for (const std::string part : {"q8.", "absmax."}) {
      if (rest.rfind(m + part, 0) != 0) continue;
      const std::string name = rest.substr(m.size() + part.size());
      out.codes = part == "q8.";
      out.scales = !out.codes;
      out.is_signed = m == "exp_avg.";
      out.moment = prefix + m + name;
      out.scales_key = prefix + eight_bit_scales_key(m, name);
      return out;
    }
  }
  return out;
}

}  // namespace hwt
