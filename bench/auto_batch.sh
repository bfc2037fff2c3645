#!/usr/bin/env bash
# Automatic micro-batch sizing (issue 4): workload W2 (GPT-2 124M shape, block 256) with a global
# batch of 32 sequences and a memory budget small enough that not every micro-batch fits
# (optimization.memory_threshold = THRESHOLD of available memory). Prints the probe table (the
# measured memory of each probed micro-batch against the budget), the choice, and the peak
# resident set of the whole process over the probes and 3 training steps (/usr/bin/time).
# Usage: bench/auto_batch.sh [build-dir] [threshold]
set -euo pipefail
BUILD=${1:-build}
THRESHOLD=${2:-0.12}
OUT=$(mktemp -d)
echo "== auto batch size ($(date -u +%F), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB), W2, threshold $THRESHOLD"
/usr/bin/time -v "$BUILD/hwtrain" train --set model.preset=gpt2 --set model.block_size=256 \
  --set optimization.auto_batch_size=true --set optimization.target_batch_size=32 \
  --set optimization.memory_threshold=$THRESHOLD --set train.max_steps=3 --set train.eval_interval=0 \
  --set train.sample_tokens=0 --set train.time_budget=0 --set checkpoint.save_final=false --set log.report=false \
  --set log.progress=lines --set train.log_interval=1 --out "$OUT/run" > "$OUT/log" 2>&1
grep -E "memory_budget|  micro_batch|activation_checkpointing|auto batch size|  micro-batch|  -> " "$OUT/log" | sed 's/^.*\] //'
grep -E "^step [0-9]+ \|" "$OUT/log" | tail -1
grep "Maximum resident set size" "$OUT/log" | awk '{printf "process peak RSS: %.0f MiB\n", $6 / 1024}'
rm -rf "$OUT"
