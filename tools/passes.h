// `onnx-train passes MODEL [train options] [-o STEP.onnx] [--dump-after PASS|all] [--fuse lite|full]`: builds the
// training step graph (passes/step_graph.h), prints a summary (nodes by op, parameters, states) and writes it as a
// standard ONNX training model (onnx_import/training_info.h: main graph = the model in inference mode plus every
// training state as an initializer; training_info[0].algorithm = the step; update_binding = (state, next value)).
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "graph/graph.h"
#include "tools/commands.h"

namespace ot::tools {

struct PassesOptions {
  TrainOptions train;  // the model and the step's options (--loss, --optimizer, --lr ...)
  std::string output;  // -o STEP.onnx
  std::string dump_after;
  // --fuse given explicitly: cluster fusion (and full's GEMM epilogues) for --batch (and --data's other dims), so
  // the printed and exported step shows the FusedElementwise / MatMulEpilogue nodes train would run.
  bool fuse_given = false;
};
// Registers the subcommand on `app`.
CLI::App* AddPassesCommand(CLI::App& app, PassesOptions& o);
int Passes(const PassesOptions& o);

}  // namespace ot::tools

namespace ot {
class Trainer;
}
namespace ot::tools {
// The Trainer of a model that holds its training step (training_info, as `passes -o` writes it): the step is
// trained as stored. Train options that would rebuild the step (--loss*, --logits, --labels, --freeze,
// --optimizer, --lr, --weight-decay, --clip-grad-norm, --grad-accum, --lr-schedule, --warmup) and --eval-data
// are errors naming them.
std::unique_ptr<Trainer> StoredStepTrainer(std::unique_ptr<Graph> model, const TrainOptions& o);

}  // namespace ot::tools
