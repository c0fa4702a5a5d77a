#!/usr/bin/env bash
# The whole test suite: installs the real-node binaries (cached), then runs
# every package's tests with the race detector, the real containerd tests
# required (an unavailable node fails them instead of skipping), in the root
# module and in the nested examples/virtualkubelet module.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOFLAGS=${GOFLAGS:--buildvcs=false}
export SYNCPOD_REALNODE=require

bash hack/install-realnode.sh
go test -race -count=1 -timeout 30m ./...
(cd examples/virtualkubelet && go test -race -count=1 -timeout 30m ./...)
