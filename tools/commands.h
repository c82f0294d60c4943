// The onnx-train subcommands. Each returns the process exit code; errors a user can cause throw ot::Error and
// are printed by main as one line.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "dist/comm.h"
#include "graph/graph.h"

namespace ot::tools {

// LoadModel, then every node whose op cannot run here named, one line each ("FILE: node 'N': op X (domain, opset V)
// is not supported"), as one UnsupportedError before anything else can fail (tools/load.cc).
std::unique_ptr<Graph> LoadCheckedModel(const std::string& path);

struct CheckOptions {
  std::vector<std::string> dirs;
  bool roundtrip = false;    // import -> export -> import before running
  std::string fuse = "off";  // cluster fusion (sized for the first data set's shapes) before running
  bool fork = true;          // run each model in a child process (a crash is a failure, not the end)
  bool quiet = false;        // print only failures and the summary
  int timeout_s = 300;       // per model
  int threads = 0;
  std::string passed_list;     // write the names of passed tests to this file
  std::string device = "cpu";  // executor/device.h's OpenDevice spec: cpu, cuda[:N] or auto
};
int Check(const CheckOptions& o);

int Info(const std::string& model);

struct RunOptions {
  std::string model, data, output;
  bool profile = false;                   // print time per op type
  std::string fuse = "lite";              // cluster fusion (sized for the data's shapes) after the pattern fusions
  int repeat = 1;                         // > 1: time repeated runs (after one warm-up) and print the median and best
  std::vector<std::string> disable_pass;  // --disable-pass pattern_fusion|fusion: run the model as exported
};
int Run(const RunOptions& o);
}  // namespace ot::tools

namespace ot {
class Executor;
struct KernelEvent;
}  // namespace ot
namespace ot::tools {
// Time per op type and the slowest kernels of the executor's last plan, divided by `runs`.
void PrintOpProfile(const Executor& ex, double runs);
// Writes `events` (one step's kernels) as a Chrome trace to `path`; returns a one-line summary for stderr.
// `comm` (data-parallel): the step's all-reduces in bucket order, drawn on a lane of their own from the end of each
// bucket's AllReduceStart kernel.
std::string WriteProfileTrace(const std::string& path, const std::vector<KernelEvent>& events, int64_t step,
                              const std::string& precision, const std::string& fuse,
                              const std::vector<dist::CollectiveTiming>& comm = {});

}  // namespace ot::tools

namespace ot::tools {
// `onnx-train ops [--markdown]`: every op with a schema and a CPU kernel, from the registries.
int Ops(bool markdown);
// `onnx-train ops --gpu`: "DOMAIN.OP: no GPU kernel yet" for every op with a CPU kernel and no CUDA one, except the
// ones that always fold when a plan is made (a build without the CUDA backend says so first).
int OpsWithoutGpuKernel();
}  // namespace ot::tools

namespace ot {
struct TrainerOptions;
}
namespace ot::tools {
struct TrainOptions {
  std::string model, data;
  std::string loss_output, loss, logits, labels, freeze;
  // --loss ctc: the length arrays, the blank id, mean|sum, --ctc-zero-infinity, tbc|btc, the vocabulary file.
  std::string logit_lengths, label_lengths;
  int64_t blank = 0;
  std::string ctc_reduction = "mean";
  bool ctc_zero_infinity = false;
  std::string logits_layout = "tbc", ctc_vocab;
  std::string optimizer = "adam";
  double lr = 0;             // 0: the optimizer's default
  double weight_decay = -1;  // < 0: the optimizer's default
  double clip_grad_norm = 0;
  int64_t grad_accum = 1, warmup = 0;
  double bucket_mb = 25;         // --bucket-mb: data-parallel gradient buckets (mpirun -np N)
  bool sync_batchnorm = false;   // --sync-batchnorm: BatchNorm on the statistics of every rank's batch
  bool shard_optimizer = false;  // --shard-optimizer: ZeRO stage 1 (passes/optimizer.h)
  int world_size = 0;            // plan --world-size N: the step of one of N ranks (0: this job's ranks)
  std::string lr_schedule = "constant";
  int64_t batch = 32, epochs = 1, steps = 0;
  bool no_shuffle = false, quiet = false, check_numerics = false, profile = false;
  std::string amp;  // "" (fp32), "auto" (bare --amp: bf16 on the CPU), "fp16", "bf16"
  std::vector<std::string> keep_fp32, keep_fp32_node;
  double fp16_infinity = 1e4, fp16_epsilon = 1e-5;
  // --loss-scale dynamic|N (default: dynamic for fp16, none otherwise) and the dynamic knobs.
  std::string loss_scale;
  double loss_scale_init = 65536, loss_scale_factor = 2, loss_scale_backoff = 0.5;
  int64_t loss_scale_growth_interval = 2000, loss_scale_overflows = 1;
  uint64_t seed = 0;
  std::string fuse = "lite", memory_budget, log_json, save, eval_data;
  std::vector<std::string> disable_pass;     // --disable-pass NAME[,NAME...]: optional passes left out
  bool verify_passes = false;                // --verify-passes
  std::string profile_trace;                 // --profile FILE: Chrome trace of one step
  std::string device = "cpu";                // --device auto|cpu|cuda[:N]
  bool tf32 = false, deterministic = false;  // --tf32, --deterministic (GPU)
  bool cuda_graph = true;  // --no-cuda-graph clears it: replay the steady-state step as a CUDA graph (GPU)
  int streams = 2;         // --streams N: CUDA streams a step's kernels are spread over (GPU; 1: one stream)
  std::string checkpoint, resume;
  bool reset_optimizer = false;   // --reset-optimizer: resume another optimizer's checkpoint, its state afresh
  bool allow_other_data = false;  // --allow-other-data: resume on a data set other than the checkpoint's
  int64_t checkpoint_every = 0;   // 0: only at the end (and on SIGINT)
};
// The Trainer's options from the command line's (total_steps: the run's optimizer steps, for the LR schedule).
ot::TrainerOptions MakeTrainerOptions(const TrainOptions& o, int64_t total_steps);
// `onnx-train train`: see README.
int Train(const TrainOptions& o);
}  // namespace ot::tools

namespace ot::tools {
// `onnx-train plan MODEL --batch N [train options] [--json]`: the training step's planned peak memory and its
// split (training/memory_report.h) for batch N; no step runs.
struct PlanOptions {
  TrainOptions train;
  bool json = false;  // one JSON object instead of the table
};
int PlanMemoryReport(const PlanOptions& o);
}  // namespace ot::tools
