#!/usr/bin/env bash
# The test command: sets up what is missing (scripts/setup.sh is idempotent), then runs the CPU suite.
#   scripts/test.sh            CPU label (what CI runs)
#   KZ_TEST_LABEL=gpu scripts/test.sh   on a machine with a GPU and network (else scripts/gpu_test.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cd build
ctest -L "${KZ_TEST_LABEL:-cpu}" --output-on-failure
