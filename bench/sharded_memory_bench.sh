#!/usr/bin/env bash
# Per-rank memory of a ZeRO-2/3 training step (bench/train_sharded_memory_bench.cpp), at each world
# size asked, every rank a process on this machine (Gloo, torchrun's variables): rank 0's live CPU
# tensor bytes at the step's start and its peak above them, and the engine's counters.
# With two binaries (an older build's and this one's) they run side by side, A then B per setting.
# Usage: bench/sharded_memory_bench.sh "BIN [BIN_B]" [worlds="2 4"] [stages="zero2 zero3"] [n_layer n_embd vocab block batch steps recompute]
#   e.g. bench/sharded_memory_bench.sh build/bench/bench_train_sharded_memory_bench "2 4" zero3 12 768 50257 256 1 3 1
set -euo pipefail
BINS=$1; WORLDS=${2:-2 4}; STAGES=${3:-zero2 zero3}; shift $(( $# < 3 ? $# : 3 ))
echo "== $(date -u +%F) $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p')"
port=29840
for W in $WORLDS; do
  for S in $STAGES; do
    for BIN in $BINS; do
      port=$((port + 1))
      echo "## $BIN, world $W"
      pids=()
      for ((r = 0; r < W; r++)); do
        RANK=$r WORLD_SIZE=$W LOCAL_RANK=$r LOCAL_WORLD_SIZE=$W MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
          "$BIN" "$S" "$@" 2>&1 | grep -v '^process group\|^zero[23]:' &
        pids+=($!)
      done
      for p in "${pids[@]}"; do wait "$p" || true; done
    done
  done
done
