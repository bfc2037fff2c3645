#include "hwtrain/model/deferred_init.h"

#include <ATen/CPUGeneratorImpl.h>

#include <stdexcept>

namespace hwt {

namespace {

torch::Tensor placeholder(c10::IntArrayRef sizes, const torch::TensorOptions& options) {
  return torch::zeros({1}, options).expand(sizes);
}

}  // namespace

bool is_placeholder(const torch::Tensor& t) {
  return t.defined() && t.numel() > 1 && t.has_storage() &&
         t.storage().nbytes() < static_cast<size_t>(t.numel()) * t.element_size();
}

void assign_parameter(torch::Tensor& param, const torch::Tensor& value) {
  torch::NoGradGuard no_grad;
  if (!is_placeholder(param)) {
    param.copy_(value);
    return;
  }
  TORCH_CHECK(value.sizes() == param.sizes(), "a value of shape ", value.sizes(), " for a parameter of shape ",
              param.sizes());
  param.set_data(value.to(param.options(), /*non_blocking=*/false, /*copy=*/true).contiguous());
}

DeferredInit::Recipe& DeferredInit::recipe(const torch::Tensor& param) {
  auto it = recipes_.find(param.unsafeGetTensorImpl());
  if (it == recipes_.end()) {
    throw std::logic_error("deferred init: a parameter of shape " + c10::str(param.sizes()) +
                           " that the model did not release is initialized");
  }
  return it->second;
}

void DeferredInit::release(torch::nn::Module& module, const std::string& prefix) {
  torch::NoGradGuard no_grad;
  for (auto& item : module.named_parameters()) {
    torch::Tensor& p = item.value();
    if (p.numel() <= 1 || is_placeholder(p)) continue;  // nothing to save (or released already: a tied weight)
    Recipe r;
    r.name = prefix + item.key();
    r.shape = p.sizes().vec();
    if (p.dim() == 1) {  // norms and biases: their value as constructed, unless init sets another
      r.kind = Recipe::Kind::Values;
      r.values = p.detach().clone();
    }
    recipes_[p.unsafeGetTensorImpl()] = std::move(r);
    p.set_data(placeholder(p.sizes(), p.options()));
  }
}

void DeferredInit::normal(const torch::Tensor& param, double mean, double std) {
  torch::NoGradGuard no_grad;
  Recipe& r = recipe(param);
  r.kind = Recipe::Kind::Normal;
  r.generator = at::detail::getDefaultCPUGenerator().clone();
  r.mean = mean;
  r.std = std;
  r.values = torch::Tensor();
  // The draw the parameter would take, into a scratch tensor of its shape, dtype and device: the
  // generator moves exactly as far (CPU normal_ fills contiguous float tensors 16 values at a time).
  torch::empty(param.sizes(), param.options()).normal_(mean, std);
}

void DeferredInit::fill(const torch::Tensor& param, double value) {
  Recipe& r = recipe(param);
  r.kind = Recipe::Kind::Fill;
  r.value = value;
  r.values = torch::Tensor();
}

void DeferredInit::cut(torch::Tensor& param, Cut keep) {
  Recipe& r = recipe(param);
  // The cut's shape from a meta tensor of the placeholder's: nothing allocated.
  const torch::Tensor shape = keep(torch::empty(param.sizes(), param.options().device(torch::kMeta)));
  r.cuts.push_back(std::move(keep));
  param.set_data(placeholder(shape.sizes(), param.options()));
}

void DeferredInit::draw(const Recipe& r, torch::Tensor& out) const {
  switch (r.kind) {
    case Recipe::Kind::Normal: {
      at::Generator g = r.generator.clone();  // materializing twice gives the same value
      out.normal_(r.mean, r.std, g);
      return;
    }
    case Recipe::Kind::Fill:
      out.fill_(r.value);
      return;
    case Recipe::Kind::Values:
      out.copy_(r.values);
      return;
    case Recipe::Kind::Unset:
      break;
  }
  throw std::logic_error("deferred init: no initial value was recorded for parameter '" + r.name + "'");
}

void DeferredInit::materialize(const torch::Tensor& param, torch::Tensor& out) const {
  torch::NoGradGuard no_grad;
  auto it = recipes_.find(param.unsafeGetTensorImpl());
  if (it == recipes_.end()) throw std::logic_error("deferred init: a parameter the model did not release was asked for");
  const Recipe& r = it->second;
  if (r.cuts.empty()) {
    draw(r, out);
    return;
  }
  torch::Tensor value = torch::empty(r.shape, torch::kFloat);  // as the ordinary build drew it, whole
  draw(r, value);
  for (const Cut& keep : r.cuts) value = keep(value);
  out.copy_(value);
}

void DeferredInit::retarget(torch::nn::Module& module, std::optional<torch::Device> device,
                            std::optional<torch::Dtype> dtype) {
  for (auto& p : module.parameters()) {
    if (!is_placeholder(p)) continue;
    torch::TensorOptions o = p.options();
    if (device) o = o.device(*device);
    if (dtype) o = o.dtype(*dtype);
    p.set_data(placeholder(p.sizes(), o));
  }
}

}  // namespace hwt
