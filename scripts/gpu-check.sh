#!/usr/bin/env bash
# The CUDA path in one call on a GPU machine (issue 15): unpacks the Debian packages hwtrain builds
# against into a prefix, configures against that machine's torch, builds with every core, runs the
# whole test suite (the GPU-only tests included), runs the GPU benchmark and prints a table last.
#
# The GPU machines have python3 with torch, CMake, ninja and nvcc but no -dev packages and no
# network. On a machine with apt (Debian 12), `scripts/gpu-check.sh --download` fetches the .deb
# files into .gpu-debs/ (git-ignored); carry that folder to the GPU machine and run
#   scripts/gpu-check.sh [all|build|test|bench] [OUT_DIR]
# Logs and the table go to OUT_DIR (default /tmp/hwtrain-gpu-check); where $OUT is set (the device
# tool), summary.txt and logs.tar.gz are copied there.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEBS=$ROOT/.gpu-debs
PACKAGES=(libtomlplusplus-dev libtomlplusplus3 libcli11-dev libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
  nlohmann-json3-dev libgtest-dev libgmock-dev googletest libsentencepiece-dev libsentencepiece0 sentencepiece
  libjemalloc2 libjemalloc-dev fortunes fortunes-min libpcre2-dev libpcre2-8-0
  libicu-dev libicu72 libsqlite3-dev libsqlite3-0)

if [ "${1:-}" = "--download" ]; then
  mkdir -p "$DEBS" && cd "$DEBS" && apt-get download "${PACKAGES[@]}" && ls "$DEBS"
  exit $?
fi
# --prebuild: packs this machine's build/ (binaries, tests, ctest files) into .gpu-prebuilt/, for a
# GPU machine whose compiler cannot build hwtrain (GCC 13.3 there crashed once on this code): the
# binaries are Debian 12's, they run there on the carried libraries and that machine's torch.
if [ "${1:-}" = "--prebuild" ]; then
  mkdir -p "$ROOT/.gpu-prebuilt" &&
    tar czf "$ROOT/.gpu-prebuilt/build.tar.gz" -C "$ROOT" --exclude=CMakeFiles --exclude='*.a' \
      --exclude='.ninja_*' --exclude=build.ninja --exclude=include-first build &&
    echo "$ROOT" > "$ROOT/.gpu-prebuilt/ROOT" && ls -la "$ROOT/.gpu-prebuilt"
  exit $?
fi

WHAT=${1:-all}
OUTDIR=${2:-/tmp/hwtrain-gpu-check}
PREFIX=${HWTRAIN_DEPS_PREFIX:-/tmp/hwtrain-deps}
BUILD=$ROOT/build-gpu
JOBS=$(nproc)
mkdir -p "$OUTDIR"
SUMMARY=$OUTDIR/summary.txt
: > "$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
stamp() { date +%s; }
T0=$(stamp)

note "== gpu-check $(date -u +%FT%TZ) on $(hostname), $(nproc) cores"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv,noheader 2>&1 | sed 's/^/gpu: /' | tee -a "$SUMMARY"
note "torch: $(python3 -c 'import torch;print(torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1)"
note "compiler: $(c++ --version 2>&1 | head -1); nvcc: $(command -v nvcc || echo none); cmake: $(cmake --version | head -1)"

