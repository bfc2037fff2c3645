// What Trainer::resume_from refuses: a checkpoint whose files fail their checksums (the same
// verify_checkpoint as eval and generate), with one line naming the file.
#include <gtest/gtest.h>

#include <fstream>

#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
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

}  // namespace
}  // namespace hwt
