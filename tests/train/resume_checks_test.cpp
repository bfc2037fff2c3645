// What Trainer::resume_from refuses: a checkpoint whose files fail their checksums (the same
// verify_checkpoint as eval and generate) and a trainer_state.json whose fields are ill-typed or
// out of range, each with one line naming the file (and the key and value).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/train/sharded_checkpoint_reader.h"
#include "support/checkpoint_edit.h"
#include "trainer_fixture.h"

namespace hwt {
namespace {

// The IoError resume_from throws, or "" (with a test failure) when it resumes.
std::string resume_error(TrainerFixture& f, const fs::path& ckpt) {
  try {
    f.make("resumed")->resume_from(ckpt);
  } catch (const IoError& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "one line: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "resumed from " << ckpt;
  return "";
}

fs::path saved_checkpoint(TrainerFixture& f) {
  torch::set_num_threads(1);
  f.config.train.max_steps = 2;
  auto t = f.make("run");
  t->fit();
  return t->save_checkpoint();
}

TEST(ResumeChecks, AFlippedByteInAnyTensorFileIsRefused) {
  TrainerFixture f;
  const fs::path ckpt = saved_checkpoint(f);
  for (const std::string& file : {std::string("model.safetensors"), std::string("optimizer.safetensors")}) {
    const std::string good = read_file(ckpt / file);
    std::string bad = good;
    bad[bad.size() - 3] ^= 0x10;  // inside the last tensor: the file still parses
    std::ofstream(ckpt / file, std::ios::binary | std::ios::trunc) << bad;
    const std::string msg = resume_error(f, ckpt);
    EXPECT_NE(msg.find((ckpt / file).string()), std::string::npos) << msg;
    EXPECT_NE(msg.find("CRC32C"), std::string::npos) << msg;
    std::ofstream(ckpt / file, std::ios::binary | std::ios::trunc) << good;
  }
  EXPECT_NO_THROW(f.make("resumed")->resume_from(ckpt));
}

TEST(ResumeChecks, TrainerStateFieldsAreTypeAndRangeChecked) {
  TrainerFixture f;
  const fs::path ckpt = saved_checkpoint(f);
  const std::string original = read_file(ckpt / "trainer_state.json");
  struct Case {
    std::string key;  // dotted
    nlohmann::json value;
    std::string valid;  // a word of what the message says is valid
  };
  const std::vector<Case> cases = {
      {"step", -5, "[0, 1000000000000]"},
      {"step", int64_t{4611686018427387904}, "[0, 1000000000000]"},
      {"step", "3", "integer"},
      {"step", 2.5, "integer"},
      {"tokens_seen", -1, "integer in [0"},
      {"elapsed_seconds", -3.0, "number in [0"},
      {"lr_scale", 0.0, "(0, 1]"},
      {"lr_scale", "1", "number"},
      {"micro_batch_size", 0, "[1, "},
      {"grad_accum_steps", -2, "[1, "},
      {"world_size", 0, "[1, "},
      {"loader", nlohmann::json{{"seed", "0"}, {"epoch", -1}, {"position", 0}}, "epoch"},
      {"dataset.vocab_size", "64", "integer"},
      {"dataset.tokenizer", 7, "string"},
      {"dataset.fingerprint", -1, "unsigned"},
  };
  for (const Case& c : cases) {
    nlohmann::json j = nlohmann::json::parse(original);
    const auto dot = c.key.find('.');
    if (dot == std::string::npos) j[c.key] = c.value;
    else j[c.key.substr(0, dot)][c.key.substr(dot + 1)] = c.value;
    testing::reseal_checkpoint(ckpt, {{"trainer_state.json", j.dump(2)}});
    const std::string msg = resume_error(f, ckpt);
    SCOPED_TRACE(c.key + " = " + c.value.dump() + ": " + msg);
    EXPECT_NE(msg.find((ckpt / "trainer_state.json").string()), std::string::npos);
    EXPECT_NE(msg.find("\"" + c.key + "\""), std::string::npos);
    EXPECT_NE(msg.find(c.value.dump()), std::string::npos);
    EXPECT_NE(msg.find(c.valid), std::string::npos);
  }
  nlohmann::json j = nlohmann::json::parse(original);
  j.erase("tokens_seen");
  testing::reseal_checkpoint(ckpt, {{"trainer_state.json", j.dump(2)}});
  EXPECT_NE(resume_error(f, ckpt).find("\"tokens_seen\" is missing"), std::string::npos);
  testing::reseal_checkpoint(ckpt, {{"trainer_state.json", original}});
  EXPECT_NO_THROW(f.make("resumed")->resume_from(ckpt));
}

// A checkpoint whose rows per step and rank differ from this run's plan (e.g. a planned micro-batch
// the resumed config does not carry) is refused naming both keys and the values that continue it,
// not crashed on; the same rows split otherwise (an OOM retry's) resume with the checkpoint's split.
TEST(ResumeChecks, OtherRowsPerStepAreRefusedNamingTheBatchKeys) {
  TrainerFixture f;
  const fs::path ckpt = saved_checkpoint(f);  // 4 x 2 rows
  f.plan.micro_batch_size = 2;  // 2 x 2: half the rows
  try {
    f.make("resumed")->resume_from(ckpt);
    ADD_FAILURE() << "resumed 4 x 2 rows as 2 x 2";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("train.micro_batch_size = 4 and train.grad_accum_steps = 2"), std::string::npos) << msg;
  }
  f.plan.grad_accum_steps = 4;  // 2 x 4: the same rows
  EXPECT_NO_THROW(f.make("split")->resume_from(ckpt));
}

// Under a ZeRO-2/3 plan the checkpoint's optimizer state is kept aside for the shards (left in its
// file, unread), never loaded into the whole optimizer (a second whole copy of the moments); a
// trainer that never shards loads it when it starts to fit, so nothing is lost.
TEST(ResumeChecks, AShardedPlanKeepsTheOptimizerStateForTheShards) {
  TrainerFixture f;
  const fs::path ckpt = saved_checkpoint(f);
  f.plan.sharding = Sharding::Zero2;
  f.config.train.max_steps = 3;
  auto sharded = f.make("sharded");
  sharded->resume_from(ckpt);
  EXPECT_FALSE(sharded->optimizer().has_state());
  const ResumedState kept = sharded->take_resumed_state();
  EXPECT_TRUE(kept.optimizer.empty());  // a checkpoint written whole: each rank reads its own ranges
  ASSERT_TRUE(kept.shards);
  EXPECT_TRUE(kept.shards->whole_checkpoint());
  // Only the RNG and loss-scaler entries have been read: less than the weights alone.
  EXPECT_LT(kept.shards->bytes_read(), static_cast<int64_t>(fs::file_size(ckpt / "model.safetensors")));
  EXPECT_TRUE(sharded->take_resumed_state().empty());  // taken once

  auto unsharded = f.make("unsharded");  // a Zero2 plan with no shards attached: fit() loads it
  unsharded->resume_from(ckpt);
  unsharded->fit();
  EXPECT_TRUE(unsharded->optimizer().has_state());
  f.plan.sharding = Sharding::None;
  auto plain = f.make("plain");
  plain->resume_from(ckpt);
  EXPECT_TRUE(plain->optimizer().has_state());
  plain->fit();
  const NamedTensors a = unsharded->optimizer().state(), b = plain->optimizer().state();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i].second, b[i].second)) << a[i].first;
}

}  // namespace
}  // namespace hwt
