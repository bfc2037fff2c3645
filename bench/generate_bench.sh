#!/usr/bin/env bash
# Generation with and without the KV cache (issue 17), side by side in one run: a model of the
# given preset (random-init weights after one training step on the default corpus: speed does not
# depend on the weights), then `hwtrain generate` greedy for N new tokens both ways. Prints the
# tokens/s of each, their ratio, and whether the two texts are identical.
# Usage: bench/generate_bench.sh BUILD_DIR [PRESET] [NEW_TOKENS] [BLOCK]   (default: small 256 512)
set -euo pipefail
BUILD=${1:?build dir}
PRESET=${2:-small}
N=${3:-256}
BLOCK=${4:-512}
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
DATA=$("$HERE/default_data.sh" "$BUILD")
"$BUILD/hwtrain" train --data "$DATA" --out "$OUT/run" --set model.preset="$PRESET" --set model.block_size="$BLOCK" \
  --set train.max_steps=1 --set train.eval_interval=0 --set train.sample_tokens=0 --set log.report=false \
  --set train.micro_batch_size=1 > "$OUT/train.log" 2>&1 || { tail -5 "$OUT/train.log"; exit 1; }
run() {  # extra flags -> text on stdout, timing line in $OUT/t$2
  "$BUILD/hwtrain" generate "$OUT/run" --prompt "The meaning of life" -n "$N" --temperature 0 $1 \
    > "$OUT/text$2" 2> "$OUT/t$2"
  sed -n 's/.*(\([0-9.]*\) tokens\/s.*/\1/p' "$OUT/t$2"
}
cached=$(run "" 1)
recomputed=$(run "--no-kv-cache" 2)
same=$(cmp -s "$OUT/text1" "$OUT/text2" && echo identical || echo DIFFERENT)
echo "generate_bench: preset $PRESET, block $BLOCK, $N new tokens, greedy: KV cache $cached tokens/s," \
     "recompute $recomputed tokens/s, ratio $(python3 -c "print(round($cached/$recomputed, 2))"); texts $same"
