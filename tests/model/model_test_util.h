// Helpers shared by the model tests: tiny configs, gradient snapshots, autograd graph walks.
#pragma once
#include <torch/torch.h>

#include <string>
#include <unordered_set>
#include <vector>

#include "hwtrain/model/gpt.h"

namespace hwt::test {

inline ModelConfig tiny_config(int64_t n_layer = 2, double dropout = 0.0) {
  ModelConfig cfg;
  cfg.preset = "";
  cfg.n_layer = n_layer;
  cfg.n_head = 2;
  cfg.n_embd = 32;
  cfg.block_size = 16;
  cfg.dropout = dropout;
  return cfg;
}

inline std::vector<torch::Tensor> grads_of(GPT& model) {
  std::vector<torch::Tensor> grads;
  for (auto& p : model->parameters()) {
    grads.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
  }
  return grads;
}

inline double max_abs_diff(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  }
  return worst;
}

// Number of nodes in the autograd graph of `root` whose name contains `fragment`.
inline int count_graph_nodes(const torch::Tensor& root, const std::string& fragment) {
  int count = 0;
  std::vector<torch::autograd::Node*> stack;
  std::unordered_set<torch::autograd::Node*> seen;
  if (root.grad_fn()) stack.push_back(root.grad_fn().get());
  while (!stack.empty()) {
    auto* node = stack.back();
    stack.pop_back();
    if (!seen.insert(node).second) continue;
    if (node->name().find(fragment) != std::string::npos) ++count;
    for (const auto& edge : node->next_edges()) {
      if (edge.function) stack.push_back(edge.function.get());
    }
  }
  return count;
}

}  // namespace hwt::test
