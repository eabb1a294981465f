#!/usr/bin/env bash
# Installs the Debian 12 packages dpviz needs, only those missing. Run as root (or with sudo).
#   install_deps.sh run    what building and running dpv and the app needs (scripts/run.sh)
#   install_deps.sh test   that and what the tests need (scripts/test.sh; the default)
#   install_deps.sh package  'run' and what `cpack -G DEB` needs (scripts/package.sh)
# Each package is here because a find_package, a test or a script needs it, checked on a bare
# Debian 12 root (debootstrap minbase), with --no-install-recommends: a package that is only a
# Recommends of another must be named. The CUDA toolkit is not a Debian package: when it is
# installed under /usr/local/cuda the build picks it up; without it the CPU engine and the app
# still build.
set -euo pipefail
purpose="${1:-test}"

RUN_PACKAGES=(
  build-essential cmake ninja-build pkg-config ccache
  libopenblas-dev nlohmann-json3-dev libcli11-dev
  libgloo-dev                     # the CPU process group of `dpv launch`
  libdnnl-dev ocl-icd-opencl-dev  # oneDNN; its CMake config asks for OpenCL (only a Recommends)
  libgtest-dev libgmock-dev       # the release preset configures the tests too
  qt6-base-dev qt6-base-dev-tools qt6-svg-dev libqcustomplot-dev
  qt6-qpa-plugins fonts-dejavu-core  # the app's window plugins (xcb, wayland) and a font
)
TEST_PACKAGES=(
  clang libclang-rt-14-dev libomp-14-dev  # libFuzzer harnesses; clang's omp.h for oneDNN's users
  python3-torch python3-numpy             # the live comparisons with PyTorch 1.13
  iproute2                                # `ip netns`: the launch test across two network namespaces
  desktop-file-utils appstream            # the install test validates the desktop entry and metadata
)
PACKAGE_PACKAGES=(
  file dpkg-dev  # CPack's DEB generator runs `file` and dpkg-shlibdeps on the binaries
)
case "$purpose" in
  run) PACKAGES=("${RUN_PACKAGES[@]}") ;;
  test) PACKAGES=("${RUN_PACKAGES[@]}" "${TEST_PACKAGES[@]}") ;;
  package) PACKAGES=("${RUN_PACKAGES[@]}" "${PACKAGE_PACKAGES[@]}") ;;
  *) echo "install_deps.sh: unknown purpose '$purpose' (use run, test or package)" >&2; exit 2 ;;
esac

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "dpviz: all ${#PACKAGES[@]} Debian packages for '$purpose' are installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "dpviz: need root to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
echo "dpviz: installing ${#missing[@]} Debian packages and what they depend on: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp /tmp/dpviz-apt.XXXXXX.log)
if ! { $SUDO apt-get update -q && $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "dpviz: apt-get failed (whole log: $log); check the network and /etc/apt/sources.list, then run this again" >&2
  exit 1
fi
echo "dpviz: $(grep -c '^Setting up ' "$log") packages installed (log: $log)"
