#!/usr/bin/env bash
# Logging and monitoring overhead (issue 7 target: under 1% of step time in the default run).
# Trains the default model with the metric sinks (metrics.jsonl, metrics.csv, TensorBoard), the
# hardware monitor and the report OFF, then ON (the defaults), alternating, and prints both rates.
#
# Sink work runs in callbacks outside the timed step, so the trainer's per-step tokens/s cannot see
# it. The rate is measured end to end instead: each progress line ("step N | ...", printed and
# flushed every train.log_interval steps in both settings) is timestamped as it arrives, and
#   time per step = (arrival of the last line - arrival of the first after warm-up) / steps between,
# which leaves out start-up (hardware detection, planning, data) and the end of the run.
# That comparison is as noisy as the machine (about ±5-10% between identical runs here), so each
# run also reports the cost directly: the wall time of every callback on the training thread
# (sinks, progress, report, checkpointing) and the monitor thread's own CPU time, as a share of
# the run ("callbacks: ..." at the end of hwtrain train). That figure is not disturbed by noise.
#
# Usage: bench/obs_overhead.sh [N_STEPS] [REPEATS]      (defaults 300 and 2; ~2 min per run on 2 cores)
# Env:   HWTRAIN=path/to/hwtrain (default build/hwtrain); EXTRA="--set k=v ..." for both settings.
set -euo pipefail

N=${1:-300}
REPEATS=${2:-2}
HWTRAIN=${HWTRAIN:-build/hwtrain}
EXTRA=${EXTRA:-}
WARMUP=25  # the first progress line at or after this step starts the clock
if [[ ! -x "$HWTRAIN" ]]; then
  echo "obs_overhead: $HWTRAIN not found; build it first (make build) or set HWTRAIN=" >&2
  exit 2
fi
if [[ -z "${EPOCHREALTIME:-}" ]]; then
  echo "obs_overhead: needs bash 5 (EPOCHREALTIME)" >&2
  exit 2
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/hwtrain-obs-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# The same run in both settings: fixed steps, no time budget, no evaluation, checkpoint or sample,
# so only logging differs. Progress lines stay on in both: they are the run's output either way.
COMMON=(--set train.time_budget=0 --set train.eval_interval=0 --set train.sample_tokens=0
        --set checkpoint.interval=0 --set checkpoint.save_final=false --set log.progress=lines
        --set train.max_steps="$N")
OFF=(--set log.jsonl=false --set log.csv=false --set log.tensorboard=false
     --set log.gpu_log_interval=0 --set log.report=false)
ON=()  # the defaults: jsonl, csv, TensorBoard, monitor, report

# run NAME SETTINGS... -> prints "ms_per_step tokens_per_step median_step_tokens_per_s direct_share_%"
run() {
  local name=$1; shift
  local dir="$WORK/$name-$RANDOM" stamped="$WORK/$name-$RANDOM.log"
  # shellcheck disable=SC2086
  if ! "$HWTRAIN" train --out "$dir" "${COMMON[@]}" "$@" $EXTRA 2>&1 |
       while IFS= read -r line; do printf '%s %s\n' "$EPOCHREALTIME" "$line"; done >"$stamped"; then
    echo "obs_overhead: the '$name' run failed; its output ends with:" >&2
    tail -20 "$stamped" >&2
    exit 1
  fi
  # Line: "<arrival> step N | loss .. | tokens/s X | ... | step_time Ys | ..."
  awk -v warmup="$WARMUP" '
    $2 == "step" && $4 == "|" {
      n = $3 + 0; tps = ""; st = ""
      for (i = 4; i < NF; i++) {
        if ($i == "tokens/s") tps = $(i + 1)
        if ($i == "step_time") { st = $(i + 1); sub(/s$/, "", st) }
      }
      if (n >= warmup) {
        if (first_n == "") { first_n = n; first_t = $1 }
        last_n = n; last_t = $1
        if (tps != "") { rates[++k] = tps + 0; if (st != "") tok = tps * st }
      }
    }
    END {
      if (last_n == "" || last_n == first_n) { print "0 0 0"; exit }
      # median of the per-step rates (insertion sort: few values, and mawk has no asort)
      for (i = 2; i <= k; i++) { v = rates[i]; for (j = i - 1; j >= 1 && rates[j] > v; j--) rates[j + 1] = rates[j]; rates[j + 1] = v }
      printf "%.4f %.0f %.0f ", 1000 * (last_t - first_t) / (last_n - first_n), tok, rates[int((k + 1) / 2)]
    }' "$stamped"
  # "callbacks: ... together 0.12% of the 123 s run"
  sed -n 's/.*callbacks: .* together \([0-9.]*\)% of the.*/\1/p' "$stamped" | tail -1 | grep . || echo nan
  grep -o 'callbacks: .*' "$stamped" | tail -1 >"$WORK/last-callbacks.txt" || true
}

echo "obs_overhead: $HWTRAIN, $N steps per run, $REPEATS repeat(s) per setting, alternating"
sum_off=0; sum_on=0; tokens=0
for ((r = 1; r <= REPEATS; r++)); do
  for setting in off on; do
    if [[ $setting == off ]]; then
      out=$(run off "${OFF[@]}")
    else
      out=$(run on ${ON[@]+"${ON[@]}"})
    fi
    read -r ms tok med direct <<<"$out"
    if [[ $ms == 0 ]]; then
      echo "obs_overhead: too few progress lines; raise N_STEPS above $((WARMUP * 2)) or lower train.log_interval" >&2
      exit 1
    fi
    echo "  repeat $r, sinks + monitor $setting: $ms ms per step, $tok tokens per step, median step $med tokens/s;" \
         "callbacks + monitor measured directly: $direct% of the run"
    echo "    $(cat "$WORK/last-callbacks.txt")"
    tokens=$tok
    if [[ $setting == off ]]; then sum_off=$(awk -v a="$sum_off" -v b="$ms" 'BEGIN{print a + b}')
    else sum_on=$(awk -v a="$sum_on" -v b="$ms" 'BEGIN{print a + b}'); fi
  done
done

awk -v off="$sum_off" -v on="$sum_on" -v r="$REPEATS" -v tok="$tokens" 'BEGIN {
  off /= r; on /= r
  printf "\n%-30s %12s %14s\n", "setting", "ms per step", "tokens/s"
  printf "%-30s %12.2f %14.0f\n", "sinks + monitor off", off, (off > 0 ? 1000 * tok / off : 0)
  printf "%-30s %12.2f %14.0f\n", "sinks + monitor on (default)", on, (on > 0 ? 1000 * tok / on : 0)
  ov = (off > 0 ? 100 * (on - off) / off : 0)
  verdict = (ov < 1 ? "within target" : "above target, or noise: use an idle machine, more steps or repeats")
  printf "\noverhead: %.2f%% of step time (target: under 1%%): %s\n", ov, verdict
}'
