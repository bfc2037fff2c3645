// What a ZeRO-2/3 training step allocates on a rank (Gloo; one process, or each of the processes
// that bench/sharded_memory_bench.sh starts with torchrun's variables): the model
// built whole, sharded by the engine (dist/sharded_parameters.h), then `steps` optimizer steps of
// forward, backward and the gradients' reduction. For each step: the live CPU tensor bytes at its
// start (the model states) and the peak above them during forward and backward
// (obs/host_allocation_counter.h: what the tensors hold, not what the malloc keeps), and the
// engine's own counters (peak gathered parameters; peak reduce buffers, where the build has it).
// Over one rank a shard is the whole unit (the gradient shards are the whole gradient), so run it on
// 2 or more ranks to see what sharding saves.
// HWT_MEMORY_TRACE=1 also prints, in the last step, rank 0's live bytes as each gradient arrives.
// Usage: bench_train_sharded_memory_bench [zero2|zero3] [n_layer=12] [n_embd=768] [vocab=50257]
//        [block=128] [batch=1] [steps=3] [recompute=1]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <torch/torch.h>
#include <type_traits>
#include <utility>
#include <vector>

#include "hwtrain/dist/dist_env.h"
#include "hwtrain/model/gpt_model.h"
#include "hwtrain/obs/host_allocation_counter.h"
#include "hwtrain/train/sharded_training.h"

namespace {

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

template <typename S, typename = void>
struct HasReducing : std::false_type {};
template <typename S>
struct HasReducing<S, std::void_t<decltype(std::declval<S>().peak_reducing_bytes)>> : std::true_type {};

template <typename S>
double peak_reducing(const S& s) {
  if constexpr (HasReducing<S>::value) {
    return static_cast<double>(s.peak_reducing_bytes);
  } else {
    return -1;
  }
}

double mib(double b) { return b / (1024.0 * 1024.0); }

}  // namespace

int main(int argc, char** argv) {
  if (!hwt::install_host_allocation_counter()) {
    std::fprintf(stderr, "the host allocation counter could not be installed\n");
    return 1;
  }
  auto arg = [&](int i, long d) { return argc > i ? std::atol(argv[i]) : d; };
  const std::string stage_name = argc > 1 ? argv[1] : "zero3";
  const hwt::ShardStage stage = stage_name == "zero2" ? hwt::ShardStage::Zero2 : hwt::ShardStage::Zero3;
  hwt::ModelConfig m;
  m.n_layer = arg(2, 12);
  m.n_embd = arg(3, 768);
  m.n_head = m.n_embd / 64;
  const int64_t vocab = arg(4, 50257);
  m.block_size = arg(5, 128);
  m.dropout = 0;
  const int64_t batch = arg(6, 1), steps = arg(7, 3);
  torch::manual_seed(0);
  hwt::GPT gpt(m, vocab);
  gpt->set_activation_checkpointing(arg(8, 1) != 0 ? 1 : 0);
  std::vector<std::pair<std::string, torch::Tensor>> decay, no_decay;
  gpt->named_decay_and_no_decay(decay, no_decay);
  hwt::AdamWOptions whole_options;
  whole_options.defer_state = true;  // as the trainer's under zero2/zero3: no whole moments
  hwt::AdamW whole(decay, no_decay, whole_options);
  hwt::GptModel model(gpt);
  hwt::DistEnv env = hwt::read_dist_env();
  if (!env.distributed()) env.master_port = free_port();
  auto group = std::make_shared<hwt::ProcessGroup>(env, hwt::DistConfig{});
  hwt::ShardedTraining st = hwt::shard_training(model, whole, group, stage, hwt::Precision::Fp32);
  if (env.rank == 0) std::printf("== rank %d of %d, %s, gpt2 shape: %ld layers, width %ld, vocabulary %ld, block %ld, batch %ld, recompute %ld, fp32\n",
              env.rank, env.world_size, stage_name.c_str(), static_cast<long>(m.n_layer), static_cast<long>(m.n_embd),
              static_cast<long>(vocab), static_cast<long>(m.block_size), static_cast<long>(batch), arg(8, 1));
  const auto x = torch::randint(vocab, {batch, m.block_size}), y = torch::randint(vocab, {batch, m.block_size});
  // HWT_MEMORY_TRACE=1: rank 0's live bytes (and the peak so far) above the last step's start as
  // each parameter's gradient arrives in backward: where the step peak is reached.
  const bool trace = std::getenv("HWT_MEMORY_TRACE") != nullptr && env.rank == 0;
  for (int64_t step = 1; step <= steps; ++step) {
    const double start = static_cast<double>(hwt::host_allocation().current_bytes);
    hwt::reset_host_allocation_peak();
    if (trace && step == steps) {
      for (const auto& item : gpt->named_parameters()) {
        const std::string name = item.key();
        torch::Tensor p = item.value();
        p.register_hook([name, start](const torch::Tensor& g) {
          std::printf("  trace: %-28s gradient arrives: live %7.1f MiB, peak so far %7.1f MiB\n", name.c_str(),
                      mib(static_cast<double>(hwt::host_allocation().current_bytes) - start),
                      mib(static_cast<double>(hwt::host_allocation().peak_bytes) - start));
          return g;
        });
      }
    }
    torch::Tensor loss = gpt->forward_loss(x, y);
    const double forward = static_cast<double>(hwt::host_allocation().peak_bytes) - start;
    st.engine->begin_micro_step(true);
    loss.backward();
    st.engine->finish();
    const double step_peak = static_cast<double>(hwt::host_allocation().peak_bytes) - start;
    st.sharding.optimizer->step(1e-4);
    st.sharding.after_step();
    st.sharding.optimizer->zero_grad();
    if (env.rank != 0) continue;
    std::printf("step %ld: loss %.4f, live at start %.1f MiB, peak above it: forward %.1f MiB, step %.1f MiB\n",
                static_cast<long>(step), loss.item<double>(), mib(start), mib(forward), mib(step_peak));
  }
  const auto& s = st.engine->stats();
  if (env.rank == 0) std::printf("engine: peak gathered %.1f MiB, peak reducing %s\n", mib(static_cast<double>(s.peak_gathered_bytes)),
              peak_reducing(s) < 0 ? "(not counted by this build)"
                                   : (std::to_string(mib(peak_reducing(s))).substr(0, 6) + " MiB").c_str());
  group->shutdown();
  return 0;
}
