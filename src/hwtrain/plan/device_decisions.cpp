// Where and with what the step runs: the device, threads, the data loader, the GPU's process-wide
// settings, and the peak FLOP/s that MFU is measured against (plan/decisions.h).
#include <algorithm>

#include "hwtrain/core/error.h"
#include "hwtrain/core/strings.h"
#include "hwtrain/plan/decisions.h"

namespace hwt {

const GpuInfo* local_gpu(const PlanInputs& in) {
  const HardwareProfile& hw = in.hw;
  if (hw.gpus.empty()) return nullptr;
  const size_t per_node = std::max<size_t>(1, hw.gpus.size() / std::max(1, hw.num_nodes));
  return &hw.gpus[static_cast<size_t>(in.ctx.local_rank) % per_node];
}

const GpuInfo* plan_gpu(const Plan& p, const PlanInputs& in) { return p.on_gpu() ? local_gpu(in) : nullptr; }

int64_t ranks_sharing_host(const Plan& p, const PlanInputs& in) {
  if (p.on_gpu()) return 1;
  const int64_t all = std::max<int64_t>(1, in.ctx.world_size * in.ctx.model_parallel);
  return in.ctx.ranks_per_node > 0 ? std::min(all, in.ctx.ranks_per_node) : all;
}

void decide_device(Plan& p, const PlanInputs& in) {
  const GpuInfo* gpu = local_gpu(in);
  const bool gpu_usable = gpu && (gpu->usable_by_torch || in.ctx.paper);
  const DeviceIntent& want = in.want.device;
  const int64_t rank = in.ctx.local_rank;
  if (want.kind == DeviceIntent::Kind::Cpu) {
    p.device = c10::Device(c10::kCPU);
    p.decide("device", "cpu", "train.device set by user");
  } else if (want.kind == DeviceIntent::Kind::Cuda) {
    if (!gpu_usable) {
      throw HardwareError("train.device = '" + want.text + "' but no CUDA GPU is usable here" +
                          std::string(in.hw.gpus.empty() ? " (none detected)" : " (LibTorch cannot use it)") +
                          "; set train.device=cpu or auto");
    }
    p.device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(want.index.value_or(static_cast<int>(rank))));
    p.decide("device", p.device.str(), "train.device set by user");
  } else if (gpu_usable) {
    const int64_t gpus = static_cast<int64_t>(std::max<size_t>(1, in.hw.gpus.size()));
    p.device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(rank % gpus));
    p.decide("device", p.device.str() + " (" + gpu->name + ")", "a CUDA GPU is available");
  } else {
    p.device = c10::Device(c10::kCPU);
    p.decide("device", "cpu", in.hw.gpus.empty() ? "no CUDA GPU detected" : "GPU present but LibTorch cannot use it");
  }
}

void decide_threads(Plan& p, const PlanInputs& in) {
  const int64_t cores = std::max(1, in.hw.cpu.num_physical_cores);
  if (in.want.intra_op_threads) {
    p.intra_op_threads = *in.want.intra_op_threads;
    p.decide("intra_op_threads", std::to_string(p.intra_op_threads), "set by user");
    return;
  }
  // On GPUs each rank has a device of its own but the node's ranks share its cores (8 ranks of
  // 112 threads each oversubscribed a DGX node 8x).
  int64_t sharing = ranks_sharing_host(p, in);
  if (p.on_gpu()) {
    const int64_t all = std::max<int64_t>(1, in.ctx.world_size * in.ctx.model_parallel);
    const int64_t gpus_per_node =
        static_cast<int64_t>(std::max<size_t>(1, in.hw.gpus.size() / std::max(1, in.hw.num_nodes)));
    sharing = std::min(all, in.ctx.ranks_per_node > 0 ? in.ctx.ranks_per_node : gpus_per_node);
  }
  p.intra_op_threads = std::max<int64_t>(1, cores / sharing);
  p.decide("intra_op_threads", std::to_string(p.intra_op_threads),
           std::to_string(cores) + " physical cores usable by this process" +
               (sharing > 1 ? " shared by " + std::to_string(sharing) + " local ranks" : ""));
}

