// A project of its own that uses an installed hwtrain (find_package(hwtrain), hwtrain::hwtrain):
// it trains its own torch::nn::Module, an MLP fitting y = mean(x^2) on synthetic data, with
// hwtrain's Trainer through train_model: the planner picks precision, threads, device and loader,
// the micro-batch comes from measured probe steps, and the run gets the Trainer's accumulation,
// clipping, LR schedule, evaluation, checkpoints and history.
// Exits 0 only if the validation loss fell below half of its first value (tests/install runs it).
//   ./train_mlp [epochs]    (default 4)
#include <torch/torch.h>

#include <cstdlib>
#include <iostream>

#include "hwtrain/run/train_model.h"

struct MlpImpl : torch::nn::Module {
  MlpImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(16, 128));
    fc2 = register_module("fc2", torch::nn::Linear(128, 1));
  }
  torch::Tensor forward(const torch::Tensor& x_BD) { return fc2(torch::gelu(fc1(x_BD))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Mlp);

// n samples of D = 16 features and their target.
std::shared_ptr<hwt::TensorExamples> examples(int64_t n) {
  auto x_ND = torch::randn({n, 16});
  return std::make_shared<hwt::TensorExamples>(x_ND, x_ND.pow(2).mean(1, true));
}

int main(int argc, char** argv) {
  torch::manual_seed(0);
  auto train = examples(4096), validation = examples(512);
  auto model = hwt::make_module_model(Mlp(), torch::mse_loss);

  hwt::TrainModelOptions options;  // unset: the planner decides
  options.epochs = argc > 1 ? std::atof(argv[1]) : 4;
  options.batch_size = 64;
  options.run_dir = "train_mlp_run";
  options.config.apply_override("train.lr=0.003");
  options.config.apply_override("train.eval_interval=16");
  options.config.apply_override("train.eval_batches=4");
  hwt::TrainHistory history = hwt::train_model(model, train, validation, options);

  for (size_t e = 0; e < history.epoch_losses.size(); ++e) {
    std::cout << "epoch " << e + 1 << " mean loss " << history.epoch_losses[e] << "\n";
  }
  if (history.val_losses.size() < 2) {
    std::cout << "fewer than two evaluations\n";
    return 1;
  }
  const double first = history.val_losses.front().second, last = history.val_losses.back().second;
  const bool fell = last < 0.5 * first;
  std::cout << "validation loss " << first << " (step " << history.val_losses.front().first << ") -> " << last
            << (fell ? " (fell)" : " (did not fall below half)") << "; checkpoint "
            << (history.result.last_checkpoint ? history.result.last_checkpoint->string() : "none") << "\n";
  return fell ? 0 : 1;
}
