// The Trainer: turns a model into a step graph (passes/step_graph: training mode -> loss -> autodiff ->
// optimizer) and runs steps on batches, writing each step's new state (parameters, optimizer moments, step
// counter, BatchNorm running statistics, gradient sums) back in place. It also keeps the model in inference mode
// (BatchNormalization with its running statistics, Dropout off) sharing the same weight tensors, for
// evaluation and for the saved model, and writes/reads checkpoints of the whole training state.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "executor/executor.h"
#include "graph/graph.h"
#include "passes/cluster_fusion.h"
#include "passes/step_graph.h"

namespace ot {

// The step pipeline's options (StepOptions: loss, freeze, optimizer -- .accumulate: micro-batches per Step --, amp,
// fp16_range, loss_scale, and `control`: --disable-pass and --verify-passes for both stages) and the session's.
struct TrainerOptions : StepOptions {
  uint64_t seed = 0;
  // --check-numerics: every kernel's float outputs are scanned; the first NaN or infinity stops the step (nothing
  // is updated) with an error naming the node that produced it.
  bool check_numerics = false;
  bool profile = false;  // time every kernel (executor().kernel_profile())
  bool trace = false;    // record each step's kernel timeline (executor().last_trace(); --profile FILE)
  // --device: where the steps (and evaluation) run; null = the CPU. The training state then lives on the device
  // between steps and is copied back before it is saved, checkpointed, evaluated or handed out.
  std::shared_ptr<DeviceBackend> device;
  // --fuse / --memory-budget: cluster fusion of the step, sized for the shapes of the first step's batch
  // (training/fusion.h); mode "off" leaves the step as built.
  FuseOptions fuse = [] {
    FuseOptions f;
    f.mode = FuseMode::kOff;
    return f;
  }();
  // --memory-budget given: a step whose planned peak stays above fuse.memory_budget after fusion and recomputation
  // is refused at the first step, before anything is allocated (otherwise the budget only steers fusion).
  bool refuse_over_budget = false;
  // --ctc-vocab: the symbol of each class id (line i of the file for id i), for the word error rate that Evaluate
  // reports with --loss ctc; empty: token error rate only.
  std::vector<std::string> ctc_vocab;
};

using Arrays = std::map<std::string, Tensor>;

struct StepResult {
  double loss = 0;                // mean of the micro-batches' losses
  double grad_norm = 0;           // global gradient norm before clipping (of the mean gradient with accumulation)
  bool skipped = false;           // the gradients were not all finite: nothing changed
  double lr = 0;                  // the learning rate this step used (after the schedule)
  double loss_scale = 0;          // the loss scale S this step used (0 without loss scaling)
  double param_norm = 0;          // L2 norm of the parameters after the step
  double zero_grad_fraction = 0;  // share of the last micro-step's gradient elements that were exactly zero
  double ms = 0;
};

struct EvalResult {
  double loss = 0;
  double accuracy = -1;  // fraction of samples whose arg-max logit is the label; < 0 when not applicable
  // --loss ctc: greedy-decoded token (and, with TrainerOptions::ctc_vocab, word) error rates; < 0 otherwise.
  double token_error_rate = -1, word_error_rate = -1;
  int64_t samples = 0;
};

// A training step stored in an ONNX training model (onnx_import/training_info.h CombinedStepGraph): `step` is its
// main graph and TrainingInfoProto algorithm concatenated, with the update bindings; `inference` is the model itself
// (main graph in inference mode, sharing its state tensors with `step`); the names of the step's loss, grad_norm
// and skipped outputs and of its learning-rate and step-counter states.
struct StoredStep {
  std::unique_ptr<Graph> inference, step;
  std::string loss, grad_norm, skipped, lr, step_counter;
};

class Trainer {
 public:
  // Trains a stored step as it is (no pass runs on it). opts.loss/freeze/optimizer are not used to build
  // anything: the optimizer's accumulate and LR schedule are read back from the step's OptimizerUpdate node and
  // its lr from the learning-rate state. Evaluate is not available (there is no separate evaluation graph).
  Trainer(StoredStep stored, TrainerOptions opts);
  // Takes the model; builds the step graph. Errors name the loss, op or node that stops training.
  Trainer(std::unique_ptr<Graph> model, TrainerOptions opts);
  ~Trainer();

  // One optimizer step on optimizer().accumulate micro-batches (arrays named after input_names()).
  StepResult Step(const std::vector<Arrays>& micro_batches);
  StepResult Step(const Arrays& batch) { return Step(std::vector<Arrays>{batch}); }
  // On a device: uploads a batch that a later Step will be given (the same tensors, not written in between) on the
  // device's copy stream from pinned memory, so the upload overlaps the step running now (executor/batch_stager.h).
  // Thread-safe against Step: the data loader calls it on its prefetch task (DataLoader::set_on_ready). Nothing on
  // the CPU; a batch Step gets without staging is uploaded by the step itself.
  void Stage(const Arrays& batch);

