#!/usr/bin/env bash
# Installs the Debian package into a fresh Debian 12 root (debootstrap minbase) with
# `apt-get install ./dpviz_<version>_amd64.deb`, as a new user would, and runs it there: `dpv
# devices`, `dpv sample` and `dpviz --screenshot-all` (offscreen), checking their output.
# Usage: scripts/package_test.sh [DEB]   (default: build/package/dpviz_*_amd64.deb)
# Needs root and debootstrap (scripts/fresh_root.sh says why when it cannot run).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/fresh_root.sh
deb="${1:-$(ls build/package/dpviz_*_amd64.deb 2>/dev/null | head -n 1)}"
[ -f "$deb" ] || { echo "package test: no .deb (run scripts/package.sh first)" >&2; exit 1; }
reason=$(fresh_root_unavailable_reason)
[ -z "$reason" ] || { echo "package test: cannot make a fresh root: $reason" >&2; exit 1; }
fresh_root_install_debootstrap || { echo "package test: debootstrap could not be installed" >&2; exit 1; }

root=$(mktemp -d /var/tmp/dpviz-package-root.XXXXXX)
rmdir "$root"
trap 'fresh_root_destroy "$root"' EXIT
stage "package test: a fresh Debian 12 root in $root"
fresh_root_create "$root"
cp "$deb" "$root/work/"
stage "package test: apt-get install ./$(basename "$deb")"
fresh_root_run "$root" "$(cat <<'IN_ROOT'
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q ./dpviz_*_amd64.deb >apt.log 2>&1 || { tail -n 30 apt.log; exit 1; }
fail() { echo "package test: $*" >&2; exit 1; }
for path in /usr/bin/dpv /usr/bin/dpviz /usr/share/dpviz/lessons/intro.md \
    /usr/share/applications/io.github.dpviz.Dpviz.desktop \
    /usr/share/icons/hicolor/scalable/apps/io.github.dpviz.Dpviz.svg; do
  [ -f "$path" ] || fail "the package did not install $path"
done
mkdir -p /tmp/elsewhere && cd /tmp/elsewhere
dpv devices | grep -q CPU || fail "dpv devices printed no CPU line"
out=$(dpv sample --devices cpu:2)
grep -q '^Loss: ' <<<"$out" || fail "dpv sample printed no loss line: $out"
QT_QPA_PLATFORM=offscreen dpviz --screenshot-all /tmp/shots >/dev/null || fail "dpviz --screenshot-all failed"
shots=$(find /tmp/shots -name '*.png' | wc -l)
[ "$shots" -ge 5 ] || fail "dpviz wrote $shots screenshots, expected at least 5"
echo "package test: dpv and dpviz run from the installed package ($shots screenshots)"
IN_ROOT
)"
stage "package test: passed"
