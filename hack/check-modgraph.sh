#!/usr/bin/env bash
# A module that imports only the locks package must not pull the examples'
# heavy modules into its graph (prometheus, fsnotify, virtual-kubelet).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/go.mod" <<MOD
module example.com/lockonly

go 1.26

require github.com/syncpod/syncpod v0.0.0

replace github.com/syncpod/syncpod => $root
MOD
cat > "$dir/main.go" <<'SRC'
package main

import (
	"context"

	"github.com/syncpod/syncpod/locks"
)

func main() {
	var km locks.KeyedMutex[string]
	_ = km.Lock(context.Background(), "a")
	_ = km.Unlock("a")
}
SRC
cd "$dir"
export GOWORK=off GOFLAGS=-mod=mod
go mod tidy >/dev/null
go build -o /dev/null .
if go list -m all | grep -Ei 'prometheus|fsnotify|client_golang|virtual-kubelet'; then
  echo "check-modgraph: a module importing only locks sees the modules above" >&2
  exit 1
fi
echo "check-modgraph: a module importing only locks needs $(go list -m all | wc -l) modules, none of the examples'"
