#!/usr/bin/env bash
# The default run as `make run` does it (no flags), timed: prints wall time, final validation
# loss (nats per byte) and the sample. Usage: bench/default_run.sh [build-dir]
set -euo pipefail
BUILD=${1:-build}
OUT=$(mktemp -d)
start=$(date +%s)
"$BUILD/hwtrain" train --out "$OUT/run" > "$OUT/log" 2>&1
end=$(date +%s)
grep -E '^(precision|  precision|  micro_batch_size)|^eval step|^stopped after|^measured' "$OUT/log" || true
grep -A12 '^sample:' "$OUT/log" || true
echo "wall seconds: $((end - start))"
rm -rf "$OUT"
