#!/usr/bin/env bash
# The C++ API as an installed package: `cmake --install` into a temporary prefix, then examples/cpp_api is
# configured with find_package(onnxtrain), built, and run on the digits MLP (it must learn: test accuracy > 70%
# after two epochs, and write the trained model).
# Usage: install.sh BUILD_DIR SOURCE_DIR
set -u
build=$(realpath "$1")
src=$(realpath "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; echo "FAIL: install"; exit 1; }
[ -f "$tmp/prefix/lib/cmake/onnxtrain/onnxtrainConfig.cmake" ] || { echo "FAIL: no package config installed"; exit 1; }
[ -x "$tmp/prefix/bin/onnx-train" ] || { echo "FAIL: onnx-train not installed"; exit 1; }
cmake -S "$src/examples/cpp_api" -B "$tmp/example" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release \
  >"$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log"; echo "FAIL: configure the example"; exit 1; }
cmake --build "$tmp/example" -j 2 >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; echo "FAIL: build the example"; exit 1; }
OMP_WAIT_POLICY=PASSIVE "$tmp/example/train_digits" "$src/examples/digits_mlp" "$tmp/out.onnx" | tee "$tmp/out.txt" ||
  { echo "FAIL: the example exited non-zero"; exit 1; }
acc=$(sed -n 's/^epoch 2: .*test accuracy \([0-9.]*\)$/\1/p' "$tmp/out.txt")
python3 -c "import sys; sys.exit(0 if float('${acc:-0}') > 0.7 else 1)" || { echo "FAIL: accuracy '${acc}'"; exit 1; }
"$tmp/prefix/bin/onnx-train" info "$tmp/out.onnx" 2>&1 | grep -q "logits" ||
  { echo "FAIL: the saved model does not load"; exit 1; }
echo "install + find_package(onnxtrain) example: ok (accuracy $acc)"
