#!/usr/bin/env bash
# Configures and builds dpviz in build/release (CUDA where a toolkit is found, the app where Qt 6
# is found). With no arguments it builds everything (tests and benchmarks too); with target names
# it builds only those: scripts/run.sh builds `dpv` and `dpviz`.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${DPV_JOBS:-$(nproc)}"
cmake --preset release >/dev/null
if [ $# -gt 0 ]; then
  cmake --build --preset release -j "$jobs" --target "$@"
else
  cmake --build --preset release -j "$jobs"
fi
