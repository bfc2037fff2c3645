// Every input in fuzz/corpus/<target>/ (the seeds, and each crash the fuzzers found, kept as a
// regression input) through the same target functions the libFuzzer binaries run: an input that
// escapes with anything but hwt::Error's one-line rejection fails here, in every CI run, with the
// gcc build. The fuzzing itself (clang, libFuzzer, sanitizers) is scripts/fuzz.sh.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "../fuzz/fuzz_targets.h"

namespace hwt {
namespace {

namespace fs = std::filesystem;

TEST(FuzzCorpus, EveryInputIsAcceptedOrRejectedWithAnError) {
  const fs::path root = fs::path(HWTRAIN_SOURCE_DIR) / "fuzz" / "corpus";
  for (const auto& target : fuzz::all_targets()) {
    const fs::path dir = root / target.name;
    ASSERT_TRUE(fs::is_directory(dir)) << "no corpus for " << target.name;
    size_t inputs = 0;
    for (const auto& e : fs::directory_iterator(dir)) {
      std::ifstream in(e.path(), std::ios::binary);
      const std::string bytes(std::istreambuf_iterator<char>(in), {});
      SCOPED_TRACE(e.path().string());
      EXPECT_NO_THROW(target.run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
      ++inputs;
    }
    EXPECT_GE(inputs, 2u) << target.name << ": seed its corpus with valid files";
  }
}

}  // namespace
}  // namespace hwt
