// CNNs trained on the GPU (cuDNN convolution, pooling and BatchNorm; executor/cuda/kernels_conv*.cc) against the
// same training on the CPU, fp32 with TF32 off: every step's loss within 1e-4 relative and the parameters after the
// last step within 1e-4, unfused and --fuse=lite. Models: examples/fashion_cnn (Conv-BN-ReLU-MaxPool x2, Gemm)
// on random images (the GPU machine has no Fashion-MNIST files), and a small CNN built here that adds a strided
// convolution with bias, a grouped one, AveragePool with and without count_include_pad and overlapping max
// windows. With --deterministic, two GPU runs give the same bits. Label `gpu` (tests named *Gpu*), skipped without
// a device.
//
// Adam and the bias of a convolution that feeds a BatchNormalization: BN subtracts the batch mean, so that bias's
// gradient is zero analytically and what reaches it is rounding noise, which Adam normalizes into steps of up to
// lr. Its trajectory is backend noise bounded by 2 lr steps (as tests/cuda/trainer_gpu_test.cc says of the key
// part of an attention bias); every other parameter is held to the strict tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <set>

#include "executor/device.h"
#include "graph/op_registry.h"
#include "onnx_import/model_io.h"
#include "passes/optimizer.h"
#include "tests/test_util.h"
#include "training/trainer.h"

