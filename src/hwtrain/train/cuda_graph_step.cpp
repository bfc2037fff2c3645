#include "hwtrain/train/cuda_graph_step.h"

#ifdef HWTRAIN_CUDA
#include <ATen/core/CachingHostAllocator.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <algorithm>
#include <cmath>

#include "hwtrain/core/clock.h"
#include "hwtrain/core/error.h"
#include "hwtrain/obs/log.h"
#include "hwtrain/train/update_step.h"

namespace hwt {

namespace {

[[maybe_unused]] std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

#ifdef HWTRAIN_CUDA
// After a capture that failed before it ended, the allocator still routes the capture's stream to
// the graph's pool through a filter that refers to the graph, about to be destroyed: stop that and
// hand the pool back. Where the capture did end, the graph's own reset releases the pool instead.
// The pinned host allocator was routed to the graph the same way.
void release_unfinished_pool(c10::DeviceIndex device, c10::MempoolId_t pool) {
  namespace alloc = c10::cuda::CUDACachingAllocator;
  try {
    alloc::endAllocateToPool(device, pool);
    alloc::releasePool(device, pool);
  } catch (const std::exception&) {  // not recording any more: the capture ended
  }
  try {
    at::getHostAllocator(at::kCUDA)->end_allocate_to_pool(pool);
    at::getHostAllocator(at::kCUDA)->release_pool(pool);
  } catch (const std::exception&) {
  }
}

// An invalidated capture leaves the default generator marked as capturing (capture_end throws
// before its epilogue), which would fail every later eager draw (dropout): the generator gets a
// copy of its state from before the capture, which was not capturing.
void restore_generator(c10::DeviceIndex device, const std::shared_ptr<at::CUDAGeneratorImpl>& before) {
  if (!before) return;
  at::Generator gen = at::cuda::detail::getDefaultCUDAGenerator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  at::check_generator<at::CUDAGeneratorImpl>(gen)->graphsafe_set_state(before->graphsafe_get_state());
}
#endif

}  // namespace

struct CudaGraphStep::Graph {
#ifdef HWTRAIN_CUDA
  at::cuda::CUDAGraph graph;
#endif
  torch::Tensor x, y, lr;           // the captured inputs: each step's batch and rate are copied in
  torch::Tensor losses, found_inf;  // the micro-losses, and 1 where low precision skips the update
  torch::Tensor norm;               // the gradient norm before clipping
  std::string signature;
};

CudaGraphStep::CudaGraphStep(GraphedStep step, int64_t warmup_steps)
    : step_(std::move(step)), warmup_(std::max<int64_t>(1, warmup_steps)) {}

CudaGraphStep::~CudaGraphStep() {
  if (graph_ && step_.optimizer) step_.optimizer().zero_grad();  // the gradients live in the graph's pool
}

void CudaGraphStep::stop(const std::string& why) {
  if (stopped_) return;
  stopped_ = true;
  stop_reason_ = why;
  if (graph_) {
    step_.optimizer().zero_grad();  // an eager step starts from no gradients
    graph_.reset();
  }
  log_warn("CUDA graphs: {}; the steps run eagerly from here on ({} replayed)", why, replays_);
}

std::optional<GraphedStepResult> CudaGraphStep::run(const torch::Tensor& x_NT, const torch::Tensor& y_NT, double lr,
                                                    int64_t step_number) {
  if (stopped_) return std::nullopt;
  const std::string obstacle = step_.obstacle ? step_.obstacle() : std::string();
  if (!obstacle.empty()) {
    stop("step " + std::to_string(step_number) + " cannot be captured: " + obstacle);
    return std::nullopt;
  }
  if (!graph_) {
    if (!capture(x_NT, y_NT, step_number)) return std::nullopt;
  } else if (step_.signature() != graph_->signature || x_NT.sizes() != graph_->x.sizes()) {
    stop("step " + std::to_string(step_number) + " differs from the captured one (" + graph_->signature + ", rows " +
         std::to_string(graph_->x.size(0)) + " -> " + step_.signature() + ", rows " + std::to_string(x_NT.size(0)) + ")");
    return std::nullopt;
  }
#ifdef HWTRAIN_CUDA
  Graph& g = *graph_;
  g.x.copy_(x_NT, /*non_blocking=*/true);
  g.y.copy_(y_NT, /*non_blocking=*/true);
  g.lr.fill_(lr);
  g.graph.replay();
  ++replays_;
  GraphedStepResult r;
  const torch::Tensor losses = g.losses.to(torch::kCPU).to(torch::kDouble);  // waits for the step
  const auto* l = losses.data_ptr<double>();
  r.micro_losses.assign(l, l + losses.numel());
  r.grad_norm = g.norm.item<double>();
  r.updated = !g.found_inf.defined() || g.found_inf.item<float>() == 0.0f;
  return r;
#else
  (void)lr;
  return std::nullopt;
#endif
}

void CudaGraphStep::record(Graph& g) {
  g.losses = step_.forward_backward(g.x, g.y);
  if (step_.low_precision && step_.low_precision()) {
    g.found_inf = torch::isfinite(g.losses.sum()).logical_not().to(torch::kFloat32);
  }
  g.norm = update_on_device(step_.parameters(), step_.max_grad_norm, step_.optimizer(), g.lr, g.found_inf);
}

bool CudaGraphStep::capture(const torch::Tensor& x_NT, const torch::Tensor& y_NT, int64_t step_number) {
#ifndef HWTRAIN_CUDA
  (void)x_NT;
  (void)y_NT;
  stop("step " + std::to_string(step_number) + " cannot be captured: this build of hwtrain has no CUDA");
  return false;
#else
  const auto t0 = Clock::now();
  std::unique_ptr<Graph> g;
  try {
    if (!x_NT.is_cuda()) throw ConfigError("the batch is on " + x_NT.device().str() + ", not a CUDA device");
    const std::string obstacle = step_.optimizer().capture_obstacle();
    if (!obstacle.empty()) throw ConfigError("AdamW: " + obstacle);
    const c10::DeviceIndex device = x_NT.device().index();
    c10::cuda::CUDAGuard on_device(device);
    g = std::make_unique<Graph>();  // a CUDA graph touches the device as it is made
    g->signature = step_.signature();
    g->x = x_NT.clone();
    g->y = y_NT.clone();
    g->lr = torch::zeros({}, x_NT.options().dtype(torch::kFloat32));
    step_.optimizer().zero_grad();  // backward makes the gradients inside the graph's pool
    c10::cuda::device_synchronize();
    c10::cuda::CUDACachingAllocator::emptyCache();  // the eager steps' cached blocks back for the pool
    // Thread-local capture mode: the loader's threads may pin host memory meanwhile (global mode
    // would fail the capture on their calls); the autograd engine's kernels go to the capturing
    // stream, whatever thread launches them.
    c10::cuda::CUDAStreamGuard on_side(at::cuda::getStreamFromPool(/*isHighPriority=*/false, device));
    const auto pool = at::cuda::graph_pool_handle();
    std::shared_ptr<at::CUDAGeneratorImpl> generator_before;
    {
      at::Generator gen = at::cuda::detail::getDefaultCUDAGenerator(device);
      std::lock_guard<std::mutex> lock(gen.mutex());
      generator_before = at::check_generator<at::CUDAGeneratorImpl>(gen)->clone();
    }
    g->graph.capture_begin(pool, cudaStreamCaptureModeThreadLocal);
    try {
      record(*g);
    } catch (...) {
      try {
        g->graph.capture_end();
      } catch (...) {  // an invalidated capture fails here too; the first error is the one to report
      }
      release_unfinished_pool(device, pool);
      restore_generator(device, generator_before);
      throw;
    }
    g->graph.capture_end();
    c10::cuda::device_synchronize();
  } catch (const std::exception& e) {
    (void)cudaGetLastError();  // a failed capture leaves its error behind
    g.reset();
    stop("capturing step " + std::to_string(step_number) + " failed (" + first_line(e.what()) + ")");
    step_.optimizer().zero_grad();
    return false;
  }
  graph_ = std::move(g);
  log_info("CUDA graphs: step {} captured in {:.2f} s ({}; forward, backward, clipping and AdamW in one launch)",
           step_number, seconds_since(t0), graph_->signature);
  return true;
#endif
}

}  // namespace hwt
