#!/usr/bin/env bash
# Idempotent set-up on a fresh Debian 12 machine: apt packages, the project's .venv (torch pinned to
# the GPU machines' version), and the build. Leaves build/kernelzero.
#   scripts/setup.sh            everything
#   SKIP_APT=1 scripts/setup.sh  when the packages are known to be there
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

APT_PACKAGES=(build-essential cmake ninja-build pkg-config git clang-format
              nlohmann-json3-dev libcli11-dev libsqlite3-dev libssl-dev libgtest-dev libgmock-dev
              libpcre2-dev libutf8proc-dev libcpp-httplib-dev zlib1g-dev libbrotli-dev libtomlplusplus-dev libgloo-dev
              libhiredis-dev redis-server)
TORCH_VERSION=2.11.0
TRITON_VERSION=3.6.0
# Triton 3.6's CPU interpreter calls int() on one-element arrays, which numpy 2.4 refuses: a loop over
# a runtime bound (`for k in range(0, K, BLOCK)`) fails under TRITON_INTERPRET=1 with numpy >= 2.4.
NUMPY_SPEC="numpy>=2,<2.4"

log() { printf '[setup] %s\n' "$*"; }

if [[ "${SKIP_APT:-0}" != 1 ]]; then
  missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  if ((${#missing[@]})); then
    log "apt: installing ${missing[*]}"
    SUDO=""; [[ $(id -u) == 0 ]] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
  fi
fi

PYTHON=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
  log "creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
# transformers, peft (and with them tokenizers, safetensors) are the references of the engine's golden
# tests; ruff lints the Python (ruff.toml).
TEST_REFERENCES=("transformers==5.24.0" "peft==0.21.2" "ruff==0.17.6")
log "pip: torch==$TORCH_VERSION triton==$TRITON_VERSION $NUMPY_SPEC ${TEST_REFERENCES[*]} (no-op when satisfied)"
.venv/bin/python -m pip install -q --disable-pip-version-check \
  "torch==$TORCH_VERSION" "triton==$TRITON_VERSION" "$NUMPY_SPEC" "${TEST_REFERENCES[@]}"

TORCH_PREFIX=$(.venv/bin/python -c 'import torch; print(torch.utils.cmake_prefix_path)')
log "configuring against libtorch at $TORCH_PREFIX"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" -DKZ_PYTHON="$ROOT/.venv/bin/python" >/dev/null
cmake --build build
log "ready: build/kernelzero"
