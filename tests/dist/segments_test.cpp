// join_segments: pieces named "<key>@<offset>" become whole tensors; scalars keep their first copy;
// unknown keys, bad offsets, element counts that do not add up (checked before anything is
// allocated), pieces past the end and overlaps are IoErrors naming them.
#include <gtest/gtest.h>

#include "hwtrain/core/error.h"
#include "hwtrain/dist/segments.h"

namespace hwt {
namespace {

ShapeOf shapes() {
  return [](const std::string& key) -> std::optional<std::vector<int64_t>> {
    if (key == "w") return std::vector<int64_t>{2, 3};
    if (key == "step.w") return std::vector<int64_t>{};
    return std::nullopt;
  };
}

std::string error_of(const SegmentList& entries) {
  try {
    join_segments(entries, shapes(), "test shards");
  } catch (const IoError& e) {
    return e.what();
  }
  return "";
}

TEST(Segments, JoinWholeTensorsAndPassTheRestThrough) {
  const SegmentList entries = {{"w@4", torch::tensor({4.f, 5.f})},
                               {"rng", torch::ones({1})},
                               {"w@0", torch::tensor({0.f, 1.f, 2.f, 3.f})},
                               {"step.w@0", torch::tensor(7.f)},
                               {"step.w@4", torch::tensor(7.f)}};
  const SegmentList whole = join_segments(entries, shapes(), "test shards");
  ASSERT_EQ(whole.size(), 3u);
  EXPECT_EQ(whole[0].first, "rng");
  EXPECT_EQ(whole[1].first, "w");
  EXPECT_TRUE(torch::equal(whole[1].second, torch::arange(6, torch::kFloat).view({2, 3})));
  EXPECT_EQ(whole[2].first, "step.w");
  EXPECT_EQ(whole[2].second.dim(), 0);
}

TEST(Segments, RefuseWhatDoesNotFit) {
  EXPECT_NE(error_of({{"w@0", torch::zeros({4})}}).find("hold 4 elements, its shape has 6"), std::string::npos);
  EXPECT_NE(error_of({{"w@0", torch::zeros({4})}, {"w@2", torch::zeros({2})}}).find("overlap at element 2"),
            std::string::npos);  // as many elements as the tensor, but one shard twice
  EXPECT_NE(error_of({{"w@0", torch::zeros({2})}, {"w@4", torch::zeros({4})}}).find("runs past"), std::string::npos);
  EXPECT_NE(error_of({{"step.w@0", torch::zeros({3})}}).find("hold 3 elements, its shape has 1"), std::string::npos);
  EXPECT_NE(error_of({{"v@0", torch::zeros({4})}}).find("'v@0' belongs to no tensor"), std::string::npos);
  EXPECT_NE(error_of({{"w@x1", torch::zeros({4})}}).find("no valid element offset"), std::string::npos);
  EXPECT_NE(error_of({{"w@", torch::zeros({4})}}).find("test shards"), std::string::npos);
}

}  // namespace
}  // namespace hwt
