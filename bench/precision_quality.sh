#!/usr/bin/env bash
# bf16 autocast vs fp32 quality (issue 4): workload W1 (char-small: 6 layers, 6 heads, 384 wide,
# block 256, micro-batch 12) trained for the same number of steps from the same seed and data in
# both precisions, then evaluated on the same validation batches.
# Usage: bench/precision_quality.sh [build-dir] [steps]
set -euo pipefail
BUILD=${1:-build}
STEPS=${2:-150}
HW=$BUILD/hwtrain
OUT=$(mktemp -d)
echo "== precision quality ($(date -u +%F), $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p')), W1, $STEPS steps"
for P in fp32 bf16; do
  "$HW" train --set model.preset=char-small --set train.micro_batch_size=12 --set train.max_steps=$STEPS \
    --set train.eval_interval=$STEPS --set train.eval_batches=20 --set train.sample_tokens=0 --set train.time_budget=0 \
    --set checkpoint.save_final=false --set log.report=false --set log.progress=lines --set train.log_interval=50 \
    --set optimization.mixed_precision_dtype=$P --out "$OUT/$P" > "$OUT/$P.log" 2>&1
  val=$(sed -n 's/.*val_loss \([0-9.]*\).*/\1/p' "$OUT/$P.log" | tail -1)
  secs=$(sed -n 's/.*stopped after .* \([0-9]*\) s$/\1/p' "$OUT/$P.log" | tail -1)
  echo "$P val_loss $val (${secs}s)"
  eval "VAL_$P=$val"
done
awk -v a="$VAL_fp32" -v b="$VAL_bf16" 'BEGIN { printf "bf16 vs fp32 validation loss: %+.2f%%\n", 100 * (b - a) / a }'
rm -rf "$OUT"
