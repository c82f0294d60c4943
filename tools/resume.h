// `train --checkpoint` / `--resume`: what the tool records beside the Trainer's state (the position in the data,
// the batch settings, the data set's fingerprint) and the checks a resume makes before it changes anything.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "tools/commands.h"
#include "training/trainer.h"

namespace ot::tools {

// Names, dtypes and shapes of the arrays, and a 64-bit FNV-1a hash of their bytes: "x:float32[1500,64],...#hash".
std::string DataFingerprint(const Arrays& arrays);
// The step graph's nodes (op, name, operand names, attribute names) and initializers (names, shapes, bytes) hashed:
// data-parallel ranks compare theirs at start.
std::string StepGraphFingerprint(const Graph& g);

// The metadata of a checkpoint taken after `steps_done` optimizer steps of `accum` micro-batches each.
std::map<std::string, std::string> CheckpointMeta(const TrainOptions& o, int64_t steps_done, int64_t accum,
                                                  const std::string& data_fingerprint);

// Loads o.resume into the trainer and returns the optimizer steps already done. Refused, with nothing changed:
// another batch size, accumulation, seed or shuffling (the batches would differ), another data set (unless
// --allow-other-data), another optimizer (unless --reset-optimizer), metadata that is missing or not a number.
// An --lr given with --resume replaces the checkpoint's learning rate, and the "resumed" line says so. A checkpoint
// of another number of data-parallel ranks resumes at the same position in the data, counted in samples (refused
// when that is not a whole number of this run's global batches); the returned steps are this run's.
int64_t Resume(Trainer& trainer, const TrainOptions& o, int64_t accum, const std::string& data_fingerprint);

}  // namespace ot::tools
