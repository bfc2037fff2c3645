#include "hwtrain/model/trainable_model.h"

#include <map>

#include "hwtrain/core/error.h"

namespace hwt {

void TrainableModel::named_decay_and_no_decay(NamedParameters& decay, NamedParameters& no_decay) {
  for (const auto& item : module().named_parameters()) {
    (item.value().dim() >= 2 ? decay : no_decay).emplace_back(item.key(), item.value());
  }
}

std::vector<ParameterUnit> TrainableModel::parameter_units() {
  ParameterUnit all{"all", {}, {}};
  for (const auto& item : module().named_parameters()) all.params.emplace_back(item.key(), item.value());
  return {all};
}

void TrainableModel::set_unit_hooks(std::shared_ptr<UnitHooks> hooks) {
  if (hooks) {
    throw ConfigError("this model does not run unit hooks, which dist.sharding = zero3 gathers its parameters "
                      "through; use zero2, zero1 or none, or implement TrainableModel::set_unit_hooks");
  }
}

double TrainableModel::training_flops_per_row(int64_t row_elements) {
  return 6.0 * static_cast<double>(num_parameters()) * static_cast<double>(row_elements);
}

NamedParameters TrainableModel::own_gradients() {
  NamedParameters out;
  for (const auto& item : module().named_parameters()) {
    if (item.value().grad().defined()) out.emplace_back(item.key(), item.value().grad());
  }
  return out;
}

int64_t TrainableModel::num_parameters() {
  int64_t n = 0;
  for (const auto& p : module().parameters()) n += p.numel();
  return n;
}

void check_scalar_loss(const torch::Tensor& loss, const std::string& what) {
  if (!loss.defined() || loss.dim() != 0) {
    throw ConfigError(what + ": the loss has shape " + (loss.defined() ? c10::str(loss.sizes()) : std::string("(undefined)")) +
                      "; it must be a scalar (reduce it, e.g. with .mean())");
  }
  if (!loss.is_floating_point()) {
    throw ConfigError(what + ": the loss has dtype " + std::string(c10::toString(loss.scalar_type())) +
                      "; it must be a floating-point scalar");
  }
}

void check_parameters_registered_once(torch::nn::Module& module) {
  std::map<const void*, std::string> first;  // tensor -> the first name it is registered under
  for (const auto& item : module.named_parameters()) {
    const auto [it, fresh] = first.emplace(item.value().unsafeGetTensorImpl(), item.key());
    if (fresh) continue;
    throw ConfigError("model parameter '" + item.key() + "' is the same tensor as '" + it->second +
                      "': the optimizer would update it twice per step and count its gradient twice; "
                      "register a tied weight once (another module may use it in its forward)");
  }
}

ModuleModel::ModuleModel(std::shared_ptr<torch::nn::Module> module, Forward forward, Loss loss)
    : module_(std::move(module)), forward_(std::move(forward)), loss_(std::move(loss)) {
  if (!module_ || !forward_ || !loss_) throw ConfigError("ModuleModel needs a module, a forward and a loss function");
}

torch::Tensor ModuleModel::forward_loss(const torch::Tensor& x, const torch::Tensor& y) {
  torch::Tensor out = forward_(x);
  if (cast_outputs_ && out.is_floating_point() && out.scalar_type() != torch::kFloat32 &&
      out.scalar_type() != torch::kFloat64) {
    out = out.to(torch::kFloat32);
  }
  return loss_(out, y);
}

}  // namespace hwt
