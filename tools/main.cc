// onnx-train: the command-line front end. See README.md for the command reference.
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <new>
#include <string>

#include "executor/executor.h"
#include "graph/error.h"
#include "tools/commands.h"
#include "tools/cli_checks.h"
#include "tools/passes.h"
#include "tools/train_cli.h"

int main(int argc, char** argv) {
  // oneDNN's OpenMP threads must sleep, not spin, between parallel regions: spinning OpenMP workers would
  // take the cores from the TBB threads that run the other kernels (measured: a 0.2 ms step became 120 ms on
  // 2 cores). libgomp reads its wait policy only when it loads, so set it and re-execute once.
  if (!std::getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    execv("/proc/self/exe", argv);  // on failure, carry on with the default policy
  }
  CLI::App app{"onnx-train: train and run ONNX models on the CPU (and CUDA)"};
  app.require_subcommand(1);
  int threads = 0;
  app.add_option("--threads", threads, "Threads for everything (TBB and oneDNN); 0 = all cores")
      ->check(ot::tools::AtLeast(0));

  ot::tools::RunOptions run;
  auto* run_cmd = app.add_subcommand("run", "Inference: run MODEL on the arrays of an .npz file");
  run_cmd->add_option("model", run.model, "MODEL.onnx")->required();
  run_cmd->add_option("--data", run.data, "IN.npz whose arrays are named after the model's inputs")
      ->required()
      ->check(ot::tools::NonEmptyPath());
  run_cmd->add_option("-o,--output", run.output, "OUT.npz for the model's outputs (else a summary is printed)")
      ->check(ot::tools::NonEmptyPath());
  run_cmd->add_option("--threads", threads, "Threads for everything; 0 = all cores")
      ->check(ot::tools::AtLeast(0));
  run_cmd->add_option("--repeat", run.repeat, "Time this many runs after a warm-up (median and best ms)")
      ->check(ot::tools::AtLeast(1));
  run_cmd->add_flag("--profile-ops", run.profile, "Print the time spent per op type");
  run_cmd->add_option("--fuse", run.fuse, "off|lite|full: cluster fusion for the data's shapes (lite)");
  run_cmd->add_option("--disable-pass", run.disable_pass,
                      "pattern_fusion and/or fusion (= --fuse=off): run the model's ops as exported")
      ->delimiter(',');

  std::string info_model;
  auto* info_cmd = app.add_subcommand("info", "Inputs, outputs, opsets, op counts, parameters, unsupported ops");
  info_cmd->add_option("model", info_model, "MODEL.onnx")->required();

  ot::tools::TrainOptions train;
  auto* train_cmd = app.add_subcommand("train", "Train MODEL on the arrays of an .npz file (CPU)");
  ot::tools::AddTrainOptions(train_cmd, train);
  train_cmd->add_option("--threads", threads, "Threads for everything; 0 = all cores")
      ->check(ot::tools::AtLeast(0));

  ot::tools::PassesOptions passes;
  auto* passes_cmd = ot::tools::AddPassesCommand(app, passes);
  passes_cmd->add_option("--threads", threads, "Threads for everything; 0 = all cores")
      ->check(ot::tools::AtLeast(0));

  ot::tools::PlanOptions plan;
  auto* plan_cmd = app.add_subcommand("plan", "The training step's planned peak memory and its split (nothing runs)");
  ot::tools::AddTrainOptions(plan_cmd, plan.train);
  plan_cmd->add_flag("--json", plan.json, "Print one JSON object (peak_bytes and each part)");
  plan_cmd->add_option("--threads", threads, "Threads for everything; 0 = all cores")
      ->check(ot::tools::AtLeast(0));

  bool markdown = false;
  auto* ops_cmd = app.add_subcommand("ops", "List the supported ops (schema and CPU kernel)");
  ops_cmd->add_flag("--markdown", markdown, "As a Markdown table (the README's)");
  bool gpu = false;
  ops_cmd->add_flag("--gpu", gpu,
                    "The ops (internal ones included) that run on the CPU but have no GPU kernel yet, one per line");

  ot::tools::CheckOptions check;
  auto* check_cmd = app.add_subcommand("check", "Run ONNX backend-test directories against their reference outputs");
  check_cmd->add_option("dirs", check.dirs, "Directories searched for model.onnx + test_data_set_*")->required();
  check_cmd->add_flag("--roundtrip", check.roundtrip, "Import, export and re-import each model before running it");
  check_cmd->add_option("--fuse", check.fuse, "Cluster fusion before running: off (default), lite or full")
      ->check(CLI::IsMember({"off", "lite", "full"}));
  check_cmd->add_flag("!--no-fork", check.fork, "Run models in this process (no crash isolation)");
  check_cmd->add_flag("-q,--quiet", check.quiet, "Print only failures and the summary");
  check_cmd->add_option("--timeout", check.timeout_s, "Seconds per model")->check(ot::tools::AtLeast(1));
  check_cmd->add_option("--passed-list", check.passed_list, "Write the names of passed tests to this file");
  check_cmd->add_option("--device", check.device,
                        "Where the models run: cpu (default), cuda[:N] or auto; a model with an op the device has no "
                        "kernel for is a skip");
  check_cmd->add_option("--threads", threads, "Threads for everything; 0 = all cores")
      ->check(ot::tools::AtLeast(0));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    // A bad option is a user error like any other: one line, exit status 1.
    std::fprintf(stderr, "onnx-train: error: %s\n", e.what());
    return 1;
  }
  try {
    if (*check_cmd) {
      // Threads start in each checked model's child process, never in the parent that forks.
      check.threads = threads;
      return ot::tools::Check(check);
    }
    ot::SetThreadCount(threads);
    if (*run_cmd) return ot::tools::Run(run);
    if (*train_cmd) return ot::tools::Train(train);
    if (*passes_cmd) return ot::tools::Passes(passes);
    if (*plan_cmd) return ot::tools::PlanMemoryReport(plan);
    if (*info_cmd) return ot::tools::Info(info_model);
    if (*ops_cmd) return gpu ? ot::tools::OpsWithoutGpuKernel() : ot::tools::Ops(markdown);
  } catch (const ot::Error& e) {
    // One line per line of the message (an unsupported model names each node on its own line).
    std::string msg = e.what();
    for (size_t start = 0;;) {
      const size_t end = msg.find('\n', start);
      std::fprintf(stderr, "onnx-train: error: %s\n", msg.substr(start, end - start).c_str());
      if (end == std::string::npos) break;
      start = end + 1;
    }
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "onnx-train: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "onnx-train: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
