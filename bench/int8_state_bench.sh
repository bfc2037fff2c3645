#!/usr/bin/env bash
# 8-bit AdamW moments against fp32 ones (issue 16): the default model on the default corpus, the
# same seed and steps, one after the other: the final validation loss, the optimizer state this
# process holds, and the median step time (the 8-bit update dequantizes and requantizes each step).
# Usage: bench/int8_state_bench.sh [build-dir] [steps]
set -euo pipefail
BUILD=${1:-build}
STEPS=${2:-300}
HW=$(realpath "$BUILD/hwtrain")
OUT=$(mktemp -d)
echo "== 8-bit AdamW states ($(date -u +%F), $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p')), default model, $STEPS steps"
COMMON="--set train.max_steps=$STEPS --set train.eval_interval=$STEPS --set train.sample_tokens=0 --set train.time_budget=0
  --set checkpoint.save_final=false --set log.report=false --set log.progress=lines --set log.tensorboard=false
  --set train.log_interval=10"
for D in fp32 int8; do
  log=$OUT/$D.log
  "$HW" train $COMMON --set optimization.optimizer_state_dtype=$D --out "$OUT/$D" > "$log" 2>&1 || { echo "$D failed:"; tail -5 "$log"; continue; }
  val=$(sed -n 's/.*eval step [0-9]* | val_loss \([0-9.]*\).*/\1/p' "$log" | tail -1)
  opt=$(sed -n 's/.*optimizer state on rank 0: \([0-9.]* [KMG]iB\).*/\1/p' "$log" | head -1)
  st=$(sed -n 's/^step \([0-9]*\) |.*step_time \([0-9.]*\)s.*/\1 \2/p' "$log" | awk '$1 > 20 {print $2}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  printf "%-4s val_loss %-7s optimizer state %-10s median step %s s\n" $D "${val:-?}" "${opt:-?}" "${st:-?}"
done
rm -rf "$OUT"
