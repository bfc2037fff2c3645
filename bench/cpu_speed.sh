#!/usr/bin/env bash
# Side-by-side CPU training throughput, one run: hwtrain (plan defaults, forced fp32, activation
# checkpointing) and plain PyTorch (Python, same model and data) in fp32 and bf16 autocast.
# Workloads (issue 4): W1 = 6 layers, 6 heads, 384 wide, block 256, micro-batch 12;
#                      W2 = GPT-2 124M shape, block 256, micro-batch 4.
# Usage: bench/cpu_speed.sh [build-dir] [steps]   (WORKLOADS="W1" runs one workload)
set -euo pipefail
BUILD=${1:-build}
STEPS=${2:-20}
HW=$BUILD/hwtrain
PY=$(cat "$BUILD/torch-python" 2>/dev/null || echo python3)
OUT=$(mktemp -d)
DATA=$("$(dirname "$0")/default_data.sh" "$BUILD")
echo "data: $DATA"

hwtrain_run() {  # name, extra args...
  local name=$1; shift
  "$HW" train --data "$DATA" --set train.max_steps=$((STEPS + 3)) --set train.eval_interval=0 \
    --set train.sample_tokens=0 --set train.log_interval=1 --set train.time_budget=0 \
    --set checkpoint.save_final=false --set log.report=false --set log.progress=lines "$@" --out "$OUT/$name" \
    > "$OUT/$name.log" 2>&1
  # median tokens/s and last RSS of the timed steps (the first 3 are warm-up)
  local tps rss
  tps=$(sed -n 's/^step \([0-9]*\) |.*tokens\/s \([0-9.]*\).*/\1 \2/p' "$OUT/$name.log" | awk '$1 > 3 {print $2}' | sort -n)
  rss=$(sed -n 's/^step .*| mem \([0-9.]* [KMG]iB\).*/\1/p' "$OUT/$name.log" | tail -1)
  printf "%-36s tokens/s %8s  (median of %s steps)  rss %s\n" "$name" \
    "$(echo "$tps" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')" "$(echo "$tps" | wc -l)" "$rss"
}

for W in ${WORKLOADS:-W1 W2}; do
  if [ $W = W1 ]; then SHAPE="--set model.preset=char-small --set train.micro_batch_size=12"; PYSHAPE="--n-layer 6 --n-head 6 --n-embd 384 --batch 12"
  else SHAPE="--set model.preset=gpt2 --set model.block_size=256 --set train.micro_batch_size=4"; PYSHAPE="--n-layer 12 --n-head 12 --n-embd 768 --batch 4"; fi
  echo "== $W ($(date -u +%F), $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'))"
  hwtrain_run "$W hwtrain default plan" $SHAPE
  hwtrain_run "$W hwtrain fp32" $SHAPE --set optimization.mixed_precision_dtype=fp32
  hwtrain_run "$W hwtrain default + ckpt(all blocks)" $SHAPE --set optimization.checkpoint_every=1
  hwtrain_run "$W hwtrain fp32 + ckpt(all blocks)" $SHAPE --set optimization.mixed_precision_dtype=fp32 --set optimization.checkpoint_every=1
  for mode in "--dtype fp32" "--dtype fp32 --threads 2 --fused" "--dtype bf16 --threads 2 --fused"; do
    "$PY" "$(dirname "$0")/pytorch_baseline.py" --data "$DATA" $PYSHAPE --block 256 --steps "$STEPS" $mode
    LD_PRELOAD=$(ls /usr/lib/x86_64-linux-gnu/libjemalloc.so.2) MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1 \
      "$PY" "$(dirname "$0")/pytorch_baseline.py" --data "$DATA" $PYSHAPE --block 256 --steps "$STEPS" $mode | sed 's/^pytorch /pytorch+jemalloc /'
  done
done
rm -rf "$OUT"
