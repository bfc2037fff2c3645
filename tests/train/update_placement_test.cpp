// Whether a failed step (an OOM, a missing low-precision kernel) may be redone on the failing rank
// alone (train/update_placement.h): only while no collective of the step has met the other ranks'.
#include "hwtrain/train/update_placement.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "hwtrain/core/error.h"
#include "hwtrain/dist/gradient_sync.h"

namespace hwt {
namespace {

class FakeSync : public GradientSync {
 public:
  void begin_micro_step(bool) override {}
  void finish() override {}
  bool collective_started() const override { return started; }
  bool started = false;
};

std::string redo_error(const UpdatePlacement& placement) {
  try {
    placement.check_redo(std::runtime_error("CUDA out of memory"), true, 7);
  } catch (const HardwareError& e) {
    return e.what();
  }
  return "";
}

TEST(UpdatePlacement, ARedoIsRefusedOnceTheStepsCollectivesBegan) {
  UpdateParts parts;
  UpdateAfterBackward placement(parts);
  EXPECT_EQ(redo_error(placement), "");  // one process

  auto sync = std::make_shared<FakeSync>();
  parts.grad_sync = sync;
  EXPECT_EQ(redo_error(placement), "");  // data parallel, the OOM came before any all-reduce
  sync->started = true;
  const std::string after_reduce = redo_error(placement);
  EXPECT_NE(after_reduce.find("out of memory in step 7"), std::string::npos) << after_reduce;
  EXPECT_NE(after_reduce.find("gradient all-reduces had begun"), std::string::npos) << after_reduce;
  EXPECT_NE(after_reduce.find("train.micro_batch_size"), std::string::npos) << after_reduce;

  sync->started = false;
  parts.model_parallel = true;
  EXPECT_NE(redo_error(placement).find("tensor or pipeline parallelism"), std::string::npos);
}

}  // namespace
}  // namespace hwt
