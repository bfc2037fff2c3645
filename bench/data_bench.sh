#!/usr/bin/env bash
# Data pipeline benchmarks (issue 5 targets):
#   1. prepare with the byte tokenizer, input MB/s, on ~200 MB of text (the fortunes corpus
#      repeated; target >= 100 MB/s on the 2-core machine);
#   2. prepare with a 16k-vocabulary SentencePiece BPE, side by side with SentencePiece's own
#      encoder (spm_encode, one thread) on the same text: prepare on 1 thread and on all cores;
#   3. the loader alone (BatchLoader::next() in a loop), tokens/s from shards in the page cache
#      (target >= 100 M tokens/s), at the default run's batch (16 x 256) and a larger one;
#   4. the share of time next() waits when each batch is followed by 20 ms of busy compute (the
#      default run's steps take longer), i.e. what a trainer loses to data (target < 1%).
# Every measurement prints a "result:" line. Outputs go to a temporary directory, removed at exit.
#
# Usage: bench/data_bench.sh [MB] [SPM_MB]   (defaults 200 and 20: SentencePiece BPE encodes a few
#        MB/s per core, so its comparison runs on the first SPM_MB of the same text)
# Env:   BENCH=path/to/bench_data_bench (default build/bench/bench_data_bench), KEEP=1 keeps the files.
set -euo pipefail

MB=${1:-200}
SPM_MB=${2:-20}
BENCH=${BENCH:-build/bench/bench_data_bench}
FORTUNES=/usr/share/games/fortunes
if [[ ! -x "$BENCH" ]]; then
  echo "data_bench: $BENCH not found; build it (cmake --build build --target bench_data_bench) or set BENCH=" >&2
  exit 2
fi
command -v spm_encode >/dev/null || { echo "data_bench: spm_encode not found (apt-get install sentencepiece)" >&2; exit 2; }
[[ -d $FORTUNES ]] || { echo "data_bench: $FORTUNES not found (apt-get install fortunes)" >&2; exit 2; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/hwtrain-data-bench.XXXXXX")
[[ "${KEEP:-0}" == 1 ]] || trap 'rm -rf "$WORK"' EXIT

echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"

# One copy of the fortunes text (documents end with a '%' line), then MB of it repeated.
for f in "$FORTUNES"/*; do
  [[ -f $f && ! -L $f && $f != *.dat && $f != *.u8 ]] || continue
  grep -qP '\x00' "$f" && continue
  cat "$f"; echo "%"
done >"$WORK/fortunes.txt"
one=$(stat -c %s "$WORK/fortunes.txt")
copies=$(( (MB * 1000000 + one - 1) / one ))
for ((i = 0; i < copies; i++)); do cat "$WORK/fortunes.txt"; done >"$WORK/corpus.txt"
echo "corpus: $(stat -c %s "$WORK/corpus.txt") bytes ($copies copies of $one bytes of fortunes)"
cat "$WORK/corpus.txt" >/dev/null  # into the page cache: prepare is measured, not the disk

echo "== 1. prepare, byte tokenizer"
for run in 1 2 3; do
  rm -rf "$WORK/byte"
  "$BENCH" prepare "$WORK/corpus.txt" "$WORK/byte"
done

echo "== 2. prepare, SentencePiece BPE 16k (trained on one copy), vs spm_encode, on $SPM_MB MB"
"$BENCH" tokenizer "$WORK/fortunes.txt" "$WORK/tok" --vocab 16000 --type bpe
head -c "$((SPM_MB * 1000000))" "$WORK/corpus.txt" >"$WORK/spm.txt"
for threads in 1 0; do
  rm -rf "$WORK/spm"
  "$BENCH" prepare "$WORK/spm.txt" "$WORK/spm" --tokenizer "$WORK/tok" --threads "$threads"
done
bytes=$(stat -c %s "$WORK/spm.txt")
t0=$(date +%s.%N)
spm_encode --model="$WORK/tok/tokenizer.model" --output_format=id <"$WORK/spm.txt" >"$WORK/spm_ids.txt"
t1=$(date +%s.%N)
awk -v b="$bytes" -v s="$(echo "$t1 - $t0" | bc)" \
  'BEGIN { printf "result: spm_encode threads=1 bytes=%d seconds=%.3f MB/s=%.1f\n", b, s, b / s / 1e6 }'

echo "== 3. loader alone (shards of the byte dataset, in the page cache)"
for shape in "16 256" "16 1024"; do
  set -- $shape
  for workers in 0 1 2; do
    "$BENCH" loader "$WORK/byte" --batch "$1" --block "$2" --workers "$workers" --seconds 3
  done
done
"$BENCH" loader "$WORK/byte" --batch 16 --block 1024 --workers 1 --sampling sequential --seconds 3
echo "== 4. time waiting for data behind a 20 ms stand-in training step (default batch 16 x 256, 1 worker)"
"$BENCH" loader "$WORK/byte" --batch 16 --block 256 --workers 1 --compute-ms 20 --seconds 5
