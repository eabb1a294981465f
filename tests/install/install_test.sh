#!/usr/bin/env bash
# Installs the build into a temporary prefix and starts the installed programs from an unrelated
# folder, with no variable pointing back at the sources: what a user who ran `cmake --install`
# gets. Usage: install_test.sh BUILD_DIR HAVE_GUI(ON|OFF)
set -euo pipefail
build_dir=$1
have_gui=$2
prefix=$(mktemp -d /tmp/dpviz-install.XXXXXX)
trap 'rm -rf "$prefix"' EXIT
unset DPVIZ_LESSONS

cmake --install "$build_dir" --prefix "$prefix" >"$prefix.log" 2>&1 || { cat "$prefix.log"; exit 1; }
rm -f "$prefix.log"

fail() { echo "install test: $*" >&2; exit 1; }
expect_file() { [ -f "$prefix/$1" ] || fail "missing $1 in the installed tree"; }

expect_file bin/dpv
expect_file share/dpviz/lessons/intro.md
expect_file share/dpviz/lessons/quiz/01-document.json

cd "$prefix"
mkdir -p elsewhere && cd elsewhere
"$prefix/bin/dpv" devices | grep -q "CPU" || fail "installed dpv devices printed no CPU line"
out=$("$prefix/bin/dpv" sample --devices cpu:2)
grep -q "^Loss: " <<<"$out" || fail "installed dpv sample did not print the sample program's lines: $out"

if [ "$have_gui" = "ON" ]; then
  expect_file bin/dpviz
  expect_file share/applications/io.github.dpviz.Dpviz.desktop
  expect_file share/metainfo/io.github.dpviz.Dpviz.metainfo.xml
  expect_file share/icons/hicolor/scalable/apps/io.github.dpviz.Dpviz.svg
  if command -v desktop-file-validate >/dev/null; then
    desktop-file-validate "$prefix/share/applications/io.github.dpviz.Dpviz.desktop" || fail "the .desktop entry is invalid"
  fi
  if command -v appstreamcli >/dev/null; then
    appstreamcli validate --no-net --pedantic "$prefix/share/metainfo/io.github.dpviz.Dpviz.metainfo.xml" >/dev/null ||
      appstreamcli validate --no-net "$prefix/share/metainfo/io.github.dpviz.Dpviz.metainfo.xml" || fail "the AppStream metadata is invalid"
  fi
  # The installed app must find its lessons beside itself (it exits non-zero when a lesson is missing).
  QT_QPA_PLATFORM=offscreen "$prefix/bin/dpviz" --screenshot-all "$prefix/shots" >/dev/null ||
    fail "the installed dpviz --screenshot-all failed"
  shots=$(find "$prefix/shots" -name '*.png' | wc -l)
  [ "$shots" -ge 5 ] || fail "the installed dpviz wrote $shots screenshots, expected at least 5"
fi
echo "install test: the installed programs run from $prefix/elsewhere"
