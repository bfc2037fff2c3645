// A user's own torch::nn::Module trained through hwtrain's HardwareAwareOptimizer: the planner
// picks precision, threads and device for this machine; the loop uses its autocast region, scaled
// backward and step (unscale, clip, skip on inf/NaN).
//   build/examples/example_custom_model
#include <torch/torch.h>

#include <iostream>

#include "hwtrain/run/hardware_aware_optimizer.h"

struct Mlp : torch::nn::Module {
  Mlp() {
    fc1 = register_module("fc1", torch::nn::Linear(64, 256));
    fc2 = register_module("fc2", torch::nn::Linear(256, 1));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2(torch::gelu(fc1(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};

int main() {
  hwt::RunConfig config;  // [optimization] defaults: the planner decides
  config.model.vocab_size = 257;  // the planner's memory model is sized for its GPT; harmless here
  hwt::HardwareAwareOptimizer hao(config);
  std::cout << hao.get_hardware_summary() << "\n" << hao.get_optimization_summary() << "\n";

  auto model = std::make_shared<Mlp>();
  hao.apply_optimizations(*model);
  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(1e-3));
  torch::manual_seed(0);
  auto x = torch::randn({512, 64}).to(hao.device());
  auto y = x.pow(2).sum(1, true).to(hao.device());
  for (int step = 1; step <= 200; ++step) {
    torch::Tensor loss;
    {
      auto region = hao.autocast();
      loss = torch::mse_loss(model->forward(x).to(torch::kFloat32), y);
    }
    hao.backward(loss);
    double grad_norm = hao.step(optimizer, 1.0);
    if (step % 50 == 0) std::cout << "step " << step << " loss " << loss.item<double>() << " grad_norm " << grad_norm << "\n";
  }
  std::cout << hao.get_optimization_metrics().dump(2) << "\n";
  return 0;
}
