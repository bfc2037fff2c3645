#!/usr/bin/env bash
# Tensor parallelism at TP2 (issue 18), two hwtrain binaries side by side: A (an older build whose
# column-parallel layers all-reduce their input's gradient after the weight gradients) and B (the
# layers' autograd function that overlaps it). Runs interleaved A B A B ... with and without
# sequence parallelism, fp32, GPT-2 shape of model_parallel_bench.sh: per run, rank 0's median
# tokens/s over the steps after the first two, the seconds blocked in the group's collectives (the
# binary's own "tensor parallel:" line) and rank 0's largest resident set; then the median B/A.
# Usage: bench/tp_overlap_bench.sh OLD_BINARY NEW_BINARY [rounds=3] [steps=16] [extra --set args...]
set -euo pipefail
A=$(realpath "$1"); B=$(realpath "$2"); ROUNDS=${3:-3}; STEPS=${4:-16}; shift $(( $# < 4 ? $# : 4 ))
OUT=$(mktemp -d); trap 'rm -rf "$OUT"' EXIT
echo "== TP2 overlap ($(date -u +'%F %H:%M') UTC, $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p')); $STEPS steps x $ROUNDS rounds"
COMMON=(--set model.n_layer=4 --set model.n_head=4 --set model.n_embd=256 --set model.block_size=128
  --set train.max_steps="$STEPS" --set train.eval_interval=0 --set train.sample_tokens=0 --set train.time_budget=0
  --set checkpoint.save_final=false --set log.report=false --set log.progress=lines --set log.tensorboard=false
  --set optimization.mixed_precision_dtype=fp32 --set train.log_interval=1 --set optimization.intra_op_threads=1
  --set train.device=cpu --set dist.sharding=none --set train.micro_batch_size=8 --set dist.tensor_parallel=2
  --set data.cache_dir="$OUT/cache" "$@")
port=29855
# binary, run name, sequence parallel -> "tokens/s blocked_s rss_mib"
run() {
  port=$((port + 1))
  "$1" launch --nproc-per-node 2 --master-port $port -- train "${COMMON[@]}" --set dist.sequence_parallel="$3" \
    --out "$OUT/$2" > "$OUT/$2.log" 2>&1 || { echo "run $2 failed:" >&2; tail -5 "$OUT/$2.log" >&2; exit 1; }
  local blocked
  blocked=$(sed -n 's/.*tensor parallel: .*; \([0-9.]*\) s blocked in them.*/\1/p' "$OUT/$2.log" | head -1)
  python3 - "$OUT/$2/metrics.jsonl" "${blocked:-?}" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"type":"step"' in l]
tps = sorted(r["tokens_per_second"] for r in rows if r["step"] > 2)
rss = max(r["rss_bytes"] for r in rows) / 2**20
print(f"{tps[len(tps) // 2]:.0f} {sys.argv[2]} {rss:.0f}")
PY
}
for SP in false true; do
  echo "-- dist.sequence_parallel = $SP"
  ratios=()
  for r in $(seq "$ROUNDS"); do
    read -r ta ba ma <<< "$(run "$A" "a-$SP-$r" "$SP")"
    read -r tb bb mb <<< "$(run "$B" "b-$SP-$r" "$SP")"
    ratio=$(python3 -c "print(f'{$tb/$ta:.3f}')")
    ratios+=("$ratio")
    printf 'round %d: A %s tokens/s, %s s blocked, %s MiB | B %s tokens/s, %s s blocked, %s MiB | B/A %s\n' \
      "$r" "$ta" "$ba" "$ma" "$tb" "$bb" "$mb" "$ratio"
  done
  echo "median B/A tokens/s: $(printf '%s\n' "${ratios[@]}" | sort -n | sed -n "$(( (ROUNDS + 1) / 2 ))p")"
  grep -h "tensor parallel:" "$OUT/a-$SP-1.log" | head -1 | sed 's/^/  A: /'
  grep -h "tensor parallel:" "$OUT/b-$SP-1.log" | head -1 | sed 's/^/  B: /'
done
