#include "hwtrain/dist/tensor_parallel_group.h"

namespace hwt {

void ProcessGroupComm::all_reduce_sum(torch::Tensor& t) {
  // c10d reduces contiguous tensors in place; a view would be left untouched.
  torch::Tensor buffer = t.is_contiguous() ? t : t.contiguous();
  group_->wait(group_->all_reduce_sum(buffer), "a tensor-parallel all-reduce");
  if (!buffer.is_same(t)) t.copy_(buffer);
}

torch::Tensor ProcessGroupComm::all_gather(const torch::Tensor& t) {
  torch::Tensor input = t.contiguous().view({-1});  // the group gathers flat tensors
  std::vector<int64_t> shape{group_->world_size()};
  for (int64_t d : t.sizes()) shape.push_back(d);
  if (t.numel() == 0) return torch::empty(shape, t.options());
  torch::Tensor output = torch::empty({group_->world_size() * input.numel()}, input.options());
  group_->wait(group_->all_gather_into(output, input), "a tensor-parallel all-gather");
  return output.view(shape);
}

}  // namespace hwt
