#!/usr/bin/env bash
# The test suite under sanitizers: every test under AddressSanitizer + UndefinedBehaviorSanitizer
# (make test SANITIZE=address,undefined), then the distributed and data-loader tests, the ones
# with threads of their own, under ThreadSanitizer. hwtrain's code is instrumented; LibTorch is
# not (its own races and leaks are out of reach, and suppressed where they surface).
#   scripts/sanitize.sh [address|thread|all]     (default all; results: docs/reliability.md)
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-all}"
supp="$PWD/scripts/sanitizers"
# protect_shadow_gap=0: the CUDA runtime LibTorch loads maps memory where ASan's gap would be.
export ASAN_OPTIONS="protect_shadow_gap=0:detect_leaks=1:abort_on_error=1:suppressions=$supp/asan.supp"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$supp/ubsan.supp"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp"

if [ "$what" = all ] || [ "$what" = address ]; then
  # Instrumented code is slower: a sanitizer build gives each GoogleTest 1800 s (tests/CMakeLists.txt);
  # TEST_TIMEOUT covers the other tests (install, python).
  time make test SANITIZE=address,undefined TEST_TIMEOUT=1800
fi
if [ "$what" = all ] || [ "$what" = thread ]; then
  make configure SANITIZE=thread
  cmake --build build-sanitize-thread -j "$(nproc)" --target test_dist test_data
  (cd build-sanitize-thread && time ctest --output-on-failure -j "$(nproc)" --timeout 900 -R '^(Launcher|LivenessWatch|ProcessGroup|DataParallel|Zero1|DistEnv|DeviceMesh|Segments|ShardedParameters|BatchLoader|OrderedPipeline|ShardedDataset|DatasetSampler|WindowSampler|Prepare)')
fi
