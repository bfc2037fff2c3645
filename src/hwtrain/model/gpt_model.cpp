#include "hwtrain/model/gpt_model.h"

namespace hwt {

double training_flops_per_token(const ModelConfig& m, int64_t num_params) {
  return 6.0 * static_cast<double>(num_params) +
         12.0 * static_cast<double>(m.n_layer * m.n_embd * m.block_size);
}

double GptModel::training_flops_per_row(int64_t row_elements) {
  return training_flops_per_token(gpt_->config(), gpt_->num_parameters(false)) * static_cast<double>(row_elements);
}

}  // namespace hwt
