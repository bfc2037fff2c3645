#include "hwtrain/dist/process_group.h"

#include <c10/util/Logging.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <sstream>
#include <thread>

#include "hwtrain/core/error.h"
#include "hwtrain/core/fault_injection.h"
#include "hwtrain/core/strings.h"
#include "hwtrain/dist/backend_factory.h"
#include "hwtrain/dist/dist_error.h"
#include "hwtrain/dist/heartbeat.h"
#include "hwtrain/dist/liveness.h"
#include "hwtrain/dist/store_text.h"
#include "hwtrain/obs/log.h"

namespace hwt {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// c10d logs every connection retry and socket error to stderr; hwtrain reports the outcome itself
// in one line. The level is process-wide, so this is only held around the rendezvous.
class QuietC10dLogs {
 public:
  QuietC10dLogs() : saved_(FLAGS_caffe2_log_level) { FLAGS_caffe2_log_level = 3; }
  ~QuietC10dLogs() { FLAGS_caffe2_log_level = saved_; }

 private:
  int saved_;
};

}  // namespace

torch::Device rank_device(const DistEnv& env, torch::Device planned) {
  if (!planned.is_cuda()) return planned;
  const int count = static_cast<int>(torch::cuda::device_count());
  if (env.local_rank >= count) {
    throw HardwareError("local rank " + std::to_string(env.local_rank) + " needs GPU " +
                        std::to_string(env.local_rank) + " but " + std::to_string(count) +
                        " are visible; start at most " + std::to_string(count) + " ranks per node");
  }
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank));
}

ProcessGroup::ProcessGroup(const DistEnv& env, const DistConfig& config, torch::Device device)
    : rank_(env.rank),
      world_size_(env.world_size),
      device_(device),
      master_(env.master_addr + ":" + std::to_string(env.master_port)),
      timeout_(milliseconds(static_cast<int64_t>(config.timeout * 1000.0))) {
  if (config.timeout <= 0) {
    throw ConfigError("dist.timeout = " + std::to_string(config.timeout) + " must be positive (seconds)");
  }
  check_master_address(env);
  liveness_ = LivenessBeacon::from_environment(rank_, timeout_);
  // c10d warns, with a C++ stack trace, about every store call that fails once a peer is gone; hwtrain names the
  // failure in one line. Errors still print; a user's TORCH_CPP_LOG_LEVEL wins. Process-wide, kept to the exit.
  if (!std::getenv("TORCH_CPP_LOG_LEVEL")) FLAGS_caffe2_log_level = std::max(FLAGS_caffe2_log_level, 2);
  const DistBackend kind = config.backend.value_or(device.is_cuda() ? DistBackend::kNccl : DistBackend::kGloo);
  const std::string backend = enum_name(kind);
  if (kind == DistBackend::kNccl && !device.is_cuda()) {
    throw ConfigError("dist.backend = nccl needs CUDA devices but this rank runs on " + device.str() +
                      "; use dist.backend = gloo (or auto)");
  }
  {
    QuietC10dLogs quiet;
    c10d::TCPStoreOptions options;
    options.port = static_cast<uint16_t>(env.master_port);
    options.isServer = env.rank == 0;
    options.numWorkers = env.world_size;
    options.waitWorkers = false;  // await_ranks() waits instead, naming who is missing
    options.timeout = timeout_;
    try {
      store_ = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
    } catch (const std::exception& e) {
      const std::string text = error_text(e);
      if (env.rank == 0 && text.find("EADDRINUSE") != std::string::npos) {
        throw ConfigError("MASTER_PORT " + std::to_string(env.master_port) + " on " + env.master_addr +
                          " is in use; choose another with --master-port (or MASTER_PORT)");
      }
      if (env.rank == 0) {
        throw DistError("rank 0 cannot serve the rendezvous store at " + master_ + ": " + text +
                        "; MASTER_ADDR must be an address of rank 0's node");
      }
      throw DistError("cannot reach the master at " + master_ + " within " + seconds_text(timeout_) +
                      " (" + text + "); is rank 0 running, and are MASTER_ADDR and MASTER_PORT right?");
    }
  }
  await_ranks(master_);
  create_backend(env, backend);
  const milliseconds interval = std::clamp(timeout_ / 20, milliseconds(50), milliseconds(1000));
  heartbeat_ = std::make_unique<Heartbeat>(store_->clone(), rank_, world_size_, interval, timeout_ / 2,
                                           completed_);
  log_info("process group: {} ranks, {} backend, rendezvous at {}", world_size_, backend_name_, master_);
  fault_point("startup");
}

