#!/usr/bin/env bash
# Installs the real-node binaries (containerd 2.4.2, its runc shim, runc 1.5.3,
# crictl and critest 1.37.0, the CNI plugins) from the Go module proxy into
# SYNCPOD_NODE_BIN (default: $HOME/.cache/syncpod/node/bin). Binaries that are
# already there at the right version are kept, so a second run takes a second.
set -euo pipefail

bin=${SYNCPOD_NODE_BIN:-$HOME/.cache/syncpod/node/bin}
cni=${SYNCPOD_CNI_BIN:-$bin/cni}
mkdir -p "$bin" "$cni"
stamp="$bin/.versions"

CONTAINERD=v2.4.2
RUNC=v1.5.3
CRITOOLS=v1.37.0
CNI=v1.10.0
want="containerd=$CONTAINERD runc=$RUNC+seccomp critools=$CRITOOLS cni=$CNI"

have_all() {
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] || return 1
  for b in containerd containerd-shim-runc-v2 runc crictl critest; do
    [ -x "$bin/$b" ] || return 1
  done
  for p in bridge host-local loopback portmap; do
    [ -x "$cni/$p" ] || return 1
  done
}

if have_all; then
  echo "real-node binaries present in $bin ($want)"
  exit 0
fi

command -v go >/dev/null || { echo "install-realnode: the go command is not on PATH (Go 1.26 is needed)" >&2; exit 1; }
# gcc and the C headers are needed for the cgo builds of containerd and runc
# (hack/realnode-prereqs.sh installs every Debian package the tests need).
if ! command -v gcc >/dev/null || [ ! -e /usr/include/stdio.h ] || ! pkg-config --exists libseccomp 2>/dev/null; then
  bash "$(dirname "$0")/realnode-prereqs.sh"
fi

export GOFLAGS=-buildvcs=false
echo "installing containerd $CONTAINERD, runc $RUNC, cri-tools $CRITOOLS, CNI $CNI into $bin"
GOBIN="$bin" CGO_ENABLED=1 go install -tags "no_btrfs no_devmapper no_zfs" \
  github.com/containerd/containerd/v2/cmd/containerd@$CONTAINERD
GOBIN="$bin" go install github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$CONTAINERD
# seccomp: the real kubelet asks every sandbox for the RuntimeDefault profile.
GOBIN="$bin" CGO_ENABLED=1 go install -tags seccomp github.com/opencontainers/runc@$RUNC
GOBIN="$bin" go install sigs.k8s.io/cri-tools/cmd/crictl@$CRITOOLS
GOBIN="$cni" go install \
  github.com/containernetworking/plugins/plugins/main/bridge@$CNI \
  github.com/containernetworking/plugins/plugins/ipam/host-local@$CNI \
  github.com/containernetworking/plugins/plugins/main/loopback@$CNI \
  github.com/containernetworking/plugins/plugins/meta/portmap@$CNI

# critest is a Ginkgo test binary, built from the module cache.
go mod download sigs.k8s.io/cri-tools@$CRITOOLS
src="$(go env GOMODCACHE)/sigs.k8s.io/cri-tools@$CRITOOLS"
tmp=$(mktemp -d)
cp -r "$src/." "$tmp/"
chmod -R u+w "$tmp"
(cd "$tmp" && go test -c -o "$bin/critest" ./cmd/critest)
rm -rf "$tmp"

echo "$want" >"$stamp"
echo "real-node binaries installed in $bin"
