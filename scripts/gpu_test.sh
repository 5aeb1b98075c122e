#!/usr/bin/env bash
# Build and test on a GPU machine with no network, against that machine's own torch:
#   scripts/gpu_test.sh [build-dir]
# Needs: python3 with torch (and triton), cmake, ninja, a C++ compiler, the CUDA toolkit; the Debian
# -dev packages of scripts/fetch_gpu_deps.sh in .deps/debs (carried with the repo), which
# scripts/gpu_deps.sh unpacks into .deps/prefix. KZ_BUILD_TARGET="T ..." builds only those targets. Runs the `gpu` test label and prints a summary; logs go to $OUT when set.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd)
BUILD=${1:-build-gpu}
LOGS=${OUT:-$ROOT/$BUILD/logs}
mkdir -p "$LOGS"
PY=${KZ_PYTHON:-python3}

PREFIX=$ROOT/.deps/prefix
bash scripts/gpu_deps.sh || { echo "the -dev packages of .deps/debs do not unpack"; exit 1; }
TORCH_PREFIX=$($PY -c 'import torch; print(torch.utils.cmake_prefix_path)') || { echo "python3 has no torch"; exit 1; }
ARCH=$($PY -c 'import torch; m,n=torch.cuda.get_device_capability(); print(f"{m}.{n}")' 2>/dev/null || echo 9.0)
echo "[gpu_test] torch $($PY -c 'import torch; print(torch.__version__)') at $TORCH_PREFIX, arch $ARCH"
export TORCH_CUDA_ARCH_LIST=$ARCH NCCL_NVLS_ENABLE=0

cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX;$PREFIX/usr;$PREFIX/usr/lib/x86_64-linux-gnu/cmake" \
  -DCMAKE_BUILD_RPATH="$PREFIX/usr/lib/x86_64-linux-gnu" \
  -DCMAKE_EXE_LINKER_FLAGS="-Wl,--disable-new-dtags" \
  -DKZ_PYTHON="$PY" > "$LOGS/configure.log" 2>&1 || { tail -40 "$LOGS/configure.log"; exit 1; }
t0=$(date +%s)
cmake --build "$BUILD" ${KZ_BUILD_TARGET:+--target $KZ_BUILD_TARGET} > "$LOGS/build.log" 2>&1 || { grep -E "error" -A5 "$LOGS/build.log" | head -60; exit 1; }
echo "[gpu_test] built in $(( $(date +%s) - t0 )) s"
./"$BUILD"/kernelzero info

[[ "${KZ_TEST_LABEL:-gpu}" == none ]] && exit 0
t0=$(date +%s)
(cd "$BUILD" && ctest -L "${KZ_TEST_LABEL:-gpu}" -j "${KZ_CTEST_JOBS:-2}" --output-on-failure) > "$LOGS/ctest.log" 2>&1
rc=$?
echo "[gpu_test] ctest -L ${KZ_TEST_LABEL:-gpu}: rc=$rc in $(( $(date +%s) - t0 )) s"
grep -E "^\s*[0-9]+/[0-9]+ Test|tests passed|FAILED|Failure" "$LOGS/ctest.log" | head -60
exit $rc
