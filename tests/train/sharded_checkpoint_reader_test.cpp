// ShardedCheckpointReader reads a range of a tensor from just the shard files holding it: a
// 10-element weight over 3 ranks (4 + 4 + 2 elements) read across a file boundary touches those two
// files and the bytes of the range only; a rank's own range touches its own file. With checksums
// checked on read, a damaged shard fails only the read that touches it, naming the file; a shard
// truncated after opening, overlapping segments and a range outside the tensor are IoErrors. A
// one-process checkpoint is read range by range the same way.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/io/checkpoint_store.h"
#include "hwtrain/io/safetensors.h"
#include "hwtrain/train/adamw.h"
#include "hwtrain/train/blockwise_quant.h"
#include "hwtrain/train/sharded_checkpoint.h"
#include "hwtrain/train/sharded_checkpoint_reader.h"
#include "support/error_of.h"
#include "support/temp_dir.h"

namespace hwt {
namespace sharded_reader_test {

namespace fs = std::filesystem;

const torch::Tensor kW = torch::arange(10, torch::kFloat).view({2, 5});

// Rank r holds w[4r, min(4r + 4, 10)) and its AdamW state (exp_avg = 10 x w, step 7); rank 2's
// weight segment is stored in bf16 (read back as fp32).
void write_three_shards(const fs::path& dir) {
  const torch::Tensor flat = kW.reshape(-1);
  for (int r = 0; r < 3; ++r) {
    const int64_t off = 4 * r, n = std::min<int64_t>(4, 10 - off);
    const std::string seg = "w@" + std::to_string(off);
    torch::Tensor w = flat.narrow(0, off, n);
    if (r == 2) w = w.to(torch::kBFloat16);
    write_checkpoint_shard(dir, r, 3, {{seg, w}},
                           {{"exp_avg." + seg, flat.narrow(0, off, n) * 10}, {"exp_avg_sq." + seg, torch::ones({n})},
                            {"step." + seg, torch::full({}, 7.0f)}});
  }
  write_sharding_manifest(dir, 3, {{"w", {2, 5}}});
  save_safetensors(dir / "optimizer.safetensors", {});
}

fs::path sealed_checkpoint(const testing::TempDir& tmp) {
  CheckpointStore store(tmp.path() / "ckpts", 10);
  return store.save(1, [](const fs::path& staging) { write_three_shards(staging); });
}

TEST(ShardedCheckpointReader, ReadsARangeFromTheFilesHoldingItOnly) {
  testing::TempDir tmp;
  const fs::path ckpt = sealed_checkpoint(tmp);
  ShardedCheckpointReader reader(ckpt, /*verify_on_read=*/true);
  EXPECT_TRUE(reader.files_read().empty());  // opening reads headers only
  EXPECT_TRUE(torch::equal(reader.read("model.w", 3, 3), torch::tensor({3.0f, 4.0f, 5.0f})));
  EXPECT_EQ(reader.files_read(), (std::vector<std::string>{shard_file_name(0, 3), shard_file_name(1, 3)}));
  EXPECT_EQ(reader.bytes_read(), 3 * 4);

  ShardedCheckpointReader own(ckpt, true);  // rank 2 of 3 on the checkpoint's world size
  EXPECT_TRUE(torch::equal(own.read("optimizer.exp_avg.w", 8, 2), torch::tensor({80.0f, 90.0f})));
  EXPECT_EQ(own.read("optimizer.step.w", 8, 0).item<float>(), 7.0f);
  EXPECT_TRUE(torch::equal(own.read("model.w", 8, 2), torch::tensor({8.0f, 9.0f})));  // bf16 on disk
  EXPECT_EQ(own.files_read(), std::vector<std::string>{shard_file_name(2, 3)});

  ShardedCheckpointReader other(ckpt, true);  // a rank of another world size: its step beside its moments
  EXPECT_EQ(other.read("optimizer.step.w", 5, 0).item<float>(), 7.0f);
  EXPECT_EQ(other.files_read(), std::vector<std::string>{shard_file_name(1, 3)});

  EXPECT_TRUE(torch::equal(own.whole("model.w"), kW));
  EXPECT_EQ(own.parameters().size(), 1u);
  EXPECT_NE(testing::error_of<IoError>([&] { own.read("model.w", 8, 3); }).find("outside 'model.w'"), std::string::npos);
  EXPECT_NE(testing::error_of<IoError>([&] { own.read("model.v", 0, 1); }).find("no tensor 'model.v'"), std::string::npos);
}

TEST(ShardedCheckpointReader, ADamagedShardFailsOnlyTheReadsThatTouchIt) {
  testing::TempDir tmp;
  const fs::path ckpt = sealed_checkpoint(tmp);
  const fs::path shard1 = ckpt / shard_file_name(1, 3);
  {
    std::fstream f(shard1, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);  // the last data byte: the header stays valid
    f.put('\x7f');
  }
  ShardedCheckpointReader reader(ckpt, true);
  EXPECT_NO_THROW(reader.read("model.w", 0, 4));  // rank 0's own file is intact
  const std::string what = testing::error_of<IoError>([&] { reader.read("model.w", 4, 4); });
  EXPECT_NE(what.find(shard1.string()), std::string::npos) << what;
  EXPECT_NE(what.find("CRC32C"), std::string::npos) << what;
  EXPECT_NO_THROW(ShardedCheckpointReader(ckpt, false).read("model.w", 4, 4));  // unchecked: the caller verified

  ShardedCheckpointReader opened(ckpt, false);
  const fs::path shard2 = ckpt / shard_file_name(2, 3);
  fs::resize_file(shard2, fs::file_size(shard2) - 24);  // all of its data: 2 x 8 bytes of moments, a step, 2 bf16
  EXPECT_NE(testing::error_of<IoError>([&] { opened.whole("optimizer.exp_avg.w"); }).find("shorter than its header"),
            std::string::npos);
}

// With chunk checksums (here 4 KiB chunks of a 3000-element weight's shard file), a damaged byte
// fails only the reads whose bytes share its chunk, and a read checks the chunks it touches (and
// the header's), not the file.
TEST(ShardedCheckpointReader, ADamagedChunkFailsOnlyTheReadsThatTouchIt) {
  testing::TempDir tmp;
  const torch::Tensor w = torch::arange(3000, torch::kFloat);
  CheckpointStore store(tmp.path() / "ckpts", 10, 4096);
  const fs::path ckpt = store.save(1, [&](const fs::path& staging) {
    write_checkpoint_shard(staging, 0, 1, {{"w@0", w}},
                           {{"exp_avg.w@0", w * 2}, {"exp_avg_sq.w@0", w * 3}, {"step.w@0", torch::full({}, 7.0f)}});
    write_sharding_manifest(staging, 1, {{"w", {3000}}});
    save_safetensors(staging / "optimizer.safetensors", {});
  });
  const fs::path shard = ckpt / shard_file_name(0, 1);
  const std::string file = read_file(shard);
  uint64_t header = 0;
  std::memcpy(&header, file.data(), 8);
  const SafetensorsHeader h = parse_safetensors_header(shard, file.size(), std::string_view(file).substr(8, header));
  uint64_t moment = 0;
  for (const auto& e : h.entries) {
    if (e.name == "optimizer.exp_avg_sq.w@0") moment = h.data_start + e.begin;
  }
  ASSERT_GT(moment, 0u);
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(moment + 4 * 2000));  // element 2000 of the second moment
    f.put('\x7f');
  }
  ShardedCheckpointReader reader(ckpt, true);
  EXPECT_TRUE(torch::equal(reader.read("model.w", 0, 3000), w));
  EXPECT_TRUE(torch::equal(reader.read("optimizer.exp_avg_sq.w", 0, 100), w.narrow(0, 0, 100) * 3));
  EXPECT_LT(reader.bytes_checked(), static_cast<int64_t>(file.size()));
  const std::string what = testing::error_of<IoError>([&] { reader.read("optimizer.exp_avg_sq.w", 1990, 20); });
  EXPECT_NE(what.find(shard.string() + " bytes ["), std::string::npos) << what;
  EXPECT_NE(what.find("CRC32C"), std::string::npos) << what;
}

