#!/usr/bin/env bash
# The installed package used by a project of its own: installs the build tree into a fresh prefix,
# checks what was installed (hwtrainConfig.cmake and the public headers, no internal header, every
# hwtrain include of an installed header installed too), then configures, builds and runs
# examples/find_package against that prefix; the example exits non-zero unless its loss fell.
#   out_of_tree_test.sh SOURCE_DIR BUILD_DIR TORCH_PYTHON WORK_DIR [CMAKE]
set -euo pipefail
src=$1 build=$2 python=$3 work=$4 cmake=${5:-cmake}
prefix=$work/prefix
fail() { echo "FAIL: $*" >&2; exit 1; }
phase() { echo "== $* ($(( SECONDS - start ))s)"; }
start=$SECONDS

rm -rf "$work"
mkdir -p "$work"
phase "cmake --install $build --prefix $prefix"
"$cmake" --install "$build" --prefix "$prefix" > "$work/install.log" || { cat "$work/install.log"; fail "cmake --install"; }

config=$(find "$prefix" -name hwtrainConfig.cmake -print -quit)
[[ -n $config ]] || fail "no hwtrainConfig.cmake under $prefix"
inc=$prefix/include
[[ -f $inc/hwtrain/run/hardware_aware_optimizer.h ]] || fail "public header hwtrain/run/hardware_aware_optimizer.h not installed"
# Internal headers: a .cpp-private helper of hardware detection, and the dist area's gloo shim.
for internal in hwtrain/hw/sysfs.h hwtrain/dist/gloo_shim/gloo/algorithm.h; do
  [[ -f $src/src/$internal ]] || fail "the internal header $internal no longer exists; pick another for this check"
  [[ ! -e $inc/$internal ]] || fail "internal header $internal was installed"
done
num_headers=0
while IFS= read -r -d '' header; do
  num_headers=$((num_headers + 1))
  while IFS= read -r included; do
    [[ -f $inc/$included ]] || fail "${header#"$inc"/} includes $included, which was not installed"
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\(hwtrain\/[^"]*\)".*/\1/p' "$header")
done < <(find "$inc" -type f -print0)
[[ -z $(find "$inc" -type f ! -name '*.h') ]] || fail "files other than headers under $inc"
echo "installed: $config, $num_headers headers"

generator=()
if command -v ninja > /dev/null; then generator=(-G Ninja); fi
phase "configure examples/find_package against $prefix"
"$cmake" -S "$src/examples/find_package" -B "$work/build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" -DHWTRAIN_TORCH_PYTHON="$python"
phase "build"
"$cmake" --build "$work/build" -j 2
phase "run"
(cd "$work" && "$work/build/train_mlp")
phase "passed"
