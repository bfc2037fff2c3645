#!/usr/bin/env bash
# Issue 15's GPU targets, side by side on one GPU in one call: hwtrain against a plain PyTorch
# script of the same GPT (bench/pytorch_baseline.py) in eager fp32, eager bf16 autocast + fused
# AdamW + SDPA, and torch.compile, at block 1024, every one at the micro-batch hwtrain's planner
# chose. tokens/s is the median over the timed steps after warm-up; MFU is against the bf16
# matmul rate measured on this GPU (an 8192^3 product), FLOPs per token = 6N + 12*L*C*T.
# Usage: bench/gpu_bench.sh BUILD_DIR OUT_DIR [MODEL...]   (MODEL: gpt2 (124M), gpt2-medium (350M),
#   llama-150m (the Llama block at GPT-2 124M's shape))
# GPU_BENCH_GRAPHS=0 leaves out the hwtrain + cuda_graphs row.
# GPU_BENCH_PYTORCH picks the PyTorch rows (unset: eager-fp32 eager-bf16-fused compile-bf16-fused; empty: none).
set -uo pipefail
BUILD=${1:?build dir}
OUT=${2:?output dir}
shift 2
MODELS=("$@")
[ ${#MODELS[@]} -eq 0 ] && MODELS=(gpt2 gpt2-medium)
HERE=$(cd "$(dirname "$0")" && pwd)
WARMUP=${GPU_BENCH_WARMUP:-10}
STEPS=${GPU_BENCH_STEPS:-30}
BLOCK=1024
read -ra EXTRA <<< "${HWTRAIN_BENCH_SET:-}"  # more --set options for hwtrain, space-separated
# The global batch the planner reaches with the largest micro-batch that fits (up to 64) and
# accumulation; the PyTorch runs use that micro-batch (one step each: tokens/s compares per token).
GLOBAL_BATCH=${GPU_BENCH_GLOBAL_BATCH:-128}
VOCAB=50304
FAILED=0  # the exit status: 1 when a run failed
mkdir -p "$OUT"
TABLE=$OUT/gpu_bench_table.txt
: > "$TABLE"

DATA=$("$HERE/default_data.sh" "$BUILD")
[ -f "$DATA" ] || { echo "gpu_bench: no prepared default corpus ($DATA)"; exit 1; }

PEAK=$(python3 - <<'EOF'
import torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
for _ in range(3): a @ b
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
times = []
for _ in range(10):
    s.record(); a @ b; e.record(); torch.cuda.synchronize(); times.append(s.elapsed_time(e) / 1e3)
times.sort()
print(f"{2 * 8192**3 / times[len(times) // 2]:.4e}")
EOF
)
echo "measured bf16 matmul peak: $PEAK FLOP/s" | tee -a "$TABLE"

median() { python3 -c 'import sys,statistics; v=[float(x) for x in sys.stdin.read().split()]; print(statistics.median(v) if v else "nan")'; }

# FLOPs per token: 6 x parameters (the tied head counted once as the LM head; an untied embedding,
# a lookup, left out)
# + 12 x layers x width x block for attention's two matmuls forward and backward.
flops_per_token() {  # n_layer n_embd params [parameters without matmul FLOPs: an untied embedding]
  python3 -c "print(6*($3 - ${4:-0}) + 12*$1*$2*$BLOCK)"
}

hwtrain_run() {  # model label [--set ...] -> "rc mb params median_step_s last_loss"
  local model=$1 label=$2 log=$OUT/hwtrain-$1-$2.log
  shift 2
  "$BUILD/hwtrain" train --data "$DATA" --out "$OUT/run-$model-$label" \
    "${HW_MODEL[@]}" --set model.vocab_size=$VOCAB --set model.block_size=$BLOCK \
    --set train.max_steps=$((WARMUP + STEPS)) --set train.time_budget=0 --set train.eval_interval=0 \
    --set train.sample_tokens=0 --set train.log_interval=1 --set checkpoint.save_final=false \
    --set checkpoint.interval=0 --set log.report=false --set optimization.target_batch_size="$GLOBAL_BATCH" \
    --set optimization.max_batch_size=64 "${EXTRA[@]}" "$@" > "$log" 2>&1
  local rc=$?
  local mb params med last
  mb=$(sed -n 's/^  micro_batch_size *\([0-9]*\) .*/\1/p' "$log" | head -1)
  params=$(sed -n 's/^model: \([0-9]*\) parameters.*/\1/p' "$log" | head -1)
  med=$(awk -v w="$WARMUP" '/^step [0-9]+ \|/ { if ($2 > w) for (i = 1; i <= NF; i++) if ($i == "step_time") { v = $(i + 1); sub("s", "", v); print v } }' "$log" | median)
  last=$(awk '/^step [0-9]+ \|/ { for (i = 1; i <= NF; i++) if ($i == "loss") v = $(i + 1) } END { print v }' "$log")
  echo "$rc ${mb:-0} ${params:-0} $med ${last:-nan}"
}

# The planner's predicted peak against the CUDA caching allocator's measured peak (allocated).
memory_row() {  # model
  python3 - "$OUT/run-$1-plan" <<'EOF'
import glob, json, sys
d = sys.argv[1]
plan = json.load(open(glob.glob(d + "/plan.json")[0]))
peak = max((json.loads(l).get("device_peak_bytes") or 0) for l in open(d + "/metrics.jsonl"))
pred = plan["predicted_peak_bytes"]
print("memory: predicted peak %.2f GiB, measured peak %.2f GiB (predicted/measured %.2f)"
      % (pred / 2**30, peak / 2**30, pred / peak if peak else float("nan")))
EOF
}

pytorch_run() {  # label model_args mb extra... -> "tokens/s step_ms"
  local label=$1 margs=$2 mb=$3; shift 3
  local log=$OUT/pytorch-$label.log
  # shellcheck disable=SC2086
  python3 "$HERE/pytorch_baseline.py" --device cuda --data "$DATA" $margs --block $BLOCK --vocab $VOCAB \
    --batch "$mb" --steps "$STEPS" --warmup "$WARMUP" "$@" > "$log" 2>&1
  sed -n 's/^pytorch .* tokens\/s \([0-9.]*\) step_ms \([0-9.]*\) .*/\1 \2/p' "$log" | tail -1
}

for model in "${MODELS[@]}"; do
  ARCH=(); LOOKUP=0; HW_MODEL=(--set model.preset="$model")
  case $model in
    gpt2) L=12; C=768; H=12 ;;
    gpt2-medium) L=24; C=1024; H=16 ;;
    # The Llama block at GPT-2 124M's width and depth (GQA 12:4, SwiGLU 2048, untied head): 153M.
    llama-150m) L=12; C=768; H=12; ARCH=(--arch llama --n-kv-head 4); LOOKUP=$((VOCAB * C))
      HW_MODEL=(--set model.architecture=llama --set model.n_layer=$L --set model.n_embd=$C --set model.n_head=$H
                --set model.n_kv_head=4 --set model.bias=false) ;;
    *) echo "gpu_bench: unknown model $model" | tee -a "$TABLE"; continue ;;
  esac
  read -r rc mb params med last <<< "$(hwtrain_run "$model" plan)"
  if [ "$rc" != 0 ] || [ "$med" = nan ]; then
    echo "$model: hwtrain failed (exit $rc), see hwtrain-$model-plan.log" | tee -a "$TABLE"
    FAILED=1
    tail -5 "$OUT/hwtrain-$model-plan.log"
    continue
  fi
  accum=$(sed -n 's/^  grad_accum_steps *\([0-9]*\) .*/\1/p' "$OUT/hwtrain-$model-plan.log" | head -1)
  fpt=$(flops_per_token "$L" "$C" "$params" "$LOOKUP")
  margs="--n-layer $L --n-head $H --n-embd $C ${ARCH[*]}"
  printf '\n%s (%s parameters), block %s, micro-batch %s (hwtrain: x %s accumulation), %s timed steps after %s warm-up\n' \
    "$model" "$params" "$BLOCK" "$mb" "${accum:-1}" "$STEPS" "$WARMUP" | tee -a "$TABLE"
  printf '%-34s %12s %10s %8s %10s\n' run tokens/s step_ms MFU vs_hwtrain | tee -a "$TABLE"
  hw_tps=$(python3 -c "print(round($mb*${accum:-1}*$BLOCK/$med))")
  row() {  # label tokens/s step_ms
    python3 -c "
t=$2; print('%-34s %12.0f %10.1f %7.1f%% %10.2f' % ('$1', t, $3, 100*t*$fpt/$PEAK, t/$hw_tps))" | tee -a "$TABLE"
  }
  row "hwtrain (plan)" "$hw_tps" "$(python3 -c "print($med*1000)")"
  # The same run with the step replayed from a CUDA graph (optimization.cuda_graphs); GPU_BENCH_GRAPHS=0 skips it.
  if [ "${GPU_BENCH_GRAPHS:-1}" = 0 ]; then
    echo "  last loss: plan $last" | tee -a "$TABLE"
  else
  read -r grc gmb _ gmed glast <<< "$(hwtrain_run "$model" graphs --set optimization.cuda_graphs=true)"
  if [ "$grc" = 0 ] && [ "$gmed" != nan ] && [ "$gmb" = "$mb" ]; then
    row "hwtrain + cuda_graphs" "$(python3 -c "print(round($mb*${accum:-1}*$BLOCK/$gmed))")" "$(python3 -c "print($gmed*1000)")"
    echo "  last loss: plan $last, cuda_graphs $glast; $(grep -m1 -oE 'CUDA graphs: .*' "$OUT/hwtrain-$model-graphs.log")" | tee -a "$TABLE"
  else
    echo "hwtrain + cuda_graphs: exit $grc, micro-batch $gmb (see hwtrain-$model-graphs.log)" | tee -a "$TABLE"
    tail -3 "$OUT/hwtrain-$model-graphs.log"
  fi
  fi
  memory_row "$model" | tee -a "$TABLE"
  for spec in "eager-fp32|--dtype fp32" "eager-bf16-fused|--dtype bf16 --fused" \
              "compile-bf16-fused|--dtype bf16 --fused --compile"; do
    label=${spec%%|*}; args=${spec#*|}
    [[ " ${GPU_BENCH_PYTORCH-eager-fp32 eager-bf16-fused compile-bf16-fused} " == *" $label "* ]] || continue
    # shellcheck disable=SC2086
    res=$(pytorch_run "$model-$label" "$margs" "$mb" $args)
    if [ -z "$res" ]; then
      echo "pytorch $label: failed at micro-batch $mb (see pytorch-$model-$label.log)" | tee -a "$TABLE"
      FAILED=1
      tail -2 "$OUT/pytorch-$model-$label.log"
      continue
    fi
    read -r tps ms <<< "$res"
    row "pytorch $label" "$tps" "$ms"
  done
done
exit $FAILED
