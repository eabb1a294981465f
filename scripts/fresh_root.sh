#!/usr/bin/env bash
# A fresh Debian 12 root (debootstrap --variant=minbase) to build and test dpviz in, so that
# nothing installed by hand on this machine can make a run pass: every package the project needs
# must come from its own scripts. Sourced by .ci/run and scripts/package_test.sh.
#
# What makes a fresh root cost minutes instead of tens of minutes lives outside the root and the
# clone, under DPV_CI_CACHE (default /var/cache/dpviz-ci), and is bind-mounted in:
#   debootstrap/   the tarball of minbase's .deb files (debootstrap --make-tarball)
#   apt-archives/  every .deb the project's scripts download (the root's /var/cache/apt/archives)
#   ccache/        the compiler cache (the root's CCACHE_DIR)
# The CUDA toolkit under /usr/local/cuda comes with the machine, not from Debian: it is
# bind-mounted read-only so the CUDA code compiles in the root as it does here.
#
# Each command runs in its own private mount namespace (unshare), so every mount it makes,
# network namespaces' files included, disappears with it: nothing is left mounted on the host.

DPV_CI_CACHE="${DPV_CI_CACHE:-/var/cache/dpviz-ci}"
DPV_DEBIAN_MIRROR="${DPV_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
DPV_DEBIAN_SECURITY="${DPV_DEBIAN_SECURITY:-http://deb.debian.org/debian-security}"
DPV_CUDA_PREFIX="${DPV_CUDA_PREFIX:-/usr/local/cuda}"

source "$(dirname "${BASH_SOURCE[0]}")/stage.sh"

# Why a fresh root cannot be made here, or nothing when it can.
fresh_root_unavailable_reason() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "not running as root (debootstrap, chroot and mounts need root)"
  elif ! command -v unshare >/dev/null || ! command -v chroot >/dev/null; then
    echo "unshare or chroot is missing (Debian: util-linux, coreutils)"
  elif ! unshare --mount --propagation private true 2>/dev/null; then
    echo "this machine refuses a private mount namespace (unshare --mount)"
  fi
}

# Installs debootstrap on the host when it is missing (the one package the host itself needs).
fresh_root_install_debootstrap() {
  command -v debootstrap >/dev/null && return 0
  DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap >/dev/null
}

# fresh_root_create DIR: a new minbase Debian 12 root in DIR (which must not exist).
fresh_root_create() {
  local root=$1 tarball="$DPV_CI_CACHE/debootstrap/bookworm-minbase.tgz"
  mkdir -p "$DPV_CI_CACHE/debootstrap" "$DPV_CI_CACHE/apt-archives/partial" "$DPV_CI_CACHE/ccache"
  if [ ! -s "$tarball" ]; then
    debootstrap --variant=minbase --make-tarball="$tarball.part" bookworm "$root.tarball-work" \
      "$DPV_DEBIAN_MIRROR" >/dev/null
    rm -rf --one-file-system "$root.tarball-work"
    mv "$tarball.part" "$tarball"
  fi
  debootstrap --variant=minbase --unpack-tarball="$tarball" bookworm "$root" "$DPV_DEBIAN_MIRROR" \
    >"$root.debootstrap.log" 2>&1 || { tail -n 30 "$root.debootstrap.log"; return 1; }
  rm -f "$root.debootstrap.log"
  # The same suites a Debian 12 installation has: point releases and security updates.
  cat >"$root/etc/apt/sources.list" <<EOF
deb $DPV_DEBIAN_MIRROR bookworm main
deb $DPV_DEBIAN_MIRROR bookworm-updates main
deb $DPV_DEBIAN_SECURITY bookworm-security main
EOF
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  # Keep downloaded packages in the shared cache (Debian's docker images delete them).
  echo 'Binary::apt::APT::Keep-Downloaded-Packages "true";' >"$root/etc/apt/apt.conf.d/10dpviz-keep-debs"
  mkdir -p "$root/work" "$root/var/cache/ccache"
  [ -d "$DPV_CUDA_PREFIX" ] && mkdir -p "$root/usr/local/cuda"
  return 0
}

# fresh_root_run DIR COMMAND: runs COMMAND (a bash command line) as root inside DIR, in /work,
# with the caches and the CUDA toolkit mounted, in a mount namespace of its own. Processes the
# command leaves behind are killed before the namespace goes.
fresh_root_run() {
  local root=$1 command=$2
  unshare --mount --propagation private bash -s "$root" "$command" "$DPV_CI_CACHE" "$DPV_CUDA_PREFIX" <<'INNER'
set -euo pipefail
root=$1 command=$2 cache=$3 cuda=$4
# The root is a mount point of its own, as / is on a real machine: `ip netns exec` and `ip -n`
# remount / (mount --make-rslave /), which fails on a plain directory.
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
mount --rbind /dev "$root/dev"
mount -t tmpfs -o mode=1777 tmpfs "$root/dev/shm"
mount -t tmpfs -o mode=755 tmpfs "$root/run"
mount --bind "$cache/apt-archives" "$root/var/cache/apt/archives"
mount --bind "$cache/ccache" "$root/var/cache/ccache"
if [ -d "$cuda" ] && [ -d "$root/usr/local/cuda" ]; then
  mount --bind "$cuda" "$root/usr/local/cuda"
  mount -o remount,bind,ro "$root/usr/local/cuda"
fi
status=0
chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 CI="${CI:-}" \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  CCACHE_DIR=/var/cache/ccache CCACHE_BASEDIR=/work DPV_JOBS="${DPV_JOBS:-}" \
  DPV_FUZZ_SECONDS="${DPV_FUZZ_SECONDS:-}" DPV_REQUIRE_NETNS="${DPV_REQUIRE_NETNS:-}" \
  bash -c "cd /work && $command" </dev/null || status=$?
# Anything still running inside the root (a daemon, a stray rank) would keep the mounts alive.
for proc in /proc/[0-9]*; do
  [ "$(readlink "$proc/root" 2>/dev/null)" = "$root" ] && kill -9 "${proc#/proc/}" 2>/dev/null || true
done
exit "$status"
INNER
}

# fresh_root_destroy DIR: removes the root; never crosses into another file system, so a mount
# that somehow survived (the host's caches or CUDA) is never deleted through.
fresh_root_destroy() {
  local root=$1
  [ -d "$root" ] || return 0
  if grep -q " $root/" /proc/self/mountinfo; then
    echo "fresh root: $root still has mounts; left in place (umount them, then rm -rf it)" >&2
    return 1
  fi
  rm -rf --one-file-system "$root"
}