void decide_loader(Plan& p, const PlanInputs& in) {
  const int64_t cores = std::max(1, in.hw.cpu.num_physical_cores);
  if (in.want.num_workers) {
    p.num_workers = *in.want.num_workers;
    p.decide("loader_workers", std::to_string(p.num_workers), "optimization.num_workers set by user");
  } else {
    p.num_workers = p.on_gpu() ? std::min<int64_t>(4, std::max<int64_t>(1, cores / 2)) : 1;
    p.decide("loader_workers", std::to_string(p.num_workers),
             p.on_gpu() ? "batches are cheap to cut from memory-mapped tokens; a few threads keep the GPU fed"
                        : "one thread cuts windows from memory-mapped tokens at >100M tokens/s; the cores train");
  }
  p.prefetch_factor = in.want.prefetch_factor;
  p.pin_memory = p.on_gpu() && in.want.pin_memory;
}

void decide_gpu_settings(Plan& p, const PlanInputs& in) {
  if (const GpuInfo* gpu = plan_gpu(p, in)) {
    p.allow_tf32 = in.want.allow_tf32 && gpu->tf32;
    p.cudnn_benchmark = in.want.cudnn_benchmark && !in.want.deterministic;
    p.decide("pinned_memory", p.pin_memory ? "on, copies a step ahead on a side stream" : "off",
             p.pin_memory ? "batch k+1's host-to-device copy overlaps step k" : "optimization.pin_memory = false");
    p.decide("tf32", p.allow_tf32 ? "on" : "off", gpu->tf32 ? "TF32 tensor cores for fp32 matmuls" : "not supported");
  }
  p.deterministic = in.want.deterministic;
  if (p.deterministic) {
    p.decide("deterministic", "on", std::string("optimization.deterministic = true: deterministic kernels only") +
                                        (p.on_gpu() ? ", cuBLAS workspace :4096:8, cuDNN autotuning off" : ""));
  }
  decide_cuda_graphs(p, in);
}

namespace {

// Why this plan's step cannot be one CUDA graph ("" when it can): whatever decides on the host
// within a step, or talks to other ranks, stays eager.
std::string cuda_graph_obstacle(const Plan& p, const PlanInputs& in) {
  if (!p.on_gpu()) return "the run is on " + p.device.str() + ", not a CUDA device";
  if (p.precision == Precision::Fp16) return "fp16's loss scaling decides on the host each step; use bf16";
  if (p.world_size > 1 || in.ctx.model_parallel > 1) return "collectives across ranks are not captured";
  if (p.sharding != Sharding::None) return "dist.sharding is not captured";
  if (p.optimizer_in_backward()) return "optimization.optimizer_in_backward steps from per-parameter hooks";
  if (!p.fused_optimizer) return "it needs the fused AdamW (optimization.fused_optimizer = true)";
  if (p.pure_bf16_weights) return "bf16 weights take the reference AdamW, which reads its step count on the host";
  if (p.optimizer_state_device != StateDevice::Device) return "optimizer state in host memory is updated by the host";
  if (p.optimizer_state_dtype != StateDtype::Fp32) return "8-bit moments are requantized per parameter";
  if (p.checkpoint_every > 0) return "activation recomputation reads the CUDA generator's state on the host";
  return "";
}

}  // namespace

void decide_cuda_graphs(Plan& p, const PlanInputs& in) {
  p.cuda_graphs = false;
  if (!in.want.cuda_graphs) {
    if (p.on_gpu()) p.decide("cuda_graphs", "off", "optimization.cuda_graphs = false");
    return;
  }
  const std::string obstacle = cuda_graph_obstacle(p, in);
  if (!obstacle.empty()) {
    p.warnings.push_back("optimization.cuda_graphs = true cannot apply: " + obstacle + "; the step runs eagerly");
    p.decide("cuda_graphs", "off", obstacle);
    return;
  }
  p.cuda_graphs = true;
  p.decide("cuda_graphs", "on after " + std::to_string(kCudaGraphWarmupSteps) + " eager warm-up steps",
           "the whole step (forward, backward, clipping, AdamW) replayed as one CUDA graph: no launch cost per kernel");
}

