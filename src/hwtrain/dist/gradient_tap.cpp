#include "hwtrain/dist/gradient_tap.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/variable.h>

#include <memory>
#include <string>
#include <utility>

namespace hwt {
namespace {

class GradientTapNode : public torch::autograd::Node {
 public:
  explicit GradientTapNode(GradientSink sink) : sink_(std::move(sink)) {}
  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    if (!grads.empty() && grads[0].defined()) sink_(grads[0]);
    return {torch::Tensor()};  // undefined: the tapped tensor's accumulator adds nothing for this use
  }
  std::string name() const override { return "hwt::GradientTap"; }

 private:
  GradientSink sink_;
};

}  // namespace

torch::Tensor tap_gradient(const torch::Tensor& t, GradientSink sink) {
  if (!torch::GradMode::is_enabled() || !t.requires_grad()) return t;
  auto node = std::shared_ptr<GradientTapNode>(new GradientTapNode(std::move(sink)), torch::autograd::deleteNode);
  node->set_next_edges(torch::autograd::collect_next_edges(t));
  torch::Tensor alias = t.detach().variable_data();  // the same storage, no autograd history of its own
  torch::autograd::set_history(alias, node);
  return alias;
}

}  // namespace hwt
