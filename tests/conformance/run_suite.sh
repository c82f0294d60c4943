#!/usr/bin/env bash
# Runs `onnx-train check` over one backend-test suite and holds it against the committed list of expected
# passes: any failure, or any listed test that no longer passes, fails this test. New passes are reported so
# the list can be extended (regenerate with UPDATE=1).
set -u
tool=$1 suite=$2 expected=$3
shift 3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$tool" check --quiet --passed-list "$out/passed" "$@" "$suite" | tee "$out/log"
status=${PIPESTATUS[0]}
sort -o "$out/passed" "$out/passed"
if [ "${UPDATE:-0}" = 1 ]; then
  cp "$out/passed" "$expected"
  echo "updated $expected ($(wc -l < "$expected") passes)"
fi
missing=$(comm -23 <(sort "$expected") "$out/passed")
new=$(comm -13 <(sort "$expected") "$out/passed")
[ -n "$new" ] && echo "passing but not in $(basename "$expected") (add them): $(echo $new | tr '\n' ' ')"
if [ -n "$missing" ]; then
  echo "REGRESSION: expected to pass but did not: $(echo $missing | tr '\n' ' ')"
  exit 1
fi
if [ "$status" -ne 0 ]; then
  echo "check reported failures"
  exit 1
fi
echo "all $(wc -l < "$expected") expected passes hold"
