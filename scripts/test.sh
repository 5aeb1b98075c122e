#!/usr/bin/env bash
# The test command: sets up what is missing (scripts/setup.sh is idempotent), then runs the CPU suite.
#   scripts/test.sh            CPU label (what CI runs)
#   KZ_TEST_LABEL=gpu scripts/test.sh   on a machine with a GPU and network (else scripts/gpu_test.sh)
#   KZ_STATIC_CHECKS=0 skips the format, lint and sanitizer steps
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
scripts/setup.sh
if [[ "${KZ_STATIC_CHECKS:-1}" == 1 ]]; then
  echo "[test] clang-format (.clang-format) and ruff (ruff.toml)"
  git ls-files '*.cpp' '*.h' | xargs clang-format --dry-run --Werror
  .venv/bin/ruff check --quiet .
fi
(cd build && ctest -L "${KZ_TEST_LABEL:-cpu}" --output-on-failure)
if [[ "${KZ_STATIC_CHECKS:-1}" == 1 && "${KZ_TEST_LABEL:-cpu}" == cpu ]]; then
  # The torch-free units again, built with AddressSanitizer and UndefinedBehaviorSanitizer.
  echo "[test] unit_tests under ASan and UBSan (build-asan)"
  TORCH_PREFIX=$(.venv/bin/python -c 'import torch; print(torch.utils.cmake_prefix_path)')
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DKZ_SANITIZE=ON \
        -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" -DKZ_PYTHON="$ROOT/.venv/bin/python" > /dev/null
  cmake --build build-asan --target unit_tests
  build-asan/tests/unit_tests --gtest_brief=1
fi
