#!/usr/bin/env bash
# Two hwtrain binaries side by side on the default model and corpus (the `make run` job), runs
# interleaved A B A B ... so that drift of the machine hits both alike: tokens/s per run (the
# binary's own "measured" running mean, which forgets the first steps) and the median ratio B/A.
# Usage: bench/binary_ab.sh OLD_BINARY NEW_BINARY [rounds=3] [steps=60] [extra --set args...]
set -euo pipefail
A=$1; B=$2; ROUNDS=${3:-3}; STEPS=${4:-60}; shift $(( $# < 4 ? $# : 4 ))
OUT=$(mktemp -d); trap 'rm -rf "$OUT"' EXIT
args=(--set "train.max_steps=$STEPS" --set train.eval_interval=0 --set train.sample_tokens=0
      --set checkpoint.save_final=false --set train.time_budget=0 --set log.report=false
      --set log.tensorboard=false --set data.cache_dir="$OUT/cache" "$@")
echo "== $(date -u +%F) $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'); $STEPS steps x $ROUNDS rounds"
tps() {  # binary, run name -> tokens/s
  "$1" train "${args[@]}" --out "$OUT/$2" > "$OUT/$2.log" 2>&1
  sed -n 's/^measured: .*"tokens_per_second":\([0-9.e+]*\).*/\1/p' "$OUT/$2.log"
}
ratios=()
for r in $(seq "$ROUNDS"); do
  a=$(tps "$A" "a$r"); b=$(tps "$B" "b$r")
  ratio=$(python3 -c "print(f'{$b/$a:.3f}')")
  ratios+=("$ratio")
  printf 'round %d: A %.0f tokens/s, B %.0f tokens/s, B/A %s\n' "$r" "$a" "$b" "$ratio"
done
echo "median B/A: $(printf '%s\n' "${ratios[@]}" | sort -n | sed -n "$(( (ROUNDS + 1) / 2 ))p")"
