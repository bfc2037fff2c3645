#!/usr/bin/env bash
# Hugging Face byte-level BPE encoding, hwtrain against the `tokenizers` library (issue 17), one
# thread each, on the same generated mixed text, for a GPT-2-style and a Llama-3-style tokenizer
# trained by tokenizers (tests/data/reference/hf_tokenizers_reference.py, which also checks nothing
# but writes tokenizers' ids and its encode time; the test checks the ids are equal).
# Usage: bench/tokenizer_bench.sh BUILD_DIR [TEXT_MEGABYTES]   (needs transformers' venv python)
set -euo pipefail
BUILD=${1:?build dir}
MB=${2:-5}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=$(cat "$BUILD/torch-python" 2>/dev/null || echo python3)
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
cmake --build "$BUILD" --target bench_data_tokenizer_bench > /dev/null
RAYON_NUM_THREADS=1 "$PY" "$HERE/../tests/data/reference/hf_tokenizers_reference.py" "$OUT" "$MB"
for style in gpt2 llama3 qwen2; do
  "$BUILD/bench/bench_data_tokenizer_bench" "$OUT/$style" "$OUT/text.txt"
  echo "tokenizers $style: $(cat "$OUT/$style.seconds") s for the same text (one encode call, RAYON_NUM_THREADS=1)"
done
