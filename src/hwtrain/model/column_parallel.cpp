#include "hwtrain/model/column_parallel.h"

#include <ATen/autocast_mode.h>

#include <functional>
#include <utility>

namespace hwt {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// The casts autocast makes for x's device where it is on (weights through its cache, as the
// unfused layers' casts went: a decoding step does not cast them again), none otherwise.
struct AutocastCast {
  bool on = false;
  at::ScalarType dtype = at::kFloat;
  at::DeviceType device = at::kCPU;
  explicit AutocastCast(const torch::Tensor& x) : device(x.device().type()) {
    on = at::autocast::is_autocast_enabled(device);
    if (on) dtype = at::autocast::get_autocast_dtype(device);
  }
  torch::Tensor operator()(const torch::Tensor& t) const { return on ? at::autocast::cached_cast(dtype, t, device) : t; }
};

// One layer's output from x_c and w_c in the compute dtype, the bias added as hwt::linear adds it.
torch::Tensor layer_output(const torch::Tensor& x_c, const torch::Tensor& w_c, const torch::Tensor& bias) {
  if (x_c.is_cuda()) return torch::linear(x_c, w_c, bias.defined() ? bias.to(x_c.scalar_type()) : bias);
  torch::Tensor y = x_c.matmul(w_c.t());
  if (bias.defined()) y += bias;
  return y;
}

// A started collective's wait, done on every path: by take(), or by the destructor when an error
// unwinds past it (its own error then dropped: the first one is on its way), so that this rank
// never leaves a collective unfinished while its peers wait in it.
class StartedCollective {
 public:
  StartedCollective() = default;
  explicit StartedCollective(std::function<torch::Tensor()> wait) : wait_(std::move(wait)) {}
  StartedCollective(const StartedCollective&) = delete;
  StartedCollective& operator=(StartedCollective&& other) noexcept {
    std::swap(wait_, other.wait_);
    return *this;
  }
  ~StartedCollective() {
    if (!wait_) return;
    try {
      wait_();
    } catch (...) {
    }
  }
  torch::Tensor take() {
    std::function<torch::Tensor()> wait = std::move(wait_);
    wait_ = nullptr;
    return wait ? wait() : torch::Tensor();
  }