unpack() {
  [ -d "$DEBS" ] || { note "no $DEBS: run scripts/gpu-check.sh --download on a Debian machine and carry it"; exit 2; }
  mkdir -p "$PREFIX"
  for f in "$DEBS"/*.deb; do dpkg -x "$f" "$PREFIX" || { note "dpkg -x $f failed"; exit 2; }; done
  # The default corpus (fortunes) is data at a fixed path; the tests and `make run` read it there.
  if [ ! -d /usr/share/games/fortunes ]; then
    mkdir -p /usr/share/games && cp -r "$PREFIX/usr/share/games/fortunes" /usr/share/games/
  fi
}

configure_and_build() {
  local lib=$PREFIX/usr/lib/x86_64-linux-gnu t=$(stamp)
  export PKG_CONFIG_SYSROOT_DIR=$PREFIX PKG_CONFIG_PATH=$lib/pkgconfig
  local cuda=()
  command -v nvcc >/dev/null || { [ -x /usr/local/cuda/bin/nvcc ] && export PATH=/usr/local/cuda/bin:$PATH; }
  command -v nvcc >/dev/null && cuda=(-DCMAKE_CUDA_COMPILER="$(command -v nvcc)")
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHWTRAIN_TORCH_PYTHON="$(command -v python3)" \
    -DCMAKE_PREFIX_PATH="$PREFIX/usr" -DTORCH_CUDA_ARCH_LIST=9.0 -DHWTRAIN_PCH=OFF "${cuda[@]}" > "$OUTDIR/configure.log" 2>&1 ||
    { note "configure FAILED ($(($(stamp) - t)) s)"; tail -30 "$OUTDIR/configure.log"; return 3; }
  note "configure: $(grep -E 'LibTorch CUDA support|SentencePiece' "$OUTDIR/configure.log" | tr '\n' ' ')"
  # GCC 13 (Ubuntu 24.04, the GPU image) crashed (internal compiler error) loading LibTorch's
  # precompiled header; without it each unity file parses torch.h itself, which 16 cores absorb.
  if ! cmake --build "$BUILD" -j "$JOBS" > "$OUTDIR/build.log" 2>&1; then
    note "build failed once ($(grep -m1 -E 'error' "$OUTDIR/build.log")); again without unity files"
    cmake -DHWTRAIN_UNITY_BUILD=OFF "$BUILD" >> "$OUTDIR/configure.log" 2>&1
    cmake --build "$BUILD" -j "$JOBS" > "$OUTDIR/build.log" 2>&1 ||
      { note "build FAILED ($(($(stamp) - t)) s)"; grep -E 'error|Error' "$OUTDIR/build.log" | sort -u | head -30 | tee -a "$SUMMARY"; return 4; }
  fi
  note "build: ok in $(($(stamp) - t)) s"
}

export LD_LIBRARY_PATH=$PREFIX/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# The binaries built elsewhere (--prebuild), unpacked as build-gpu/, their ctest paths moved here.
use_prebuilt() {
  local pre=$ROOT/.gpu-prebuilt from
  [ -f "$pre/build.tar.gz" ] || { note "no prebuilt binaries in $pre"; exit 4; }
  from=$(cat "$pre/ROOT")
  rm -rf "$BUILD" /tmp/hwtrain-prebuilt && mkdir -p /tmp/hwtrain-prebuilt &&
    tar xzf "$pre/build.tar.gz" -C /tmp/hwtrain-prebuilt && mv /tmp/hwtrain-prebuilt/build "$BUILD"
  find "$BUILD" -name '*.cmake' -exec sed -i "s#$from/build#$BUILD#g; s#$from#$ROOT#g" {} +
  # Test binaries name the hwtrain binary by its path where they were built.
  [ -e "$from/build" ] || { mkdir -p "$from" && ln -s "$BUILD" "$from/build"; }
  local torch_lib
  torch_lib=$(python3 -c 'import torch,os;print(os.path.join(os.path.dirname(torch.__file__),"lib"))')
  export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$torch_lib
  note "prebuilt binaries from $from ($(cd "$ROOT" && git log -1 --format='%h %s' 2>/dev/null)); ldd: $(ldd "$BUILD/hwtrain" | grep -c 'not found') missing"
}

# The GPU-only tests (they GTEST_SKIP without CUDA) and those whose GPU runs are yet to be seen
# (GPU_CHECK_GPU_REGEX), each result in the summary.
run_gpu_tests() {
  local t=$(stamp)
  (cd "$BUILD" && timeout 240 ctest -R "${GPU_CHECK_GPU_REGEX:-Cuda|CUDA|Gpu|GPU|Nvml|GoldenLosses}" -j 4 --timeout 200 --output-on-failure -V) > "$OUTDIR/ctest-gpu.log" 2>&1
  note "gpu tests: $(grep -E 'tests passed|tests failed' "$OUTDIR/ctest-gpu.log" | tail -1) in $(($(stamp) - t)) s"
  grep -E '^\s*[0-9]+/[0-9]+ Test +#[0-9]+:' "$OUTDIR/ctest-gpu.log" | sed 's/^ *//' | tee -a "$SUMMARY"
  grep -E 'Failure|Expected|Which is|actual|error:|largest difference|CUDA graphs:' "$OUTDIR/ctest-gpu.log" | head -30 | tee -a "$SUMMARY"
}

run_tests() {
  run_gpu_tests
  run_all_tests
}