  // Loss (and accuracy, when the loss is cross_entropy on --logits/--labels; the token and word error rates of
  // greedy decoding for ctc: training/ctc_decode.h) of the model in inference mode
  // over all samples of `data` (axis 0), in batches of `batch` (the last one may be smaller).
  EvalResult Evaluate(const Arrays& data, int64_t batch) const;
  // The inputs a training batch must provide (model inputs and labels); the same names serve Evaluate.
  std::vector<std::string> input_names() const;
  // Writes the model in inference mode with the current weights and running statistics (an ordinary ONNX model).
  void Save(const std::string& path) const;

  // Checkpoints (training/checkpoint.cc): every state tensor of the step graph (parameters, optimizer moments and
  // step, learning rate, BatchNorm statistics, gradient sums; not --amp's half copies, which loading rounds again
  // from their masters), the executor's run counter (random draws), the
  // optimizer's name and `meta` (the caller's KEY=VALUE pairs: position, seed...) in DIR/checkpoint.npz, written
  // to a temporary file, fsynced and renamed over the previous one. LoadCheckpoint checks everything before it
  // changes anything -- every state there with its dtype and shape, no array of another model or optimizer, every
  // value finite, the step counter >= 0, the learning rate >= 0, the loss scale > 0, the same optimizer -- and
  // returns `meta`. reset_optimizer: a checkpoint of another optimizer is accepted, and only the model's state
  // (weights, running statistics, loss scale) is loaded; the optimizer starts afresh.
  void SaveCheckpoint(const std::string& dir, const std::map<std::string, std::string>& meta) const;
  std::map<std::string, std::string> LoadCheckpoint(const std::string& dir, bool reset_optimizer = false);
  // The optimizer of the step (sgd, momentum, nesterov, adam, adamw, lamb).
  std::string optimizer_name() const;
  // Sets the base learning rate (the state the schedule scales), e.g. an --lr given when resuming.
  void set_lr(double lr);

  // Runs the step on `micro_batch` again with every kernel's output checked, without changing any state, and
  // returns the first node that produced a NaN or infinity ("" when none did).
  std::string FirstNonFiniteNode(const Arrays& micro_batch);

  const Graph& step_graph() const { return *graph_; }
  // The LR schedule's length in optimizer steps (the run's, known once the data is read), before the first Step.
  void set_total_steps(int64_t n);
  const TrainerOptions& options() const { return opts_; }
  const Executor& executor() const { return *exec_; }
  void ResetProfile() { exec_->ResetProfile(); }
  // Turns the kernel timeline of the following steps on or off (TrainerOptions::trace).
  void set_trace(bool on);
  // Current values of the trained parameters, by name. With sharded master weights (--shard-optimizer under
  // mixed precision, passes/shard_masters.h) a collective: every rank calls it.
  std::map<std::string, Tensor> Parameters() const;
  // Runs f with the whole float32 parameters in the model Evaluate and Save read. With sharded master weights a
  // parameter's value exists only in pieces, one per rank: every rank calls this (a collective), the parameters
  // are gathered for f's duration (rank 0 evaluates or saves inside f) and dropped after. Otherwise just f().
  void WithWholeParameters(const std::function<void()>& f);
  const std::string& loss_name() const { return info_.loss; }
  // What the step-graph pipeline made (the amp report, fp16-range changes, parameters...).
  const StepGraphInfo& step_info() const { return info_; }
  // The clusters made before the first step (empty report until then, and with --fuse=off).
  const FusionReport& fusion_report() const { return fusion_; }
  int64_t optimizer_steps() const;

 private:
  void MakeExecutor();
  // Fuses the step for the shapes of `batch` (once, before the first run; see TrainerOptions::fuse).
  void FuseFor(const Arrays& batch);
  TrainerOptions opts_;
  bool fused_ = false;
  FusionReport fusion_;
  std::unique_ptr<Graph> graph_;      // the step graph
  std::unique_ptr<Graph> inference_;  // the model in inference mode, sharing the state tensors
  std::unique_ptr<Graph> eval_;       // inference_ plus the loss
  std::unique_ptr<Executor> exec_;
  std::unique_ptr<Executor> check_exec_;  // check_numerics, built on first use
  std::shared_ptr<BatchStager> stager_;   // on a device (Stage)
  StepGraphInfo info_;
  int loss_out_ = -1, grad_norm_out_ = -1, skipped_out_ = -1, param_norm_out_ = -1, zero_frac_out_ = -1;
  std::vector<std::pair<Value*, int>> state_outs_;  // state value, index of its next value among the outputs
  // Sharded master weights: the parameters with no whole value between WithWholeParameters calls.
  std::vector<std::string> shard_only_;
  bool whole_ = true;
  void RequireWholeParameters(const char* what) const;
  void DropShardOnlyParameters();
};

}  // namespace ot
