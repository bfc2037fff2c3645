#!/usr/bin/env bash
# Decoding with the model split over ranks (issue 18) beside one process, in one run: a model of the
# given preset after one training step on the default corpus, then `hwtrain generate` greedy for N
# new tokens in one process and under `hwtrain launch --nproc-per-node R` (P pipeline stages, each
# tensor parallel over R / P ranks; P = 1: tensor parallel over all R). Prints each one's tokens/s, the largest resident set of one process (GNU time's %M; for
# the launch, its largest rank), and whether rank 0 printed the text one process does.
# Usage: bench/split_generate_bench.sh BUILD_DIR [PRESET] [NEW_TOKENS] [RANKS] [STAGES]   (default: gpt2 200 2 1)
set -euo pipefail
BUILD=${1:?build dir}
PRESET=${2:-gpt2}
N=${3:-200}
R=${4:-2}
P=${5:-1}
HERE=$(cd "$(dirname "$0")" && pwd)
HW=$(realpath "$BUILD/hwtrain")
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
"$HERE/one_step_run.sh" "$BUILD" "$PRESET" "$OUT/run"
ARGS=(generate "$OUT/run" --prompt "The meaning of life" -n "$N" --temperature 0)
/usr/bin/time -f "%M" -o "$OUT/rss1" "$HW" "${ARGS[@]}" > "$OUT/one.txt" 2> "$OUT/one.err"
/usr/bin/time -f "%M" -o "$OUT/rss2" "$HW" launch --nproc-per-node "$R" --master-port 29842 -- "${ARGS[@]}" --pipeline "$P" \
  > "$OUT/split.txt" 2>&1 || { tail -5 "$OUT/split.txt"; exit 1; }
one=$(sed -n 's/.*(\([0-9.]*\) tokens\/s.*/\1/p' "$OUT/one.err")
split=$(sed -n 's/.*(\([0-9.]*\) tokens\/s.*/\1/p' "$OUT/split.txt")
same=$(grep -qF "[rank 0] $(head -1 "$OUT/one.txt")" "$OUT/split.txt" && echo identical || echo DIFFERENT)
echo "split_generate_bench ($(date -u +%F), $(nproc) cores): preset $PRESET, $N new tokens, greedy, KV cache:" \
     "one process $one tokens/s, RSS $(( $(tail -1 "$OUT/rss1") / 1024 )) MiB;" \
     "$R ranks in $P stages $split tokens/s, largest rank's RSS $(( $(tail -1 "$OUT/rss2") / 1024 )) MiB; texts $same"
