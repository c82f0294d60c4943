// The data a user gives `train` checked against the step before any step runs, so a mistake is named by the file,
// the array and the sample, never by an internal node: dtypes and the sizes after the sample axis against the
// step's inputs, class labels within the classes of --logits (--loss cross_entropy).
#pragma once
#include <string>

#include "tools/commands.h"
#include "training/trainer.h"

namespace ot::tools {

// Throws Error("FILE: array 'x' is float64, the step's input 'x' is float32") and the like. `o` says which loss the
// tool added (the labels' meaning).
void CheckDataFitsStep(const Graph& step, const Arrays& arrays, const std::string& file, const TrainOptions& o);

}  // namespace ot::tools
