// ProcessGroupComm: a c10d process group (usually a mesh's tensor-parallel subgroup) as the
// model's TensorParallelComm (model/tensor_parallel.h). Every operation blocks, bounded by
// dist.timeout, and a failure names the rank to blame like every other collective.
#pragma once
#include <memory>

#include "hwtrain/dist/process_group.h"
#include "hwtrain/model/tensor_parallel.h"

namespace hwt {

class ProcessGroupComm : public TensorParallelComm {
 public:
  explicit ProcessGroupComm(std::shared_ptr<ProcessGroup> group) : group_(std::move(group)) {}
  int rank() const override { return group_->rank(); }
  int size() const override { return group_->world_size(); }
  void all_reduce_sum(torch::Tensor& t) override;
  torch::Tensor all_gather(const torch::Tensor& t) override;
  ProcessGroup& group() { return *group_; }

 private:
  std::shared_ptr<ProcessGroup> group_;
};

}  // namespace hwt