void ProcessGroup::await_ranks(const std::string& master) {
  std::vector<int> missing;
  try {
    store_->set(Heartbeat::key(rank_), Heartbeat::bytes(Heartbeat::encode(0, 0, "running")));
    missing = wait_for_rank_keys(*store_, "hwt/hb/", world_size_, timeout_);
  } catch (const std::exception& e) {
    throw DistError("the rendezvous at " + master + " failed on rank " + std::to_string(rank_) + ": " +
                    error_text(e) + (rank_ == 0 ? "" : "; did rank 0 stop?"));
  }
  if (!missing.empty()) {
    throw DistError(rank_list(missing) + " did not join the rendezvous at " + master + " within " +
                    seconds_text(timeout_) + " (WORLD_SIZE=" + std::to_string(world_size_) +
                    "); start every rank (under Slurm, with srun) with the same MASTER_ADDR and MASTER_PORT");
  }
}

void ProcessGroup::create_backend(const DistEnv& env, const std::string& backend) {
  // Single-node runs talk over loopback; across nodes Gloo binds the address of this host.
  bind_host_ = is_loopback(env.master_addr) ? "127.0.0.1" : "";
  // The backend's own keys stay apart from hwtrain's.
  auto prefixed = c10::make_intrusive<c10d::PrefixStore>("pg/" + backend, store_);
  backend_name_ = backend;
  try {
    if (backend == "nccl") {
      backend_ = make_nccl_backend(prefixed, rank_, world_size_, timeout_, device_.index() < 0 ? 0 : device_.index());
    } else {
      backend_ = make_gloo_backend(prefixed, rank_, world_size_, timeout_, bind_host_);
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw DistError("cannot create the " + backend + " process group (rank " + std::to_string(rank_) + " of " +
                    std::to_string(world_size_) + "): " + error_text(e));
  }
}

ProcessGroup::~ProcessGroup() {
  if (closed_) return;
  try {
    if (failed_ || std::uncaught_exceptions() > 0) {
      abandon();
    } else {
      shutdown();
    }
  } catch (const std::exception& e) {
    log_warn("process group shutdown: {}", error_text(e));
  }
}

void ProcessGroup::wait(const WorkPtr& work, const std::string& what) {
  fault_point("collective");
  try {
    // NCCL: the current stream waits for the work and the host goes on queueing kernels, as
    // torch.distributed's work.wait() does; the backend's watchdog enforces dist.timeout there
    // (make_nccl_backend). A timeout passed here would make WorkNCCL::wait block the host until the
    // work completes: every tensor-parallel collective, every pipeline tick, every bucket.
    work->wait(backend_name_ == "nccl" ? ::kNoTimeout : timeout_);
  } catch (const std::exception& e) {
    fail(what, error_text(e));
  }
  ++*completed_;
}

void ProcessGroup::send(torch::Tensor& tensor, int dst, int tag) {
  std::vector<torch::Tensor> tensors{tensor};
  wait(backend_->send(tensors, dst, tag), "sending to rank " + std::to_string(world_rank(dst)));
}

ProcessGroup::WorkPtr ProcessGroup::send_async(torch::Tensor& tensor, int dst, int tag) {
  std::vector<torch::Tensor> tensors{tensor};
  return backend_->send(tensors, dst, tag);
}

void ProcessGroup::recv(torch::Tensor& tensor, int src, int tag) {
  std::vector<torch::Tensor> tensors{tensor};
  wait(backend_->recv(tensors, src, tag), "receiving from rank " + std::to_string(world_rank(src)));
}

bool ProcessGroup::coalesces_point_to_point() const { return backend_->supportsCoalescing(); }

ProcessGroup::WorkPtr ProcessGroup::start_point_to_point(const std::vector<PeerOp>& ops, const std::string& what) {
  TORCH_CHECK(coalesces_point_to_point(), "the ", backend_name(), " backend does not group point-to-point operations");
  backend_->startCoalescing();
  try {
    for (const PeerOp& op : ops) {
      std::vector<torch::Tensor> tensors{*op.tensor};
      op.send ? backend_->send(tensors, op.peer, op.tag) : backend_->recv(tensors, op.peer, op.tag);
    }
    return backend_->endCoalescing();
  } catch (const std::exception& e) {  // a group half issued cannot be matched: the group is broken
    fail(what, error_text(e));
  }
}

void ProcessGroup::barrier(const std::string& what) {
  c10d::BarrierOptions options;
  options.timeout = timeout_;
  if (device_.is_cuda()) options.device_ids = {static_cast<int64_t>(device_.index())};
  wait(backend_->barrier(options), what);
}

void ProcessGroup::fail(const std::string& what, const std::string& error) {
  failed_ = true;
  if (heartbeat_) heartbeat_->set_state("failed");
  if (parent_) {
    parent_->failed_ = true;
    if (parent_->heartbeat_) parent_->heartbeat_->set_state("failed");
  }
  throw DistError(what + " failed on rank " + std::to_string(world_rank(rank_)) + ": " + error + "; " + blame());
}

std::string ProcessGroup::blame() {
  if (parent_) return parent_->blame();
  if (!heartbeat_) return "no heartbeat information";
  const double interval = std::chrono::duration<double>(heartbeat_->interval()).count();
  // A peer that just died still has a fresh last beat: give the evidence a few intervals.
  const auto deadline = Clock::now() + std::chrono::duration<double>(4.5 * interval);
  std::vector<std::string> culprits;
  std::vector<Heartbeat::Peer> peers;
  for (;;) {
    culprits.clear();
    peers = heartbeat_->peers();
    const double down = heartbeat_->store_down_seconds();
    if (down > 2 * interval && rank_ != 0) {
      culprits.push_back("rank 0 is gone or frozen (the rendezvous store it serves at " + master_ +
                         " has not answered for " + std::to_string(static_cast<int>(down + 0.5)) +
                         " s: dead, killed or stopped)");
    }
    for (int r = 0; r < world_size_ && down == 0; ++r) {
      if (r == rank_) continue;
      const auto& p = peers[r];
      if (p.state == "failed") {
        culprits.push_back("rank " + std::to_string(r) + " failed (see its error)");
      } else if (p.state == "done") {
        culprits.push_back("rank " + std::to_string(r) + " had already finished (did the ranks run different step counts?)");
      } else if (p.silent_seconds > 3 * interval) {
        culprits.push_back("rank " + std::to_string(r) + " stopped responding (no heartbeat for " +
                           std::to_string(static_cast<int>(p.silent_seconds + 0.5)) + " s: dead, killed or stopped)");
      }
    }
    if (!culprits.empty() || Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::duration<double>(interval / 2));
  }
  if (culprits.empty()) {
    const int64_t mine = completed_->load();
    for (int r = 0; r < world_size_; ++r) {
      if (r != rank_ && peers[r].progress < mine) {
        culprits.push_back("rank " + std::to_string(r) + " is behind (" + std::to_string(peers[r].progress) +
                           " collectives done, this rank " + std::to_string(mine) + "): hung or much slower");
      }
    }
  }
  if (culprits.empty()) return "no rank reported a problem";
  return join(culprits, "; ");
}

void ProcessGroup::check_consistency(const std::string& fingerprint) {
  const std::string prefix = "hwt/fingerprint/", checked = "hwt/fingerprint_checked/";
  auto lines_of = [](const std::vector<uint8_t>& bytes) {
    std::vector<std::string> lines;
    std::istringstream in(std::string(bytes.begin(), bytes.end()));
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  };
  std::string mismatch;
  try {
    store_->set(prefix + std::to_string(rank_), Heartbeat::bytes(fingerprint));
    std::vector<int> missing = wait_for_rank_keys(*store_, prefix, world_size_, timeout_);
    if (!missing.empty()) {
      failed_ = true;
      throw DistError(rank_list(missing) + " did not reach the start-up check within " + seconds_text(timeout_) +
                      "; " + blame());
    }
    const auto reference = lines_of(store_->get(prefix + "0"));
    for (int r = 1; r < world_size_ && mismatch.empty(); ++r) {
      const auto lines = lines_of(store_->get(prefix + std::to_string(r)));
      if (lines == reference) continue;
      size_t i = 0;
      while (i < lines.size() && i < reference.size() && lines[i] == reference[i]) ++i;
      const std::string theirs = i < lines.size() ? "'" + lines[i] + "'" : "nothing";
      const std::string ours = i < reference.size() ? "'" + reference[i] + "'" : "nothing";
      mismatch = "rank " + std::to_string(r) + " runs a different configuration than rank 0: " + theirs +
                 " where rank 0 has " + ours + "; every rank needs the same config, seed and dataset";
    }
    // Rank 0 serves the store: it stays until every rank has read what it compares, so that all
    // of them report the same error rather than a lost connection.
    store_->set(checked + std::to_string(rank_), Heartbeat::bytes("1"));
    if (rank_ == 0) wait_for_rank_keys(*store_, checked, world_size_, timeout_);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail("the start-up consistency check", error_text(e));
  }
  if (!mismatch.empty()) {
    failed_ = true;
    throw ConfigError(mismatch);
  }
}

double ProcessGroup::mean_across_ranks(double value, const std::string& what) {
  torch::Tensor t = torch::full({1}, value, torch::TensorOptions().dtype(torch::kFloat64).device(device_));
  wait(all_reduce_sum(t), what);
  return t.item<double>() / world_size_;
}

bool ProcessGroup::any_rank(bool flag, const std::string& what) {
  torch::Tensor t = torch::full({1}, flag ? 1.0f : 0.0f, torch::TensorOptions().device(device_));
  wait(all_reduce_sum(t), what);
  return t.item<float>() > 0;
}

std::string ProcessGroup::share_from_rank0(const std::string& key, const std::string& value,
                                           std::optional<milliseconds> timeout) {
  const std::string full = "hwt/shared/" + key;
  if (rank_ == 0) {
    store_->set(full, Heartbeat::bytes(value));
    return value;
  }
  const milliseconds limit = timeout.value_or(timeout_);
  const auto deadline = Clock::now() + limit;
  for (;;) {
    bool ready = false;
    try {
      ready = store_->check({full});
    } catch (const std::exception& e) {
      fail("waiting for rank 0 to publish '" + key + "'", error_text(e));
    }
    if (ready) break;
    if (Clock::now() >= deadline) {
      failed_ = true;
      throw DistError("rank 0 did not publish '" + key + "' within " + seconds_text(limit) + "; " + blame());
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
  std::vector<uint8_t> bytes;
  try {
    bytes = store_->get(full);
  } catch (const std::exception& e) {
    fail("reading '" + key + "' from rank 0", error_text(e));
  }
  return std::string(bytes.begin(), bytes.end());
}

void ProcessGroup::shutdown() {
  if (closed_) return;
  closed_ = true;
  if (heartbeat_) {
    heartbeat_->set_state("done");
    if (rank_ == 0) {
      // The store lives in this process: keep it until the others are done with it.
      const auto deadline = Clock::now() + timeout_;
      while (Clock::now() < deadline) {
        bool all_done = true;
        const auto peers = heartbeat_->peers();
        for (int r = 1; r < world_size_; ++r) all_done = all_done && peers[r].state != "running";
        if (all_done) break;
        std::this_thread::sleep_for(heartbeat_->interval());
      }
    }
    heartbeat_->stop();
  }
  if (backend_) backend_->shutdown();  // NCCL's orderly teardown; nothing for Gloo
  backend_.reset();
  heartbeat_.reset();
  store_.reset();
}

void ProcessGroup::abandon() {
  if (closed_) return;
  closed_ = true;
  failed_ = true;
  if (heartbeat_) {
    heartbeat_->set_state("failed");
    heartbeat_->stop();
  }
  // Joining the backend's worker threads could block on a dead peer until its timeout; the
  // process is ending with an error anyway, so they are left to exit. NCCL's abort() cancels
  // what is queued on the GPU (Gloo's does nothing).
  if (backend_) {
    try {
      backend_->abort();
    } catch (const std::exception&) {
    }
  }
  (void)backend_.release();
  (void)store_.release();
}

}  // namespace hwt
