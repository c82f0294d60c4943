// The train options of DESIGN.md's command-line contract, shared by `train` and `passes`.
#pragma once
#include <CLI/CLI.hpp>

#include "tools/commands.h"
#include "training/trainer.h"

namespace ot::tools {
// Adds MODEL and every train option to `cmd`, writing into `o`.
void AddTrainOptions(CLI::App* cmd, TrainOptions& o);
// The step-graph pipeline's options (loss, optimizer, AMP, loss scaling) of the command line's; the LR schedule's
// length is --steps.
StepOptions MakeStepOptions(const TrainOptions& o);
}  // namespace ot::tools
