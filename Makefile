# onnx-train: `make demo` and `make test` are the whole set-up on a fresh Debian 12 machine.
JOBS       ?= $(shell nproc)
BUILD      ?= build
ASAN_BUILD ?= build-asan
CUDA       ?= AUTO
PREFIX     ?= /usr/local
FUZZ_SECONDS ?= 60
TESTDATA   := /usr/share/libonnx-testdata/data
SHELL      := /bin/bash
.SHELLFLAGS := -o pipefail -c

.PHONY: all bootstrap build build-asan demo test test-unit test-conformance test-asan test-models fuzz test-full bench clean install venv models-venv format

all: build

bootstrap:
	@scripts/bootstrap

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DONNXTRAIN_CUDA=$(CUDA)

build: bootstrap $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# Core libraries, tools and the fuzzer with clang + ASan/UBSan (no CUDA: the sanitizers cover the host code).
$(ASAN_BUILD)/build.ninja:
	CC=clang CXX=clang++ cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DONNXTRAIN_CUDA=OFF -DONNXTRAIN_SANITIZE=ON -DONNXTRAIN_FUZZ=ON -DONNXTRAIN_TESTS=OFF

build-asan: bootstrap $(ASAN_BUILD)/build.ninja
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target onnx-train onnxtrain_mpi fuzz_model_import fuzz_tensor_import \
	  fuzz_checkpoint fuzz_cli

# Fashion-MNIST (Debian's dataset-fashion-mnist) as .npz, converted with the Python standard library only.
$(BUILD)/fashion/train.npz:
	python3 examples/fashion_cnn/convert.py --out $(BUILD)/fashion

# The speech example's utterances (espeak-ng, 3,000 training and 500 test utterances of unseen voices, as log-mel
# features; about 20 s).
$(BUILD)/speech/train.npz:
	python3 examples/speech_ctc/make_data.py --out $(BUILD)/speech

# Trains the Fashion-MNIST CNN (BatchNorm) on the CPU in mixed precision (bf16) and evaluates it on the 10,000 test
# images (with lite cluster fusion), then the speech recognizer (Conv1d + 2-layer BiLSTM, CTC) in fp16 with TF1's
# dynamic loss-scale recipe (2^32 to start, halved after every 2 overflows, doubled after 1000 good steps) and its
# character error rate on voices it never heard, then the digits MLP, then runs the bundled inference example.
demo: build $(BUILD)/fashion/train.npz $(BUILD)/speech/train.npz
	$(BUILD)/onnx-train train examples/fashion_cnn/model.onnx --data $(BUILD)/fashion/train.npz \
	  --loss cross_entropy --logits logits --labels y --optimizer adam --lr 0.003 --lr-schedule cosine \
	  --batch 64 --steps 300 --amp --fuse=lite --eval-data $(BUILD)/fashion/test.npz \
	  --save $(BUILD)/fashion_trained.onnx
	$(BUILD)/onnx-train train examples/speech_ctc/model.onnx --data $(BUILD)/speech/train.npz \
	  --loss ctc --logits logits --labels labels --label-lengths label_lengths --logit-lengths logit_lengths \
	  --optimizer adam --lr 0.002 --clip-grad-norm 5 --batch 16 --steps 600 --amp=fp16 --loss-scale dynamic \
	  --loss-scale-init 4294967296 --loss-scale-overflows 2 --loss-scale-growth-interval 1000 \
	  --eval-data $(BUILD)/speech/test.npz --ctc-vocab $(BUILD)/speech/vocab.txt --save $(BUILD)/speech_trained.onnx
	$(BUILD)/onnx-train train examples/digits_mlp/model.onnx --data examples/digits_mlp/train.npz \
	  --loss cross_entropy --logits logits --labels y --optimizer adam --lr 0.01 --batch 50 --epochs 3 \
	  --amp --fuse=lite --save $(BUILD)/digits_trained.onnx
	$(BUILD)/onnx-train info examples/mlp/model.onnx
	$(BUILD)/onnx-train run examples/mlp/model.onnx --data examples/mlp/input.npz

# onnx-train, its libraries and headers, and the CMake package (find_package(onnxtrain); examples/cpp_api).
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

test-unit: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L 'unit|cli'

test-conformance: build
	cd $(BUILD) && ctest --output-on-failure -L conformance

# The conformance suites again under ASan+UBSan (every model, round-tripped through export), then the fuzzer.
test-asan: build-asan
	ASAN_OPTIONS=detect_leaks=1 $(ASAN_BUILD)/onnx-train check --quiet --roundtrip \
	  $(TESTDATA)/node $(TESTDATA)/simple $(TESTDATA)/pytorch-operator $(TESTDATA)/pytorch-converted \
	  | tail -n 30
	tests/asan/train.sh $(ASAN_BUILD) examples
	tests/fuzz/run.sh $(ASAN_BUILD) $(FUZZ_SECONDS)

fuzz: build-asan
	tests/fuzz/run.sh $(ASAN_BUILD) $(FUZZ_SECONDS)

# .venv (PyPI): onnx, numpy and onnxruntime, the peers the CLI tests hold exported and saved models against
# (the ONNX checker, ONNX Runtime) and the newer ONNX node tests of test-full.
venv:
	scripts/onnx-newer-tests .venv
	.venv/bin/python -c 'import onnxruntime' 2>/dev/null || .venv/bin/pip install -q onnxruntime

# The corpus's Python: Debian's PyTorch and torchvision, transformers and timm pinned (tests/models/requirements.txt).
models-venv:
	scripts/models-venv .venv-torch

# The corpus of exported models alone (tests/models): exported, trained and checked against PyTorch.
test-models: build models-venv
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L models

test: build build-asan venv models-venv
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) --no-print-directory test-asan

# Heavier suites: the newer ONNX node tests (opsets up to 22) shipped inside the onnx 1.22 wheel (needs PyPI).
test-full: build venv
	$(BUILD)/onnx-train check --quiet $$(.venv/bin/python -c 'import onnx,os;print(os.path.join(os.path.dirname(onnx.__file__),"backend/test/data/node"))')

bench: build
	bench/run.sh $(BUILD)
	bench/train.sh $(BUILD)
	bench/amp.sh $(BUILD)
	bench/fusion.sh $(BUILD)
	bench/fuse_ab.sh $(BUILD)
	bench/models.sh $(BUILD)

# Formats every C++ and CUDA source in place with clang-format 14 (`make test` checks it: tests/structure/format.sh).
format: bootstrap
	git ls-files --cached --others --exclude-standard '*.cc' '*.h' '*.cu' '*.cuh' | xargs clang-format-14 --style=file -i

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
