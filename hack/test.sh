#!/usr/bin/env bash
# The whole test suite, as CI runs it, on a fresh machine or a used one:
# installs what the tests need (Debian packages when run as root, then the
# real-node binaries, cached), and runs every package's tests with the race
# detector in the three modules of the repository (the library at the root,
# examples/, examples/virtualkubelet/). Real-node tests are required: an
# unavailable node, binary or image fails them, and a real-node test that
# skipped anyway fails the run (internal/testreport reads go test -json).
# Then every fuzz target runs briefly (hack/fuzz-brief.sh, SYNCPOD_FUZZTIME).
# Every module runs and reports even when an earlier one failed; the exit
# status is non-zero when any did.
#
# Environment: SYNCPOD_TEST_ARGS adds go test flags (e.g. "-run Pleg -v");
# SYNCPOD_REALNODE=auto lets real-node tests skip (not what CI does).
set -uo pipefail
cd "$(dirname "$0")/.."
export GOFLAGS=${GOFLAGS:--buildvcs=false}
export SYNCPOD_REALNODE=${SYNCPOD_REALNODE:-require}

start=$(date +%s)
if [ "$(id -u)" -eq 0 ]; then
  bash hack/realnode-prereqs.sh || exit 1
fi
bash hack/install-realnode.sh || exit 1
bash hack/install-kube.sh || exit 1

require=-require-realnode
[ "$SYNCPOD_REALNODE" = require ] || require=

go build -o /tmp/syncpod-testreport.$$ ./internal/testreport || exit 1
trap 'rm -f /tmp/syncpod-testreport.$$' EXIT

status=0
summaries=()
for mod in . examples examples/virtualkubelet; do
  echo "== go test -race: module $mod"
  # shellcheck disable=SC2086
  (cd "$mod" && go test -race -count=1 -timeout 40m -json ${SYNCPOD_TEST_ARGS:-} ./... 2>&1) |
    /tmp/syncpod-testreport.$$ -label "$mod" $require | tee /tmp/syncpod-test-summary.$$
  rc=${PIPESTATUS[1]}
  summaries+=("$(tail -1 /tmp/syncpod-test-summary.$$)")
  rm -f /tmp/syncpod-test-summary.$$
  [ "$rc" -eq 0 ] || status=1
done

echo "== fuzz targets, briefly (hack/fuzz-brief.sh)"
bash hack/fuzz-brief.sh > /tmp/syncpod-fuzz.$$ 2>&1
rc=$?
grep -E '^(== fuzz|--- FAIL|FAIL|.*Failing input)' /tmp/syncpod-fuzz.$$
[ "$rc" -eq 0 ] || { tail -40 /tmp/syncpod-fuzz.$$; status=1; }
summaries+=("$(tail -1 /tmp/syncpod-fuzz.$$)")
rm -f /tmp/syncpod-fuzz.$$

echo "== summary ($(( $(date +%s) - start )) s)"
printf '%s\n' "${summaries[@]}"
[ "$status" -eq 0 ] && echo "PASS" || echo "FAIL"
exit "$status"
