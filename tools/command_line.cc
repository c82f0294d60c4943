#include "tools/command_line.h"

#include "tools/cli_checks.h"
#include "tools/train_cli.h"

namespace ot::tools {

std::unique_ptr<CommandLine> MakeCommandLine() {
  auto cl = std::make_unique<CommandLine>();
  CommandLine& c = *cl;
  c.app.require_subcommand(1);
  c.app.add_option("--threads", c.threads, "Threads for everything (TBB and oneDNN); 0 = all cores")->check(AtLeast(0));

  c.run_cmd = c.app.add_subcommand("run", "Inference: run MODEL on the arrays of an .npz file");
  c.run_cmd->add_option("model", c.run.model, "MODEL.onnx")->required();
  c.run_cmd->add_option("--data", c.run.data, "IN.npz whose arrays are named after the model's inputs")
      ->required()
      ->check(NonEmptyPath());
  c.run_cmd->add_option("-o,--output", c.run.output, "OUT.npz for the model's outputs (else a summary is printed)")
      ->check(NonEmptyPath());
  c.run_cmd->add_option("--threads", c.threads, "Threads for everything; 0 = all cores")->check(AtLeast(0));
  c.run_cmd->add_option("--repeat", c.run.repeat, "Time this many runs after a warm-up (median and best ms)")
      ->check(AtLeast(1));
  c.run_cmd->add_flag("--profile-ops", c.run.profile, "Print the time spent per op type");
  c.run_cmd->add_option("--fuse", c.run.fuse, "off|lite|full: cluster fusion for the data's shapes (lite)");
  c.run_cmd
      ->add_option("--disable-pass", c.run.disable_pass,
                   "pattern_fusion and/or fusion (= --fuse=off): run the model's ops as exported")
      ->delimiter(',');

  c.info_cmd = c.app.add_subcommand("info", "Inputs, outputs, opsets, op counts, parameters, unsupported ops");
  c.info_cmd->add_option("model", c.info_model, "MODEL.onnx")->required();

  c.train_cmd = c.app.add_subcommand("train", "Train MODEL on the arrays of an .npz file (CPU)");
  AddTrainOptions(c.train_cmd, c.train);
  c.train_cmd->add_option("--threads", c.threads, "Threads for everything; 0 = all cores")->check(AtLeast(0));

  c.passes_cmd = AddPassesCommand(c.app, c.passes);
  c.passes_cmd->add_option("--threads", c.threads, "Threads for everything; 0 = all cores")->check(AtLeast(0));

  c.plan_cmd = c.app.add_subcommand("plan", "The training step's planned peak memory and its split (nothing runs)");
  AddTrainOptions(c.plan_cmd, c.plan.train);
  c.plan_cmd->add_flag("--json", c.plan.json, "Print one JSON object (peak_bytes and each part)");
  c.plan_cmd
      ->add_option("--world-size", c.plan.train.world_size,
                   "Plan one rank's step of a data-parallel job of N ranks (mpirun -np N; with --shard-optimizer its "
                   "optimizer state is 1/N)")
      ->check(CLI::Range(1, 1 << 20));
  c.plan_cmd->add_option("--threads", c.threads, "Threads for everything; 0 = all cores")->check(AtLeast(0));

  c.ops_cmd = c.app.add_subcommand("ops", "List the supported ops (schema and CPU kernel)");
  c.ops_cmd->add_flag("--markdown", c.markdown, "As a Markdown table (the README's)");
  c.ops_cmd->add_flag("--gpu", c.gpu,
                      "The ops (internal ones included) that run on the CPU but have no GPU kernel yet, one per line");

  c.check_cmd = c.app.add_subcommand("check", "Run ONNX backend-test directories against their reference outputs");
  c.check_cmd->add_option("dirs", c.check.dirs, "Directories searched for model.onnx + test_data_set_*")->required();
  c.check_cmd->add_flag("--roundtrip", c.check.roundtrip, "Import, export and re-import each model before running it");
  c.check_cmd->add_option("--fuse", c.check.fuse, "Cluster fusion before running: off (default), lite or full")
      ->check(CLI::IsMember({"off", "lite", "full"}));
  c.check_cmd->add_flag("!--no-fork", c.check.fork, "Run models in this process (no crash isolation)");
  c.check_cmd->add_flag("-q,--quiet", c.check.quiet, "Print only failures and the summary");
  c.check_cmd->add_option("--timeout", c.check.timeout_s, "Seconds per model")->check(AtLeast(1));
  c.check_cmd->add_option("--passed-list", c.check.passed_list, "Write the names of passed tests to this file");
  c.check_cmd->add_option("--device", c.check.device,
                          "Where the models run: cpu (default), cuda[:N] or auto; a model with an op the device has no "
                          "kernel for is a skip");
  c.check_cmd->add_option("--threads", c.threads, "Threads for everything; 0 = all cores")->check(AtLeast(0));

  return cl;
}

}  // namespace ot::tools
