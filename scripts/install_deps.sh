#!/usr/bin/env bash
# Installs the Debian 12 packages dpviz needs, only those missing. Run as root (or with sudo).
# The CUDA toolkit is not a Debian package here: when it is installed under /usr/local/cuda the
# build picks it up; without it the CPU engine and the app still build.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config ccache clang libclang-rt-14-dev
  libopenblas-dev libgloo-dev libdnnl-dev ocl-icd-opencl-dev libomp-14-dev nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev
  qt6-base-dev qt6-base-dev-tools libqt6svg6-dev libqcustomplot-dev
  xvfb xauth fonts-dejavu-core desktop-file-utils appstream iproute2
  python3-torch python3-numpy
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "dpviz: all ${#PACKAGES[@]} Debian packages are installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "dpviz: need root to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
echo "dpviz: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
