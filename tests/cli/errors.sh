#!/usr/bin/env bash
# Every error a user can cause gives one line on stderr that names the problem, and a non-zero exit; never a
# crash. Usage: errors.sh ONNX_TRAIN_BINARY TESTS_CLI_DIR
set -u
tool=$(realpath "$1")
data=$2/data
examples=$(realpath "$2/../../examples")
. "$(dirname "$0")/lib.sh"

cd "$data"
expect_error "truncated.onnx: not a valid ONNX model" run truncated.onnx --data good.npz
expect_error "random.onnx: not a valid ONNX model" run random.onnx --data good.npz
expect_error "node 'add1' (Add): input 'nope' is not defined" run missing_input.onnx --data good.npz
expect_error "node 'add1' (Add, opset 17): shapes do not broadcast" run shape_mismatch.onnx --data shape_mismatch.npz
expect_error "input 'y' has shape [5] but the model declares [3]" run good.onnx --data wrong_shape.npz
for cmd in "run unsupported_op.onnx --data good.npz" \
           "train unsupported_op.onnx --data good.npz --loss mse --logits z --labels y" \
           "plan unsupported_op.onnx --batch 2 --loss mse --logits z --labels y" \
           "passes unsupported_op.onnx --loss mse --logits z --labels y"; do
  # shellcheck disable=SC2086
  expect_error "unsupported_op.onnx: node 'add1': op Resize (ai.onnx, opset 17) is not supported" $cmd
done
# Every unsupported node is named, one line each, before anything else fails on its outputs (a custom-domain op and
# an If between the weight and the output), by every command that reads the model.
for cmd in "run unsupported_two.onnx --data unsupported_two.npz" \
           "train unsupported_two.onnx --data unsupported_two.npz --loss mse --logits z --labels z" \
           "plan unsupported_two.onnx --batch 2 --loss mse --logits z --labels z" \
           "passes unsupported_two.onnx --loss mse --logits z --labels z"; do
  # shellcheck disable=SC2086
  MAX_ERR_LINES=2 expect_error "unsupported_two.onnx: node 'custom1': op Foo (com.example, opset 1) is not supported" $cmd
  grep -qF "unsupported_two.onnx: node 'if1': op If (ai.onnx, opset 17) is not supported" "$tmp/err" && ok ||
    bad "$cmd: the If node is not named"
done
# The reliability issue's rows: a node with more inputs than its op takes (10); a model newer than onnx-train
# knows, or without the ai.onnx import its nodes need (18); a step that cannot fit in memory is refused before
# anything is allocated, naming the largest value (15); a GEMM larger than oneDNN takes is refused by the node, at
# plan time (1); `check` with nothing to check (17).
expect_error "node 'add1' (Relu, opset 17): takes 1 input, got 3" run relu_three_inputs.onnx --data good.npz
expect_error "opset99.onnx: ai.onnx opset 99 is newer than onnx-train knows (up to 27)" run opset99.onnx --data good.npz
expect_error "ir99.onnx: IR version 99 is newer than onnx-train knows (up to 13)" info ir99.onnx
expect_error "node 'add1' (Add) is of domain ai.onnx, which the model does not import" train no_onnx_opset.onnx \
  --data good.npz --loss mse --logits z --labels y
expect_error "huge_constant.onnx: out of memory: " run huge_constant.onnx --data good.npz
grep -qF "4.0 TB" "$tmp/err" && ok || bad "the out-of-memory error does not say how much the step needs"
expect_error "node '/0/Gemm' (Gemm, opset 13): GEMM of M=4294967296 K=64 N=64 (batch 1) is larger than oneDNN takes" \
  plan "$examples/digits_mlp/model.onnx" --batch 4294967296 --loss cross_entropy --logits logits --labels y
"$tool" plan "$examples/digits_mlp/model.onnx" --batch 100000000 --loss cross_entropy --logits logits --labels y \
  >"$tmp/out" 2>&1 && grep -q "^peak " "$tmp/out" && ok || { bad "plan of a step larger than memory"; tail -3 "$tmp/out"; }
avail=$(awk '/^MemAvailable:/ {printf "%.0f", $2 * 1024}' /proc/meminfo)
if [ "${avail:-0}" -lt 70000000000 ]; then
  grep -q "^does not fit: the arena needs" "$tmp/out" && ok || bad "plan does not say that the step does not fit"
fi
mkdir -p "$tmp/empty" "$tmp/nomodel/test_data_set_0"
expect_error "empty: no ONNX backend test under it" check "$tmp/empty"
expect_error "nomodel: holds test_data_set_0 but no model.onnx" check "$tmp/nomodel"
expect_error "external data location '../outside.bin' refused" run external_escape.onnx --data good.npz
expect_error "external data location '/etc/hostname' refused" run external_absolute.onnx --data good.npz
expect_error "tensor 'w': declared [3,4] float32 = 48 bytes but raw_data has 40" run size_mismatch.onnx --data good.npz
# An array the model does not read is said once (a misspelt name shows up there); the missing input is the error.
MAX_ERR_LINES=2 expect_error "wrong_name.npz: no array for the model input 'y' (arrays not read: why)" \
  run good.onnx --data wrong_name.npz
grep -qx "note: wrong_name.npz: arrays the model does not read: why" "$tmp/err" && ok || bad "run: unused arrays not said"
expect_error "truncated.npz: not a valid .npz" run good.onnx --data truncated.npz
expect_error "missing.npz: cannot open" run good.onnx --data missing.npz
expect_error "missing.onnx: cannot open" info missing.onnx
expect_error "truncated.onnx: not a valid ONNX model" info truncated.onnx
expect_error "not a directory" check missing_dir
expect_error "--device: expected auto, cpu, cuda or cuda:N, got 'tpu'" check --device tpu .
# No GPU in CI: the device fails once, before any model runs (built with or without the CUDA backend).
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi >/dev/null 2>&1; then
  expect_error "--device cuda: " check --device cuda .
fi

# ops --gpu names the ops without a GPU kernel (the internal SliceGrad has none yet; MatMul has cuBLASLt's; Shape
# always folds), one per line.
"$tool" ops --gpu >"$tmp/gpu" 2>&1 && grep -qx "ai.onnxtrain.SliceGrad: no GPU kernel yet" "$tmp/gpu" &&
  ! grep -q "^MatMul:\|^Shape:" "$tmp/gpu" && ok || { bad "ops --gpu"; head -5 "$tmp/gpu"; }

# The good model runs, and writes an .npz that reads back as data.
"$tool" run good.onnx --data good.npz -o "$tmp/out.npz" >/dev/null 2>&1 && [ -s "$tmp/out.npz" ] &&
  "$tool" run good.onnx --data good.npz >"$tmp/sum" 2>&1 && grep -q "z: float32\[2,3\]" "$tmp/sum" &&
  pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: good model did not run"; }

finish
