#!/usr/bin/env bash
# Run on a machine with Debian's package archive (not on the GPU machine, which has no network):
# downloads the Debian -dev packages the build needs into .deps/debs, for scripts/gpu_test.sh to
# unpack there. The folder is git-ignored; carry it to the GPU machine with the repo.
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS=(nlohmann-json3-dev libcli11-dev libsqlite3-dev libsqlite3-0 libssl-dev libssl3 libgtest-dev libgmock-dev
      libpcre2-dev libpcre2-8-0 libutf8proc-dev libutf8proc2 libcpp-httplib-dev libcpp-httplib0.11 zlib1g-dev
      libbrotli-dev libbrotli1 libtomlplusplus-dev libtomlplusplus3 libgloo-dev
      libhiredis-dev libhiredis0.14 redis-tools redis-server libjemalloc2 liblzf1 libatomic1)
mkdir -p .deps/debs
[[ -n "$(ls /var/lib/apt/lists 2>/dev/null | grep -v lock)" ]] || apt-get update -qq
(cd .deps/debs && apt-get download "${PKGS[@]}")
ls -la .deps/debs
