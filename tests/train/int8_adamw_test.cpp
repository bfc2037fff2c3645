// 8-bit AdamW moments (train/blockwise_quant.h, AdamWOptions::int8_moments): the dynamic code, the
// block-wise round trip, the state's size (<= 27% of fp32's), its checkpoint form and conversions,
// and an optimization that tracks fp32 AdamW.
#include <gtest/gtest.h>

#include "hwtrain/train/adamw.h"
#include "hwtrain/train/blockwise_quant.h"

namespace hwt {
namespace {

TEST(BlockwiseQuant, DynamicCodesSpanTheirRangeAscending) {
  for (bool is_signed : {true, false}) {
    const torch::Tensor& c = dynamic_code(is_signed);
    ASSERT_EQ(c.numel(), 256);
    EXPECT_TRUE((c.slice(0, 1) >= c.slice(0, 0, -1)).all().item<bool>());
    EXPECT_FLOAT_EQ(c[-1].item<float>(), 1.0f);
    EXPECT_TRUE((c == 0).any().item<bool>());
    EXPECT_NEAR(c[0].item<float>(), is_signed ? -0.99297f : 0.0f, 1e-4);  // bitsandbytes' extremes
  }
}

TEST(BlockwiseQuant, RoundTripKeepsRelativePrecisionPerBlock) {
  torch::manual_seed(0);
  // Blocks of very different magnitudes: each is scaled by its own absmax.
  torch::Tensor x = torch::randn({3 * kQuantBlockSize + 100});
  x.narrow(0, 0, kQuantBlockSize).mul_(1e-6);
  x.narrow(0, kQuantBlockSize, kQuantBlockSize).mul_(1e3);
  const BlockQuantized q = quantize_blockwise(x, true);
  EXPECT_EQ(q.codes.scalar_type(), torch::kUInt8);
  EXPECT_EQ(q.codes.numel(), x.numel());
  EXPECT_EQ(q.absmax.numel(), 4);
  const torch::Tensor back = dequantize_blockwise(q, true);
  for (int64_t b = 0; b < 4; ++b) {
    const int64_t n = std::min<int64_t>(kQuantBlockSize, x.numel() - b * kQuantBlockSize);
    const torch::Tensor xb = x.narrow(0, b * kQuantBlockSize, n), yb = back.narrow(0, b * kQuantBlockSize, n);
    const double absmax = xb.abs().max().item<double>();
    // The dynamic code's largest gap (0.9 / 64 around 1 in the signed code) bounds the error.
    EXPECT_LE((xb - yb).abs().max().item<double>(), absmax * 0.9 / 64 / 2 * 1.01) << "block " << b;
    EXPECT_LT(((xb - yb).norm() / xb.norm()).item<double>(), 0.02) << "block " << b;
  }
  const torch::Tensor v = torch::rand({5000}).pow(4);  // second moments: non-negative, skewed
  const torch::Tensor v_back = dequantize_blockwise(quantize_blockwise(v, false), false);
  EXPECT_TRUE((v_back >= 0).all().item<bool>());
  EXPECT_LT(((v - v_back).norm() / v.norm()).item<double>(), 0.02);
}

struct Problem {
  torch::Tensor w, small, x, y;
  double loss() const { return (torch::mm(x, w).add(small) - y).pow(2).mean().item<double>(); }
};

// A least-squares problem with a 128x96 weight (quantized) and a 96-element bias (too small to be).
Problem make_problem() {
  torch::manual_seed(1);
  Problem p;
  p.w = torch::zeros({128, 96}, torch::requires_grad());
  p.small = torch::zeros({96}, torch::requires_grad());
  p.x = torch::randn({256, 128});
  p.y = torch::mm(p.x, torch::randn({128, 96})) + 0.5;
  return p;
}

double train(Problem& p, AdamW& opt, int steps) {
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    (torch::mm(p.x, p.w).add(p.small) - p.y).pow(2).mean().backward();
    opt.step(0.02);
  }
  return p.loss();
}

TEST(Int8AdamW, TracksFp32AdamWAndStoresAQuarterOfItsState) {
  AdamWOptions fp32;
  fp32.weight_decay = 0.01;
  AdamWOptions int8 = fp32;
  int8.int8_moments = true;
  Problem a = make_problem(), b = make_problem();
  AdamW full({{"w", a.w}}, {{"b", a.small}}, fp32), eight({{"w", b.w}}, {{"b", b.small}}, int8);
  const double start = a.loss();
  for (int steps : {50, 50}) {  // the curves side by side, while the loss is far from its floor
    const double la = train(a, full, steps), lb = train(b, eight, steps);
    EXPECT_NEAR(lb / la, 1.0, 0.05) << "fp32 " << la << ", int8 " << lb << " (from " << start << ")";
  }
  const double la = train(a, full, 200), lb = train(b, eight, 200);  // both converge
  EXPECT_LT(la, 1e-3 * start);
  EXPECT_LT(lb, 1e-3 * start) << "fp32 " << la << ", int8 " << lb;
  // 2 bytes and a scale per 2048 for the weight; the bias keeps fp32 moments (under 4096 elements).
  const double ratio = static_cast<double>(eight.state_bytes()) / static_cast<double>(full.state_bytes());
  EXPECT_LE(ratio, 0.27);
  EXPECT_GE(ratio, 0.25);
}

TEST(Int8AdamW, StateRoundTripsAndConvertsFromAndToFp32) {
  AdamWOptions int8;
  int8.int8_moments = true;
  Problem a = make_problem();
  AdamW eight({{"w", a.w}}, {{"b", a.small}}, int8);
  train(a, eight, 5);
  const auto state = eight.state();
  std::map<std::string, torch::Tensor> by_name(state.begin(), state.end());
  ASSERT_TRUE(by_name.count("exp_avg.q8.w"));
  ASSERT_TRUE(by_name.count("exp_avg_sq.absmax.w"));
  ASSERT_TRUE(by_name.count("exp_avg.b"));  // small: fp32
  EXPECT_EQ(by_name["exp_avg.q8.w"].scalar_type(), torch::kUInt8);

  Problem b = make_problem();
  AdamW again({{"w", b.w}}, {{"b", b.small}}, int8);
  again.load_state(state);
  for (const auto& [name, t] : again.state()) EXPECT_TRUE(torch::equal(t, by_name[name])) << name;

  // An int8 checkpoint resumed with fp32 moments, and back: the values survive the conversion.
  Problem c = make_problem();
  AdamW full({{"w", c.w}}, {{"b", c.small}}, AdamWOptions{});
  full.load_state(state);
  std::map<std::string, torch::Tensor> f;
  for (const auto& [name, t] : full.state()) f[name] = t;
  const torch::Tensor m = dequantize_blockwise({by_name["exp_avg.q8.w"], by_name["exp_avg.absmax.w"]}, true);
  EXPECT_TRUE(torch::allclose(f["exp_avg.w"].reshape(-1), m));
  AdamW back({{"w", b.w}}, {{"b", b.small}}, int8);
  back.load_state(full.state());
  std::map<std::string, torch::Tensor> r;
  for (const auto& [name, t] : back.state()) r[name] = t;
  EXPECT_TRUE(torch::equal(r["exp_avg.q8.w"], by_name["exp_avg.q8.w"]));

  std::vector<std::pair<std::string, torch::Tensor>> missing = state;
  missing.erase(missing.begin());
  EXPECT_THROW(again.load_state(missing), std::exception);
}

// A sharded run replaces its whole optimizer before any step: with defer_state it never holds the
// whole moments; a step (or a load) allocates them, and the update equals an eager optimizer's.
TEST(AdamWDeferredState, AllocatesMomentsOnlyWhenFirstUsed) {
  AdamWOptions deferred;
  deferred.defer_state = true;
  Problem a = make_problem(), b = make_problem();
  AdamW lazy({{"w", a.w}}, {{"b", a.small}}, deferred), eager({{"w", b.w}}, {{"b", b.small}}, AdamWOptions{});
  EXPECT_EQ(lazy.state_bytes(), 0);
  EXPECT_FALSE(lazy.has_state());
  EXPECT_EQ(train(a, lazy, 3), train(b, eager, 3));
  EXPECT_EQ(lazy.state_bytes(), eager.state_bytes());
}

// The 8-bit state's keys are named and parsed in one place (blockwise_quant.h): the codes and the
// scales of either moment, with or without a checkpoint's prefix, and nothing else taken for them.
TEST(EightBitKeys, NamesAndParsesTheCodesAndScalesOfEitherMoment) {
  EXPECT_EQ(eight_bit_codes_key("exp_avg.", "h.0.w"), "exp_avg.q8.h.0.w");
  EXPECT_EQ(eight_bit_scales_key("exp_avg_sq.", "h.0.w"), "exp_avg_sq.absmax.h.0.w");
  const EightBitKey codes = parse_eight_bit_key("optimizer.exp_avg_sq.q8.h.0.w@12", "optimizer.");
  EXPECT_TRUE(codes.codes);
  EXPECT_FALSE(codes.scales);
  EXPECT_FALSE(codes.is_signed);
  EXPECT_EQ(codes.moment, "optimizer.exp_avg_sq.h.0.w@12");
  EXPECT_EQ(codes.scales_key, "optimizer.exp_avg_sq.absmax.h.0.w@12");
  const EightBitKey scales = parse_eight_bit_key(eight_bit_scales_key("exp_avg.", "wte.weight"));
  EXPECT_TRUE(scales.scales);
  EXPECT_TRUE(scales.is_signed);
  EXPECT_EQ(scales.moment, "exp_avg.wte.weight");
  for (const char* other : {"exp_avg.h.0.w", "step.h.0.w", "exp_avg.q8x.w", "optimizer.exp_avg.q8.w"}) {
    const EightBitKey k = parse_eight_bit_key(other);
    EXPECT_FALSE(k.codes || k.scales) << other;
  }
}

}  // namespace
}  // namespace hwt
