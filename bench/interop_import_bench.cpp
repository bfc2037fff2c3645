// Peak memory of importing a Hugging Face model directory (issue 17): the memory-mapped path that
// `hwtrain train --init-from`, `generate DIR` and `eval DIR` take (load_hf_directory_weights:
// MappedSafetensors, tensor by tensor) against the previous one (load_safetensors reads each shard
// whole, then its tensors are copied), side by side, each in a process of its own so that every
// peak is that path's alone.
//   bench_interop_import_bench DIR [ROUNDS]        both paths, alternating, ROUNDS times (2)
//   bench_interop_import_bench DIR --path old|new  one path in this process
// Per run: the model's bytes; the resident set once the model is built (before the import);
// VmHWM after the import (the peak, reset with /proc/self/clear_refs once the model is built) and
// what the import added to it; the peak anonymous resident memory (RssAnon sampled every
// millisecond) and what the import added to it; the peak file-backed resident memory (RssFile,
// sampled: the mapped shard pages and the libraries); the import's seconds.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "hwtrain/interop/hf_directory.h"
#include "hwtrain/interop/hf_weights.h"
#include "hwtrain/io/safetensors.h"

using namespace hwt;
namespace fs = std::filesystem;

namespace {

// A field of /proc/self/status in bytes ("VmHWM", "RssAnon", ...).
double status_bytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) * 1024.0;
  }
  return -1;
}

// The previous import (hf_directory.cpp before issue 17): each shard read whole into memory.
void import_whole_shards(GPT& model, const fs::path& dir) {
  std::map<std::string, std::set<std::string>> shards;
  if (fs::exists(dir / "model.safetensors.index.json")) {
    std::ifstream in(dir / "model.safetensors.index.json");
    const auto index = nlohmann::json::parse(in);
    for (const auto& [name, shard] : index.at("weight_map").items()) shards[shard.get<std::string>()].insert(name);
  } else {
    shards["model.safetensors"] = {};
  }
  HfWeightLoader loader(model);
  for (const auto& [shard, names] : shards) {
    SafetensorsFile f = load_safetensors(dir / shard);
    NamedTensors taken;
    for (auto& [name, t] : f.tensors) {
      if (names.empty() || names.count(name)) taken.emplace_back(name, std::move(t));
    }
    loader.add(taken, (dir / shard).string());
  }
  loader.finish(dir.string());
}

int run_one(const fs::path& dir, const std::string& path) {
  torch::set_num_threads(1);
  const ModelConfig cfg = read_hf_model_config(dir, ModelConfig{});
  GPT model(cfg, cfg.vocab_size);
  double model_bytes = 0;
  for (const auto& p : model->parameters()) model_bytes += static_cast<double>(p.nbytes());
  const double before = status_bytes("VmRSS");
  const double anon_before = status_bytes("RssAnon");
  std::ofstream("/proc/self/clear_refs") << "5";  // VmHWM := VmRSS
  std::atomic<bool> done{false};
  double peak_anon = 0, peak_file = 0;
  std::thread sampler([&] {
    while (!done.load()) {
      peak_anon = std::max(peak_anon, status_bytes("RssAnon"));
      peak_file = std::max(peak_file, status_bytes("RssFile"));
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  const auto t0 = std::chrono::steady_clock::now();
  if (path == "old") {
    import_whole_shards(model, dir);
  } else {
    load_hf_directory_weights(model, dir);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  done = true;
  sampler.join();
  const double hwm = status_bytes("VmHWM");
  const double mb = 1 << 20;
  std::printf("%-4s %9.0f %10.0f %8.0f %12.0f %12.0f %10.0f %12.0f %7.2f\n", path.c_str(), model_bytes / mb,
              before / mb, hwm / mb, (hwm - before) / mb, peak_anon / mb, (peak_anon - anon_before) / mb,
              peak_file / mb, seconds);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR [ROUNDS] | DIR --path old|new\n", argv[0]);
    return 2;
  }
  if (argc == 4 && std::string(argv[2]) == "--path") return run_one(argv[1], argv[3]);
  const int rounds = argc > 2 ? std::stoi(argv[2]) : 2;
  std::printf("import of %s (MiB, s)\n", argv[1]);
  std::printf("path model_MiB rss_before peak_rss import_added peak_RssAnon anon_added peak_RssFile seconds\n");
  std::fflush(stdout);
  for (int r = 0; r < rounds; ++r) {
    for (const char* path : {"old", "new"}) {
      const pid_t pid = ::fork();
      if (pid == 0) {
        ::execl("/proc/self/exe", argv[0], argv[1], "--path", path, static_cast<char*>(nullptr));
        std::perror("execl");
        ::_exit(127);
      }
      int status = 0;
      ::waitpid(pid, &status, 0);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
    }
  }
  return 0;
}
