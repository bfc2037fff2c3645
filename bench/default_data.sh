#!/usr/bin/env bash
# Prints the path of the default corpus's prepared token file (fortunes, byte tokenizer), preparing
# it first if needed by a one-step run of the binary. The benchmarks that train on it share this.
# Usage: bench/default_data.sh [build-dir]
set -euo pipefail
BUILD=${1:-build}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
"$BUILD/hwtrain" train --set train.max_steps=1 --set train.eval_interval=0 --set train.sample_tokens=0 \
  --set checkpoint.save_final=false --set log.report=false --out "$OUT/prep" 2>&1 |
  sed -n 's/^data: \([^ ]*\) ([0-9]* train.*/\1/p' | tail -1
