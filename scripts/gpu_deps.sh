#!/usr/bin/env bash
# Unpacks the Debian -dev packages of scripts/fetch_gpu_deps.sh (.deps/debs, carried with the repo to
# a GPU machine with no network) into .deps/prefix, where a GPU build finds them and its binary's
# rpath loads them from:
#   scripts/gpu_deps.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -d .deps/debs ]]; then
  mkdir -p .deps/prefix
  for deb in .deps/debs/*.deb; do dpkg -x "$deb" .deps/prefix; done
fi
