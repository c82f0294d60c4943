// The device side of the executor (executor/plan_device.cc, Executor/Trainer state sync) on a fake device whose
// "device memory" is host memory and whose kernels are the CPU's: everything a GPU plan does with buffers -- the
// arena, device copies of state/constants/inputs/outputs, state kept on the device between steps and synced back
// on demand, next-state copies on the device, plan switching -- runs in CI without a GPU. With the same kernels, a
// run on this device must equal the CPU backend bit for bit.
#include "tests/executor/host_device.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>

#include "executor/device.h"
#include "executor/kernel_registry.h"
#include "tests/executor/example_data.h"
#include "tests/test_util.h"

namespace ot {
namespace {
using namespace ot::examples;
using test::HostDevice;

struct Case {
  std::string dir, optimizer;
  DataType half;
};

class HostDeviceTraining : public ::testing::TestWithParam<Case> {};

TEST_P(HostDeviceTraining, EqualsTheCpuBackendBitForBit) {
  const Case& c = GetParam();
  auto dev = std::make_shared<HostDevice>();
  const ExampleRun cpu = TrainExample(c.dir, c.optimizer, 5, [&](TrainerOptions& o) { o.amp.half = c.half; });
  const ExampleRun on = TrainExample(c.dir, c.optimizer, 5, [&](TrainerOptions& o) {
    o.amp.half = c.half;
    o.device = dev;
  });
  ASSERT_EQ(on.losses.size(), cpu.losses.size());
  for (size_t k = 0; k < cpu.losses.size(); ++k) EXPECT_EQ(on.losses[k], cpu.losses[k]) << "step " << k + 1;
  for (const auto& [name, t] : cpu.params) {
    SCOPED_TRACE(name);
    test::ExpectClose(on.params.at(name), t, 0, 0);  // Parameters() brought the device state back
  }
}

INSTANTIATE_TEST_SUITE_P(
    Examples, HostDeviceTraining,
    ::testing::Values(Case{"digits_mlp", "adam", DataType::kUndefined}, Case{"digits_mlp", "sgd", DataType::kUndefined},
                      Case{"tiny_lm", "adam", DataType::kBFloat16}, Case{"tiny_lm", "adam", DataType::kFloat16}),
    [](const auto& info) {
      return info.param.dir + "_" + info.param.optimizer + "_" +
             (info.param.half == DataType::kUndefined ? std::string("fp32") : DataTypeName(info.param.half));
    });

// The state stays on the device between steps: after the first step, a step uploads its batch and downloads the
// step's scalars (loss, norm, flags, small state) -- never the parameters, moments or half copies.
TEST(HostDevice, StepsMoveOnlyTheBatchAndScalars) {
  auto dev = std::make_shared<HostDevice>();
  nlohmann::json ref = Reference("tiny_lm", "adam");
  TrainerOptions o = Options(ref, "adam");
  o.amp.half = DataType::kFloat16;  // half copies and loss-scale state too
  o.device = dev;
  const std::string path = kExamples + "tiny_lm/model.onnx";
  Trainer trainer(LoadModel(path), o);
  DataLoader data(TinyLmData(), ref["batch"], false, 0, path);
  trainer.Step(data.Get(0, 0).arrays);
  size_t batch_bytes = 0;
  for (const auto& [name, t] : data.Get(0, 1).arrays) batch_bytes += t.nbytes();
  const size_t up0 = dev->to_device, down0 = dev->to_host;
  for (int k = 1; k < 4; ++k) trainer.Step(data.Get(0, k).arrays);
  EXPECT_EQ(dev->to_device - up0, 3 * batch_bytes);
  EXPECT_LT(dev->to_host - down0, 3 * 4096u) << "a step copied more than its scalars back";
  size_t param_bytes = 0;
  for (const auto& [name, t] : trainer.Parameters()) param_bytes += t.nbytes();
  EXPECT_GE(dev->to_host - down0, param_bytes) << "Parameters() did not bring the state back";
}

// A checkpoint written from the device holds the device's state: resumed on the CPU, the run continues exactly as an
// uninterrupted CPU run. And a second plan (another batch size) picks up the state the first left on the device.
TEST(HostDevice, CheckpointsAndPlanSwitchesCarryTheDeviceState) {
  nlohmann::json ref = Reference("digits_mlp", "adam");
  const std::string path = kExamples + "digits_mlp/model.onnx";
  std::map<std::string, Tensor> arrays;
  for (NamedTensor& t : ReadNpz(kExamples + "digits_mlp/train.npz")) arrays[t.name] = t.tensor;
  DataLoader big(arrays, 32, false, 0, path), small(arrays, 16, false, 0, path);
  auto run = [&](std::shared_ptr<DeviceBackend> dev, const std::string& ckpt_dir) {
    TrainerOptions o = Options(ref, "adam");
    o.device = dev;
    Trainer t(LoadModel(path), o);
    std::vector<double> losses;
    for (int k = 0; k < 3; ++k) losses.push_back(t.Step((k == 1 ? small.Get(0, k) : big.Get(0, k)).arrays).loss);
    if (!ckpt_dir.empty()) t.SaveCheckpoint(ckpt_dir, {});
    losses.push_back(t.Step(big.Get(0, 3).arrays).loss);
    return losses;
  };
  const std::string dir = ::testing::TempDir() + "/host_device_ckpt";
  std::filesystem::remove_all(dir);
  const std::vector<double> cpu = run(nullptr, ""), dev = run(std::make_shared<HostDevice>(), dir);
  ASSERT_EQ(cpu.size(), dev.size());
  for (size_t k = 0; k < cpu.size(); ++k) EXPECT_EQ(dev[k], cpu[k]) << "step " << k + 1;
  // Resume the device's checkpoint on the CPU: the 4th step equals the uninterrupted run's.
  TrainerOptions o = Options(ref, "adam");
  Trainer resumed(LoadModel(path), o);
  resumed.LoadCheckpoint(dir);
  EXPECT_EQ(resumed.Step(big.Get(0, 3).arrays).loss, cpu[3]);
  std::filesystem::remove_all(dir);
}

// --check-numerics on a device: the outputs are scanned on the host after each kernel; a NaN in the batch stops the
// step naming the first node that produced one, and no state changes (the device state is uploaded again).
TEST(HostDevice, CheckNumericsNamesTheNodeAndKeepsTheState) {
  nlohmann::json ref = Reference("digits_mlp", "adam");
  const std::string path = kExamples + "digits_mlp/model.onnx";
  std::map<std::string, Tensor> arrays;
  for (NamedTensor& t : ReadNpz(kExamples + "digits_mlp/train.npz")) arrays[t.name] = t.tensor;
  DataLoader data(arrays, 32, false, 0, path);
  TrainerOptions o = Options(ref, "adam");
  o.device = std::make_shared<HostDevice>();
  o.check_numerics = true;
  Trainer t(LoadModel(path), o);
  t.Step(data.Get(0, 0).arrays);
  const std::map<std::string, Tensor> before = t.Parameters();
  Arrays bad = data.Get(0, 1).arrays;
  Tensor& x = bad.begin()->second;
  x = x.Clone();
  x.SetDouble(5, std::nan(""));
  try {
    t.Step(bad);
    FAIL() << "a NaN in the batch went through --check-numerics";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--check-numerics"), std::string::npos) << m;
    EXPECT_NE(m.find("node '"), std::string::npos) << m;
  }
  for (const auto& [name, p] : t.Parameters()) test::ExpectClose(p, before.at(name), 0, 0);
}

}  // namespace
}  // namespace ot
