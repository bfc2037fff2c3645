#!/usr/bin/env bash
# Fuzzes every parser of untrusted input (fuzz/fuzz_targets.h) with libFuzzer under ASan + UBSan:
# builds build-fuzz with clang (hwtrain's libraries instrumented; LibTorch is not), copies each
# target's seed corpus (fuzz/corpus/<target>) to build-fuzz/corpus, runs the target for SECONDS,
# then prints a table. A crash leaves its input in build-fuzz/crashes/<target>/: add it to
# fuzz/corpus/<target>/ as a regression input (tests/cli/fuzz_corpus_test.cpp replays it in CI).
#   scripts/fuzz.sh [SECONDS=60] [TARGET...]        every target (default) one after another
#   scripts/fuzz.sh --ci [SECONDS=15] [TARGET...]   what `make test` runs: every target, as many at
#                                                   once as there are cores; installs clang if missing;
#                                                   from the seed corpus alone, with a fixed seed
#                                                   (FUZZ_SEED, default 1), so that what CI finds a
#                                                   local --ci run finds too. Without --ci the seed is
#                                                   random and the corpus grows from run to run.
# Exits 1 if any target crashed (or hung, or ran out of memory), 2 on bad arguments or no toolchain.
set -euo pipefail
cd "$(dirname "$0")/.."
ci=0
if [ "${1:-}" = "--ci" ]; then ci=1; shift; fi
seconds=$([ $ci -eq 1 ] && echo 15 || echo 60)
if [[ "${1:-}" =~ ^[0-9]+$ ]]; then seconds=$1; shift; fi
[[ "$seconds" =~ ^[0-9]+$ ]] && [ "$seconds" -gt 0 ] ||
  { echo "fuzz.sh: SECONDS must be a positive integer (0 would let libFuzzer run without a limit)" >&2; exit 2; }
# The targets: fuzz/CMakeLists.txt's list (one list; fuzz_targets.h defines them).
mapfile -t all < <(sed -n 's/^foreach(target \(.*\))$/\1/p' fuzz/CMakeLists.txt | tr ' ' '\n')
[ ${#all[@]} -gt 0 ] || { echo "fuzz.sh: no target list in fuzz/CMakeLists.txt" >&2; exit 2; }
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all[@]}")
for t in "${targets[@]}"; do
  printf '%s\n' "${all[@]}" | grep -qx "$t" || { echo "fuzz.sh: unknown target '$t'; valid: ${all[*]}" >&2; exit 2; }
done

# Whether clang links a libFuzzer binary here (any clang version, any architecture).
have_libfuzzer() {
  command -v clang++ >/dev/null || return 1
  local probe; probe=$(mktemp -d)
  printf '#include <cstddef>\n#include <cstdint>\nextern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n' > "$probe/p.cpp"
  clang++ -fsanitize=fuzzer "$probe/p.cpp" -o "$probe/p" >/dev/null 2>&1; local ok=$?
  rm -rf "$probe"
  return $ok
}
if ! have_libfuzzer; then
  if [ $ci -eq 1 ]; then
    echo "[fuzz] installing clang and its libFuzzer runtime (Debian: clang libclang-rt-dev)" >&2
    sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get install -y -qq --no-install-recommends clang libclang-rt-dev >/dev/null 2>&1 ||
      { $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends clang libclang-rt-dev >/dev/null; } || true
  fi
  have_libfuzzer || { echo "fuzz.sh: needs clang++ with libFuzzer (apt-get install clang libclang-rt-dev); make test FUZZ_SECONDS=0 skips fuzzing" >&2; exit 2; }
fi
bash scripts/install-deps.sh build-fuzz/torch-python >/dev/null
if [ ! -f build-fuzz/CMakeCache.txt ]; then
  gen=Ninja; command -v ninja >/dev/null || gen="Unix Makefiles"
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G "$gen" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DHWTRAIN_TORCH_PYTHON="$(cat build-fuzz/torch-python)" -DHWTRAIN_FUZZ=ON \
    -DHWTRAIN_SANITIZE=address,undefined,fuzzer-no-link -DHWTRAIN_BUILD_TESTS=OFF -DHWTRAIN_BUILD_BENCH=OFF >/dev/null
fi
start=$(date +%s)
cmake --build build-fuzz -j "$(nproc)" --target $(printf 'fuzz_%s ' "${targets[@]}") > build-fuzz/build.log 2>&1 ||
  { tail -40 build-fuzz/build.log; echo "fuzz.sh: the instrumented build failed (build-fuzz/build.log)" >&2; exit 2; }
built=$(( $(date +%s) - start ))
export ASAN_OPTIONS="protect_shadow_gap=0:detect_leaks=0:allocator_may_return_null=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

# One target for `seconds`; its table row goes to build-fuzz/row-<target>.
run_target() {
  local t=$1 corpus=build-fuzz/corpus/$1 crashes=build-fuzz/crashes/$1 log=build-fuzz/fuzz-$1.log status=ok
  if [ "$ci" -eq 1 ]; then rm -rf "$corpus"; fi  # CI starts from the seeds; so does a local --ci run
  mkdir -p "$corpus" "$crashes"
  cp -n fuzz/corpus/$t/* "$corpus"/ 2>/dev/null || true
  local before; before=$(find "$crashes" -type f | wc -l)
  local seed=()
  if [ "$ci" -eq 1 ]; then seed=(-seed="${FUZZ_SEED:-1}"); fi
  build-fuzz/fuzz/fuzz_$t "$corpus" "${seed[@]}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$crashes/" > "$log" 2>&1 || status=CRASH
  local runs rate edges found
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  edges=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  found=$(( $(find "$crashes" -type f | wc -l) - before ))  # new in this run
  printf '%-18s %6s s %12s %10s %8s %8s  %s\n' "$t" "$seconds" "${runs:-?}" "${rate:-?}" "${edges:-?}" "$found" "$status" \
    > build-fuzz/row-$t
}
export -f run_target
export seconds ci
rm -f build-fuzz/row-*
jobs=1; [ $ci -eq 1 ] && jobs=$(nproc)
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'run_target {}' || true  # rows say what happened
echo "== fuzz $(date -u '+%F %H:%M') UTC, $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), build ${built} s, $jobs at once"
printf '%-18s %8s %12s %10s %8s %8s  %s\n' target time executions exec/s edges crashes status
crashed=0
for t in "${targets[@]}"; do
  [ -f build-fuzz/row-$t ] || printf '%-18s %6s s %12s %10s %8s %8s  %s\n' "$t" "$seconds" ? ? ? ? CRASH > build-fuzz/row-$t
  cat build-fuzz/row-$t
  grep -q ' CRASH$' build-fuzz/row-$t && { crashed=1; echo "  $t: $(grep -m1 -E 'ERROR|runtime error|deadly signal' build-fuzz/fuzz-$t.log || true) (log build-fuzz/fuzz-$t.log)"; }
done
exit $crashed
