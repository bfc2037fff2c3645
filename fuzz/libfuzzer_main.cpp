// libFuzzer's entry point for one target, chosen at compile time (fuzz/CMakeLists.txt).
#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hwt::fuzz::HWT_FUZZ_TARGET(data, size);
  return 0;
}