# The whole suite as CI runs it, several times side by side: shard i of S takes every S-th test
# (ctest -I i,,S), two at a time on its own two cores (taskset). A test process sizes its threads to
# the cores it may use, so one ctest -j 16 over 16 cores ran 16 tests of 16 threads each (several
# ranks apiece): 174 of 809 tests in 350 s on the H100 machine, CI's 2-core tests taking 50-170 s.
run_all_tests() {
  local t=$(stamp) shards=${GPU_CHECK_SHARDS:-$(( JOBS / 2 > 0 ? JOBS / 2 : 1 ))} i cores pin
  local only=()
  [ -n "${GPU_CHECK_TEST_REGEX:-}" ] && only=(-R "$GPU_CHECK_TEST_REGEX")  # a subset, e.g. to re-check failures
  for ((i = 1; i <= shards; i++)); do
    cores=$(( (2 * (i - 1)) % JOBS )),$(( (2 * (i - 1) + 1) % JOBS ))
    pin=(); command -v taskset >/dev/null && pin=(taskset -c "$cores")
    (cd "$BUILD" && timeout "${GPU_CHECK_TEST_SECONDS:-300}" ${pin[@]+"${pin[@]}"} \
      ctest -I "$i,,$shards" -j 2 --timeout 240 --output-on-failure "${only[@]}") > "$OUTDIR/ctest-shard$i.log" 2>&1 &
  done
  wait
  cat "$OUTDIR"/ctest-shard*.log > "$OUTDIR/ctest.log"
  local passed failed listed
  passed=$(grep -cE 'Test +#[0-9]+: .* Passed' "$OUTDIR/ctest.log")
  failed=$(grep -cE 'Test +#[0-9]+: .*\*\*\*(Failed|Timeout|Exception)' "$OUTDIR/ctest.log")
  listed=$(sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p; s/.*tests passed out of \([0-9]*\).*/\1/p' "$OUTDIR/ctest.log" |
    awk '{ n += $1 } END { print n + 0 }')
  note "tests: $passed passed, $failed failed in $(($(stamp) - t)) s ($shards shards x 2 cores; those that finished listed $listed tests)"
  grep -E '^\s+[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess|Exception)' "$OUTDIR/ctest.log" | head -40 | tee -a "$SUMMARY"
  # Which tests skipped on the GPU (the CPU-only ones should be the only skips here).
  grep -E 'Skipped|\*\*\*Not Run' "$OUTDIR/ctest.log" | sed 's/^/skipped: /' | head -40 >> "$SUMMARY"
}

# NVML at log.gpu_log_interval: a short run sampling every second; the monitor records of its
# metrics.jsonl must carry the GPU's utilization, memory, temperature and power.
nvml_check() {
  local run=$OUTDIR/run-nvml
  rm -rf "$run"
  "$BUILD/hwtrain" train --out "$run" --set model.preset=gpt2 --set model.block_size=1024 --set train.max_steps=60 \
    --set train.eval_interval=0 --set train.sample_tokens=0 --set checkpoint.save_final=false --set log.report=false \
    --set log.gpu_log_interval=1 > "$OUTDIR/nvml-run.log" 2>&1
  note "nvml run: exit $?; $(python3 - "$run/metrics.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"type":"monitor"' in l]
g = [r["gpus"][0] for r in rows if r.get("gpus")]
if not g:
    print("no GPU samples in", len(rows), "monitor records")
else:
    keys = ["utilization_percent", "memory_used_bytes", "temperature_celsius", "power_watts"]
    print(len(g), "GPU samples; max", ", ".join(f"{k} {max((s.get(k) or 0) for s in g):.4g}" for k in keys))
EOF
)"
}

gpu_facts() {
  local t=$(stamp)
  "$BUILD/hwtrain" doctor > "$OUTDIR/doctor.txt" 2>&1; note "doctor: exit $? ($OUTDIR/doctor.txt)"
  "$BUILD/hwtrain" plan --set model.preset=gpt2 --set model.vocab_size=50304 --set model.block_size=1024 \
    > "$OUTDIR/plan-gpt2.txt" 2>&1; note "plan gpt2: exit $?"
  sed -n '/^plan:/,/^$/p' "$OUTDIR/plan-gpt2.txt" | tee -a "$SUMMARY"
  grep -E '^  (GPUs|Software)|^ +\[[0-9]\]|NVIDIA driver' "$OUTDIR/doctor.txt" | sed 's/^/doctor: /' | tee -a "$SUMMARY"
  nvml_check
  note "facts: $(($(stamp) - t)) s"
}

