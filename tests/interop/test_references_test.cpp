// The Python references the equality tests compare against (transformers, tokenizers, sentencepiece,
// protobuf, pytest) skip their tests where the test python lacks them: a preinstalled python, such as
// the offline GPU machines'. In hwtrain's own virtual environment, where scripts/install-deps.sh
// installs them (pinned), a missing one is a failure: the equality tests must not pass by skipping.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace hwt {
namespace {

TEST(TestReferences, InstalledInHwtrainsOwnVenv) {
  const std::string python = HWTRAIN_PYTHON;
  if (python.find("/venv-torch-") == std::string::npos) {
    GTEST_SKIP() << python << " is not hwtrain's own venv: the references are optional there";
  }
  for (const char* module : {"transformers", "tokenizers", "sentencepiece", "google.protobuf", "pytest", "safetensors"}) {
    const std::string cmd = python + " -c 'import " + module + "' > /dev/null 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << module << " is missing from " << python
                                           << " (scripts/install-deps.sh installs it; see its log)";
  }
}

}  // namespace
}  // namespace hwt
