#!/usr/bin/env bash
# The README's first command: install what is missing, build what running needs (dpv, and the app
# where Qt 6 is found; the lessons are read from lessons/), and run the app.
# With a display it opens dpviz; without one it runs the seed's sample program with `dpv sample`
# and renders every page of the app to build/screenshots (offscreen) so you can look at them.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/stage.sh
stage "installing the Debian packages dpviz needs (only those missing)"
bash scripts/install_deps.sh run
stage "building dpv and the app (build/release)"
cmake --preset release >/dev/null
targets=(dpv)
grep -q '^DPV_HAVE_GUI:INTERNAL=ON' build/release/CMakeCache.txt && targets+=(dpviz)
bash scripts/build.sh "${targets[@]}"
stage "built"
bin=build/release
if [ -x "$bin/gui/dpviz" ] && [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
  exec "$bin/gui/dpviz" "$@"
fi
echo "dpviz: no display here; running the sample program on 4 simulated devices instead"
"$bin/cli/dpv" sample --devices cpu:4
if [ -x "$bin/gui/dpviz" ]; then
  QT_QPA_PLATFORM=offscreen "$bin/gui/dpviz" --screenshot-all build/screenshots
  echo "dpviz: screenshots of every page are in build/screenshots/"
fi
stage "done"
