// WorkGroup: several asynchronous c10d collectives finished as one (a collective that hwtrain
// composes from simpler ones, such as an all-gather from one broadcast per rank). wait() waits for
// every part within one deadline and then rethrows the first failure; isCompleted() is true once
// every part is; its future completes when every part's has (used to time the collective).
#pragma once
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <vector>

namespace hwt {

class WorkGroup : public c10d::Work {
 public:
  explicit WorkGroup(std::vector<c10::intrusive_ptr<c10d::Work>> parts);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  bool wait(std::chrono::milliseconds timeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  std::vector<c10::intrusive_ptr<c10d::Work>> parts_;
};

}  // namespace hwt
