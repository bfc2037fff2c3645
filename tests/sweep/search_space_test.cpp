#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>

#include "hwtrain/core/error.h"
#include "hwtrain/sweep/search_space.h"

namespace hwt::sweep {
namespace {

ParamSpec space_real(const std::string& key, double lo, double hi, ParamKind kind = ParamKind::kUniform) {
  ParamSpec p;
  p.key = key;
  p.kind = kind;
  p.low = lo;
  p.high = hi;
  return p;
}

ParamSpec space_choice(const std::string& key, std::vector<std::string> choices) {
  ParamSpec p;
  p.key = key;
  p.kind = ParamKind::kChoice;
  p.choices = std::move(choices);
  return p;
}

// validate() throws a ConfigError whose message contains every one of `needles`.
void expect_space_error(const SearchSpace& space, const std::vector<std::string>& needles) {
  try {
    space.validate();
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
  }
}

TEST(SearchSpace, ValidSpacePasses) {
  SearchSpace s;
  s.params.push_back(space_real("train.lr", 1e-5, 1e-2, ParamKind::kLogUniform));
  s.params.push_back(space_real("model.n_layer", 2, 8, ParamKind::kInt));
  s.params.push_back(space_choice("train.dtype", {"bf16", "fp32"}));
  EXPECT_NO_THROW(s.validate());
  ASSERT_NE(s.find("model.n_layer"), nullptr);
  EXPECT_EQ(s.find("nope"), nullptr);
}

TEST(SearchSpace, EmptyRangeNamesKey) {
  expect_space_error({{space_real("train.lr", 0.1, 0.1)}}, {"sweep.space.train.lr", "empty range", "low must be below high"});
  expect_space_error({{space_real("train.wd", 0.2, 0.1)}}, {"sweep.space.train.wd", "[0.2, 0.1]"});
}

TEST(SearchSpace, LogRangeNeedsPositiveLow) {
  expect_space_error({{space_real("train.lr", 0, 1, ParamKind::kLogUniform)}}, {"sweep.space.train.lr", "low must be > 0"});
  auto p = space_real("model.n_layer", 0, 8, ParamKind::kInt);
  p.log = true;
  expect_space_error({{p}}, {"sweep.space.model.n_layer", "at least 1"});
  auto q = space_real("train.lr", 1e-5, 1);
  q.log = true;
  expect_space_error({{q}}, {"sweep.space.train.lr", "loguniform"});
}

TEST(SearchSpace, IntBoundsMustBeIntegral) {
  expect_space_error({{space_real("model.n_layer", 1.5, 8, ParamKind::kInt)}},
                     {"sweep.space.model.n_layer", "1.5", "must be integers"});
}

TEST(SearchSpace, ChoicesMustBeNonEmptyAndDistinct) {
  expect_space_error({{space_choice("train.dtype", {})}}, {"sweep.space.train.dtype", "empty choice list"});
  expect_space_error({{space_choice("train.dtype", {"bf16", "bf16"})}}, {"sweep.space.train.dtype", "'bf16' twice"});
}

TEST(SearchSpace, DuplicateKeyAndNonFiniteBoundsAndGridPoints) {
  expect_space_error({{space_real("train.lr", 0, 1), space_real("train.lr", 0, 2)}}, {"sweep.space.train.lr", "twice"});
  expect_space_error({{space_real("train.lr", 0, std::numeric_limits<double>::infinity())}}, {"sweep.space.train.lr", "finite"});
  auto p = space_real("train.lr", 0, 1);
  p.grid_points = 1;
  expect_space_error({{p}}, {"sweep.space.train.lr", "grid_points = 1", "at least 2"});
}

TEST(SearchSpace, OverrideValuesRoundTrip) {
  EXPECT_EQ(to_override_value(ParamValue{0.1}), "0.1");
  EXPECT_EQ(to_override_value(ParamValue{1e-5}), "1e-05");
  EXPECT_EQ(to_override_value(ParamValue{std::int64_t{12}}), "12");
  EXPECT_EQ(to_override_value(ParamValue{std::string("bf16")}), "bf16");
  for (double x : {1.0 / 3.0, 0.30000000000000004, 2.5e-300, 123456789.123456789, -7.0}) {
    EXPECT_EQ(std::strtod(to_override_value(ParamValue{x}).c_str(), nullptr), x);
  }
}

TEST(SearchSpace, FingerprintIgnoresOrderButNotContent) {
  SearchSpace a;
  a.params = {space_real("train.lr", 1e-5, 1e-2, ParamKind::kLogUniform), space_choice("train.dtype", {"bf16", "fp32"})};
  SearchSpace b;
  b.params = {a.params[1], a.params[0]};
  EXPECT_EQ(fingerprint(a), fingerprint(b));
  EXPECT_EQ(fingerprint(a), "train.dtype=choice{bf16,fp32};train.lr=loguniform[1e-05,0.01]");
  SearchSpace c = a;
  c.params[0].high = 2e-2;
  EXPECT_NE(fingerprint(a), fingerprint(c));
  SearchSpace d = a;
  d.params[1].choices.push_back("fp16");
  EXPECT_NE(fingerprint(a), fingerprint(d));
  SearchSpace e = a;
  e.params[0].grid_points = 4;
  EXPECT_NE(fingerprint(a), fingerprint(e));
}

TEST(SearchSpace, IsValueOfChecksKindAndBounds) {
  const auto lr = space_real("train.lr", 0.1, 1.0);
  EXPECT_TRUE(is_value_of(lr, ParamValue{0.5}));
  EXPECT_FALSE(is_value_of(lr, ParamValue{1.5}));
  EXPECT_FALSE(is_value_of(lr, ParamValue{std::int64_t{1}}));
  const auto dtype = space_choice("train.dtype", {"bf16"});
  EXPECT_TRUE(is_value_of(dtype, ParamValue{std::string("bf16")}));
  EXPECT_FALSE(is_value_of(dtype, ParamValue{std::string("fp8")}));
}

}  // namespace
}  // namespace hwt::sweep
