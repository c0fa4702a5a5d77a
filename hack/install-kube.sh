#!/usr/bin/env bash
# Installs the real Kubernetes consumers the tests run against: kubelet,
# kube-apiserver, kube-controller-manager and kubectl v1.37.2, built from the
# k8s.io/kubernetes module on the Go module proxy in one go build (the four
# share most of their packages), and etcd v3.6.16, into SYNCPOD_NODE_BIN (default
# $HOME/.cache/syncpod/node/bin). Cached: binaries already there at the right
# version are kept, so a second run takes a second.
#
# k8s.io/kubernetes cannot be `go install`ed: its go.mod points 33 staging
# modules at ./staging/src/k8s.io/*, which module zips leave out. The build
# copies the module out of the module cache, points every staging replace at
# the published v0.37.2 module (only k8s.io lines of go.mod change, no Go
# source), and builds as upstream's release build does. etcd's server module
# has replace directives too, so it is built from a three-line main module.
set -euo pipefail

bin=${SYNCPOD_NODE_BIN:-$HOME/.cache/syncpod/node/bin}
work=${SYNCPOD_KUBE_SRC:-$HOME/.cache/syncpod/kube-src}
mkdir -p "$bin"
stamp="$bin/.kube-versions"

KUBE=v1.37.2
STAGING=v0.37.2
ETCD=v3.6.16
want="kubernetes=$KUBE etcd=$ETCD"

have_all() {
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] || return 1
  for b in kubelet kube-apiserver kube-controller-manager kubectl etcd; do
    [ -x "$bin/$b" ] || return 1
  done
}

if have_all; then
  echo "kubernetes binaries present in $bin ($want)"
  exit 0
fi

command -v go >/dev/null || { echo "install-kube: the go command is not on PATH (Go 1.26 is needed)" >&2; exit 1; }
export GOFLAGS=-buildvcs=false GOWORK=off
start=$(date +%s)

echo "preparing k8s.io/kubernetes@$KUBE (staging modules -> published $STAGING)"
dir=$(go mod download -json "k8s.io/kubernetes@$KUBE" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$dir" ] || { echo "install-kube: go mod download k8s.io/kubernetes@$KUBE gave no directory" >&2; exit 1; }
src="$work/kubernetes-$KUBE"
rm -rf "$src"
mkdir -p "$work"
cp -r "$dir" "$src"
chmod -R u+w "$src"
rm -rf "$src/vendor" "$src/go.work" "$src/go.work.sum"
(
  cd "$src"
  edits=()
  # Every replace whose target is a local staging directory.
  while read -r mod; do
    case "$mod" in
      k8s.io/sample-cli-plugin|k8s.io/sample-controller) edits+=("-dropreplace=$mod") ;;
      *) edits+=("-replace=$mod=$mod@$STAGING") ;;
    esac
  done < <(awk '/=> \.\/staging\/src\// {for (i = 1; i <= NF; i++) if ($i ~ /^k8s\.io\//) {print $i; break}}' go.mod)
  [ ${#edits[@]} -gt 0 ] || { echo "install-kube: found no staging replaces in go.mod" >&2; exit 1; }
  go mod edit "${edits[@]}"
  if grep -q '=> ./staging' go.mod; then
    echo "install-kube: staging replaces left in go.mod:" >&2
    grep '=> ./staging' go.mod >&2
    exit 1
  fi
)

ver="-X k8s.io/component-base/version.gitVersion=$KUBE -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z"
ver="$ver -X k8s.io/client-go/pkg/version.gitVersion=$KUBE -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=37 -X k8s.io/client-go/pkg/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.buildDate=1970-01-01T00:00:00Z"
echo "building kubelet, kube-apiserver, kube-controller-manager and kubectl $KUBE (the first build takes about half an hour on 2 cores)"
(
  cd "$src"
  GOFLAGS="-buildvcs=false -mod=mod" CGO_ENABLED=0 go build -trimpath -tags selinux,notest,grpcnotrace \
    -ldflags "all=-s -w $ver" -o "$bin/" ./cmd/kubelet ./cmd/kube-apiserver ./cmd/kube-controller-manager ./cmd/kubectl
)

echo "building etcd $ETCD"
etcdsrc="$work/etcd-$ETCD"
rm -rf "$etcdsrc"
mkdir -p "$etcdsrc"
cat >"$etcdsrc/main.go" <<'EOF'
// Command etcd is the etcd server, built from its published module.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
(
  cd "$etcdsrc"
  go mod init syncpod.local/etcd >/dev/null 2>&1
  go get "go.etcd.io/etcd/server/v3@$ETCD" >/dev/null
  go mod tidy >/dev/null
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin/etcd" .
)

"$bin/kubelet" --version
"$bin/kubectl" version --client | sed -n 1p
"$bin/etcd" --version | sed -n 1p
echo "$want" >"$stamp"
echo "kubernetes binaries installed in $bin in $(( $(date +%s) - start )) s"
