#!/usr/bin/env bash
# Micro-batched decoding over pipeline stages (issue 18), side by side in one run: a model of the
# given preset after one training step on the default corpus, then `hwtrain generate --samples S`
# greedy for N new tokens on R ranks in R pipeline stages, with --micro-batches 1 (the samples as one
# batch: one stage works at a time) and with R micro-batches (one per stage: all work at once),
# alternated for ROUNDS rounds, and in one process (one batch) for reference. Prints each run's
# tokens/s (all samples' tokens) and whether rank 0 printed one process's text.
# Usage: bench/pipeline_decode_bench.sh BUILD_DIR [PRESET] [NEW_TOKENS] [SAMPLES] [RANKS] [ROUNDS]
#        (default: gpt2 64 4 2 2)
set -euo pipefail
BUILD=${1:?build dir}
PRESET=${2:-gpt2}
N=${3:-64}
S=${4:-4}
R=${5:-2}
ROUNDS=${6:-2}
HERE=$(cd "$(dirname "$0")" && pwd)
HW=$(realpath "$BUILD/hwtrain")
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
"$HERE/one_step_run.sh" "$BUILD" "$PRESET" "$OUT/run"
ARGS=(generate "$OUT/run" --prompt "The meaning of life" -n "$N" --temperature 0 --samples "$S")
rate() { sed -n 's/.*(\([0-9.]*\) tokens\/s.*/\1/p' "$1"; }
"$HW" "${ARGS[@]}" --micro-batches 1 > "$OUT/one.txt" 2> "$OUT/one.err"
echo "pipeline_decode_bench ($(date -u "+%F %H:%M") UTC, $(nproc) cores): preset $PRESET, $S samples x $N new tokens," \
     "greedy, KV cache; one process: $(rate "$OUT/one.err") tokens/s"
port=29843
for round in $(seq 1 "$ROUNDS"); do
  for M in 1 "$R"; do
    port=$((port + 1))
    "$HW" launch --nproc-per-node "$R" --master-port $port -- "${ARGS[@]}" --pipeline "$R" --micro-batches "$M" \
      > "$OUT/split-$M.txt" 2>&1 || { tail -5 "$OUT/split-$M.txt"; exit 1; }
    same=$(grep -qF "[rank 0] $(sed -n 2p "$OUT/one.txt")" "$OUT/split-$M.txt" && echo identical || echo DIFFERENT)
    echo "  round $round: $R ranks in $R stages, $M micro-batch(es): $(rate "$OUT/split-$M.txt") tokens/s; first sample's text $same"
  done
done
