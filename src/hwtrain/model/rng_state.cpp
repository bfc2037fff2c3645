#include "hwtrain/model/rng_state.h"

#include <ATen/CPUGeneratorImpl.h>

#include <mutex>

namespace hwt {
namespace {

at::Generator default_generator(const torch::Device& device) {
  if (device.is_cpu()) return at::detail::getDefaultCPUGenerator();
  return at::globalContext().defaultGenerator(device);
}

torch::Tensor generator_state(const torch::Device& device) {
  auto gen = default_generator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_generator_state(const torch::Device& device, const torch::Tensor& state) {
  auto gen = default_generator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

}  // namespace

RngState rng_state(const torch::Device& device) {
  RngState s;
  s.cpu = generator_state(torch::kCPU);
  if (device.is_cuda()) s.cuda = generator_state(device);
  return s;
}

void set_rng_state(const RngState& state, const torch::Device& device) {
  if (state.cpu.defined()) set_generator_state(torch::kCPU, state.cpu);
  if (state.cuda.defined() && device.is_cuda()) set_generator_state(device, state.cuda);
}

}  // namespace hwt
