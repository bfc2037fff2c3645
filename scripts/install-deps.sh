#!/usr/bin/env bash
# Installs what hwtrain needs, idempotently: Debian packages and LibTorch (PyPI's torch wheel).
#
# LibTorch comes from PyPI's `torch` wheel, pinned so that this machine and the GPU machines run the
# same version. It goes into a virtual environment cached outside the clone ($HWTRAIN_CACHE,
# default ~/.cache/hwtrain), so a second clone or a CI run on the same machine does not download it
# again. Where a python3 already imports torch 2.x (the GPU machines, which cannot download), that
# one is used instead. The chosen interpreter is written to build/torch-python for the Makefile.
set -euo pipefail

TORCH_VERSION="${HWTRAIN_TORCH_VERSION:-2.11.0}"
CACHE_DIR="${HWTRAIN_CACHE:-$HOME/.cache/hwtrain}"
VENV="$CACHE_DIR/venv-torch-$TORCH_VERSION"
STAMP_FILE="${1:-build/torch-python}"

log() { echo "[install-deps] $*" >&2; }

debian_packages=(
  build-essential cmake ninja-build pkg-config python3-venv
  libtomlplusplus-dev libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libsentencepiece-dev sentencepiece libjemalloc2 libjemalloc-dev libpcre2-dev
  libicu-dev libsqlite3-dev
  python3-dev pybind11-dev
  fortunes
)

install_debian_packages() {
  local missing=()
  for p in "${debian_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then log "Debian packages: all present"; return; fi
  log "Debian packages missing: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

torch_ok() { "$1" -c 'import torch,sys; sys.exit(0 if torch.__version__.startswith("2.") else 1)' 2>/dev/null; }

find_or_install_torch() {
  # 1. A python3 that already has torch 2.x (GPU machines): use it as it is.
  for py in python3 /usr/bin/python3; do
    if command -v "$py" >/dev/null && torch_ok "$py"; then
      log "using preinstalled torch: $("$py" -c 'import torch;print(torch.__version__)') from $(command -v "$py")"
      echo "$(command -v "$py")"; return
    fi
  done
  # 2. The cached virtual environment.
  if [ -x "$VENV/bin/python" ] && torch_ok "$VENV/bin/python"; then
    log "using cached torch venv $VENV"; echo "$VENV/bin/python"; return
  fi
  # 3. Install into the cache (atomically: a half-made venv is never taken for a good one).
  log "installing torch==$TORCH_VERSION into $VENV (one-time download)"
  mkdir -p "$CACHE_DIR"
  local tmp="$VENV.partial.$$"
  rm -rf "$tmp"
  python3 -m venv "$tmp"
  "$tmp/bin/pip" install -q --upgrade pip >/dev/null
  "$tmp/bin/pip" install -q "torch==$TORCH_VERSION" numpy
  rm -rf "$VENV"
  mv "$tmp" "$VENV"
  # venv scripts hard-code their path; python itself does not, so only the interpreter is used.
  echo "$VENV/bin/python"
}

# Test references from PyPI (issue 17: reference equality with Hugging Face transformers), pinned,
# into hwtrain's own venv only: a preinstalled python (the GPU machines, offline) is left as it is,
# and the tests that need them skip there, saying why. pytest runs the Python package's tests
# (tests/python; issue 22). sentencepiece and protobuf let transformers convert a tokenizer.model
# into a Llama tokenizer.json (tests/data/hf_sentencepiece_test.cpp).
TRANSFORMERS_VERSION="${HWTRAIN_TRANSFORMERS_VERSION:-4.57.6}"
SENTENCEPIECE_VERSION="${HWTRAIN_SENTENCEPIECE_VERSION:-0.2.3}"
PROTOBUF_VERSION="${HWTRAIN_PROTOBUF_VERSION:-7.36.2}"
PYTEST_VERSION="${HWTRAIN_PYTEST_VERSION:-9.0.3}"
install_test_references() {
  local py=$1
  [ "$py" = "$VENV/bin/python" ] || return 0
  if ! "$py" -c "import transformers,sys; sys.exit(transformers.__version__ != '$TRANSFORMERS_VERSION')" 2>/dev/null; then
    log "installing transformers==$TRANSFORMERS_VERSION into $VENV (test reference)"
    "$py" -m pip install -q "transformers==$TRANSFORMERS_VERSION" >&2 || log "could not install transformers: its tests will skip"
  fi
  if ! "$py" -c "import sentencepiece,google.protobuf,sys; sys.exit(sentencepiece.__version__ != '$SENTENCEPIECE_VERSION' or google.protobuf.__version__ != '$PROTOBUF_VERSION')" 2>/dev/null; then
    log "installing sentencepiece==$SENTENCEPIECE_VERSION protobuf==$PROTOBUF_VERSION into $VENV (test reference)"
    "$py" -m pip install -q "sentencepiece==$SENTENCEPIECE_VERSION" "protobuf==$PROTOBUF_VERSION" >&2 ||
      log "could not install sentencepiece and protobuf: the Llama tokenizer.json tests will skip"
  fi
  if ! "$py" -c "import pytest,sys; sys.exit(pytest.__version__ != '$PYTEST_VERSION')" 2>/dev/null; then
    log "installing pytest==$PYTEST_VERSION into $VENV (the Python package's tests)"
    "$py" -m pip install -q "pytest==$PYTEST_VERSION" >&2 || log "could not install pytest: the Python tests will skip"
  fi
}

install_debian_packages
py=$(find_or_install_torch)
install_test_references "$py"
mkdir -p "$(dirname "$STAMP_FILE")"
echo "$py" > "$STAMP_FILE"
log "torch python: $py"
