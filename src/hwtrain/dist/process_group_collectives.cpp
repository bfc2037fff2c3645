// ProcessGroup's asynchronous collectives (dist/process_group.h): thin calls into the c10d backend
// with the run's timeout; wait() (process_group.cpp) finishes them and names a rank to blame.
#include "hwtrain/dist/process_group.h"

#include <utility>
#include <vector>

#include "hwtrain/dist/work_group.h"

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

namespace {
bool gloo_on_cpu(const std::string& backend, int world_size, const torch::Tensor& t) {
  return backend == "gloo" && world_size > 1 && t.device().is_cpu();
}
}  // namespace

ProcessGroup::WorkPtr ProcessGroup::all_gather_into(torch::Tensor& output, torch::Tensor& input) {
  if (gloo_on_cpu(backend_name_, world_size_, output)) {
    const int64_t n = input.numel();
    TORCH_CHECK(output.is_contiguous() && output.numel() == n * world_size_, "all_gather_into: the output needs ",
                n * world_size_, " contiguous elements, has ", output.numel());
    TORCH_CHECK(output.scalar_type() == input.scalar_type(), "all_gather_into: output ", output.scalar_type(),
                " and input ", input.scalar_type(), " differ");
    torch::Tensor flat = output.view({-1});
    flat.narrow(0, rank_ * n, n).copy_(input.reshape({-1}));
    std::vector<WorkPtr> parts;
    for (int r = 0; r < world_size_; ++r) {
      torch::Tensor slice = flat.narrow(0, r * n, n);
      parts.push_back(broadcast(slice, r));
    }
    return c10::make_intrusive<WorkGroup>(std::move(parts));
  }
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

bool ProcessGroup::reduces_by_all_reduce(const torch::Tensor& t) const {
  return gloo_on_cpu(backend_name_, world_size_, t);
}

ProcessGroup::WorkPtr ProcessGroup::reduce_scatter_in_place(torch::Tensor& input, torch::Tensor& shard) {
  const int64_t n = input.numel() / world_size_;
  TORCH_CHECK(input.dim() == 1 && n * world_size_ == input.numel(), "reduce_scatter_in_place: ", input.numel(),
              " elements do not split into ", world_size_, " equal slices");
  if (gloo_on_cpu(backend_name_, world_size_, input)) {
    WorkPtr work = all_reduce_sum(input);
    shard = input.narrow(0, rank_ * n, n);
    return work;
  }
  shard = torch::empty({n}, input.options());
  return reduce_scatter_sum(shard, input);
}

}  // namespace hwt
