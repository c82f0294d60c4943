#include "tools/train_cli.h"

#include "tools/cli_checks.h"

namespace ot::tools {

// The step `train` builds: on the CPU, CNN activations channels-last as the Trainer sets them (training/trainer.cc).
StepOptions MakeStepOptions(const TrainOptions& o) {
  TrainerOptions t = MakeTrainerOptions(o, o.steps);
  t.channels_last = !t.device;
  return t;
}

void AddTrainOptions(CLI::App* cmd, TrainOptions& o) {
  cmd->add_option("model", o.model, "MODEL.onnx")->required();
  cmd->add_option("--data", o.data, "TRAIN.npz whose arrays are named after the step's inputs")->check(NonEmptyPath());
  cmd->add_option("--loss-output", o.loss_output, "The model's scalar loss output");
  cmd->add_option("--loss", o.loss, "Append a loss on --logits: cross_entropy, mse or ctc");
  cmd->add_option("--logits", o.logits, "The output the appended loss reads");
  cmd->add_option("--labels", o.labels, "Name of the labels input the appended loss adds");
  cmd->add_option("--logit-lengths", o.logit_lengths,
                  "--loss ctc: the array of each sample's frame count in the logits (int64 [N])");
  cmd->add_option("--label-lengths", o.label_lengths,
                  "--loss ctc: the array of each sample's label count (int64 [N]; --labels is int64 [N, S], padded)");
  cmd->add_option("--blank", o.blank, "--loss ctc: the blank's class id (default 0)")->check(AtLeast(0));
  cmd->add_option("--ctc-reduction", o.ctc_reduction,
                  "--loss ctc: mean (each loss over its label length, then the batch mean; the default) or sum")
      ->check(CLI::IsMember({"mean", "sum"}));
  cmd->add_flag("--ctc-zero-infinity", o.ctc_zero_infinity,
                "--loss ctc: a sample whose labels cannot fit its frames adds 0 (otherwise the run stops at load)");
  cmd->add_option("--logits-layout", o.logits_layout,
                  "--loss ctc: tbc (time-major [frames, batch, classes], the default) or btc (batch-major)")
      ->check(CLI::IsMember({"tbc", "btc"}));
  cmd->add_option("--ctc-vocab", o.ctc_vocab,
                  "--loss ctc: symbols, one per line (line i for id i; <space> separates words): --eval-data also "
                  "reports the word error rate")
      ->check(NonEmptyPath());
  cmd->add_option("--freeze", o.freeze, "Parameters whose names match this regex are not trained");
  cmd->add_option("--optimizer", o.optimizer, "sgd|momentum|nesterov|adam|adamw|lamb");
  cmd->add_option("--lr", o.lr, "Learning rate (default: the optimizer's)")->check(FiniteNumber(true));
  cmd->add_option("--weight-decay", o.weight_decay, "Weight decay (default: the optimizer's)")
      ->check(FiniteNumber(false));
  cmd->add_option("--clip-grad-norm", o.clip_grad_norm, "Clip the global gradient norm to this")
      ->check(FiniteNumber(false));
  cmd->add_option("--grad-accum", o.grad_accum, "Micro-batches of --batch per optimizer step")->check(AtLeast(1));
  cmd->add_option("--bucket-mb", o.bucket_mb,
                  "Data-parallel (mpirun -np N): MiB of gradients all-reduced together, in backward order (default 25)")
      ->check(FiniteNumber(true));
  cmd->add_flag(
      "--sync-batchnorm", o.sync_batchnorm,
      "Data-parallel: BatchNormalization normalizes with the statistics of every rank's batch (SyncBatchNorm)");
  cmd->add_flag("--shard-optimizer", o.shard_optimizer,
                "Data-parallel: each rank keeps and updates 1/N of the optimizer state (ZeRO stage 1); gradients "
                "reduce-scattered, parameters all-gathered");
  cmd->add_option("--lr-schedule", o.lr_schedule, "constant|linear|cosine over the optimizer steps");
  cmd->add_option("--warmup", o.warmup, "Warm-up optimizer steps (linear from 0)")->check(AtLeast(0));
  cmd->add_option("--batch", o.batch, "Batch size (the micro-batch with --grad-accum)")->check(AtLeast(1));
  cmd->add_option("--epochs", o.epochs, "Epochs (unless --steps)")->check(AtLeast(1));
  cmd->add_option("--steps", o.steps, "Optimizer steps (overrides --epochs)")->check(AtLeast(1));
  cmd->add_flag("--no-shuffle", o.no_shuffle, "Batches in file order");
  cmd->add_option("--seed", o.seed, "Seed for shuffling and random ops");
  cmd->add_option("--eval-data", o.eval_data,
                  "VAL.npz evaluated (loss, accuracy or CTC token/word error rates) after each epoch")
      ->check(NonEmptyPath());
  cmd->add_flag("--amp{auto}", o.amp,
                "Mixed precision: --amp=fp16 or --amp=bf16 (bare --amp: bf16 on the CPU, fp16 on CUDA)");
  cmd->add_option("--keep-fp32", o.keep_fp32, "With --amp: ops (types) that stay fp32, e.g. Softmax,Gelu")
      ->delimiter(',');
  cmd->add_option("--keep-fp32-node", o.keep_fp32_node, "With --amp: nodes (names) that stay fp32")->delimiter(',');
  cmd->add_option("--loss-scale", o.loss_scale,
                  "dynamic (default with fp16), none, or a number: a static scale (also for fp32/bf16 runs)");
  cmd->add_option("--loss-scale-init", o.loss_scale_init, "Dynamic loss scaling: the first scale (default 65536)")
      ->check(FiniteNumber(true));
  cmd->add_option("--loss-scale-growth-interval", o.loss_scale_growth_interval,
                  "Dynamic: finite steps in a row before the scale grows (default 2000)")
      ->check(AtLeast(1));
  cmd->add_option("--loss-scale-factor", o.loss_scale_factor, "Dynamic: growth factor (default 2)");
  cmd->add_option("--loss-scale-backoff", o.loss_scale_backoff, "Dynamic: factor on overflow (default 0.5)");
  cmd->add_option("--loss-scale-overflows", o.loss_scale_overflows,
                  "Dynamic: back off only after this many overflows (default 1; TF's decr_every_n_nan_or_inf)")
      ->check(AtLeast(1));
  cmd->add_option("--fp16-infinity", o.fp16_infinity,
                  "fp16: constants beyond +-65504 (attention masks) become +-this (default 1e4)")
      ->check(FiniteNumber(true));
  cmd->add_option("--fp16-epsilon", o.fp16_epsilon,
                  "fp16: epsilons below fp16's normal range become this (default 1e-5)")
      ->check(FiniteNumber(true));
  cmd->add_option("--fuse", o.fuse,
                  "Cluster fusion: off, lite (elementwise ops and row reductions, one output per cluster; the default) "
                  "or full (also clusters with several outputs)");
  std::string optional;
  for (const std::string& p : OptionalPasses()) optional += (optional.empty() ? "" : ", ") + p;
  cmd->add_option("--disable-pass", o.disable_pass, "Leave out optional passes: " + optional)->delimiter(',');
  cmd->add_flag("--verify-passes", o.verify_passes,
                "Check the graph's structure after every pass of the step (debug builds and the tests always do)");
  cmd->add_option("--memory-budget", o.memory_budget,
                  "Fusion never raises the planned peak above this (e.g. 2G, 512M; default: the machine's memory)");
  cmd->add_option("--log-json", o.log_json, "Write one JSON object per step (and per evaluation) to this file")
      ->check(NonEmptyPath());
  cmd->add_option("--save", o.save, "Write the trained model (ONNX, inference mode) here")->check(NonEmptyPath());
  cmd->add_option("--checkpoint", o.checkpoint, "Directory for the full training state (checkpoint.npz)")
      ->check(NonEmptyPath());
  cmd->add_option("--checkpoint-every", o.checkpoint_every, "Write the checkpoint every N optimizer steps")
      ->check(AtLeast(1));
  cmd->add_option("--resume", o.resume, "Continue from the checkpoint in this directory")->check(NonEmptyPath());
  cmd->add_flag(
      "--reset-optimizer", o.reset_optimizer,
      "With --resume: accept a checkpoint of another optimizer; load its weights, start the optimizer afresh");
  cmd->add_flag("--allow-other-data", o.allow_other_data,
                "With --resume: accept a checkpoint made on another data set than --data");
  cmd->add_flag("--check-numerics", o.check_numerics,
                "Check every kernel's output; the first NaN/inf stops the run naming its node");
  cmd->add_flag("--profile-ops", o.profile, "At the end, the time per op type and the slowest kernels of a step");
  cmd->add_option("--profile", o.profile_trace,
                  "Write a Chrome-trace JSON of one step (the second, the first when there is one) to FILE: each "
                  "kernel's node, op, precision, bytes and time")
      ->check(NonEmptyPath());
  cmd->add_option("--device", o.device,
                  "Where the step runs: cpu (default), cuda, cuda:N, or auto (the first GPU when there is one)");
  cmd->add_flag("--tf32", o.tf32, "GPU: let float32 GEMMs use TF32 tensor cores (off: fp32 means fp32)");
  cmd->add_flag(
      "--deterministic", o.deterministic,
      "GPU: GEMM algorithms without split-K reductions, so every run gives the same bits (the CPU always does)");
  cmd->add_flag("!--no-cuda-graph", o.cuda_graph,
                "GPU: issue every kernel of every step instead of replaying the steady-state step as a CUDA graph");
  cmd->add_option("--streams", o.streams,
                  "GPU: spread a step's kernels over N CUDA streams with events between them, so independent "
                  "branches (a layer's weight- and data-gradient GEMMs) overlap; 1 issues every kernel on one stream "
                  "(at most 8)")
      ->check(CLI::Range(1, 8))
      ->capture_default_str();
  cmd->add_flag("-q,--quiet", o.quiet, "No per-step lines");
}

}  // namespace ot::tools
