// The example models' data and reference trajectories, for the tests that train them (trajectory_examples_test,
// amp_training_test): examples/<dir>/trajectory_<optimizer>.json, the Fashion-MNIST idx files of Debian's
// dataset-fashion-mnist read as convert.py writes them, and the tiny LM's token ids.
#pragma once
#include <gtest/gtest.h>
#include <zlib.h>

#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "graph/tensor.h"
#include "onnx_import/model_io.h"
#include "onnx_import/tensor_io.h"
#include "passes/optimizer.h"
#include "training/data_loader.h"
#include "training/trainer.h"

namespace ot::examples {

inline const std::string kExamples = std::string(OT_SOURCE_DIR) + "/examples/";
inline const std::string kFashion = "/usr/share/datasets/fashion-mnist/";  // Debian: dataset-fashion-mnist

inline nlohmann::json Reference(const std::string& dir, const std::string& optimizer) {
  std::ifstream f(kExamples + dir + "/trajectory_" + optimizer + ".json");
  EXPECT_TRUE(f) << "missing " << dir << "/trajectory_" << optimizer << ".json";
  return f ? nlohmann::json::parse(f) : nlohmann::json();
}

inline TrainerOptions Options(const nlohmann::json& ref, const std::string& optimizer) {
  TrainerOptions o;
  o.loss = {"", ref["loss"], ref["logits"], ref["labels"]};
  o.optimizer.kind = ParseOptimizerKind(optimizer);
  o.optimizer.lr = ref["lr"];
  return o;
}

// An idx file of unsigned bytes (gzipped): the dims from its header and the bytes.
inline std::vector<uint8_t> ReadIdx(const std::string& path, std::vector<int64_t>* dims) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) {
    ADD_FAILURE() << path << ": cannot open (install Debian's dataset-fashion-mnist)";
    return {};
  }
  std::vector<uint8_t> all;
  uint8_t chunk[1 << 16];
  int n;
  while ((n = gzread(f, chunk, sizeof chunk)) > 0) all.insert(all.end(), chunk, chunk + n);
  gzclose(f);
  if (n < 0 || all.size() < 4 || all[0] != 0 || all[1] != 0 || all[2] != 0x08) {
    ADD_FAILURE() << path << ": not an idx file of unsigned bytes";
    return {};
  }
  const size_t rank = all[3], header = 4 + 4 * rank;
  int64_t count = 1;
  dims->clear();
  for (size_t i = 0; i < rank; ++i) {
    const uint8_t* p = all.data() + 4 + 4 * i;
    dims->push_back((int64_t{p[0]} << 24) | (p[1] << 16) | (p[2] << 8) | p[3]);
    count *= dims->back();
  }
  EXPECT_EQ(all.size(), header + static_cast<size_t>(count)) << path;
  return {all.begin() + static_cast<std::ptrdiff_t>(header), all.end()};
}

// The first `n` training images as convert.py writes them: x float32 [n,1,28,28] = pixel / 255 (float32
// division), y int64 [n].
inline std::map<std::string, Tensor> FashionHead(int64_t n) {
  std::vector<int64_t> idims, ldims;
  std::vector<uint8_t> images = ReadIdx(kFashion + "train-images-idx3-ubyte.gz", &idims);
  std::vector<uint8_t> labels = ReadIdx(kFashion + "train-labels-idx1-ubyte.gz", &ldims);
  if (idims.size() != 3 || ldims.size() != 1 || idims[0] < n || ldims[0] < n) {
    ADD_FAILURE() << "Fashion-MNIST idx files: unexpected dims";
    return {};
  }
  Tensor x(DataType::kFloat32, {n, 1, idims[1], idims[2]}), y(DataType::kInt64, {n});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(images[i]) / 255.0f;
  for (int64_t i = 0; i < n; ++i) y.data<int64_t>()[i] = labels[i];
  return {{"x", x}, {"y", y}};
}

inline std::map<std::string, Tensor> TinyLmData() {
  std::map<std::string, Tensor> arrays;
  for (NamedTensor& t : ReadNpz(kExamples + "tiny_lm/data.npz")) arrays[t.name] = t.tensor;
  return arrays;
}

// `steps` steps of example `dir` with `optimizer` (the reference trajectory's loss, lr and batch, the file-order
// batches of the reference script), with `configure` changing the options first (fusion, precision, device): every
// step's loss, the parameters after the last step and the fusion report.
struct ExampleRun {
  std::vector<double> losses;
  std::map<std::string, Tensor> params;
  FusionReport fusion;
};
inline ExampleRun TrainExample(const std::string& dir, const std::string& optimizer, int steps,
                               const std::function<void(TrainerOptions&)>& configure) {
  nlohmann::json ref = Reference(dir, optimizer);
  TrainerOptions o = Options(ref, optimizer);
  configure(o);
  std::map<std::string, Tensor> arrays;
  if (dir == "digits_mlp") {
    for (NamedTensor& t : ReadNpz(kExamples + "digits_mlp/train.npz")) arrays[t.name] = t.tensor;
  } else {
    arrays = dir == "fashion_cnn" ? FashionHead(1024) : TinyLmData();
  }
  const std::string path = kExamples + dir + "/model.onnx";
  Trainer trainer(LoadModel(path), o);
  DataLoader data(std::move(arrays), ref["batch"], false, 0, path);
  ExampleRun r;
  for (int k = 0; k < steps; ++k)
    r.losses.push_back(trainer.Step(data.Get(k / data.batches_per_epoch(), k % data.batches_per_epoch()).arrays).loss);
  r.params = trainer.Parameters();
  r.fusion = trainer.fusion_report();
  return r;
}

}  // namespace ot::examples
