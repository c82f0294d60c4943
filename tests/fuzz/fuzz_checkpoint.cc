// libFuzzer target: arbitrary bytes as a checkpoint (DIR/checkpoint.npz) resumed into a Trainer of the digits MLP
// with Adam. Loading must either succeed or throw ot::Error, and a refused checkpoint must leave the trainer's
// parameters as they were (everything is checked before anything is copied).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "graph/error.h"
#include "onnx_import/model_io.h"
#include "training/trainer.h"

namespace {

ot::Trainer& TheTrainer() {
  static ot::Trainer* t = [] {
    ot::TrainerOptions o;
    o.loss = {"", "cross_entropy", "logits", "y"};
    o.optimizer.kind = ot::ParseOptimizerKind("adam");
    o.optimizer.lr = 0.01;
    return new ot::Trainer(ot::LoadModel(OT_SOURCE_DIR "/examples/digits_mlp/model.onnx"), o);
  }();
  return *t;
}

const std::string& Dir() {
  static const std::string d = [] {
    std::string p = (std::filesystem::temp_directory_path() / ("ot_fuzz_ckpt_" + std::to_string(getpid()))).string();
    std::filesystem::create_directories(p);
    return p;
  }();
  return d;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ot::Trainer& t = TheTrainer();
  {
    std::ofstream f(Dir() + "/checkpoint.npz", std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  const auto before = t.Parameters();
  try {
    t.LoadCheckpoint(Dir());
  } catch (const ot::Error&) {
    for (const auto& [name, w] : t.Parameters())
      if (w.nbytes() != before.at(name).nbytes() || std::memcmp(w.raw(), before.at(name).raw(), w.nbytes()) != 0)
        __builtin_trap();  // a refused checkpoint changed the weights
  }
  return 0;
}
