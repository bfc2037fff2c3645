#!/usr/bin/env bash
# W1 (issue 4) bf16 vs fp32, and hwtrain's default plan vs the best PyTorch run, measured in
# interleaved rounds: this shared machine drifts by 10-20% over minutes, so one run per setting can
# put the whole drift into a ratio. Each round runs hwtrain's default plan (bf16), hwtrain fp32 and
# PyTorch bf16 autocast (fused AdamW, 2 threads, jemalloc preloaded: its best W1 setting in
# bench/cpu_speed.sh) back to back; the ratios are taken within each round, then their median.
# Usage: bench/bf16_ratio.sh [build-dir] [steps] [rounds]     (defaults: build 16 3)
set -euo pipefail
BUILD=${1:-build}
STEPS=${2:-16}
ROUNDS=${3:-3}
HW=$BUILD/hwtrain
PY=$(cat "$BUILD/torch-python" 2>/dev/null || echo python3)
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
DATA=$("$(dirname "$0")/default_data.sh" "$BUILD")
SHAPE=(--set model.preset=char-small --set train.micro_batch_size=12)

hwtrain_tps() {  # extra args... -> median tokens/s of the steps after the first 3
  "$HW" train --data "$DATA" "${SHAPE[@]}" --set train.max_steps=$((STEPS + 3)) --set train.eval_interval=0 \
    --set train.sample_tokens=0 --set train.log_interval=1 --set train.time_budget=0 \
    --set checkpoint.save_final=false --set log.report=false --set log.progress=lines "$@" --out "$OUT/run" \
    > "$OUT/run.log" 2>&1
  sed -n 's/^step \([0-9]*\) |.*tokens\/s \([0-9.]*\).*/\1 \2/p' "$OUT/run.log" | awk '$1 > 3 {print $2}' | sort -n |
    awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
pytorch_tps() {
  LD_PRELOAD=$(ls /usr/lib/x86_64-linux-gnu/libjemalloc.so.2) MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1 \
    "$PY" "$(dirname "$0")/pytorch_baseline.py" --data "$DATA" --n-layer 6 --n-head 6 --n-embd 384 --batch 12 \
    --block 256 --steps "$STEPS" --dtype bf16 --threads 2 --fused | sed -n 's/.*tokens\/s \([0-9.]*\).*/\1/p'
}

echo "W1 interleaved, $STEPS timed steps per run, $ROUNDS rounds ($(date -u '+%F %T') UTC, $(nproc) cores)"
printf "%-6s %14s %14s %16s %12s %14s\n" round "hwtrain bf16" "hwtrain fp32" "PyTorch bf16+" "bf16/fp32" "hwtrain/PyTorch"
ratios=(); versus=()
for ((r = 1; r <= ROUNDS; r++)); do
  bf16=$(hwtrain_tps)
  fp32=$(hwtrain_tps --set optimization.mixed_precision_dtype=fp32)
  torch_bf16=$(pytorch_tps)
  ratio=$(awk -v a="$bf16" -v b="$fp32" 'BEGIN {printf "%.3f", a / b}')
  vs=$(awk -v a="$bf16" -v b="$torch_bf16" 'BEGIN {printf "%.3f", a / b}')
  ratios+=("$ratio"); versus+=("$vs")
  printf "%-6s %14s %14s %16s %11sx %13sx\n" "$r" "$bf16" "$fp32" "$torch_bf16" "$ratio" "$vs"
done
median() { printf "%s\n" "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "median bf16/fp32: $(median "${ratios[@]}")x (target >= 1.5x); median hwtrain default / best PyTorch: $(median "${versus[@]}")x"
