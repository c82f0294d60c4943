#include "tools/passes.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>

#include "graph/error.h"
#include "graph/printer.h"
#include "onnx_import/model_io.h"
#include "onnx_import/tensor_io.h"
#include "onnx_import/training_info.h"
#include "tools/cli_checks.h"
#include "tools/commands.h"
#include "tools/train_cli.h"
#include "training/memory_report.h"
#include "training/pipeline.h"
#include "training/trainer.h"

namespace ot::tools {

CLI::App* AddPassesCommand(CLI::App& app, PassesOptions& o) {
  auto* cmd =
      app.add_subcommand("passes", "Build the training step graph of MODEL; write it as an ONNX training model");
  AddTrainOptions(cmd, o.train);
  cmd->add_option("-o,--output", o.output, "STEP.onnx: the model with the step in its TrainingInfoProto")
      ->check(NonEmptyPath());
  std::string names;
  for (const std::string& p : StepPassNames()) names += p + "|";
  std::string fusion;
  for (const std::string& p : FusionPassNames()) fusion += p + "|";
  cmd->add_option("--dump-after", o.dump_after,
                  "Print the graph after a pass: " + names + " with --fuse: " + fusion +
                      "fusion (the end of it); all, or step (the finished step graph)");
  if (CLI::Option* f = cmd->get_option("--fuse")) f->each([&o](const std::string&) { o.fuse_given = true; });
  return cmd;
}

int Passes(const PassesOptions& o) {
  const TrainOptions& t = o.train;
  std::vector<std::string> known = StepPassNames();
  const std::vector<std::string> fusion_passes = FusionPassNames();
  known.insert(known.end(), fusion_passes.begin(), fusion_passes.end());
  known.insert(known.end(), {"fusion", "step", "all"});
  if (!o.dump_after.empty() && std::find(known.begin(), known.end(), o.dump_after) == known.end()) {
    std::string list;
    for (const std::string& p : known) list += (list.empty() ? "" : ", ") + p;
    throw Error("--dump-after: no pass '" + o.dump_after + "' (" + list + ")");
  }
  if (!o.fuse_given &&
      (o.dump_after == "fusion" || std::count(fusion_passes.begin(), fusion_passes.end(), o.dump_after)))
    throw Error("--dump-after " + o.dump_after + ": give --fuse lite|full (and --batch)");
  if (!o.output.empty()) CheckOutputFile("-o", o.output);
  std::unique_ptr<Graph> model = LoadCheckedModel(t.model);
  if (!model->training_info.empty())
    throw Error(t.model + ": the model already holds a training step (training_info); train it with onnx-train train");
  // The step is built on a copy: -o writes the model itself beside it.
  std::unique_ptr<Graph> step = ParseModel(SerializeModel(*model), "", t.model);
  TrainerOptions to = MakeTrainerOptions(t, t.steps);
  StepGraphInfo info;
  if (!o.dump_after.empty())
    to.control.after_pass = [&](const std::string& pass, const Graph& g) {
      if (o.dump_after == "all" || o.dump_after == pass)
        std::printf("--- after %s ---\n%s\n", pass.c_str(), PrintGraph(g).c_str());
    };
  try {
    info = BuildStep(*step, to);
  } catch (const Error& e) {
    throw Error(t.model + ": " + e.what());
  }
  std::string fusion_text;
  if (o.fuse_given && to.fuse.mode != FuseMode::kOff) {
    // Fused for the shapes of one --batch, as train fuses before its first step (the programs themselves hold no
    // batch size: the exported step runs at others too).
    std::map<std::string, Tensor> data;
    if (!t.data.empty())
      for (NamedTensor& a : ReadNpz(t.data)) data[a.name] = std::move(a.tensor);
    try {
      BatchInputs in = InputsForBatch(*step, t.batch, t.data.empty() ? nullptr : &data, t.data);
      fusion_text = FormatFusionReport(FuseForShapes(*step, to.fuse, in.descs, in.known(), to.control));
    } catch (const Error& e) {
      throw Error(t.model + ": " + e.what());
    }
    if (o.dump_after == "fusion") std::printf("--- after fusion ---\n%s\n", PrintGraph(*step).c_str());
  }
  if (o.dump_after == "step") std::printf("--- step graph ---\n%s\n", PrintGraph(*step).c_str());

  std::map<std::string, int> by_op;
  for (const auto& n : step->nodes()) by_op[(n->domain.empty() ? "" : n->domain + ".") + n->op_type]++;
  int64_t param_elems = 0;
  for (const Value* p : info.params) param_elems += p->initializer ? p->initializer->numel() : 0;
  int64_t state_elems = 0;
  for (const auto& b : step->update_bindings) state_elems += b.state->initializer ? b.state->initializer->numel() : 0;
  std::printf("step graph of %s: %zu nodes, %zu parameters (%lld elements), %zu states (%lld elements)\n",
              t.model.c_str(), step->nodes().size(), info.params.size(), static_cast<long long>(param_elems),
              step->update_bindings.size(), static_cast<long long>(state_elems));
  std::printf("nodes by op:");
  for (const auto& [op, k] : by_op) std::printf(" %s %d", op.c_str(), k);
  std::printf("\nstates:");
  for (const auto& b : step->update_bindings) std::printf(" %s", b.state->name.c_str());
  std::printf("\nloss: %s\n", info.loss.c_str());
  if (!fusion_text.empty()) std::printf("\n%s", fusion_text.c_str());
  if (to.amp.half != DataType::kUndefined) {
    std::printf("\nmixed precision (%s):\n%s", to.amp.half == DataType::kFloat16 ? "fp16" : "bf16",
                FormatAmpReport(info.amp, to.amp.half).c_str());
    for (const std::string& c : info.fp16_range_changes) std::printf("fp16-range: %s\n", c.c_str());
  }

  if (!o.output.empty()) {
    ToInferenceMode(*model);
    const StepOutputNames names =
        AttachStepGraph(*model, *step,
                        {info.loss, info.grad_norm ? info.grad_norm->name : "", info.skipped ? info.skipped->name : "",
                         info.lr ? info.lr->name : "", info.step ? info.step->name : ""});
    SaveModel(*model, o.output);
    std::printf("wrote %s (loss output '%s' of training_info[0].algorithm)\n", o.output.c_str(), names.loss.c_str());
  }
  return 0;
}

std::unique_ptr<Trainer> StoredStepTrainer(std::unique_ptr<Graph> model, const TrainOptions& o) {
  std::string refused;
  auto refuse = [&](bool given, const char* opt) {
    if (given) refused += std::string(refused.empty() ? "" : ", ") + opt;
  };
  refuse(!o.loss_output.empty(), "--loss-output");
  refuse(!o.loss.empty(), "--loss");
  refuse(!o.logits.empty(), "--logits");
  refuse(!o.labels.empty(), "--labels");
  refuse(!o.freeze.empty(), "--freeze");
  refuse(o.optimizer != "adam", "--optimizer");  // "adam" is the option's default
  refuse(o.lr > 0, "--lr");
  refuse(o.weight_decay >= 0, "--weight-decay");
  refuse(o.clip_grad_norm > 0, "--clip-grad-norm");
  refuse(o.grad_accum != 1, "--grad-accum");
  refuse(o.lr_schedule != "constant", "--lr-schedule");
  refuse(o.warmup > 0, "--warmup");
  if (!refused.empty())
    throw Error(o.model + ": the model holds its training step (training_info), which " + refused +
                " would rebuild; train it as stored, or train the original model with these options");
  if (!o.eval_data.empty())
    throw Error(o.model + ": --eval-data is not supported for a stored training step (evaluate the saved model)");
  StepOutputNames names;
  StoredStep s;
  s.step = CombinedStepGraph(*model, &names, o.model);
  s.loss = names.loss;
  s.grad_norm = names.grad_norm;
  s.skipped = names.skipped;
  s.lr = names.lr;
  s.step_counter = names.step;
  for (const auto& [what, n] : {std::pair{kLossKey, &s.loss}, std::pair{kGradNormKey, &s.grad_norm},
                                std::pair{kSkippedKey, &s.skipped}, std::pair{kStepKey, &s.step_counter}})
    if (n->empty())
      throw UnsupportedError(o.model + ": metadata_props has no '" + what +
                             "' (training steps stored by other tools are not supported yet)");
  s.inference = std::move(model);
  return std::make_unique<Trainer>(std::move(s), MakeTrainerOptions(o, 0));
}

}  // namespace ot::tools
