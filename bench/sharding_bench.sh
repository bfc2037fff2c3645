#!/usr/bin/env bash
# Sharding on this machine (issue 16): none / zero1 / zero2 / zero3 side by side at world sizes 2
# and 4 (processes on one node, Gloo): rank 0's optimizer state, master shards and peak gathered
# parameters (from the tensors it holds), its resident memory after the last step (RSS), the
# communication in flight and the share hidden behind compute, and throughput (median tokens/s
# after step 2). Model: gpt2 (124M) at block 256, micro-batch 1 per rank, recomputation on.
# zero2/zero3 run once per gradient reduce dtype asked (dist.reduce_dtype), side by side.
# Usage: bench/sharding_bench.sh [build-dir] [steps] [precision] [world sizes] [reduce dtypes] [settings]
#   e.g. bench/sharding_bench.sh build 6 fp32 2 "fp32 bf16"
#   [settings]: more --set flags for every run, e.g. "--set dist.pipeline_parallel=2" (the replicas
#   of a pipeline; rank 0 is then the first stage's).
set -euo pipefail
BUILD=${1:-build}
STEPS=${2:-6}
PREC=${3:-fp32}
WORLDS=${4:-2 4}
REDUCES=${5:-fp32}
EXTRA=${6:-}
HW=$(realpath "$BUILD/hwtrain")
OUT=$(mktemp -d)
echo "== sharding ($(date -u +%F), $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p')), gpt2 block 256, $PREC ${EXTRA}"
COMMON="--set model.preset=gpt2 --set model.block_size=256 --set train.micro_batch_size=1 --set train.grad_accum_steps=1
  --set optimization.checkpoint_every=1 --set train.max_steps=$STEPS --set train.eval_interval=0 --set train.sample_tokens=0
  --set train.time_budget=0 --set checkpoint.save_final=false --set log.report=false --set log.progress=lines
  --set log.tensorboard=false --set optimization.mixed_precision_dtype=$PREC --set train.log_interval=1 $EXTRA"
port=29760
for W in $WORLDS; do
  for S in none zero1 zero2 zero3 $(for R in $REDUCES; do [ "$R" = fp32 ] || echo "zero2/$R zero3/$R"; done); do
    port=$((port + 1))
    R=fp32; case $S in */*) R=${S#*/}; S=${S%/*};; esac
    log=$OUT/w$W-$S-$R.log
    "$HW" launch --nproc-per-node $W --master-port $port -- train $COMMON --set dist.sharding=$S \
      --set dist.reduce_dtype=$R --out "$OUT/w$W-$S-$R" > "$log" 2>&1 || { echo "world $W $S $R failed:"; tail -5 "$log"; continue; }
    opt=$(sed -n 's/.*optimizer state on rank 0: \([0-9.]* [KMG]iB\).*/\1/p' "$log" | head -1)
    rss=$(grep "\[rank 0\] step $STEPS |" "$log" | sed -n 's/.*| mem \([0-9.]* [KMG]iB\).*/\1/p' | head -1)
    tps=$(sed -n 's/^\[rank 0\] step \([0-9]*\) |.*tokens\/s \([0-9.]*\).*/\1 \2/p' "$log" | awk '$1 > 2 {print $2}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    comm=$(sed -n 's/^\[rank 0\] .*\(all-reduce: .*\)/\1/p; s/^\[rank 0\] zero[23]: \([0-9]* all-gathers.*\)/\1/p' "$log" | head -1)
    [ $R = fp32 ] || S="$S/$R"
    printf "world %d %-10s rank 0: optimizer %-10s RSS %-10s tokens/s %7s  %s\n" $W $S "${opt:-?}" "${rss:-?}" "${tps:-?}" "${comm:-}"
  done
done
rm -rf "$OUT"