// A parameter of no elements has no segments (sharding gives it none): not missing, read empty.
TEST(ShardedCheckpointReader, AParameterOfNoElementsNeedsNoSegments) {
  testing::TempDir tmp;
  write_three_shards(tmp.path());
  write_sharding_manifest(tmp.path(), 3, {{"w", {2, 5}}, {"e", {0, 4}}});
  ShardedCheckpointReader reader(tmp.path());
  EXPECT_EQ(reader.whole("model.e").sizes(), (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(reader.whole("optimizer.exp_avg.e").numel(), 0);
  EXPECT_EQ(reader.read("optimizer.step.e", 0, 0).item<float>(), 0.0f);
}

TEST(ShardedCheckpointReader, OverlappingSegmentsAreRefusedBeforeAnyRead) {
  testing::TempDir tmp;
  write_three_shards(tmp.path());
  const torch::Tensor five = torch::zeros({5});  // rank 1 claims w[4, 9): over rank 2's w[8, 10)
  write_checkpoint_shard(tmp.path(), 1, 3, {{"w@4", five}},
                         {{"exp_avg.w@4", five}, {"exp_avg_sq.w@4", five}, {"step.w@4", torch::full({}, 7.0f)}});
  const std::string what = testing::error_of<IoError>([&] { ShardedCheckpointReader reader(tmp.path()); });
  EXPECT_NE(what.find("segments overlap at element 8"), std::string::npos) << what;
}

// A one-process checkpoint read the same way: a range of a weight or moment reads those bytes only,
// the loss scaler and RNG state come back in their own dtypes, a damaged file fails the read that
// touches it; a checkpoint without moments yet: null, read whole instead.
TEST(ShardedCheckpointReader, AOneProcessCheckpointIsReadRangeByRange) {
  testing::TempDir tmp;
  const torch::Tensor rng = torch::arange(6, torch::kUInt8);
  save_safetensors(tmp / "model.safetensors", {{"w", kW}, {"b", torch::ones({3})}});
  save_safetensors(tmp / "optimizer.safetensors",
                   {{"exp_avg.w", kW * 10}, {"exp_avg_sq.w", kW * 100}, {"step.w", torch::full({}, 7.0f)},
                    {"exp_avg.b", torch::zeros({3})}, {"exp_avg_sq.b", torch::zeros({3})},
                    {"step.b", torch::full({}, 7.0f)}, {"rng.cpu", rng}, {"scaler.scale", torch::full({}, 2.0, torch::kDouble)}});
  auto reader = ShardedCheckpointReader::open_whole(tmp.path(), false);
  ASSERT_TRUE(reader);
  EXPECT_TRUE(reader->whole_checkpoint());
  EXPECT_EQ(reader->parameters().size(), 2u);
  EXPECT_TRUE(torch::equal(reader->read("optimizer.exp_avg.w", 6, 3), torch::tensor({60.0f, 70.0f, 80.0f})));
  EXPECT_EQ(reader->bytes_read(), 3 * 4);
  EXPECT_EQ(reader->files_read(), std::vector<std::string>{"optimizer.safetensors"});
  EXPECT_TRUE(torch::equal(reader->whole("model.w"), kW));
  EXPECT_EQ(reader->read("optimizer.step.w", 4, 0).item<float>(), 7.0f);
  std::map<std::string, torch::Tensor> others;
  for (auto& [name, t] : reader->other_entries()) others[name] = t;
  ASSERT_EQ(others.size(), 2u);
  EXPECT_TRUE(torch::equal(others.at("rng.cpu"), rng));
  EXPECT_EQ(others.at("scaler.scale").scalar_type(), torch::kDouble);

  save_safetensors(tmp / "optimizer.safetensors", {{"rng.cpu", rng}});  // no moments yet
  EXPECT_FALSE(ShardedCheckpointReader::open_whole(tmp.path(), false));
}

// A one-process checkpoint with 8-bit moments (a weight of 3 blocks, and a small one whose moments
// stay fp32) is read by range too: a range across a block boundary dequantizes those blocks' codes
// only, and the whole state comes back with the codes and scales as stored (loaded into a new
// 8-bit AdamW, exactly the saved state). Codes without their scales are named.
TEST(ShardedCheckpointReader, AOneProcessEightBitCheckpointIsReadByRange) {
  testing::TempDir tmp;
  torch::manual_seed(3);
  AdamWOptions eight_bit;
  eight_bit.int8_moments = true;
  const torch::Tensor w = torch::randn({3, 2000}).requires_grad_(true), b = torch::randn({5}).requires_grad_(true);
  AdamW opt({{"w", w}, {"b", b}}, {}, eight_bit);
  for (int step = 0; step < 2; ++step) {
    w.mutable_grad() = torch::randn({3, 2000});
    b.mutable_grad() = torch::randn({5});
    opt.step(1e-2);
  }
  const NamedTensors state = opt.state();
  std::map<std::string, torch::Tensor> saved(state.begin(), state.end());
  ASSERT_TRUE(saved.count("exp_avg.q8.w") && saved.count("exp_avg.b"));
  save_safetensors(tmp / "model.safetensors", {{"w", w.detach()}, {"b", b.detach()}});
  NamedTensors file = state;
  file.emplace_back("rng.cpu", torch::arange(4, torch::kUInt8));
  file.emplace_back("exp_avg.q8.ghost", torch::zeros({10}, torch::kUInt8));  // of no weight: other entries, both
  file.emplace_back("exp_avg.absmax.ghost", torch::ones({1}));
  save_safetensors(tmp / "optimizer.safetensors", file);

  auto reader = ShardedCheckpointReader::open_whole(tmp.path(), false);
  ASSERT_TRUE(reader);
  const torch::Tensor m = dequantize_blockwise({saved.at("exp_avg_sq.q8.w"), saved.at("exp_avg_sq.absmax.w")}, false);
  EXPECT_TRUE(torch::equal(reader->read("optimizer.exp_avg_sq.w", 2040, 20), m.narrow(0, 2040, 20)));
  EXPECT_EQ(reader->bytes_read(), 2 * kQuantBlockSize + 2 * 4) << "the codes of the two blocks it touches, and their scales";
  std::set<std::string> others;
  for (const auto& [name, t] : reader->other_entries()) others.insert(name);
  EXPECT_EQ(others, (std::set<std::string>{"rng.cpu", "exp_avg.q8.ghost", "exp_avg.absmax.ghost"}))
      << "the weights' scales are read with their codes";

  const NamedTensors back = read_sharded_optimizer_state(*reader, {}, /*eight_bit_as_stored=*/true);
  for (const auto& [name, t] : read_sharded_optimizer_state(*reader)) {  // dequantized, for a split model to cut
    EXPECT_EQ(name.find("q8."), std::string::npos) << name;
    if (name == "exp_avg_sq.w") {
      EXPECT_TRUE(torch::equal(t.reshape(-1), m)) << name;
    }
  }
  EXPECT_EQ(back.size(), saved.size());
  const torch::Tensor w2 = w.detach().clone().requires_grad_(true), b2 = b.detach().clone().requires_grad_(true);
  AdamW fresh({{"w", w2}, {"b", b2}}, {}, eight_bit);
  fresh.load_state(back);
  for (const auto& [name, t] : fresh.state()) EXPECT_TRUE(torch::equal(t, saved.at(name))) << name;

  saved.erase("exp_avg.absmax.w");
  save_safetensors(tmp / "optimizer.safetensors", NamedTensors(saved.begin(), saved.end()));
  const std::string what = testing::error_of<IoError>([&] { ShardedCheckpointReader::open_whole(tmp.path(), false); });
  EXPECT_NE(what.find("the 8-bit codes 'exp_avg.q8.w' lack their block scales 'exp_avg.absmax.w'"), std::string::npos)
      << what;
}

// A ZeRO-2/3 shard's 8-bit moments (AdamW's codes and block scales of a segment) read back as the
// values they encode, a range across a block boundary too; a segment read as stored loads into a
// new 8-bit AdamW with the same codes and scales, so a resume on the same world size is exact.
TEST(ShardedCheckpointReader, EightBitMomentsReadBackAsTheirValues) {
  testing::TempDir tmp;
  torch::manual_seed(3);
  AdamWOptions eight_bit;
  eight_bit.int8_moments = true;
  const torch::Tensor w = torch::randn({6000}).requires_grad_(true);
  AdamW opt({{"w@0", w}}, {}, eight_bit);
  for (int step = 0; step < 2; ++step) {
    w.mutable_grad() = torch::randn({6000});
    opt.step(1e-2);
  }
  const NamedTensors state = opt.state();
  std::map<std::string, torch::Tensor> saved(state.begin(), state.end());
  ASSERT_TRUE(saved.count("exp_avg.q8.w@0"));
  write_checkpoint_shard(tmp.path(), 0, 1, {{"w@0", w.detach()}}, state);
  write_sharding_manifest(tmp.path(), 1, {{"w", {6000}}});
  save_safetensors(tmp / "optimizer.safetensors", {});
  ShardedCheckpointReader reader(tmp.path());
  const torch::Tensor m = dequantize_blockwise({saved.at("exp_avg.q8.w@0"), saved.at("exp_avg.absmax.w@0")}, true);
  EXPECT_TRUE(torch::equal(reader.read("optimizer.exp_avg.w", 2000, 100), m.narrow(0, 2000, 100)));

  // The segment as stored, loaded into a new 8-bit AdamW: its codes and scales exactly.
  const auto codes = reader.eight_bit("optimizer.exp_avg.w", 0, 6000), codes_sq = reader.eight_bit("optimizer.exp_avg_sq.w", 0, 6000);
  ASSERT_TRUE(codes && codes_sq);
  EXPECT_FALSE(reader.eight_bit("optimizer.exp_avg.w", 0, 3000));  // another segmentation: dequantized values only
  const torch::Tensor w2 = w.detach().clone().requires_grad_(true);
  AdamW fresh({{"w@0", w2}}, {}, eight_bit);
  fresh.load_state({{"exp_avg.q8.w@0", codes->first}, {"exp_avg.absmax.w@0", codes->second},
                    {"exp_avg_sq.q8.w@0", codes_sq->first}, {"exp_avg_sq.absmax.w@0", codes_sq->second},
                    {"step.w@0", reader.read("optimizer.step.w", 0, 0)}});
  for (const auto& [name, t] : fresh.state()) EXPECT_TRUE(torch::equal(t, saved.at(name))) << name;
}

}  // namespace sharded_reader_test
}  // namespace hwt
