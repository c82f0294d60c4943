// onnx-train's command line: every subcommand, its options and what they may hold (CLI11). main() parses with it
// and runs the chosen command; the CLI fuzzer (tests/fuzz/fuzz_cli.cc) parses arbitrary arguments with it.
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "tools/commands.h"
#include "tools/passes.h"

namespace ot::tools {

struct CommandLine {
  CLI::App app{"onnx-train: train and run ONNX models on the CPU (and CUDA)"};
  int threads = 0;
  RunOptions run;
  std::string info_model;
  TrainOptions train;
  PassesOptions passes;
  PlanOptions plan;
  bool markdown = false, gpu = false;  // ops --markdown, ops --gpu
  CheckOptions check;
  CLI::App *run_cmd = nullptr, *info_cmd = nullptr, *train_cmd = nullptr, *passes_cmd = nullptr, *plan_cmd = nullptr,
           *ops_cmd = nullptr, *check_cmd = nullptr;
};

// A fresh command line (CLI11 apps keep what they parsed: one per parse).
std::unique_ptr<CommandLine> MakeCommandLine();

}  // namespace ot::tools
