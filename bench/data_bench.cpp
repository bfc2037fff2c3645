// bench_data_bench: measurements of issue 5's data pipeline targets, driven by bench/data_bench.sh.
//   prepare CORPUS OUT [--tokenizer SPEC] [--threads N] [--separator S]  -> input MB/s of prepare
//   tokenizer CORPUS OUT --vocab N [--type bpe|unigram]                  -> trains a tokenizer
//   loader DATASET [--batch B] [--block T] [--workers W] [--seconds S]   -> tokens/s of next() alone
//          [--compute-ms M]: busy M ms per batch like a training step; then the share of time
//          next() waited is what a trainer would lose to data loading
// Prints one "result: ..." line per measurement.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_args.h"
#include "hwtrain/core/error.h"
#include "hwtrain/data/batch_loader.h"
#include "hwtrain/data/prepare.h"
#include "hwtrain/data/sharded_dataset.h"
#include "hwtrain/data/tokenizer_trainer.h"

using namespace hwt;
using Clock = std::chrono::steady_clock;

namespace {

using bench::arg;

int bench_prepare(int argc, char** argv) {
  PrepareOptions o;
  o.tokenizer = arg(argc, argv, "--tokenizer", "byte");
  o.num_threads = std::stoll(arg(argc, argv, "--threads", "0"));
  o.document_separator = arg(argc, argv, "--separator", "%");
  o.progress = false;
  PrepareStats s = prepare({argv[2]}, argv[3], o);
  std::printf("result: prepare tokenizer=%s threads=%lld bytes=%lld tokens=%lld shards=%lld seconds=%.3f MB/s=%.1f "
              "Mtokens/s=%.2f\n",
              o.tokenizer.c_str(), static_cast<long long>(o.num_threads), static_cast<long long>(s.num_bytes),
              static_cast<long long>(s.num_train_tokens + s.num_val_tokens), static_cast<long long>(s.num_shards),
              s.seconds, s.num_bytes / s.seconds / 1e6, (s.num_train_tokens + s.num_val_tokens) / s.seconds / 1e6);
  return 0;
}

int bench_tokenizer(int argc, char** argv) {
  TokenizerTrainOptions o;
  o.vocab_size = std::stoll(arg(argc, argv, "--vocab", "16000"));
  o.model_type = arg(argc, argv, "--type", "bpe");
  o.read.document_separator = arg(argc, argv, "--separator", "%");
  TokenizerTrainStats s = train_tokenizer({argv[2]}, argv[3], o);
  std::printf("result: tokenizer %s\n", describe(s).c_str());
  return 0;
}

int bench_loader(int argc, char** argv) {
  ShardedDataset ds(argv[2]);
  LoaderOptions o;
  o.batch_size = std::stoll(arg(argc, argv, "--batch", "16"));
  o.block_size = std::stoll(arg(argc, argv, "--block", "1024"));
  o.num_workers = std::stoll(arg(argc, argv, "--workers", "1"));
  o.prefetch_factor = std::stoll(arg(argc, argv, "--prefetch", "2"));
  o.sampling = parse_sampling_mode(arg(argc, argv, "--sampling", "random"));
  const double seconds = std::stod(arg(argc, argv, "--seconds", "3"));
  const double compute_ms = std::stod(arg(argc, argv, "--compute-ms", "0"));
  BatchLoader loader(ds.train(), o);
  for (int i = 0; i < 20; ++i) loader.next();  // warm the page cache and the allocator
  int64_t batches = 0, slow = 0;
  double waited = 0, max_wait = 0;
  auto t0 = Clock::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    LoadedBatch b = loader.next();
    waited += b.wait_seconds;
    max_wait = std::max(max_wait, b.wait_seconds);
    slow += b.wait_seconds > 1e-3;
    ++batches;
    if (compute_ms > 0) {  // a stand-in for forward/backward: keeps this core busy
      auto until = Clock::now() + std::chrono::duration<double, std::milli>(compute_ms);
      volatile double sink = 0;
      while (Clock::now() < until) sink = sink + b.x_NT.numel();
    }
    elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  const double tokens = static_cast<double>(batches * o.batch_size * o.block_size);
  std::printf("result: loader sampling=%s workers=%lld compute_ms=%g batch=%lldx%lld batches=%lld seconds=%.2f "
              "Mtokens/s=%.1f wait_share=%.4f max_wait_ms=%.2f waits_over_1ms=%lld starved=%lld\n",
              sampling_mode_name(o.sampling), static_cast<long long>(o.num_workers), compute_ms,
              static_cast<long long>(o.batch_size), static_cast<long long>(o.block_size),
              static_cast<long long>(batches), elapsed, tokens / elapsed / 1e6, waited / elapsed,
              max_wait * 1e3, static_cast<long long>(slow), static_cast<long long>(loader.num_starved()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s prepare|tokenizer|loader ARGS (see the source)\n", argv[0]);
    return 2;
  }
  try {
    std::string what = argv[1];
    if (what == "prepare" && argc >= 4) return bench_prepare(argc, argv);
    if (what == "tokenizer" && argc >= 4) return bench_tokenizer(argc, argv);
    if (what == "loader") return bench_loader(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: %s prepare|tokenizer|loader ARGS\n", argv[0]);
  return 2;
}
