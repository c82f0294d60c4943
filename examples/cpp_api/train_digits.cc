// Trains the digits MLP (examples/digits_mlp) through the C++ API: two epochs of Adam with shuffling, an
// evaluation after each, then the trained model saved in inference mode.
// Usage: train_digits DIGITS_MLP_DIR [OUT.onnx]
#include <onnxtrain/onnxtrain.h>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIGITS_MLP_DIR [OUT.onnx]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  try {
    ot::SetThreadCount(2);
    ot::TrainerOptions opts;
    opts.loss = {"", "cross_entropy", "logits", "y"};  // cross-entropy on output "logits", labels input "y"
    opts.optimizer.kind = ot::OptimizerKind::kAdam;
    opts.optimizer.lr = 0.01;
    ot::Trainer trainer(ot::LoadModel(dir + "/model.onnx"), opts);

    auto read = [](const std::string& path) {
      ot::Arrays arrays;
      for (ot::NamedTensor& t : ot::ReadNpz(path)) arrays[t.name] = t.tensor;
      return arrays;
    };
    ot::DataLoader data(read(dir + "/train.npz"), 50, /*shuffle=*/true, /*seed=*/1, "train.npz");
    const ot::Arrays test = read(dir + "/test.npz");
    for (int64_t epoch = 0; epoch < 2; ++epoch) {
      double loss = 0;
      for (int64_t i = 0; i < data.batches_per_epoch(); ++i) loss += trainer.Step(data.Get(epoch, i).arrays).loss;
      const ot::EvalResult e = trainer.Evaluate(test, 100);
      std::printf("epoch %lld: train loss %.4f, test loss %.4f, test accuracy %.4f\n",
                  static_cast<long long>(epoch + 1), loss / static_cast<double>(data.batches_per_epoch()), e.loss,
                  e.accuracy);
    }
    if (argc > 2) trainer.Save(argv[2]);
  } catch (const ot::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
