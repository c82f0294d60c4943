// The train options of DESIGN.md's command-line contract, shared by `train` and `passes`.
#pragma once
#include <CLI/CLI.hpp>

#include "tools/commands.h"

namespace ot::tools {
// Adds MODEL and every train option to `cmd`, writing into `o`.
void AddTrainOptions(CLI::App* cmd, TrainOptions& o);
}  // namespace ot::tools
