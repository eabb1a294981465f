#!/usr/bin/env bash
# Builds the Debian package build/package/dpviz_<version>_amd64.deb: the CPU engine and the app
# (no CUDA backend, whose libraries are not Debian packages; no tests), installed under /usr, with
# its dependencies found by dpkg-shlibdeps. Install it with
#   sudo apt-get install ./build/package/dpviz_*.deb
# scripts/package_test.sh installs it into a fresh Debian 12 root and runs it there.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${DPV_JOBS:-$(nproc)}"
bash scripts/install_deps.sh package
cmake --preset package >/dev/null
cmake --build --preset package -j "$jobs" --target dpv dpviz
rm -f build/package/dpviz_*.deb
(cd build/package && cpack -G DEB >cpack.log 2>&1) || { tail -n 40 build/package/cpack.log; exit 1; }
deb=$(ls build/package/dpviz_*_amd64.deb)
echo "dpviz: built $deb"
dpkg-deb --field "$deb" Package Version Architecture Depends
