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
  # Directories of this module (not of a nested one) holding a Fuzz target.
  while IFS= read -r dir; do
    pkg=$(cd "$mod" && go list "./$dir") || { status=1; continue; }
    for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$mod/$dir"/*_test.go | sed 's/^func //' | sort -u); do
      echo "== fuzz $pkg $target ($fuzztime)"
      if ! (cd "$mod" && go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "./$dir"); then
        status=1
      fi
      ran=$((ran + 1))
    done
  done < <(cd "$mod" && grep -rl --include='*_test.go' '^func Fuzz' . |
    while read -r f; do
      d=$(dirname "$f")
      # Skip files that belong to a nested module.
      m=$d
      while [ "$m" != . ] && [ ! -f "$m/go.mod" ]; do m=$(dirname "$m"); done
      [ "$m" = . ] && echo "${d#./}"
    done | sort -u)
done
echo "== fuzz: $ran targets, $([ "$status" -eq 0 ] && echo PASS || echo FAIL)"
exit "$status"
