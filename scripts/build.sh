#!/usr/bin/env bash
# Configures and builds dpviz (engine, dpv, the app where Qt 6 is found, tests) in build/release.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${DPV_JOBS:-$(nproc)}"
cmake --preset release >/dev/null
cmake --build --preset release -j "$jobs"
