# Shared by the tests/cli/*.sh scripts (source it after setting $tool): a scratch directory removed at exit,
# pass/fail counters, expect_error and the closing line.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
# expect_error "EXPECTED SUBSTRING" ARGS...: `onnx-train ARGS` exits with an error status (not a signal) and its
# stderr holds the substring in at most MAX_ERR_LINES lines (default 1; 2 leaves room for a warning before it).
# stdout and stderr stay in $tmp/out and $tmp/err.
expect_error() {
  local want=$1 rc lines
  shift
  "$tool" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  lines=$(wc -l <"$tmp/err")
  if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [ "$lines" -le "${MAX_ERR_LINES:-1}" ] && grep -qF -- "$want" "$tmp/err"; then
    ok
  else
    bad "onnx-train $* (exit $rc, $lines stderr lines), wanted '$want':"
    sed 's/^/  | /' "$tmp/err"
  fi
}
finish() {
  echo "$pass passed, $fail failed"
  [ $fail -eq 0 ]
}
