#!/usr/bin/env bash
# Runs the libFuzzer targets of BUILD_DIR for SECONDS each over a seed corpus in a temp dir: models and tensors of
# the ONNX backend test data and the CLI tests' crafted bad inputs (fuzz_model_import, fuzz_tensor_import: .pb,
# .npy, .npz), and checkpoints of the digits MLP made by BUILD_DIR's onnx-train (fuzz_checkpoint), and command lines
# with the CLI tests' bad options (fuzz_cli). Exits non-zero
# when a fuzzer finds a crash (its input is kept and printed).
#   tests/fuzz/run.sh build-fuzz 30
set -u
build=${1:?usage: run.sh BUILD_DIR SECONDS}
secs=${2:-30}
data=${ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}
work=$(mktemp -d "${TMPDIR:-/tmp}/ot_fuzz.XXXXXX")
trap 'rm -rf "$work/corpus_model" "$work/corpus_tensor" "$work/corpus_checkpoint" "$work/corpus_cli" "$work/ck"' EXIT
mkdir -p "$work/corpus_model" "$work/corpus_tensor" "$work/corpus_checkpoint" "$work/corpus_cli" "$work/crashes"
root=$(cd "$(dirname "$0")/../.." && pwd)

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
# The crafted bad inputs of the CLI tests (tests/cli/make_bad_models.py) seed the model and .npz readers too.
for f in "$root"/tests/cli/data/*.onnx; do cp "$f" "$work/corpus_model/cli_$(basename "$f")"; done
for f in "$root"/tests/cli/data/*.npz; do cp "$f" "$work/corpus_tensor/cli_$(basename "$f")"; done
# Checkpoints of the digits MLP (what fuzz_checkpoint resumes into an Adam trainer): Adam's, SGD's, a truncated one.
ex=$root/examples/digits_mlp
for opt in adam sgd; do
  if "$build/onnx-train" train "$ex/model.onnx" --data "$ex/train.npz" --loss cross_entropy --logits logits \
       --labels y --optimizer $opt --steps 2 --checkpoint "$work/ck" -q >/dev/null 2>&1; then
    cp "$work/ck/checkpoint.npz" "$work/corpus_checkpoint/$opt.npz"
  fi
done
[ -f "$work/corpus_checkpoint/adam.npz" ] &&
  head -c 30000 "$work/corpus_checkpoint/adam.npz" >"$work/corpus_checkpoint/adam_truncated.npz"
# The crafted checkpoints of tests/cli/reliability.sh (with the project's Python, when there is one).
if [ -f "$work/corpus_checkpoint/adam.npz" ] && "$root/.venv/bin/python" -c "import numpy" 2>/dev/null; then
  "$root/.venv/bin/python" - "$work/corpus_checkpoint" <<'PY' || true
import sys, numpy as np
d = sys.argv[1]
good = dict(np.load(d + "/adam.npz"))
meta = bytes(good["__trainer_meta__"]).decode()
def save(name, change=None, text=None):
    a = dict(good)
    if change: change(a)
    if text is not None: a["__trainer_meta__"] = np.frombuffer(text.encode(), np.uint8)
    elif text is None and change is None: a.pop("__trainer_meta__")
    np.savez(f"{d}/{name}.npz", **a)
save("step_negative", lambda a: a.__setitem__("optimizer.step", np.array(-7, np.int64)))
save("lr_nan", lambda a: a.__setitem__("optimizer.lr", np.array(np.nan)))
save("no_meta")
save("junk_meta", text="junk\n")
save("step_4x", text=meta.replace("step=2", "step=4x"))
PY
fi
# Command lines (arguments separated by NUL bytes) with the bad options of the CLI tests.
printf 'train\0m.onnx\0--data\0d.npz\0--batch\0000\0--lr\0nan\0--save\0' >"$work/corpus_cli/train"
printf 'run\0m.onnx\0--data\0d.npz\0--repeat\0000\0-o\0' >"$work/corpus_cli/run"
printf 'plan\0m.onnx\0--batch\0004294967296\0--memory-budget\0lots\0--json' >"$work/corpus_cli/plan"
printf 'check\0dir\0--fuse\0sideways\0--timeout\0-1' >"$work/corpus_cli/check"
printf 'passes\0m.onnx\0--dump-after\0all\0--threads\0-1\0--resume\0c\0--reset-optimizer' >"$work/corpus_cli/passes"

status=0
for f in fuzz_model_import fuzz_tensor_import fuzz_checkpoint fuzz_cli; do
  exe="$build/tests/fuzz/$f"
  [ -x "$exe" ] || exe="$build/$f"
  if [ ! -x "$exe" ]; then
    [ "$f" = fuzz_model_import ] && { echo "run.sh: $f not built in $build" >&2; exit 2; }
    continue
  fi
  corpus="$work/corpus_model"
  [ "$f" = fuzz_tensor_import ] && corpus="$work/corpus_tensor"
  [ "$f" = fuzz_checkpoint ] && corpus="$work/corpus_checkpoint"
  [ "$f" = fuzz_cli ] && corpus="$work/corpus_cli"
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