run_bench() {
  local t=$(stamp)
  bash "$ROOT/bench/gpu_bench.sh" "$BUILD" "$OUTDIR/bench" ${GPU_BENCH_MODELS:-gpt2 gpt2-medium} > "$OUTDIR/bench.log" 2>&1
  note "bench: exit $? in $(($(stamp) - t)) s"
  # Issue 16: what offloading the AdamW moments frees on the GPU (device peak), and what it costs.
  t=$(stamp)
  RANKS=1 bash "$ROOT/bench/offload_bench.sh" "$BUILD" 8 cuda > "$OUTDIR/offload.log" 2>&1
  note "offload bench: exit $? in $(($(stamp) - t)) s"
  tee -a "$SUMMARY" < "$OUTDIR/offload.log"
}

# Where the step time goes: hwtrain's and PyTorch's kernel timelines side by side.
run_profile() {
  local t=$(stamp) model
  for model in ${GPU_PROFILE_MODELS:-gpt2}; do
    bash "$ROOT/bench/gpu_profile.sh" "$BUILD" "$OUTDIR/profile" "$model" > "$OUTDIR/profile-$model.log" 2>&1
    note "profile $model: exit $? in $(($(stamp) - t)) s"
    cat "$OUTDIR/profile-$model.log" >> "$SUMMARY"
  done
}

# After a prebuilt run: how far this machine's compiler gets with the sources (all errors, -k 0).
probe_source_build() {
  local t=$(stamp) dir=$ROOT/build-src lib=$PREFIX/usr/lib/x86_64-linux-gnu
  PKG_CONFIG_SYSROOT_DIR=$PREFIX PKG_CONFIG_PATH=$lib/pkgconfig cmake -S "$ROOT" -B "$dir" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DHWTRAIN_TORCH_PYTHON="$(command -v python3)" -DCMAKE_PREFIX_PATH="$PREFIX/usr" \
    -DTORCH_CUDA_ARCH_LIST=9.0 -DHWTRAIN_PCH=OFF > "$OUTDIR/probe-configure.log" 2>&1
  timeout "${GPU_CHECK_PROBE_SECONDS:-200}" cmake --build "$dir" -j "$JOBS" -- -k 0 > "$OUTDIR/probe-build.log" 2>&1
  note "source build probe: exit $? in $(($(stamp) - t)) s; $(grep -c 'error' "$OUTDIR/probe-build.log") error lines"
  grep -E 'error|internal compiler' "$OUTDIR/probe-build.log" | sort -u | head -20 | tee -a "$SUMMARY"
}

# This machine's compiler first; where it fails and binaries built elsewhere were carried, those.
build_or_prebuilt() {
  configure_and_build && return 0
  [ -f "$ROOT/.gpu-prebuilt/build.tar.gz" ] || exit 4
  note "falling back to the carried prebuilt binaries"; use_prebuilt
}

# Two data-parallel ranks on the one GPU through NCCL (the issue asks whether NCCL allows it).
nccl_two_ranks_one_gpu() {
  local t=$(stamp)
  timeout 90 "$BUILD/hwtrain" launch --nproc-per-node 2 --master-port 29611 -- train --out "$OUTDIR/run-nccl2" \
    --set dist.backend=nccl --set train.max_steps=5 --set train.eval_interval=0 --set train.sample_tokens=0 \
    --set checkpoint.save_final=false --set log.report=false > "$OUTDIR/nccl2.log" 2>&1
  note "nccl, 2 ranks on one GPU: exit $? in $(($(stamp) - t)) s; $(grep -m3 -iE 'duplicate|nccl.*(error|warn)|^step 5 ' "$OUTDIR/nccl2.log" | tr '\n' ' ')"
}

# One short call: the facts, the GPU tests, the GPT-2 124M table (hwtrain with and without CUDA
# graphs, PyTorch beside it), then the whole suite for what time is left.
prebuilt_graphs() {
  unpack; use_prebuilt; gpu_facts; run_gpu_tests; nccl_two_ranks_one_gpu
  local t=$(stamp)
  bash "$ROOT/bench/gpu_bench.sh" "$BUILD" "$OUTDIR/bench" ${GPU_BENCH_MODELS:-gpt2} > "$OUTDIR/bench.log" 2>&1
  note "bench: exit $? in $(($(stamp) - t)) s"
  cat "$OUTDIR/bench/gpu_bench_table.txt" >> "$SUMMARY" 2>/dev/null
  run_all_tests
}

