#!/usr/bin/env bash
# Runs every fuzz target of the three modules briefly, after the committed
# seeds (which plain `go test` already runs as unit tests). go test -fuzz
# takes one package and one target at a time, so each target is its own
# run. A failure writes the crashing input under the package's
# testdata/fuzz/<Target>/ and fails the script.
#
# Environment: SYNCPOD_FUZZTIME per target (default 3s).
set -uo pipefail
cd "$(dirname "$0")/.."
export GOFLAGS=${GOFLAGS:--buildvcs=false}
fuzztime=${SYNCPOD_FUZZTIME:-3s}

status=0
ran=0
for mod in . examples examples/virtualkubelet; do
  # go list gives this module's packages only, not a nested module's.
  pkgs=$(cd "$mod" && go list -f '{{.ImportPath}} {{.Dir}}' ./...) || { status=1; continue; }
  while IFS=' ' read -r pkg dir; do
    for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
      echo "== fuzz $pkg $target ($fuzztime)"
      if ! (cd "$mod" && go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"); then
        status=1
      fi
      ran=$((ran + 1))
    done
  done <<<"$pkgs"
done
echo "== fuzz: $ran targets, $([ "$status" -eq 0 ] && echo PASS || echo FAIL)"
exit "$status"