namespace {

// Why a measured GEMM rate was set aside (MathLibInfo::gemm_contended).
std::string contended_note(const MathLibInfo& m) {
  return " (the GEMM probe read " + format_number("%.1f", m.fp32_gemm_gflops) + " GFLOP/s fp32 of the ISA's " +
         format_number("%.0f", m.peak_fp32_gflops) + ", " + format_number("%.1f", m.bf16_gemm_gflops) + " bf16 of " +
         format_number("%.0f", m.peak_bf16_gflops) + ": under " + format_number("%.0f", 100 * MathLibInfo::kContendedShare) +
         "%, other processes held the cores" +
         (m.gemm_load_average > 0 ? ", load average " + format_number("%.1f", m.gemm_load_average) : std::string()) + ")";
}

}  // namespace

CpuRankPeak cpu_rank_peak(const Plan& p, const PlanInputs& in, bool for_mfu) {
  const auto& m = in.hw.math;
  const bool bf16 = p.precision == Precision::Bf16;
  // A contended probe would make MFU read above 100% (issue 19, defect 6): the ISA peak instead.
  double measured = m.gemm_measured && !m.gemm_contended() ? (bf16 ? m.bf16_gemm_gflops : m.fp32_gemm_gflops) : 0;
  // Without native bf16 the emulated GEMMs run on the fp32 FMA units, and the probe's square bf16
  // product can read slower than the model's own GEMMs (2.4x here: "mfu 238%"); MFU's peak is then
  // the faster of the two measured rates (the cost model keeps the bf16 rate: the emulation's speed).
  const bool emulated = bf16 && !MathLibInfo::native_bf16_peak(m.peak_bf16_gflops, m.peak_fp32_gflops);
  const bool fp32_rate = for_mfu && emulated && measured > 0 && m.fp32_gemm_gflops > measured;
  if (fp32_rate) measured = m.fp32_gemm_gflops;
  const bool use_measured = measured > 0;
  if (!use_measured) measured = bf16 ? m.peak_bf16_gflops : m.peak_fp32_gflops;
  const int64_t cores = std::max(1, in.hw.cpu.num_physical_cores);
  const int64_t probe_threads = m.gemm_threads > 0 ? m.gemm_threads : cores;
  // Ranks sharing the machine each train on their share of the threads the probe used.
  const double share = std::min(1.0, static_cast<double>(p.intra_op_threads) / static_cast<double>(probe_threads));
  CpuRankPeak peak;
  peak.flops = measured * share * 1e9;
  peak.reason = std::string(use_measured ? "measured " : "ISA peak of ") + (bf16 && !fp32_rate ? "bf16" : "fp32") +
                " GEMM on " + std::to_string(probe_threads) + " threads" +
                (fp32_rate ? " (bf16 is emulated here on the fp32 units; its probe read " +
                                 format_number("%.1f", m.bf16_gemm_gflops) + " GFLOP/s)"
                           : std::string()) +
                (share < 1 ? ", scaled to this rank's " + std::to_string(p.intra_op_threads) : std::string()) +
                (m.gemm_contended() ? contended_note(m) : std::string());
  return peak;
}

void decide_mfu_peak(Plan& p, const PlanInputs& in) {
  if (const GpuInfo* gpu = plan_gpu(p, in)) {
    p.peak_flops = gpu->peak_bf16_tflops * 1e12;
    p.decide("mfu_peak", format_number("%.1f", gpu->peak_bf16_tflops) + " TFLOP/s",
             "dense bf16 tensor-core peak of " + gpu->name);
    return;
  }
  const CpuRankPeak peak = cpu_rank_peak(p, in, /*for_mfu=*/true);
  p.peak_flops = peak.flops;
  p.decide("mfu_peak", format_number("%.1f", peak.flops / 1e9) + " GFLOP/s", peak.reason);
}

}  // namespace hwt
