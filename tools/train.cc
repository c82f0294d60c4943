// `onnx-train train MODEL --data TRAIN.npz [options]`: trains on the CPU; one line per step (or JSON lines).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>

#include "executor/data_loader.h"
#include "executor/trainer.h"
#include "graph/error.h"
#include "onnx_import/model_io.h"
#include "onnx_import/tensor_io.h"
#include "tools/commands.h"

namespace ot::tools {

int Train(const TrainOptions& o) {
  if (o.amp) std::fprintf(stderr, "note: --amp is accepted but mixed precision is not implemented yet: training in fp32\n");
  if (!o.fuse.empty() && o.fuse != "off")
    std::fprintf(stderr, "note: --fuse=%s is accepted but fusion is not implemented yet\n", o.fuse.c_str());
  TrainerOptions to;
  to.loss = {o.loss_output, o.loss, o.logits, o.labels};
  to.freeze = o.freeze;
  to.optimizer.kind = ParseOptimizerKind(o.optimizer);
  if (o.lr > 0) to.optimizer.lr = o.lr;
  if (o.weight_decay >= 0) to.optimizer.weight_decay = o.weight_decay;
  to.optimizer.clip_grad_norm = o.clip_grad_norm;
  to.seed = o.seed;
  Trainer trainer(LoadModel(o.model), to);

  std::map<std::string, Tensor> arrays;
  const std::vector<std::string> inputs = trainer.input_names();
  for (NamedTensor& nt : ReadNpz(o.data)) {
    if (std::find(inputs.begin(), inputs.end(), nt.name) == inputs.end()) continue;  // unused arrays are fine
    arrays[nt.name] = std::move(nt.tensor);
  }
  for (const std::string& in : inputs)
    if (!arrays.count(in)) throw Error(o.data + ": no array named '" + in + "' (the step needs it as an input)");
  DataLoader data(std::move(arrays), o.batch, !o.no_shuffle, o.seed, o.data);
  const int64_t per_epoch = data.batches_per_epoch();
  const int64_t total = o.steps > 0 ? o.steps : o.epochs * per_epoch;

  std::ofstream log;
  if (!o.log_json.empty()) {
    log.open(o.log_json);
    if (!log) throw Error(o.log_json + ": cannot write");
  }
  int64_t skipped = 0, skipped_in_row = 0;
  data.Prefetch(0, 0);
  for (int64_t k = 0; k < total; ++k) {
    Batch b = data.Take();
    if (k + 1 < total) data.Prefetch((k + 1) / per_epoch, (k + 1) % per_epoch);
    StepResult r = trainer.Step(b.arrays);
    skipped += r.skipped;
    skipped_in_row = r.skipped ? skipped_in_row + 1 : 0;
    if (log) {
      char line[256];
      std::snprintf(line, sizeof line,
                    "{\"step\": %lld, \"loss\": %.9g, \"lr\": %.9g, \"grad_norm\": %.9g, \"skipped\": %s, "
                    "\"step_ms\": %.3f}\n",
                    static_cast<long long>(k + 1), r.loss, r.lr, r.grad_norm, r.skipped ? "true" : "false", r.ms);
      log << line;
      log.flush();
    }
    if (!o.quiet)
      std::printf("epoch %lld step %lld/%lld loss %.6f grad_norm %.4g%s %.1f ms\n",
                  static_cast<long long>(b.epoch + 1), static_cast<long long>(k + 1),
                  static_cast<long long>(total), r.loss, r.grad_norm, r.skipped ? " skipped" : "", r.ms);
    if (!std::isfinite(r.loss) && !r.skipped)
      throw Error("step " + std::to_string(k + 1) + ": the loss is not finite");
    if (skipped_in_row >= 10)
      throw Error("10 steps in a row had non-finite gradients (from step " + std::to_string(k - 8) + ")");
  }
  if (!o.save.empty()) {
    std::unique_ptr<Graph> out = LoadModel(o.model);
    for (auto& [name, t] : trainer.Parameters()) {
      Value* v = out->FindValue(name);
      if (v && v->initializer) *v->initializer = t;
    }
    SaveModel(*out, o.save);
    std::printf("saved the trained model to %s\n", o.save.c_str());
  }
  if (skipped) std::printf("%lld steps skipped (non-finite gradients)\n", static_cast<long long>(skipped));
  return 0;
}

}  // namespace ot::tools
