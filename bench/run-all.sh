#!/usr/bin/env bash
# Every benchmark of docs/benchmarks.md, one after the other (about an hour on 2 cores).
# Run it on an otherwise idle machine: the figures are ratios measured side by side.
# Usage: bench/run-all.sh [build-dir]
set -euo pipefail
BUILD=${1:-build}
cd "$(dirname "$0")/.."
cmake --build "$BUILD" --target hwtrain_cli bench_memory_model_bench bench_data_bench bench_model_attention_bench \
  bench_run_ab_bench
bench/default_run.sh "$BUILD"
bench/cpu_speed.sh "$BUILD" 10
bench/precision_quality.sh "$BUILD" 150
bench/side_by_side.sh "$BUILD"
MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1 "$BUILD/bench/bench_memory_model_bench"
bench/auto_batch.sh "$BUILD" 0.075
bench/dist_bench.sh "$BUILD" 10
bench/sharding_bench.sh "$BUILD" 6 fp32
bench/int8_state_bench.sh "$BUILD" 300
BENCH="$BUILD/bench/bench_data_bench" bench/data_bench.sh
bench/obs_overhead.sh 150 2
