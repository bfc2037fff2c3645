// Encoding speed of a tokenizer directory (Hugging Face tokenizer.json or hwtrain's), one thread,
// on a text file: median of 5 encodes of the whole text. bench/tokenizer_bench.sh runs it beside
// the `tokenizers` library on the same text. Usage: bench_data_tokenizer_bench TOKENIZER_DIR TEXT_FILE
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "hwtrain/core/files.h"
#include "hwtrain/data/tokenizer_files.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s TOKENIZER_DIR TEXT_FILE\n", argv[0]);
    return 2;
  }
  const auto tok = hwt::load_tokenizer(argv[1]);
  const std::string text = hwt::read_file(argv[2]);
  std::vector<double> seconds;
  size_t n = 0;
  for (int i = 0; i < 5; ++i) {
    const auto start = std::chrono::steady_clock::now();
    n = tok->encode(text).size();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  std::printf("hwtrain %s: %zu bytes -> %zu ids, %.4f s, %.2f MB/s\n", tok->name().c_str(), text.size(), n, seconds[2],
              static_cast<double>(text.size()) / seconds[2] / 1e6);
  return 0;
}
