#!/usr/bin/env bash
# Training under ASan/UBSan (make test-asan): a few steps of each example family that the node tests do not reach --
# a transformer (residual LayerNorm folds), a CNN with BatchNorm -> Relu (batch-norm folds), the speech model on both
# CPU recurrent paths, --fuse=full, and two data-parallel ranks under mpirun (the bucketed all-reduce, its
# communication thread, --sync-batchnorm, --shard-optimizer with and without --amp). Any sanitizer report fails the run.
# Usage: train.sh ASAN_BUILD_DIR EXAMPLES_DIR
set -u
tool=$(realpath "$1/onnx-train")
ex=$(realpath "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
fail=0
run() {  # run NAME ARGS...: the command must exit 0 with no sanitizer report
  local name=$1
  shift
  if "$@" >"$tmp/out" 2>&1 && ! grep -q "ERROR: AddressSanitizer\|runtime error:\|ERROR: LeakSanitizer" "$tmp/out"; then
    echo "ok   $name"
  else
    echo "FAIL $name"
    grep -m1 -A12 "ERROR\|runtime error" "$tmp/out" || tail -5 "$tmp/out"
    fail=1
  fi
}
ce=(--loss cross_entropy --logits logits --labels y --quiet --steps 3 --threads 2)
python3 "$ex/fashion_cnn/convert.py" --out "$tmp/fashion" --limit 128 >/dev/null
run "tiny_lm" "$tool" train "$ex/tiny_lm/model.onnx" --data "$ex/tiny_lm/data.npz" "${ce[@]}" --batch 8
run "tiny_lm --fuse=full" "$tool" train "$ex/tiny_lm/model.onnx" --data "$ex/tiny_lm/data.npz" "${ce[@]}" --batch 8 \
  --fuse=full
run "fashion_cnn" "$tool" train "$ex/fashion_cnn/model.onnx" --data "$tmp/fashion/train.npz" "${ce[@]}" --batch 16
sp=$ex/speech_ctc
ctc=(--data "$sp/trajectory.npz" --loss ctc --logits logits --labels labels --label-lengths label_lengths
     --logit-lengths logit_lengths --batch 4 --steps 2 --threads 2 --quiet)
run "speech (GEMM path)" "$tool" train "$sp/model.onnx" "${ctc[@]}"
run "speech (oneDNN RNN primitives)" env ONNXTRAIN_CPU_RNN=primitive "$tool" train "$sp/model.onnx" "${ctc[@]}"
run "speech --amp=bf16" "$tool" train "$sp/model.onnx" "${ctc[@]}" --amp=bf16
# Open MPI's own allocations are not ours: leaks are not checked under mpirun.
run "2 ranks: tiny_lm, 3 buckets" timeout 300 mpirun -np 2 -x ASAN_OPTIONS=detect_leaks=0:halt_on_error=1 \
  "$tool" train "$ex/tiny_lm/model.onnx" --data "$ex/tiny_lm/data.npz" "${ce[@]}" --batch 8 --bucket-mb 0.1
run "2 ranks: fashion_cnn --sync-batchnorm" timeout 300 mpirun -np 2 -x ASAN_OPTIONS=detect_leaks=0:halt_on_error=1 \
  "$tool" train "$ex/fashion_cnn/model.onnx" --data "$tmp/fashion/train.npz" "${ce[@]}" --batch 8 --sync-batchnorm \
  --bucket-mb 0.01
run "2 ranks: tiny_lm --shard-optimizer, accumulating, checkpointed" timeout 300 mpirun -np 2 \
  -x ASAN_OPTIONS=detect_leaks=0:halt_on_error=1 "$tool" train "$ex/tiny_lm/model.onnx" --data "$ex/tiny_lm/data.npz" \
  "${ce[@]}" --batch 8 --bucket-mb 0.1 --shard-optimizer --grad-accum 2 --checkpoint "$tmp/ckz"
# The fp32 master weights sharded too (--amp): the half copies from the gathered shards, gathered for evaluation and
# --save, checkpointed and resumed.
run "2 ranks: tiny_lm --shard-optimizer --amp=bf16, accumulating, evaluated, saved, resumed" timeout 300 mpirun -np 2 \
  -x ASAN_OPTIONS=detect_leaks=0:halt_on_error=1 "$tool" train "$ex/tiny_lm/model.onnx" --data "$ex/tiny_lm/data.npz" \
  "${ce[@]}" --batch 8 --bucket-mb 0.1 --shard-optimizer --amp=bf16 --grad-accum 2 --checkpoint "$tmp/ckm" \
  --eval-data "$ex/tiny_lm/data.npz" --save "$tmp/sharded.onnx"
run "2 ranks: resumed sharded --amp=bf16" timeout 300 mpirun -np 2 -x ASAN_OPTIONS=detect_leaks=0:halt_on_error=1 \
  "$tool" train "$ex/tiny_lm/model.onnx" --data "$ex/tiny_lm/data.npz" --loss cross_entropy --logits logits \
  --labels y --quiet --steps 5 --threads 2 --batch 8 --bucket-mb 0.1 --shard-optimizer --amp=bf16 --grad-accum 2 \
  --resume "$tmp/ckm"
exit $fail