# One table per model (GPU_TABLE_MODELS, else $1), each beside PyTorch eager bf16 and torch.compile
# (GPU_TABLE_PYTORCH), into the summary.
bench_tables() {
  local t model
  for model in ${GPU_TABLE_MODELS:-$1}; do
    t=$(stamp)
    GPU_BENCH_PYTORCH=${GPU_TABLE_PYTORCH-eager-bf16-fused compile-bf16-fused} \
      bash "$ROOT/bench/gpu_bench.sh" "$BUILD" "$OUTDIR/bench-$model" "$model" > "$OUTDIR/bench-$model.log" 2>&1
    note "bench $model: exit $? in $(($(stamp) - t)) s"
    cat "$OUTDIR/bench-$model/gpu_bench_table.txt" >> "$SUMMARY" 2>/dev/null
  done
}

# The tables (GPU_TABLE_MODELS, default the Llama block at 124M's shape, then GPT-2 350M, each
# beside PyTorch eager bf16 and torch.compile), then the offload bench (issue 16: the device memory
# offloading frees), after the cross-entropy's measured copies (bench/ce_memory.py).
prebuilt_tables() {
  unpack; use_prebuilt
  note "$(python3 "$ROOT/bench/ce_memory.py" 16384 50304 2>&1 | tail -1)"
  bench_tables "llama-150m gpt2-medium"
  local t
  t=$(stamp)
  RANKS=1 bash "$ROOT/bench/offload_bench.sh" "$BUILD" 8 cuda > "$OUTDIR/offload.log" 2>&1
  note "offload bench: exit $? in $(($(stamp) - t)) s"
  tee -a "$SUMMARY" < "$OUTDIR/offload.log"
}

# The model's CUDA kernel choices (the loss reading 16-bit logits, the fused RMSNorm): hwtrain's loss
# alone beside the cast-first reference, bf16 and fp16 (bench/token_loss_bench.cpp), the GPU tests,
# the GPT-2 124M and Llama tables beside PyTorch eager bf16 and torch.compile, then the whole suite
# until GPU_CHECK_DEADLINE seconds after the start.
prebuilt_fusion() {
  unpack; use_prebuilt
  local dtype
  for dtype in bf16 fp16; do
    "$BUILD/bench/bench_token_loss_bench" 16384 50304 $dtype 10 2>&1 | tail -4 | tee -a "$SUMMARY"
  done
  run_gpu_tests
  GPU_BENCH_GRAPHS=${GPU_BENCH_GRAPHS:-0} bench_tables "gpt2 llama-150m"
  local left=$(( ${GPU_CHECK_DEADLINE:-600} - ($(stamp) - T0) - 20 ))
  [ "$left" -gt 30 ] && GPU_CHECK_TEST_SECONDS=$left run_all_tests
}

case $WHAT in
  prebuilt-fusion) prebuilt_fusion ;;
  prebuilt-graphs) prebuilt_graphs ;;
  prebuilt-tables) prebuilt_tables ;;
  prebuilt) unpack; use_prebuilt; gpu_facts; run_bench; run_tests; probe_source_build ;;
  prebuilt-profile) unpack; use_prebuilt; gpu_facts; run_profile; run_tests ;;
  prebuilt-full) unpack; use_prebuilt; gpu_facts; run_bench; run_profile; run_tests ;;
  prebuilt-test) unpack; use_prebuilt; run_tests ;;
  all) unpack; build_or_prebuilt; gpu_facts; run_bench; run_tests ;;
  build) unpack; configure_and_build || exit $? ;;
  test) unpack; build_or_prebuilt; gpu_facts; run_tests ;;
  bench) unpack; build_or_prebuilt; gpu_facts; run_bench ;;
  *) echo "usage: scripts/gpu-check.sh [--download | --prebuild | prebuilt | prebuilt-fusion | prebuilt-graphs | prebuilt-tables | prebuilt-profile | prebuilt-full | prebuilt-test | all | build | test | bench] [OUT_DIR]"; exit 1 ;;
esac
note "total: $(($(stamp) - T0)) s"
if [ -n "${OUT:-}" ]; then
  cp "$SUMMARY" "$OUT/" && tar czf "$OUT/logs.tar.gz" -C "$OUTDIR" --exclude='run-*' . 2>/dev/null
fi
echo
cat "$SUMMARY"
[ -f "$OUTDIR/bench/gpu_bench_table.txt" ] && { echo; cat "$OUTDIR/bench/gpu_bench_table.txt"; }
