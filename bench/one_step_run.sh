#!/usr/bin/env bash
# A run directory holding a model of PRESET (block 256, fp32) after one training step on the default
# corpus, for the decoding benchmarks to load. Exits 1 with the log's tail if training fails.
# Usage: bench/one_step_run.sh BUILD_DIR PRESET RUN_DIR
set -euo pipefail
BUILD=${1:?build dir}
PRESET=${2:?preset}
RUN=${3:?run dir}
HERE=$(cd "$(dirname "$0")" && pwd)
DATA=$("$HERE/default_data.sh" "$BUILD")
"$BUILD/hwtrain" train --data "$DATA" --out "$RUN" --set model.preset="$PRESET" --set model.block_size=256 \
  --set train.max_steps=1 --set train.eval_interval=0 --set train.sample_tokens=0 --set log.report=false \
  --set optimization.mixed_precision_dtype=fp32 --set train.micro_batch_size=1 > "$RUN.log" 2>&1 ||
  { tail -5 "$RUN.log"; exit 1; }
