#!/usr/bin/env bash
# Optimizer-state offload (optimization.optimizer_state_device = cpu; issue 16) against the moments
# kept with the weights, side by side in one run: one process, and 2 ZeRO-2 ranks (Gloo), gpt2 shape
# at block 256, micro-batch 1, recomputation on. Prints per run the median tokens/s and optimizer
# seconds after step 2, and rank 0's offloaded bytes (host memory) and what stayed with the weights.
# On a CPU the host is the device: this measures what the host copies cost, not what offloading
# saves; on a GPU the same script shows the device memory freed (run it there with train.device=cuda).
# On a GPU the device column is the largest device_peak_bytes of the run (the caching allocator's peak).
# Usage: bench/offload_bench.sh [build-dir] [steps] [device]    (RANKS="1 2" by default; one GPU: RANKS=1)
set -euo pipefail
BUILD=${1:-build}
STEPS=${2:-8}
DEVICE=${3:-cpu}
HW=$(realpath "$BUILD/hwtrain")
OUT=$(mktemp -d)
echo "== offload ($(date -u +%F), $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p')), gpt2 block 256, $DEVICE"
COMMON="--set model.preset=gpt2 --set model.block_size=256 --set train.micro_batch_size=1 --set train.grad_accum_steps=1
  --set optimization.checkpoint_every=1 --set train.max_steps=$STEPS --set train.eval_interval=0 --set train.sample_tokens=0
  --set train.time_budget=0 --set checkpoint.save_final=false --set log.report=false --set log.progress=lines
  --set log.tensorboard=false --set optimization.mixed_precision_dtype=fp32 --set train.log_interval=1
  --set train.device=$DEVICE --set optimization.optimizer_state_dtype=fp32"
device_peak() { python3 - "$1" <<'PY'
import json, sys
vals = [r["device_peak_bytes"] for r in map(json.loads, open(sys.argv[1])) if r.get("type") == "step" and r.get("device_peak_bytes")]
print(f"{max(vals) / 2**20:.0f} MiB" if vals else "-")
PY
}
median_after_2() { python3 - "$1" "$2" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"type":"step"' in l]
vals = sorted(r[sys.argv[2]] for r in rows if r["step"] > 2)
print(f"{vals[len(vals) // 2]:.3f}" if vals else "?")
PY
}
port=29790
printf "%-7s %-7s %10s %14s %12s  %s\n" ranks state tokens/s "optimizer s" "device peak" "rank 0"
for W in ${RANKS:-1 2}; do
  for S in device cpu; do
    run=$OUT/w$W-$S
    args="$COMMON --set optimization.optimizer_state_device=$S --out $run"
    if [ $W -eq 1 ]; then
      "$HW" train $args > "$run.log" 2>&1 || { echo "1 $S failed:"; tail -5 "$run.log"; continue; }
    else
      port=$((port + 1))
      "$HW" launch --nproc-per-node 2 --master-port $port -- train $args --set dist.sharding=zero2 > "$run.log" 2>&1 ||
        { echo "2 $S failed:"; tail -5 "$run.log"; continue; }
    fi
    where=$(sed -n 's/.*offloaded optimizer on rank 0: \(.*\)/\1/p' "$run.log" | head -1)
    [ -z "$where" ] && where="moments with the weights (as logged at the start): $(sed -n 's/.*optimizer state on rank 0: \([0-9.]* [KMG]iB\).*/\1/p' "$run.log" | head -1)"
    printf "%-7s %-7s %10s %14s %12s  %s\n" $W $S "$(median_after_2 "$run/metrics.jsonl" tokens_per_second)" \
      "$(median_after_2 "$run/metrics.jsonl" optimizer_seconds)" "$(device_peak "$run/metrics.jsonl")" "$where"
  done
done
rm -rf "$OUT"
