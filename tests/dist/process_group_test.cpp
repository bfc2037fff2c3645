// ProcessGroup start-up errors (port in use, unreachable master, missing rank, bad backend),
// the consistency check, and faults: a rank that is killed, stopped or fails is named by the
// others, which stop within dist.timeout.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <thread>

#include "dist/dist_test_util.h"
#include "hwtrain/core/error.h"
#include "support/error_of.h"
#include "hwtrain/dist/dist_error.h"
#include "hwtrain/dist/ddp.h"
#include "hwtrain/dist/process_group.h"

namespace hwt {
namespace {

using testing::free_port;
using testing::run_workers;

DistEnv loopback_env(int rank, int world, int port) {
  DistEnv env;
  env.rank = rank;
  env.world_size = world;
  env.local_rank = rank;
  env.local_world_size = world;
  env.master_addr = "127.0.0.1";
  env.master_port = port;
  env.source = "torchrun";
  return env;
}

DistConfig with_timeout(double seconds) {
  DistConfig c;
  c.timeout = seconds;
  return c;
}

using testing::error_of;

TEST(ProcessGroup, PortInUseIsAConfigErrorNamingThePort) {
  const int port = free_port();
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  std::string msg = error_of<ConfigError>([&] { ProcessGroup g(loopback_env(0, 2, port), with_timeout(2)); });
  ::close(fd);
  EXPECT_NE(msg.find("MASTER_PORT " + std::to_string(port) + " on 127.0.0.1 is in use"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--master-port"), std::string::npos) << msg;
}

TEST(ProcessGroup, UnreachableMasterIsNamed) {
  std::string msg = error_of<DistError>([&] { ProcessGroup g(loopback_env(1, 2, free_port()), with_timeout(1)); });
  EXPECT_NE(msg.find("cannot reach the master at 127.0.0.1:"), std::string::npos) << msg;
}

TEST(ProcessGroup, RankThatNeverJoinsIsNamed) {
  std::string msg = error_of<DistError>([&] { ProcessGroup g(loopback_env(0, 3, free_port()), with_timeout(1)); });
  EXPECT_NE(msg.find("ranks 1, 2 did not join"), std::string::npos) << msg;
}

TEST(ProcessGroup, BackendChoicesAreChecked) {
  DistConfig c = with_timeout(1);
  c.backend = DistBackend::kNccl;  // a misspelt name is refused where it is read (tests/run)
  std::string msg = error_of<ConfigError>([&] { ProcessGroup g(loopback_env(0, 1, free_port()), c); });
  EXPECT_NE(msg.find("needs CUDA"), std::string::npos) << msg;
}

TEST(ProcessGroup, SingleRankGroupWorks) {
  ProcessGroup g(loopback_env(0, 1, free_port()), with_timeout(5));
  torch::Tensor t = torch::full({3}, 2.0);
  g.wait(g.all_reduce_sum(t), "all-reduce");
  EXPECT_TRUE(torch::equal(t, torch::full({3}, 2.0)));
  EXPECT_EQ(g.share_from_rank0("run_dir", "runs/x"), "runs/x");
  g.check_consistency("seed=1\n");
}

// NCCL through the code Gloo runs (GPU machines only): a one-rank group on cuda:0 all-reduces,
// and DataParallel's bucketed sync leaves a one-rank gradient as backward produced it.
TEST(ProcessGroup, NcclSingleRankOnCudaRunsTheGlooCodePath) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  DistConfig c = with_timeout(60);
  c.backend = DistBackend::kNccl;
  const torch::Device cuda("cuda:0");
  auto group = std::make_shared<ProcessGroup>(loopback_env(0, 1, free_port()), c, cuda);
  torch::Tensor t = torch::full({3}, 2.0, cuda);
  group->wait(group->all_reduce_sum(t), "all-reduce");
  EXPECT_TRUE(torch::equal(t.cpu(), torch::full({3}, 2.0)));

  torch::manual_seed(3);
  std::vector<torch::Tensor> params{torch::randn({64, 33}, cuda).requires_grad_(), torch::randn({1000}, cuda).requires_grad_()};
  DataParallelOptions options;
  options.bucket_size_mb = options.first_bucket_size_mb = 0.01;
  DataParallel ddp(group, params, options);
  ddp.begin_micro_step(true);
  auto loss = (params[0] * params[0]).sum() + params[1].sin().sum();
  loss.backward();
  ddp.finish();
  EXPECT_TRUE(torch::allclose(params[0].grad(), 2 * params[0].detach()));
  EXPECT_TRUE(torch::allclose(params[1].grad(), params[1].detach().cos()));
  EXPECT_EQ(ddp.last_stats().syncs, 1);
}

// ---- consistency check -----------------------------------------------------------------------

// Worker tests that end in an expected error exit with this code, so that the parent can tell
// "caught the right error" from a crash or a failed expectation.
constexpr int kExpected = 42;
[[noreturn]] void exit_worker() {
  std::fflush(stdout);
  std::_Exit(::testing::Test::HasFailure() ? 1 : kExpected);
}

TEST(DistWorker, MismatchedConfig) {
  HWT_WORKER_ONLY();
  ::signal(SIGTERM, SIG_IGN);  // the first rank to exit (with kExpected) makes the launcher stop the other
  ProcessGroup g(read_dist_env(), with_timeout(20));
  const std::string fingerprint = "model=gpt 4x128\nseed=" + std::string(g.rank() == 1 ? "2" : "1") + "\nworld=2\n";
  std::string msg = error_of<ConfigError>([&] { g.check_consistency(fingerprint); });
  EXPECT_NE(msg.find("rank 1 runs a different configuration than rank 0: 'seed=2' where rank 0 has 'seed=1'"),
            std::string::npos)
      << msg;
  exit_worker();
}

TEST(ProcessGroup, MismatchedConfigsAreRefusedNamingTheRank) {
  auto run = run_workers("MismatchedConfig", 2);
  EXPECT_EQ(run.result.exit_codes, std::vector<int>({kExpected, kExpected})) << run.output();
}

// ---- faults ----------------------------------------------------------------------------------

// Rank 0 keeps all-reducing until it fails, then reports the error.
void all_reduce_until_failure(ProcessGroup& g) {
  std::string msg = error_of<DistError>([&] {
    for (int i = 0; i < 100000; ++i) {
      torch::Tensor t = torch::ones({4});
      g.wait(g.all_reduce_sum(t), "test all-reduce");
    }
  });
  std::printf("error: %s\n", msg.c_str());
  EXPECT_NE(msg.find("test all-reduce failed on rank " + std::to_string(g.rank())), std::string::npos) << msg;
}

TEST(DistWorker, KilledRank) {
  HWT_WORKER_ONLY();
  ::signal(SIGTERM, SIG_IGN);  // outlive the launcher's stop request long enough to report
  ProcessGroup g(read_dist_env(), with_timeout(10));
  torch::Tensor t = torch::ones({4});
  g.wait(g.all_reduce_sum(t), "first all-reduce");
  if (g.rank() == 1) ::raise(SIGKILL);
  all_reduce_until_failure(g);
  exit_worker();
}

TEST(ProcessGroup, KilledRankIsNamedByTheOthers) {
  auto run = run_workers("KilledRank", 2, {}, /*grace_seconds=*/30);
  EXPECT_EQ(run.result.failed_rank, 1) << run.output();
  EXPECT_EQ(run.result.exit_code, 128 + SIGKILL) << run.output();
  EXPECT_EQ(run.result.exit_codes[0], kExpected) << run.output();
  EXPECT_TRUE(run.contains("rank 1 stopped responding")) << run.output();
}

TEST(DistWorker, StoppedRank) {
  HWT_WORKER_ONLY();
  ProcessGroup g(read_dist_env(), with_timeout(3));
  torch::Tensor t = torch::ones({4});
  g.wait(g.all_reduce_sum(t), "first all-reduce");
  if (g.rank() == 1) ::raise(SIGSTOP);  // a hang: alive, connected, silent
  all_reduce_until_failure(g);
  exit_worker();
}

TEST(ProcessGroup, HungRankTimesOutAndIsNamed) {
  auto run = run_workers("StoppedRank", 2, {}, /*grace_seconds=*/1);
  EXPECT_EQ(run.result.failed_rank, 0) << run.output();
  EXPECT_EQ(run.result.exit_code, kExpected) << run.output();
  EXPECT_EQ(run.result.exit_codes[1], 128 + SIGKILL) << run.output();  // stopped: only SIGKILL ends it
  EXPECT_TRUE(run.contains("rank 1 stopped responding")) << run.output();
}

TEST(DistWorker, StoppedRankZero) {
  HWT_WORKER_ONLY();
  ProcessGroup g(read_dist_env(), with_timeout(3));
  torch::Tensor t = torch::ones({4});
  g.wait(g.all_reduce_sum(t), "first all-reduce");
  if (g.rank() == 0) ::raise(SIGSTOP);  // rank 0 serves the store: every store call freezes with it
  all_reduce_until_failure(g);
  exit_worker();
}

// Issue 19, defect 1: a stopped rank 0 used to hang the others forever (a store call of the
// heartbeat thread blocked without a timeout and held the lock the failing rank needed).
TEST(ProcessGroup, StoppedRankZeroIsNamedAndTheRunEndsInTime) {
  const auto start = std::chrono::steady_clock::now();
  auto run = run_workers("StoppedRankZero", 2, {}, /*grace_seconds=*/1);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(run.result.failed_rank, 1) << run.output();
  EXPECT_EQ(run.result.exit_code, kExpected) << run.output();
  EXPECT_EQ(run.result.exit_codes[0], 128 + SIGKILL) << run.output();  // stopped: only SIGKILL ends it
  EXPECT_TRUE(run.contains("rank 0 is gone or frozen")) << run.output();
  EXPECT_LT(seconds, 3 + 1 + 20) << "dist.timeout 3 s + grace 1 s + start-up";
}

// Rank 0 frozen while the others wait outside any collective: nothing in-process can notice, so
// the launcher must, from rank 0's stale liveness file.
TEST(DistWorker, FrozenRankZeroSilentPeers) {
  HWT_WORKER_ONLY();
  ProcessGroup g(read_dist_env(), with_timeout(2));
  torch::Tensor t = torch::ones({4});
  g.wait(g.all_reduce_sum(t), "first all-reduce");
  if (g.rank() == 0) ::raise(SIGSTOP);
  std::this_thread::sleep_for(std::chrono::minutes(5));
  std::_Exit(1);
}

TEST(ProcessGroup, LauncherStopsARunWhoseRankIsFrozen) {
  const auto start = std::chrono::steady_clock::now();
  auto run = run_workers("FrozenRankZeroSilentPeers", 2, {}, /*grace_seconds=*/1, /*liveness_margin_seconds=*/1);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(run.result.failed_rank, 0) << run.output();
  EXPECT_EQ(run.result.exit_code, 124) << run.output();
  EXPECT_EQ(run.result.exit_codes[0], 128 + SIGKILL) << run.output();
  EXPECT_EQ(run.result.exit_codes[1], 128 + SIGTERM) << run.output();
  EXPECT_NE(run.result.reason.find("rank 0 (pid "), std::string::npos) << run.result.reason;
  EXPECT_NE(run.result.reason.find("is stopped (SIGSTOP or a debugger)"), std::string::npos) << run.result.reason;
  EXPECT_LT(seconds, 2 + 1 + 1 + 20) << "dist.timeout 2 s + margin 1 s + grace 1 s + start-up";
}

TEST(DistWorker, FailingRank) {
  HWT_WORKER_ONLY();
  ::signal(SIGTERM, SIG_IGN);
  auto g = std::make_unique<ProcessGroup>(read_dist_env(), with_timeout(10));
  torch::Tensor t = torch::ones({4});
  g->wait(g->all_reduce_sum(t), "first all-reduce");
  if (g->rank() == 1) {
    try {
      auto doomed = std::move(g);
      throw std::runtime_error("a data error on rank 1");  // unwinding marks the rank failed
    } catch (const std::exception&) {
    }
    std::_Exit(3);
  }
  all_reduce_until_failure(*g);
  exit_worker();
}

TEST(ProcessGroup, RankFailingWithAnErrorIsNamed) {
  auto run = run_workers("FailingRank", 2, {}, /*grace_seconds=*/30);
  EXPECT_EQ(run.result.failed_rank, 1) << run.output();
  EXPECT_EQ(run.result.exit_code, 3) << run.output();
  EXPECT_EQ(run.result.exit_codes[0], kExpected) << run.output();
  EXPECT_TRUE(run.contains("rank 1 failed")) << run.output();
}

}  // namespace
}  // namespace hwt
