// ProcessGroup's asynchronous collectives (dist/process_group.h): thin calls into the c10d backend
// with the run's timeout; wait() (process_group.cpp) finishes them and names a rank to blame.
#include "hwtrain/dist/process_group.h"

namespace hwt {

ProcessGroup::WorkPtr ProcessGroup::all_reduce_sum(torch::Tensor& tensor) {
  std::vector<torch::Tensor> tensors{tensor};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::SUM;
  options.timeout = timeout_;
  return backend_->allreduce(tensors, options);
}

ProcessGroup::WorkPtr ProcessGroup::broadcast(torch::Tensor& tensor, int root) {
  std::vector<torch::Tensor> tensors{tensor};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  options.timeout = timeout_;
  return backend_->broadcast(tensors, options);
}

ProcessGroup::WorkPtr ProcessGroup::all_gather_into(torch::Tensor& output, torch::Tensor& input) {
  c10d::AllgatherOptions options;
  options.timeout = timeout_;
  return backend_->_allgather_base(output, input, options);
}

ProcessGroup::WorkPtr ProcessGroup::reduce_scatter_sum(torch::Tensor& output, torch::Tensor& input) {
  c10d::ReduceScatterOptions options;
  options.reduceOp = c10d::ReduceOp::SUM;
  options.timeout = timeout_;
  return backend_->_reduce_scatter_base(output, input, options);
}

}  // namespace hwt
