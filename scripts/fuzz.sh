#!/usr/bin/env bash
# Fuzzes every parser of untrusted input (fuzz/fuzz_targets.h) with libFuzzer under ASan + UBSan:
# builds build-fuzz with clang (hwtrain's libraries instrumented; LibTorch is not), copies each
# target's seed corpus (fuzz/corpus/<target>) to build-fuzz/corpus, runs the target for SECONDS,
# then prints a table. A crash leaves its input in build-fuzz/crashes/<target>/: add it to
# fuzz/corpus/<target>/ as a regression input (tests/cli/fuzz_corpus_test.cpp replays it in CI).
#   scripts/fuzz.sh [SECONDS=60] [TARGET...]        (default: every target, one after another)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"; shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(safetensors_file trainer_state tokenizer_json dataset_manifest shard_header toml_config hardware_json checkpoint_list hf_config_json hf_weight_index sharding_manifest sweep_file study_file)
command -v clang++ >/dev/null || { echo "fuzz.sh: needs clang++ (apt-get install clang libclang-rt-14-dev)" >&2; exit 2; }
bash scripts/install-deps.sh build-fuzz/torch-python >/dev/null
if [ ! -f build-fuzz/CMakeCache.txt ]; then
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DHWTRAIN_TORCH_PYTHON="$(cat build-fuzz/torch-python)" -DHWTRAIN_FUZZ=ON \
    -DHWTRAIN_SANITIZE=address,undefined,fuzzer-no-link -DHWTRAIN_BUILD_TESTS=OFF -DHWTRAIN_BUILD_BENCH=OFF >/dev/null
fi
cmake --build build-fuzz -j "$(nproc)" --target $(printf 'fuzz_%s ' "${targets[@]}")
export ASAN_OPTIONS="protect_shadow_gap=0:detect_leaks=0:allocator_may_return_null=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
rows=()
for t in "${targets[@]}"; do
  corpus=build-fuzz/corpus/$t crashes=build-fuzz/crashes/$t
  mkdir -p "$corpus" "$crashes"
  cp -n fuzz/corpus/$t/* "$corpus"/ 2>/dev/null || true
  log=build-fuzz/fuzz-$t.log
  status=ok
  before=$(find "$crashes" -type f | wc -l)
  build-fuzz/fuzz/fuzz_$t "$corpus" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$crashes/" > "$log" 2>&1 || status=CRASH
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  found=$(( $(find "$crashes" -type f | wc -l) - before ))  # new in this run
  rows+=("$(printf '%-18s %6s s %12s %10s %8s  %s' "$t" "$seconds" "${runs:-?}" "${rate:-?}" "$found" "$status")")
done
echo "== fuzz $(date -u '+%F %H:%M') UTC, $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), commit $(git rev-parse --short HEAD)"
printf '%-18s %8s %12s %10s %8s  %s\n' target time executions exec/s crashes status
printf '%s\n' "${rows[@]}"
