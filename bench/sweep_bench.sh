#!/usr/bin/env bash
# hwtrain sweep against the default config (issue 21): learning rate x warmup x weight decay on the
# default model and corpus, 16 TPE trials of a fixed time budget each, as many at once as the
# planner chooses; the default config trained the same way (same budget, same threads, two copies
# side by side as the sweep's trials run) is the baseline. Prints the best trial's and the
# baseline's validation loss, and the sweep's wall time against trials x trial time / parallelism.
# Usage: bench/sweep_bench.sh [build-dir] [seconds-per-trial] [trials]
set -euo pipefail
BUILD=${1:-build}
SECONDS_PER_TRIAL=${2:-45}
TRIALS=${3:-16}
HW=$(realpath "$BUILD/hwtrain")
OUT=$(mktemp -d)
cd "$OUT"
echo "== sweep vs default config ($(date -u +%F), $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p')), default model,"
echo "   $TRIALS trials of $SECONDS_PER_TRIAL s (train.time_budget)"
cat > run.toml <<TOML
[train]
time_budget = $SECONDS_PER_TRIAL
sample_tokens = 0
[checkpoint]
save_final = false
[log]
report = false
tensorboard = false
TOML
cat > sweep.toml <<TOML
[sweep]
base_config = "run.toml"
trials = $TRIALS
sampler = "tpe"
seed = 1
[sweep.space."train.lr"]
type = "log_uniform"
low = 5e-4
high = 1e-2
[sweep.space."train.warmup_steps"]
type = "int"
low = 0
high = 200
[sweep.space."train.weight_decay"]
type = "log_uniform"
low = 0.01
high = 0.3
TOML
# The baseline first (it also prepares the default corpus once, before trials share the cache):
# two copies at once with one thread each, as the sweep runs its trials on 2 cores.
THREADS=$(( $(nproc) >= 4 ? 2 : 1 ))
for i in 1 2; do
  "$HW" train --config run.toml --set optimization.intra_op_threads=$THREADS --out base$i > base$i.log 2>&1 &
  [ "$i" = 1 ] && sleep 20  # the first one prepares the corpus
done
wait
base=$(for i in 1 2; do sed -n 's/.*eval step [0-9]* | val_loss \([0-9.]*\).*/\1/p' base$i.log | tail -1; done | tr '\n' ' ')
start=$(date +%s)
"$HW" sweep --config sweep.toml > sweep.log 2>&1 || { echo "sweep failed:"; tail -5 sweep.log; exit 1; }
wall=$(( $(date +%s) - start ))
sed -n '/^trial  state/,$p' sweep.log | head -$((TRIALS + 1))
par=$(sed -n 's/.*; \([0-9]*\) trial(s) at once.*/\1/p' sweep.log | head -1)
sum=$(sed -n '/^trial  state/,$p' sweep.log | awk 'NR > 1 && $2 == "complete" {s += $4} END {print s}')
best=$(sed -n '/^trial  state/,$p' sweep.log | awk 'NR == 2 {print $3}')
echo "baseline (default config) val_loss: $base"
echo "best trial val_loss: $best"
echo "sweep wall time: ${wall} s; trials x trial time / parallelism: ${sum} / ${par} = $(( sum / par )) s"
rm -rf "$OUT"
