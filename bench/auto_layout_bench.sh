#!/usr/bin/env bash
# dist.tensor_parallel = dist.pipeline_parallel = auto on this machine (issue 18): does the layout the
# planner picks for 2 CPU processes (Gloo, fp32) run fastest? For each case, the auto run's choice and
# predicted step times (its plan's "layouts considered"), then every layout it weighed run pinned
# (dist.tensor_parallel / pipeline_parallel set) and measured: median tokens/s after 2 warm-up steps.
#   a. a global batch the replicas share (16 sequences, micro-batch 2): dp2, tp2, pp2
#   b. one they cannot (3 sequences, micro-batch 1): tp2, pp2
# Usage: bench/auto_layout_bench.sh [build-dir] [steps]
set -euo pipefail
BUILD=${1:-build}
STEPS=${2:-12}
HW=$(realpath "$BUILD/hwtrain")
OUT=$(mktemp -d)
echo "== auto layout ($(date -u +%F), $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'))"
COMMON="--set model.n_layer=4 --set model.n_head=4 --set model.n_embd=256 --set model.block_size=128
  --set train.max_steps=$STEPS --set train.eval_interval=0 --set train.sample_tokens=0 --set train.time_budget=0
  --set checkpoint.save_final=false --set log.report=false --set log.progress=lines --set log.tensorboard=false
  --set optimization.mixed_precision_dtype=fp32 --set train.log_interval=1 --set optimization.intra_op_threads=1
  --set train.device=cpu --set dist.sharding=none"
tokens_per_second() {
  python3 -c "import json; r=[json.loads(l) for l in open('$1') if '\"type\":\"step\"' in l]; v=sorted(x['tokens_per_second'] for x in r if x['step']>2); print(f'{v[len(v)//2]:.0f}')"
}
port=29880
run_case() {  # name, batch settings, layouts to pin
  local name=$1 batch=$2
  shift 2
  port=$((port + 1))
  local run=$OUT/$name-auto
  "$HW" launch --nproc-per-node 2 --master-port $port -- train $COMMON $batch --set dist.tensor_parallel=auto \
    --set dist.pipeline_parallel=auto --out "$run" > "$run.log" 2>&1 || { echo "$name auto failed:"; tail -5 "$run.log"; return; }
  echo "-- case $name ($batch): auto chose $(grep -m1 -o 'parallel_layout *tp[0-9]* x pp[0-9]* x dp[0-9]*' "$run.log" | awk '{print $2,$3,$4,$5,$6}'), $(tokens_per_second "$run/metrics.jsonl") tokens/s"
  grep -h -A8 'layouts considered' "$run.log" | grep -v '^\[rank 1\]' | sed 's/^\[rank 0\] /   /' | sed '/^ *$/q'
  for layout in "$@"; do
    port=$((port + 1))
    local tp=${layout#tp}; tp=${tp%%x*}; local pp=${layout#*pp}
    run=$OUT/$name-$layout
    "$HW" launch --nproc-per-node 2 --master-port $port -- train $COMMON $batch --set dist.tensor_parallel=$tp \
      --set dist.pipeline_parallel=$pp --out "$run" > "$run.log" 2>&1 || { echo "$layout failed:"; tail -5 "$run.log"; continue; }
    printf "   %-10s measured %8s tokens/s\n" "$layout" "$(tokens_per_second "$run/metrics.jsonl")"
  done
}
run_case a "--set optimization.target_batch_size=16 --set train.micro_batch_size=2" tp1xpp1 tp2xpp1 tp1xpp2
run_case b "--set optimization.target_batch_size=3 --set train.micro_batch_size=1" tp2xpp1 tp1xpp2
rm -rf "$OUT"
