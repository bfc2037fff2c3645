#!/usr/bin/env bash
# Where hwtrain's GPU step time goes, next to PyTorch eager bf16 on the same model and batch:
# Kineto traces of 3 steps after warm-up from both, summarized side by side (trace_summary.py).
# Usage: bench/gpu_profile.sh BUILD_DIR OUT_DIR [MODEL] [MICRO_BATCH]   (MODEL: gpt2, gpt2-medium)
set -uo pipefail
BUILD=${1:?build dir}
OUT=${2:?output dir}
MODEL=${3:-gpt2}
MB=${4:-16}
HERE=$(cd "$(dirname "$0")" && pwd)
read -ra EXTRA <<< "${HWTRAIN_BENCH_SET:-}"
mkdir -p "$OUT"
DATA=$("$HERE/default_data.sh" "$BUILD")
case $MODEL in
  gpt2) MARGS="--n-layer 12 --n-head 12 --n-embd 768" ;;
  gpt2-medium) MARGS="--n-layer 24 --n-head 16 --n-embd 1024" ;;
  *) echo "gpu_profile: unknown model $MODEL"; exit 1 ;;
esac
"$BUILD/hwtrain" train --data "$DATA" --out "$OUT/prof-$MODEL" --set model.preset="$MODEL" --set model.vocab_size=50304 \
  --set model.block_size=1024 --set train.micro_batch_size="$MB" --set train.max_steps=16 --set train.eval_interval=0 \
  --set train.sample_tokens=0 --set checkpoint.save_final=false --set checkpoint.interval=0 --set log.report=false \
  --profile-steps 11:13 "${EXTRA[@]}" > "$OUT/prof-hwtrain-$MODEL.log" 2>&1 || { echo "hwtrain failed"; tail -5 "$OUT/prof-hwtrain-$MODEL.log"; }
# shellcheck disable=SC2086
python3 "$HERE/pytorch_baseline.py" --device cuda --data "$DATA" $MARGS --block 1024 --vocab 50304 --batch "$MB" \
  --steps 5 --warmup 10 --dtype bf16 --fused --trace "$OUT/prof-pytorch-$MODEL.json" > "$OUT/prof-pytorch-$MODEL.log" 2>&1 ||
  { echo "pytorch failed"; tail -5 "$OUT/prof-pytorch-$MODEL.log"; }
python3 "$HERE/trace_summary.py" --top "${GPU_PROFILE_TOP:-25}" "hwtrain=$OUT/prof-$MODEL/ops_trace.json" \
  "pytorch-eager-bf16=$OUT/prof-pytorch-$MODEL.json" | tee "$OUT/profile_summary.txt"
