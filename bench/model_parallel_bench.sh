#!/usr/bin/env bash
# Model parallelism on this machine (issue 18), processes on one node over Gloo, fp32:
# 1. the pipeline bubble measured against (p-1)/(v m+p-1) for p = 2 and m = 1..8 micro-batches per
#    step, 1F1B (v = 1 chunk per stage: blocks 0-1 | 2-3) and interleaved (v = 2: blocks 0, 2 | 1, 3;
#    m even): stage 0's compute (forward + backward seconds, which exclude waiting for stage 1) over
#    its share of the step (step seconds less the optimizer's); the head is 1% of a block. Median
#    over the steps after the first two.
# 2. tensor parallelism at TP2: the share of the run blocked in its all-reduces and all-gathers, and
#    tokens/s next to one process and next to 2 data-parallel ranks on the same 2 cores.
# Usage: bench/model_parallel_bench.sh [build-dir] [steps]
set -euo pipefail
BUILD=${1:-build}
STEPS=${2:-12}
HW=$(realpath "$BUILD/hwtrain")
OUT=$(mktemp -d)
echo "== model parallel ($(date -u +%F), $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'))"
COMMON="--set model.n_layer=4 --set model.n_head=4 --set model.n_embd=256 --set model.block_size=128
  --set train.max_steps=$STEPS --set train.eval_interval=0 --set train.sample_tokens=0 --set train.time_budget=0
  --set checkpoint.save_final=false --set log.report=false --set log.progress=lines --set log.tensorboard=false
  --set optimization.mixed_precision_dtype=fp32 --set train.log_interval=1 --set optimization.intra_op_threads=1
  --set train.device=cpu --set dist.sharding=none"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# Per step of rank 0's metrics.jsonl (steps 3..): busy share of the step's micro-batch phase.
busy_share() {
  python3 - "$1" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"type":"step"' in l]
vals = sorted((r["forward_seconds"] + r["backward_seconds"]) / (r["step_seconds"] - r["optimizer_seconds"] - r["comm_seconds"])
              for r in rows if r["step"] > 2)
print(f"{vals[len(vals) // 2]:.3f}")
PY
}
port=29760
echo "-- pipeline bubble, p = 2 (micro-batch 2), v chunks per stage"
printf "%2s %3s %10s %10s %12s\n" v m measured predicted "tokens/s"
for V in 1 2; do
  for M in 1 2 4 8; do
    [ $((M % 2)) -eq 0 ] || [ $V -eq 1 ] || continue  # interleaving groups the micro-batches by p
    port=$((port + 1))
    run=$OUT/pp-v$V-m$M
    "$HW" launch --nproc-per-node 2 --master-port $port -- train $COMMON --set dist.pipeline_parallel=2 \
      --set dist.pipeline_chunks=$V --set train.micro_batch_size=2 --set train.grad_accum_steps=$M --out "$run" \
      > "$run.log" 2>&1 || { echo "v=$V m=$M failed:"; tail -5 "$run.log"; continue; }
    busy=$(busy_share "$run/metrics.jsonl")
    tps=$(python3 -c "import json; r=[json.loads(l) for l in open('$run/metrics.jsonl') if '\"type\":\"step\"' in l]; v=sorted(x['tokens_per_second'] for x in r if x['step']>2); print(f'{v[len(v)//2]:.0f}')")
    printf "%2d %3d %10.3f %10.3f %12s\n" $V $M "$(echo "1 - $busy" | bc -l)" "$(echo "1 / ($V * $M + 1)" | bc -l)" "$tps"
  done
  grep -h "pipeline:" "$OUT/pp-v$V-m2.log" | head -1 | sed 's/^.*pipeline:/   pipeline:/'
done
echo "-- tensor parallel vs one process vs data parallel (micro-batch 8)"
for layout in one tp2 dp2; do
  port=$((port + 1))
  run=$OUT/$layout
  case $layout in
    one) cmd=(train $COMMON --set train.micro_batch_size=8) ;;
    tp2) cmd=(launch --nproc-per-node 2 --master-port $port -- train $COMMON --set train.micro_batch_size=8 --set dist.tensor_parallel=2) ;;
    dp2) cmd=(launch --nproc-per-node 2 --master-port $port -- train $COMMON --set train.micro_batch_size=4) ;;
  esac
  "$HW" "${cmd[@]}" --out "$run" > "$run.log" 2>&1 || { echo "$layout failed:"; tail -5 "$run.log"; continue; }
  tps=$(python3 -c "import json; r=[json.loads(l) for l in open('$run/metrics.jsonl') if '\"type\":\"step\"' in l]; v=sorted(x['tokens_per_second'] for x in r if x['step']>2); print(f'{v[len(v)//2]:.0f}')")
  traffic=$(sed -n 's/.*\(tensor parallel: .*\)/\1/p' "$run.log" | head -1)
  printf "%-4s tokens/s %8s  %s\n" $layout "$tps" "$traffic"
done
rm -rf "$OUT"