namespace ot {
namespace {

const std::string kFashion = std::string(OT_SOURCE_DIR) + "/examples/fashion_cnn/model.onnx";

Arrays RandomImages(int64_t n, const std::vector<int64_t>& image, int64_t classes) {
  std::vector<int64_t> dims{n};
  dims.insert(dims.end(), image.begin(), image.end());
  Arrays a;
  a["x"] = test::RandomTensor(DataType::kFloat32, dims, 0, 1);
  Tensor y(DataType::kInt64, {n});
  for (int64_t i = 0; i < n; ++i) y.SetDouble(i, static_cast<double>(test::Rng()() % static_cast<uint64_t>(classes)));
  a["y"] = y;
  return a;
}

// A small CNN over x [N, 3, 12, 12] -> logits [N, 5]:
//   Conv(3->8, 3x3, stride 2, pad 1, bias) -> BN -> Relu -> AveragePool(3x3, stride 1, pad 1, exclude pad)
//   -> Conv(8->8, 3x3, pad 1, group 2) -> BN -> Relu -> MaxPool(3x3, stride 2, pad 1: overlapping windows)
//   -> AveragePool(2x2, stride 1, pad 1 at both ends, include pad) -> Flatten -> Gemm(8*4*4 -> 5, transB).
// The BatchNormalization nodes are in inference form; the Trainer turns them into training mode with running
// statistics as state.
std::unique_ptr<Graph> SmallCnn() {
  auto g = std::make_unique<Graph>();
  g->opset_imports[""] = 15;
  Value* x = g->AddValue("x");
  x->dtype = DataType::kFloat32;
  x->shape = Shape({Dim::Symbol("N"), Dim(3), Dim(12), Dim(12)});
  g->inputs.push_back(x);
  auto param = [&](const std::string& name, std::vector<int64_t> dims, double lo = -0.5, double hi = 0.5) {
    return g->AddInitializer(name, test::RandomTensor(DataType::kFloat32, dims, lo, hi));
  };
  auto node = [&](const std::string& op, std::vector<Value*> ins, const std::string& name,
                  std::map<std::string, Attribute> attrs = {}) {
    Value* out = g->AddValue(name + ".out");
    g->AddNode(op, std::move(ins), {out}, name)->attrs = std::move(attrs);
    return out;
  };
  auto bn = [&](Value* in, const std::string& name, int64_t c) {
    return node("BatchNormalization",
                {in, param(name + ".scale", {c}, 0.5, 1.5), param(name + ".bias", {c}),
                 param(name + ".mean", {c}, 0, 0), param(name + ".var", {c}, 1, 1)},
                name);
  };
  Value* h = node("Conv", {x, param("convA.w", {8, 3, 3, 3}), param("convA.b", {8})}, "convA",
                  {{"strides", Attribute::Ints({2, 2})}, {"pads", Attribute::Ints({1, 1, 1, 1})}});
  h = node("Relu", {bn(h, "bnA", 8)}, "reluA");
  h = node("AveragePool", {h}, "avgA",
           {{"kernel_shape", Attribute::Ints({3, 3})}, {"pads", Attribute::Ints({1, 1, 1, 1})}});
  h = node("Conv", {h, param("convB.w", {8, 4, 3, 3})}, "convB",
           {{"group", Attribute::Int(2)}, {"pads", Attribute::Ints({1, 1, 1, 1})}});
  h = node("Relu", {bn(h, "bnB", 8)}, "reluB");
  h = node("MaxPool", {h}, "maxB",
           {{"kernel_shape", Attribute::Ints({3, 3})},
            {"strides", Attribute::Ints({2, 2})},
            {"pads", Attribute::Ints({1, 1, 1, 1})}});
  h = node("AveragePool", {h}, "avgB",
           {{"kernel_shape", Attribute::Ints({2, 2})},
            {"pads", Attribute::Ints({1, 1, 1, 1})},
            {"count_include_pad", Attribute::Int(1)}});
  h = node("Flatten", {h}, "flatten");
  Value* logits = g->AddValue("logits");
  g->AddNode("Gemm", {h, param("fc.w", {5, 128}), param("fc.b", {5})}, {logits}, "fc")->attrs = {
      {"transB", Attribute::Int(1)}};
  g->outputs.push_back(logits);
  InferShapes(*g);
  return g;
}

struct TrainRun {
  std::vector<double> losses;
  std::map<std::string, Tensor> params;
};

TrainRun Train(std::unique_ptr<Graph> model, const std::string& optimizer, double lr, const std::string& fuse,
               std::shared_ptr<DeviceBackend> device, const std::vector<Arrays>& batches) {
  TrainerOptions o;
  o.loss = {"", "cross_entropy", "logits", "y"};
  o.optimizer.kind = ParseOptimizerKind(optimizer);
  o.optimizer.lr = lr;
  o.fuse.mode = ParseFuseMode(fuse);
  o.device = std::move(device);
  Trainer trainer(std::move(model), o);
  TrainRun r;
  for (const Arrays& b : batches) r.losses.push_back(trainer.Step(b).loss);
  r.params = trainer.Parameters();
  return r;
}

std::unique_ptr<Graph> Copy(const Graph& g) { return ParseModel(SerializeModel(g), "", "copy"); }

struct Case {
  std::string name;
  std::function<std::unique_ptr<Graph>()> model;
  std::vector<int64_t> image;
  int64_t classes;
  std::set<std::string> biases_before_bn;
};

std::vector<Case> Cases() {
  auto small = std::shared_ptr<Graph>(SmallCnn().release());  // one set of initial weights for every run
  return {
      {"fashion_cnn", [] { return LoadModel(kFashion); }, {1, 28, 28}, 10, {"0.bias", "4.bias"}},
      {"small_cnn", [small] { return Copy(*small); }, {3, 12, 12}, 5, {"convA.b"}},
  };
}

void ExpectSameTraining(const TrainRun& gpu, const TrainRun& cpu, const Case& c, const std::string& optimizer,
                        double lr, int steps) {
  ASSERT_EQ(gpu.losses.size(), cpu.losses.size());
  for (size_t k = 0; k < cpu.losses.size(); ++k)
    EXPECT_NEAR(gpu.losses[k], cpu.losses[k], 1e-4 * std::fabs(cpu.losses[k])) << "step " << k + 1;
  ASSERT_EQ(gpu.params.size(), cpu.params.size());
  for (const auto& [name, t] : cpu.params) {
    SCOPED_TRACE(name);
    if (optimizer == "adam" && c.biases_before_bn.count(name)) {
      const double bound = 2.0 * lr * steps;  // see the file comment
      for (int64_t i = 0; i < t.numel(); ++i)
        EXPECT_NEAR(gpu.params.at(name).GetDouble(i), t.GetDouble(i), bound) << "element " << i;
      continue;
    }
    if (optimizer == "adam") {
      test::ExpectCloseAfterAdam(gpu.params.at(name), t, 1e-4, 1e-6, 2.0 * lr * steps);
    } else {
      test::ExpectClose(gpu.params.at(name), t, 1e-4, 1e-6);
    }
  }
}

// The device settings each run uses: the default (2 streams, graph replay), and one stream issued directly. An H200
// run (2026-11-28) once found fashion_cnn's parameters about one step's update away from the CPU's with every loss
// within 1e-4, where two earlier runs on fresh data had passed: scripts/gpu-check's `repeat` part runs these
// variants many times to tell a race between streams or in the replayed graph from the data.
struct DeviceVariant {
  std::string name;
  int streams;
  bool graphs;
};

class TrainerCnnGpu : public ::testing::TestWithParam<DeviceVariant> {};

TEST_P(TrainerCnnGpu, MatchesTheCpuAtEveryStep) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  DeviceOptions dev;
  dev.streams = GetParam().streams;
  dev.graphs = GetParam().graphs;
  const int steps = 8;
  for (const Case& c : Cases()) {
    std::vector<Arrays> batches;
    for (int k = 0; k < steps; ++k) batches.push_back(RandomImages(32, c.image, c.classes));
    for (const auto& [optimizer, lr] : {std::pair<std::string, double>{"sgd", 0.01}, {"adam", 0.001}}) {
      const TrainRun cpu = Train(c.model(), optimizer, lr, "off", nullptr, batches);
      for (const char* fuse : {"off", "lite"}) {
        SCOPED_TRACE(c.name + " " + optimizer + " --fuse=" + fuse);
        const TrainRun gpu = Train(c.model(), optimizer, lr, fuse, OpenDevice("cuda:0", dev), batches);
        ExpectSameTraining(gpu, cpu, c, optimizer, lr, steps);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, TrainerCnnGpu,
                         ::testing::Values(DeviceVariant{"streams2_graphs", 2, true},
                                           DeviceVariant{"streams1_direct", 1, false}),
                         [](const auto& info) { return info.param.name; });

TEST(TrainerCnnDeterminismGpu, DeterministicStepsRepeatBitwise) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  DeviceOptions det;
  det.deterministic = true;
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    std::vector<Arrays> batches;
    for (int k = 0; k < 4; ++k) batches.push_back(RandomImages(32, c.image, c.classes));
    const TrainRun a = Train(c.model(), "adam", 0.001, "off", OpenDevice("cuda:0", det), batches);
    const TrainRun b = Train(c.model(), "adam", 0.001, "off", OpenDevice("cuda:0", det), batches);
    EXPECT_EQ(a.losses, b.losses);
    for (const auto& [name, t] : a.params) {
      SCOPED_TRACE(name);
      test::ExpectClose(b.params.at(name), t, 0, 0);
    }
  }
}

}  // namespace
}  // namespace ot