 private:
  std::function<torch::Tensor()> wait_;
};

// Inputs: x, then `params` = the n weights, then the n biases where the layers have them.
struct ColumnParallelLinears : public torch::autograd::Function<ColumnParallelLinears> {
  static tensor_list forward(AutogradContext* ctx, const torch::Tensor& x, torch::TensorList params, int64_t n,
                             int64_t address) {
    TensorParallelComm& comm = comm_at(address);
    const AutocastCast cast(x);
    const torch::Tensor x_c = cast(x);
    // Under sequence parallelism this rank's slice is kept, in the rows the group gathers.
    const torch::Tensor kept = comm.sequence_parallel ? sequence_rows(x_c) : x_c;
    const torch::Tensor whole_c = comm.sequence_parallel ? whole_sequence(comm.all_gather(kept)) : x_c;
    tensor_list saved{kept}, outputs;
    for (int64_t i = 0; i < n; ++i) {
      const torch::Tensor w_c = cast(params[i]);
      saved.push_back(w_c);
      outputs.push_back(layer_output(whole_c, w_c, static_cast<int64_t>(params.size()) > n ? params[n + i] : torch::Tensor()));
    }
    ctx->save_for_backward(saved);
    ctx->saved_data["comm"] = address;
    ctx->saved_data["sequence_parallel"] = comm.sequence_parallel;
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    std::vector<int64_t> param_dtypes;
    for (const torch::Tensor& p : params) param_dtypes.push_back(static_cast<int64_t>(p.scalar_type()));
    ctx->saved_data["param_dtypes"] = param_dtypes;
    return outputs;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const tensor_list saved = ctx->get_saved_variables();
    TensorParallelComm& comm = comm_at(ctx->saved_data["comm"].toInt());
    const bool sequence_parallel = ctx->saved_data["sequence_parallel"].toBool();
    const auto x_dtype = static_cast<at::ScalarType>(ctx->saved_data["x_dtype"].toInt());
    const std::vector<int64_t> param_dtypes = ctx->saved_data["param_dtypes"].toIntVector();
    const size_t n = saved.size() - 1;
    const bool biased = param_dtypes.size() > n;
    bool weights_wanted = false;
    for (size_t i = 0; i < n; ++i) weights_wanted = weights_wanted || ctx->needs_input_grad(1 + i);
    // The kept slice's all-gather runs while the input's gradient is computed.
    StartedCollective gathered;
    if (sequence_parallel && weights_wanted) gathered = StartedCollective(comm.all_gather_async(saved[0]));
    std::vector<torch::Tensor> g_NO;  // each output's gradient, (B T, out) in the compute dtype
    for (size_t i = 0; i < n; ++i) g_NO.push_back(grads[i].to(saved[0].scalar_type()).reshape({-1, grads[i].size(-1)}));

    StartedCollective input_grad;
    if (ctx->needs_input_grad(0)) {
      // Summed last layer first, the order autograd summed the unfused layers' (bit for bit the same).
      torch::Tensor g_BTC;
      for (size_t i = n; i-- > 0;) {
        const torch::Tensor g = g_NO[i].mm(saved[1 + i]).to(x_dtype);
        g_BTC = g_BTC.defined() ? g_BTC + g : g;
      }
      g_BTC = g_BTC.view({grads[0].size(0), grads[0].size(1), -1});
      if (sequence_parallel) {
        auto mine = comm.reduce_scatter_async(sequence_rows(g_BTC));  // (T / t, B, C)
        input_grad = StartedCollective([mine] { return mine().transpose(0, 1).contiguous(); });
      } else {
        auto reduced = comm.all_reduce_sum_async(g_BTC);
        input_grad = StartedCollective([reduced, g_BTC] {
          reduced();
          return g_BTC;
        });
      }
    }
    // The weights' and biases' gradients while the input's gradient travels.
    tensor_list out{torch::Tensor()};
    if (weights_wanted) {
      const torch::Tensor whole_c = sequence_parallel ? whole_sequence(gathered.take()) : saved[0];
      const torch::Tensor whole_NC = whole_c.reshape({-1, whole_c.size(-1)});
      for (size_t i = 0; i < n; ++i) {
        const bool wanted = ctx->needs_input_grad(1 + i);
        out.push_back(wanted ? g_NO[i].t().mm(whole_NC).to(static_cast<at::ScalarType>(param_dtypes[i])) : torch::Tensor());
      }
    } else {
      out.resize(1 + n);
    }
    for (size_t i = 0; biased && i < n; ++i) {
      const bool wanted = ctx->needs_input_grad(1 + n + i);
      out.push_back(wanted ? g_NO[i].sum(0).to(static_cast<at::ScalarType>(param_dtypes[n + i])) : torch::Tensor());
    }
    out[0] = input_grad.take();
    out.push_back(torch::Tensor());  // n
    out.push_back(torch::Tensor());  // the group
    return out;
  }
};

}  // namespace

std::vector<torch::Tensor> column_parallel(const torch::Tensor& x_BTC, const std::vector<ColumnLinear>& layers,
                                           TensorParallelComm* comm) {
  std::vector<torch::Tensor> outputs;
  if (!comm) {
    for (const ColumnLinear& l : layers) outputs.push_back(linear(x_BTC, l.weight, l.bias));
    return outputs;
  }
  TORCH_CHECK(x_BTC.dim() == 3, "column_parallel expects (B, T, C), got ", x_BTC.sizes());
  std::vector<torch::Tensor> params;
  for (const ColumnLinear& l : layers) params.push_back(l.weight);
  for (const ColumnLinear& l : layers) {
    TORCH_CHECK(l.bias.defined() == layers.front().bias.defined(), "column_parallel: every layer has a bias or none does");
    if (l.bias.defined()) params.push_back(l.bias);
  }
  return ColumnParallelLinears::apply(x_BTC, torch::TensorList(params), static_cast<int64_t>(layers.size()),
                                      comm_address(*comm));
}

}  // namespace hwt
