#!/usr/bin/env bash
# Runs the libFuzzer targets of BUILD_DIR for SECONDS each over a seed corpus copied from the ONNX backend
# test data into a temp dir. Exits non-zero when a fuzzer finds a crash (its input is kept and printed).
#   tests/fuzz/run.sh build-fuzz 30
set -u
build=${1:?usage: run.sh BUILD_DIR SECONDS}
secs=${2:-30}
data=${ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}
work=$(mktemp -d "${TMPDIR:-/tmp}/ot_fuzz.XXXXXX")
trap 'rm -rf "$work/corpus_model" "$work/corpus_tensor"' EXIT
mkdir -p "$work/corpus_model" "$work/corpus_tensor" "$work/crashes"

i=0
for t in test_abs test_add_bcast test_conv_with_strides_padding test_gemm_all_attributes test_constant \
         test_reshape_extended_dims test_batchnorm_example test_if test_loop11 test_cast_FLOAT_to_FLOAT16 \
         test_dropout_default_mask test_slice_neg_steps test_lstm_defaults test_resize_downsample_scales_linear; do
  [ -f "$data/node/$t/model.onnx" ] || continue
  cp "$data/node/$t/model.onnx" "$work/corpus_model/$t.onnx"
  for pb in "$data/node/$t"/test_data_set_0/*.pb; do
    [ -f "$pb" ] && cp "$pb" "$work/corpus_tensor/$t.$i.pb" && i=$((i + 1))
  done
done
for m in "$data"/simple/*/model.onnx; do
  [ -f "$m" ] && cp "$m" "$work/corpus_model/simple_$(basename "$(dirname "$m")").onnx"
done
if [ -z "$(ls "$work/corpus_model")" ]; then echo "run.sh: no seed models under $data" >&2; exit 2; fi

status=0
for f in fuzz_model_import fuzz_tensor_import; do
  exe="$build/tests/fuzz/$f"
  [ -x "$exe" ] || exe="$build/$f"
  if [ ! -x "$exe" ]; then
    [ "$f" = fuzz_model_import ] && { echo "run.sh: $f not built in $build" >&2; exit 2; }
    continue
  fi
  corpus="$work/corpus_model"
  [ "$f" = fuzz_tensor_import ] && corpus="$work/corpus_tensor"
  echo "== $f for ${secs}s over $(ls "$corpus" | wc -l) seeds"
  if ! "$exe" -max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
        -artifact_prefix="$work/crashes/$f-" "$corpus" 2>"$work/$f.log"; then
    tail -n 60 "$work/$f.log"
    echo "run.sh: $f found a problem; inputs kept in $work/crashes" >&2
    status=1
  else
    grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units)" "$work/$f.log" | tail -n 2
  fi
done
[ $status -eq 0 ] && rm -rf "$work"
exit $status
