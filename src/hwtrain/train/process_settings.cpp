#include "hwtrain/train/process_settings.h"

#include <ATen/Context.h>
#include <torch/torch.h>

#include <cstdlib>

namespace hwt {

void apply_process_settings(const Plan& plan) {
  if (torch::get_num_threads() != plan.intra_op_threads) torch::set_num_threads(static_cast<int>(plan.intra_op_threads));
  // Set either way: the plan owns these process-wide switches (a later plan in the process may differ).
  // cuBLAS reads CUBLAS_WORKSPACE_CONFIG when a handle is created: before the device's first matmul.
  if (plan.deterministic && plan.on_gpu()) ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  at::globalContext().setDeterministicAlgorithms(plan.deterministic, /*warn_only=*/false);
  at::globalContext().setDeterministicCuDNN(plan.deterministic);
  if (plan.on_gpu()) {
    at::globalContext().setAllowTF32CuBLAS(plan.allow_tf32);
    at::globalContext().setAllowTF32CuDNN(plan.allow_tf32);
    at::globalContext().setBenchmarkCuDNN(plan.cudnn_benchmark);
  }
}

}  // namespace hwt
