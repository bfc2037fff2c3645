#!/usr/bin/env bash
# Issue 4's ratios measured side by side: one layer's attention kernels alternating call by call,
# then whole training steps alternating setting by setting in one Trainer (bench_run_ab_bench):
# bf16 vs fp32 (W1, W2), the plan's attention kernel vs SDPA (W1 bf16 and fp32), and activation
# checkpointing of every block vs none (W1, W2, bf16 and fp32), the optimizer step in backward vs
# after it, and checkpointing's cost with the step in backward. About 18 minutes on 2 cores.
# Usage: bench/side_by_side.sh [build-dir]
set -euo pipefail
BUILD=${1:-build}
DATA=$("$(dirname "$0")/default_data.sh" "$BUILD")
export MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1  # as the hwtrain binary allocates
AB=$BUILD/bench/bench_run_ab_bench
echo "== side by side ($(date -u +%F), $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p')); data $DATA"
"$BUILD/bench/bench_model_attention_bench" 15
run() {  # label, args...
  local label=$1; shift
  printf '%-34s ' "$label"
  "$AB" "$DATA" "$@" 2>&1 | grep '^median step'
}
run "W1 bf16 vs fp32" W1 40 precision
run "W1 bf16 vs fp32, both SDPA" W1 20 precision model.attention=sdpa
run "W2 bf16 vs fp32" W2 12 precision
run "W1 bf16: plan kernel vs sdpa" W1 20 attention:sdpa
run "W1 fp32: plan kernel vs sdpa" W1 20 attention:sdpa optimization.mixed_precision_dtype=fp32
run "W1 bf16: none vs ckpt" W1 15 checkpointing
run "W1 fp32: none vs ckpt" W1 15 checkpointing optimization.mixed_precision_dtype=fp32
run "W2 bf16: none vs ckpt" W2 8 checkpointing
run "W2 fp32: none vs ckpt" W2 8 checkpointing optimization.mixed_precision_dtype=fp32
run "W1 bf16: step after vs in bwd" W1 20 optimizer_in_backward
run "W2 bf16: step after vs in bwd" W2 10 optimizer_in_backward
run "W2 bf16, in bwd: none vs ckpt" W2 8 checkpointing optimization.optimizer_in_backward=true train.grad_clip=0
