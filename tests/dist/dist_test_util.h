// Helpers for multi-process tests: a free loopback port, and running worker tests of this same
// binary as ranks. A worker is a test named DistWorker.<Name> that skips unless it was started
// by run_workers() (HWT_DIST_WORKER=1); it reads its rank from the launcher's environment.
#pragma once
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "hwtrain/dist/dist_config.h"
#include "hwtrain/dist/dist_env.h"
#include "hwtrain/dist/launcher.h"
#include "hwtrain/dist/process_group.h"

namespace hwt::testing {

// A TCP port on 127.0.0.1 that was free a moment ago.
inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// A Gloo group of this process alone (rank 0 of 1) on a free loopback port.
inline std::shared_ptr<ProcessGroup> one_rank_group() {
  DistEnv env;
  env.master_port = free_port();
  DistConfig config;
  config.timeout = 30;
  return std::make_shared<ProcessGroup>(env, config);
}

// A worker's group (run_workers: the launcher's environment), waits bounded by 30 s.
inline std::shared_ptr<ProcessGroup> worker_group() {
  DistConfig config;
  config.timeout = 30;
  return std::make_shared<ProcessGroup>(read_dist_env(), config);
}

inline bool is_worker() { return std::getenv("HWT_DIST_WORKER") != nullptr; }

#define HWT_WORKER_ONLY()                                                      \
  do {                                                                         \
    if (!::hwt::testing::is_worker()) {                                        \
      GTEST_SKIP() << "runs only as a rank started by a multi-process test"; \
    }                                                                          \
  } while (0)

struct WorkerRun {
  LaunchResult result;
  std::vector<std::string> lines;  // every output line, prefixed "[rank r] "
  std::string output() const {
    std::string s;
    for (const auto& l : lines) s += l + "\n";
    return s;
  }
  bool contains(const std::string& needle) const { return output().find(needle) != std::string::npos; }
};

// Runs DistWorker.<name> as `world_size` ranks on loopback and collects their output.
inline WorkerRun run_workers(const std::string& name, int world_size, std::map<std::string, std::string> env = {},
                             double grace_seconds = 10.0, double liveness_margin_seconds = 5.0) {
  LaunchOptions o;
  o.liveness_margin_seconds = liveness_margin_seconds;
  o.nproc_per_node = world_size;
  o.master_addr = "127.0.0.1";
  o.master_port = free_port();
  o.grace_seconds = grace_seconds;
  o.command = {"/proc/self/exe", "--gtest_filter=DistWorker." + name, "--gtest_brief=1"};
  o.env = std::move(env);
  o.env["HWT_DIST_WORKER"] = "1";
  o.env["OMP_NUM_THREADS"] = "1";  // two ranks share two cores
  WorkerRun run;
  std::mutex m;
  run.result = launch(o, [&](bool, const std::string& line) {
    std::lock_guard<std::mutex> lock(m);
    run.lines.push_back(line);
  });
  return run;
}

}  // namespace hwt::testing
