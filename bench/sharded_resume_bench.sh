#!/usr/bin/env bash
# Peak memory of resuming a ZeRO-2/3 run (issue 16): a checkpoint of the gpt2 shape (block 256)
# resumed on 2 ranks with dist.sharding = zero2 and zero3 for one step, side by side from a
# one-process checkpoint (each rank reads its own ranges of model.safetensors and
# optimizer.safetensors) and from a 2-rank ZeRO-3 checkpoint (each rank reads its own shard file
# only); the largest resident set of any process (GNU time's %M over `hwtrain launch`, which waits
# for its ranks).
# EXTRA: more settings for every run, e.g. "--set optimization.optimizer_state_dtype=int8".
# Usage: bench/sharded_resume_bench.sh [build-dir] [EXTRA]
set -euo pipefail
BUILD=${1:-build}
EXTRA=${2:-}
HW=$(realpath "$BUILD/hwtrain")
OUT=$(mktemp -d)
cd "$OUT"
COMMON="--set model.preset=gpt2 --set model.block_size=256 --set train.micro_batch_size=1 --set train.grad_accum_steps=1
  --set optimization.checkpoint_every=1 --set train.eval_interval=0 --set train.sample_tokens=0 --set train.time_budget=0
  --set log.report=false --set log.tensorboard=false --set optimization.mixed_precision_dtype=fp32 --set train.device=cpu
  $EXTRA"
echo "== sharded resume ($(date -u +%F), $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p')), gpt2 block 256, fp32, $HW ${EXTRA:-}"
"$HW" train $COMMON --set train.max_steps=2 --set checkpoint.save_final=true --out base > base.log 2>&1 ||
  { tail -5 base.log; exit 1; }
"$HW" launch --nproc-per-node 2 --master-port 29779 -- train $COMMON --set train.max_steps=2 \
  --set checkpoint.save_final=true --set dist.sharding=zero3 --out sharded > sharded.log 2>&1 || { tail -5 sharded.log; exit 1; }
port=29780
for FROM in base sharded; do
  for S in zero2 zero3; do
    port=$((port + 1))
    cp -r $FROM "run-$FROM-$S"
    /usr/bin/time -f "%M" -o "rss-$FROM-$S" "$HW" launch --nproc-per-node 2 --master-port $port -- train $COMMON \
      --set train.max_steps=3 --set checkpoint.save_final=false --set dist.sharding=$S --resume "run-$FROM-$S" \
      > "$FROM-$S.log" 2>&1 || { echo "$FROM $S failed:"; tail -5 "$FROM-$S.log"; continue; }
    printf "resume on 2 ranks, %s, from the %s checkpoint: largest resident set %s MiB\n" $S \
      "$([ $FROM = base ] && echo one-process || echo 2-rank zero3)" $(( $(tail -1 "rss-$FROM-$S") / 1024 ))
    grep -h "read this rank's segments" "$FROM-$S.log" || true
  done
done
rm -rf "$OUT"
