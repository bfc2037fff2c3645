#!/usr/bin/env bash
# Data parallelism on this machine (issue 6): for world sizes 1, 2, 4 (processes on one node, Gloo),
# plain DDP and ZeRO-1 side by side: optimizer state per rank, the share of all-reduce time
# hidden behind backward, and throughput. Model: char-small (W1 shape), micro-batch 4, fp32.
# Usage: bench/dist_bench.sh [build-dir] [steps]
set -euo pipefail
BUILD=${1:-build}
STEPS=${2:-12}
HW=$(realpath "$BUILD/hwtrain")
OUT=$(mktemp -d)
echo "== dist ($(date -u +%F), $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'))"
COMMON="--set model.preset=char-small --set train.micro_batch_size=4 --set train.grad_accum_steps=1
  --set train.max_steps=$STEPS --set train.eval_interval=0 --set train.sample_tokens=0 --set train.time_budget=0
  --set checkpoint.save_final=false --set log.report=false --set log.progress=lines --set log.tensorboard=false
  --set optimization.mixed_precision_dtype=fp32 --set train.log_interval=1"
port=29710
for W in 1 2 4; do
  for Z in false true; do
    port=$((port + 1))
    log=$OUT/w$W-$Z.log
    "$HW" launch --nproc-per-node $W --master-port $port -- train $COMMON --set dist.zero1=$Z --out "$OUT/w$W-$Z" > "$log" 2>&1 || { echo "world $W zero1=$Z failed:"; tail -5 "$log"; continue; }
    opt=$(sed -n 's/.*optimizer state on rank 0: \([0-9.]* [KMG]iB\).*/\1/p' "$log" | head -1)
    zero=$(sed -n 's/.*\(optimizer state per rank.*\)/\1/p' "$log" | head -1)
    comm=$(sed -n 's/.*all-reduce: \(.*\)/\1/p' "$log" | head -1)
    tps=$(sed -n 's/^.*step \([0-9]*\) |.*tokens\/s \([0-9.]*\).*/\1 \2/p' "$log" | awk '$1 > 3 {print $2}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    printf "world %d zero1=%-5s optimizer state rank 0: %-10s tokens/s %8s  %s\n" $W $Z "${opt:-?}" "${tps:-?}" "${comm:-}"
    [ -n "$zero" ] && echo "    $zero"
  done
done
rm -rf "$OUT"
