// onnx-train as a C++ library: find_package(onnxtrain) after `make install`, link onnxtrain::onnxtrain, and
// include this header. The whole training run of `onnx-train train` in a few calls:
//
//   std::unique_ptr<ot::Graph> model = ot::LoadModel("model.onnx");
//   ot::TrainerOptions opts;                       // loss, --freeze, optimizer (kind, lr, schedule, accumulation)
//   opts.loss = {"", "cross_entropy", "logits", "y"};
//   opts.optimizer.kind = ot::OptimizerKind::kAdam;
//   ot::Trainer trainer(std::move(model), opts);  // builds the step graph: training mode, loss, autodiff, update
//   ot::DataLoader data(arrays, /*batch=*/50, /*shuffle=*/true, /*seed=*/0, "train.npz");
//   ot::StepResult r = trainer.Step(data.Get(epoch, i).arrays);   // loss, grad_norm, skipped, lr
//   ot::EvalResult e = trainer.Evaluate(test_arrays, 256);         // loss, accuracy
//   trainer.Save("trained.onnx");                                  // inference mode, trained weights
//   trainer.SaveCheckpoint(dir, meta) / trainer.LoadCheckpoint(dir)
//
// Errors a caller can cause (bad file, unsupported op, shape mismatch, non-finite data) throw ot::Error with a
// message that names the file, node, op or value. Threads: ot::SetThreadCount(n) before the first step.
#pragma once

#include "executor/threads.h"
#include "graph/error.h"
#include "onnx_import/model_io.h"
#include "onnx_import/tensor_io.h"
#include "training/data_loader.h"
#include "training/trainer.h"
