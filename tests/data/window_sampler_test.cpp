#include <gtest/gtest.h>

#include "hwtrain/core/error.h"
#include "hwtrain/data/window_sampler.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

using testing::TempDir;

// Token i has value i % vocab, so a window's content reveals its offset.
std::vector<int32_t> sequence(int64_t n, int64_t vocab) {
  std::vector<int32_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>(i % vocab);
  return v;
}

struct Fixture {
  TempDir dir;
  std::unique_ptr<TokenFile> file;
  explicit Fixture(int64_t vocab = 70000, int64_t n_train = 5000, int64_t n_val = 300) {
    write_token_file(dir / "x.hwt", vocab, "test", 1, sequence(n_train, vocab), sequence(n_val, vocab));
    file = std::make_unique<TokenFile>(dir / "x.hwt");
  }
};

TEST(WindowSampler, YIsXShiftedAndWindowsAreInRange) {
  for (int64_t vocab : {257, 70000}) {  // uint16 and uint32 files
    Fixture fx(vocab, 1000);
    WindowSampler s(*fx.file, Split::kTrain, 16, 42);
    Batch b = s.next_batch(32);
    ASSERT_EQ(b.x_BT.sizes(), (std::vector<int64_t>{32, 16}));
    ASSERT_EQ(b.y_BT.scalar_type(), torch::kLong);
    auto x = b.x_BT.accessor<int64_t, 2>();
    auto y = b.y_BT.accessor<int64_t, 2>();
    TokenSpan train = fx.file->train();
    for (int64_t r = 0; r < 32; ++r) {
      int64_t offset = s.window_offset(r);
      ASSERT_GE(offset, 0);
      ASSERT_LE(offset + 16, train.size() - 1);  // x and y both inside the split
      for (int64_t t = 0; t < 16; ++t) {
        ASSERT_EQ(x[r][t], train[offset + t]);
        ASSERT_EQ(y[r][t], train[offset + t + 1]);
      }
    }
  }
}

TEST(WindowSampler, SameSeedSameStreamOtherSeedOtherStream) {
  Fixture fx;
  WindowSampler a(*fx.file, Split::kTrain, 8, 1), b(*fx.file, Split::kTrain, 8, 1), c(*fx.file, Split::kTrain, 8, 2);
  for (int i = 0; i < 3; ++i) {
    Batch ba = a.next_batch(4), bb = b.next_batch(4), bc = c.next_batch(4);
    EXPECT_TRUE(torch::equal(ba.x_BT, bb.x_BT));
    EXPECT_FALSE(torch::equal(ba.x_BT, bc.x_BT));
  }
  EXPECT_EQ(a.position(), 12);
}

TEST(WindowSampler, SetPositionResumesTheSameStream) {
  Fixture fx;
  WindowSampler full(*fx.file, Split::kTrain, 8, 7);
  std::vector<torch::Tensor> xs, ys;
  torch::Tensor x, y;
  for (int i = 0; i < 6; ++i) {
    full.next_batch(5, x, y);
    xs.push_back(x.clone());
    ys.push_back(y.clone());
  }
  WindowSampler resumed(*fx.file, Split::kTrain, 8, 7);
  resumed.set_position(15);  // after 3 batches of 5
  for (int i = 3; i < 6; ++i) {
    resumed.next_batch(5, x, y);
    EXPECT_TRUE(torch::equal(x, xs[i])) << "batch " << i;
    EXPECT_TRUE(torch::equal(y, ys[i])) << "batch " << i;
  }
  EXPECT_THROW(resumed.set_position(-1), DataError);
}

TEST(WindowSampler, WindowsCoverTheWholeRange) {
  Fixture fx(257, 40, 10);
  WindowSampler s(*fx.file, Split::kTrain, 8, 3);  // 32 possible start offsets
  std::vector<int> seen(s.num_start_offsets(), 0);
  for (int64_t d = 0; d < 2000; ++d) ++seen[s.window_offset(d)];
  for (int64_t o = 0; o < s.num_start_offsets(); ++o) EXPECT_GT(seen[o], 20) << "offset " << o;
}

TEST(WindowSampler, BatchAtIsFixedAndIndependentOfPosition) {
  Fixture fx;
  WindowSampler eval(*fx.file, Split::kVal, 8, 99);
  Batch first = eval.batch_at(2, 4);
  eval.next_batch(4);
  eval.next_batch(4);
  Batch again = eval.batch_at(2, 4);
  EXPECT_TRUE(torch::equal(first.x_BT, again.x_BT));
  EXPECT_EQ(eval.position(), 8);
  WindowSampler fresh(*fx.file, Split::kVal, 8, 99);
  fresh.set_position(8);
  EXPECT_TRUE(torch::equal(fresh.next_batch(4).x_BT, first.x_BT));  // batch k = draws k*B ..
}

TEST(WindowSampler, ReusesTensorsOfTheRightShape) {
  Fixture fx;
  WindowSampler s(*fx.file, Split::kTrain, 8, 5);
  torch::Tensor x, y;
  s.next_batch(3, x, y);
  void* ptr = x.data_ptr();
  s.next_batch(3, x, y);
  EXPECT_EQ(x.data_ptr(), ptr);
  s.next_batch(2, x, y);
  EXPECT_EQ(x.size(0), 2);
}

TEST(WindowSampler, TooFewTokensNamesTheSplitAndTheFix) {
  Fixture fx(257, 1000, 10);
  try {
    WindowSampler s(*fx.file, Split::kVal, 10, 1);
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("validation split of " + (fx.dir / "x.hwt").string() + " has 10 tokens"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("model.block_size+1 = 11"), std::string::npos) << msg;
    EXPECT_NE(msg.find("data.val_fraction when training on text"), std::string::npos) << msg;
    // A file prepared by hand has its split fixed: prepare's flag is the way.
    EXPECT_NE(msg.find("hwtrain prepare --val-fraction"), std::string::npos) << msg;
  }
  EXPECT_NO_THROW(WindowSampler(*fx.file, Split::kVal, 9, 1));  // exactly block_size + 1 tokens
}

}  // namespace
}  // namespace hwt
