#!/usr/bin/env bash
# Installs the Debian packages the real-node tests need on a fresh Debian 12
# machine (run as root, before hack/install-realnode.sh):
#   gcc, libc6-dev   cgo builds of containerd and runc
#   ca-certificates  go install over HTTPS from the module proxy
#   iproute2         ip netns, for tests that give pods their own network
#   util-linux       nsenter and unshare (Essential on Debian, listed for minimal images)
#   libseccomp-dev,  runc built with seccomp (the real kubelet asks every sandbox
#   pkg-config       for the RuntimeDefault profile; runc without it refuses them)
#   busybox-static   /bin/busybox, the static binary the critest images are built from
# Packages already installed are left alone; with nothing missing it does
# not touch apt at all.
set -euo pipefail

pkgs=(gcc libc6-dev ca-certificates iproute2 util-linux libseccomp-dev pkg-config busybox-static)
missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "real-node prerequisites present: ${pkgs[*]}"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "real-node prerequisites missing: ${missing[*]}; run this script as root" >&2
  exit 1
fi

echo "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
