#!/usr/bin/env bash
# Start-up memory of a ZeRO-2/3 run (issue 16): the gpt2 shape at block 64, fp32, on N ranks (processes
# on this machine, Gloo), side by side with the model built whole on every rank and then sharded
# (dist.deferred_init = false, the behaviour before deferred init) and built unit by unit into the
# shards (true); two steps each. Reported: rank 0's peak resident set once the model is built,
# sharded and its optimizer made (VmHWM, logged before the first step), the largest resident set of
# any process over the whole run (GNU time's %M over `hwtrain launch`, which waits for its ranks:
# training's own peak included), and whether both builds give the same losses to the last printed
# digit (they must: the same initial values). The whole build costs 4 bytes per parameter on every
# rank however many ranks share the model; the shards' own share falls as 1/N.
# Usage: bench/deferred_init_bench.sh [build-dir] [preset] [world sizes] [shardings] [settings]
#   e.g. bench/deferred_init_bench.sh build gpt2 "2 4 8" "zero3 zero2"
#        bench/deferred_init_bench.sh build gpt2 "2 4" "none zero3" "--set dist.tensor_parallel=2"
#   [settings]: more --set flags for every run (a tensor-parallel rank fills only its cut of each weight).
set -euo pipefail
BUILD=${1:-build}
PRESET=${2:-gpt2}
WORLDS=${3:-2 4 8}
SHARDINGS=${4:-zero3}
EXTRA=${5:-}
HW=$(realpath "$BUILD/hwtrain")
OUT=$(mktemp -d)
cd "$OUT"
echo "== deferred init ($(date -u +%F), $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p')), $PRESET, block 64, fp32 $EXTRA"
port=29840
for W in $WORLDS; do
  for S in $SHARDINGS; do
    for D in false true; do
      port=$((port + 1))
      log=$W-$S-$D.log
      /usr/bin/time -f "%M" -o "rss-$W-$S-$D" "$HW" launch --nproc-per-node $W --master-port $port -- train \
        --set model.preset=$PRESET --set model.block_size=64 --set train.micro_batch_size=1 \
        --set train.grad_accum_steps=1 --set train.max_steps=2 --set train.eval_interval=0 \
        --set train.sample_tokens=0 --set train.time_budget=0 --set checkpoint.save_final=false --set log.report=false \
        --set log.tensorboard=false --set log.progress=lines --set train.log_interval=1 --set train.device=cpu \
        --set optimization.mixed_precision_dtype=fp32 --set dist.sharding=$S --set dist.deferred_init=$D $EXTRA \
        --out "run-$W-$S-$D" > "$log" 2>&1 || { echo "world $W $S deferred_init=$D failed:"; tail -5 "$log"; continue; }
      startup=$(sed -n 's/^\[rank 0\] .*peak resident set so far \([0-9.]* [KMG]iB\).*/\1/p' "$log" | head -1)
      losses=$(sed -n 's/^\[rank 0\] step \([0-9]*\) | loss \([0-9.]*\).*/\2/p' "$log" | tr '\n' ' ')
      echo "$losses" > "losses-$W-$S-$D"
      printf "world %d %s deferred_init=%-5s rank 0 at start-up %-10s whole run, any process %6d MiB   losses %s\n" \
        $W $S $D "${startup:-?}" $(( $(tail -1 "rss-$W-$S-$D") / 1024 )) "$losses"
    done
    if cmp -s "losses-$W-$S-false" "losses-$W-$S-true"; then echo "    the same losses"; else echo "    LOSSES DIFFER"; fi
  done
done
rm -rf "$OUT"
