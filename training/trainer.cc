#include "training/trainer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include "dist/comm.h"
#include "executor/batch_stager.h"
#include "executor/host_memory.h"
#include "executor/plan.h"
#include "graph/error.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "onnx_import/model_io.h"
#include "onnx_import/tensor_io.h"
#include "passes/master_weights.h"
#include "passes/training_mode.h"
#include "training/ctc_decode.h"
#include "training/fusion.h"
#include "training/sharded_state.h"
#include "training/state_memory.h"

namespace ot {

namespace {

int OutputIndex(Graph& g, Value* v) {
  auto it = std::find(g.outputs.begin(), g.outputs.end(), v);
  if (it != g.outputs.end()) return static_cast<int>(it - g.outputs.begin());
  g.outputs.push_back(v);
  return static_cast<int>(g.outputs.size()) - 1;
}

// Points every initializer of `dst` at the tensor of the same name in `src` (the step graph's state), so both
// graphs always see the current weights.
void ShareInitializers(Graph& dst, const Graph& src) {
  for (const auto& v : dst.values()) {
    if (!v->initializer) continue;
    const Value* s = src.FindValue(v->name);
    if (s && s->initializer && s->initializer->dtype() == v->initializer->dtype() &&
        s->initializer->dims() == v->initializer->dims())
      v->initializer = s->initializer;
  }
}

// Rows [b, e) of a tensor along axis 0.
Tensor Rows(const Tensor& t, int64_t b, int64_t e) {
  std::vector<int64_t> dims = t.dims();
  const int64_t n = dims[0];
  const size_t row = n ? t.nbytes() / static_cast<size_t>(n) : 0;
  dims[0] = e - b;
  Tensor r(t.dtype(), dims);
  if (row) std::memcpy(r.raw(), static_cast<const uint8_t*>(t.raw()) + row * b, row * (e - b));
  return r;
}

}  // namespace

Trainer::Trainer(std::unique_ptr<Graph> model, TrainerOptions opts) : opts_(std::move(opts)), graph_(std::move(model)) {
  RequireSupportedOps(*graph_, "the model");  // each unsupported node named before any pass can fail on it
  // The inference copies come from the model as given, before the step graph rewrites it.
  const std::string bytes = SerializeModel(*graph_);
  inference_ = ParseModel(bytes, "", "the model");
  TrainingModePass(false).Run(*inference_);
  eval_ = ParseModel(bytes, "", "the model");
  TrainingModePass(false).Run(*eval_);

  Graph& g = *graph_;
  opts_.channels_last = !opts_.device;  // a CPU step: CNN activations channels-last (passes/channels_last.h)
  info_ = BuildStepGraph(g, opts_);
  if (!opts_.device) PackStateMemory(g);
  MakeExecutor();

  LossPass(opts_.loss).Run(*eval_);
  ShareInitializers(*inference_, g);
  ShareInitializers(*eval_, g);
  DropShardOnlyParameters();
}

// Sharded master weights: the model's copies of those parameters are dropped until WithWholeParameters.
void Trainer::DropShardOnlyParameters() {
  for (const auto& [name, dims] : ShardedState(*graph_).ShardOnlyParams()) {
    shard_only_.push_back(name);
    for (Graph* m : {inference_.get(), eval_.get()})
      if (Value* v = m ? m->FindValue(name) : nullptr) v->initializer = nullptr;
  }
  whole_ = shard_only_.empty();
}

void Trainer::RequireWholeParameters(const char* what) const {
  if (!whole_)
    throw Error(std::string(what) + ": the master weights are sharded over the ranks; call it inside " +
                "WithWholeParameters (on every rank)");
}

void Trainer::WithWholeParameters(const std::function<void()>& f) {
  if (shard_only_.empty() || whole_) return f();
  exec_->SyncStateToHost();
  const ShardedState sharded(*graph_);
  for (auto& [name, t] : sharded.Gather(sharded.master())) {
    auto whole = std::make_shared<Tensor>(std::move(t));
    for (Graph* m : {inference_.get(), eval_.get()})
      if (Value* v = m ? m->FindValue(name) : nullptr) v->initializer = whole;
  }
  whole_ = true;
  struct Drop {
    Trainer* t;
    ~Drop() {
      for (const std::string& name : t->shard_only_)
        for (Graph* m : {t->inference_.get(), t->eval_.get()})
          if (Value* v = m ? m->FindValue(name) : nullptr) v->initializer = nullptr;
      t->whole_ = false;
    }
  } drop{this};
  f();
}

Trainer::Trainer(StoredStep stored, TrainerOptions opts)
    : opts_(std::move(opts)), graph_(std::move(stored.step)), inference_(std::move(stored.inference)) {
  Graph& g = *graph_;
  auto need = [&](const std::string& name, const char* what) -> Value* {
    Value* v = name.empty() ? nullptr : g.FindValue(name);
    if (!v)
      throw Error(std::string("the stored training step has no ") + what + (name.empty() ? "" : " '" + name + "'"));
    return v;
  };
  info_.loss = need(stored.loss, "loss output")->name;
  info_.grad_norm = need(stored.grad_norm, "grad_norm output");
  info_.skipped = need(stored.skipped, "skipped output");
  info_.step = need(stored.step_counter, "step-counter state");
  if (!info_.step->initializer) throw Error("the stored step counter '" + info_.step->name + "' is not an initializer");
  if (!stored.lr.empty()) info_.lr = need(stored.lr, "learning-rate state");
  for (const auto& n : g.nodes()) {
    if (n->op_type != "OptimizerUpdate" || n->domain != kInternalDomain) continue;
    const int64_t np = n->attr_int("num_params", 0);
    for (int64_t i = 0; i < np; ++i) info_.params.push_back(n->inputs.at(static_cast<size_t>(2 + i)));
    opts_.optimizer.accumulate = n->attr_int("accumulate", 1);
    opts_.optimizer.lr_schedule = static_cast<int>(n->attr_int("lr_schedule", 0));
    opts_.optimizer.warmup = n->attr_int("warmup", 0);
    opts_.optimizer.total_steps = n->attr_int("total_steps", 0);
  }
  if (info_.lr && info_.lr->initializer) opts_.optimizer.lr = info_.lr->initializer->GetDouble(0);
  if (!opts_.device) PackStateMemory(g);
  MakeExecutor();
  DropShardOnlyParameters();
}

// The step's loss, grad_norm, skipped and next-state values become outputs; the executor runs the step.
void Trainer::MakeExecutor() {
  Graph& g = *graph_;
  loss_out_ = OutputIndex(g, g.FindValue(info_.loss));
  grad_norm_out_ = OutputIndex(g, info_.grad_norm);
  skipped_out_ = OutputIndex(g, info_.skipped);
  if (info_.param_norm) param_norm_out_ = OutputIndex(g, info_.param_norm);
  if (info_.zero_grad_fraction) zero_frac_out_ = OutputIndex(g, info_.zero_grad_fraction);
  for (const auto& b : g.update_bindings) state_outs_.push_back({b.state, OutputIndex(g, b.next)});
  ExecutorOptions eo;
  eo.seed = opts_.seed;
  eo.check_numerics = opts_.check_numerics;
  eo.profile = opts_.profile;
  eo.trace = opts_.trace;
  // The next state straight into the state (no second copy of parameters and moments), except under
  // --check-numerics, whose failing step must leave the state as it was.
  eo.state_in_place = !opts_.check_numerics;
  eo.device = opts_.device;
  if (opts_.device) {
    stager_ = std::make_shared<BatchStager>(opts_.device);
    eo.stager = stager_;
  }
  // What Step reads: the loss, the update's scalars and the next state (returned sharing the state's storage).
  for (int i : {loss_out_, grad_norm_out_, skipped_out_, param_norm_out_, zero_frac_out_})
    if (i >= 0) eo.host_outputs.push_back(g.outputs[static_cast<size_t>(i)]->name);
  for (const auto& [state, idx] : state_outs_) eo.host_outputs.push_back(g.outputs[static_cast<size_t>(idx)]->name);
  exec_ = std::make_unique<Executor>(g, eo);
}

Trainer::~Trainer() = default;

void Trainer::set_total_steps(int64_t n) {
  if (fused_) throw Error("the schedule's length must be set before the first step");
  opts_.optimizer.total_steps = n;
  for (const auto& node : graph_->nodes())
    if (node->op_type == "OptimizerUpdate" && node->domain == kInternalDomain)
      node->attrs["total_steps"] = Attribute::Int(n);
}

void Trainer::Stage(const Arrays& batch) {
  if (stager_) stager_->Stage(batch);
}

void Trainer::set_trace(bool on) {
  opts_.trace = on;
  if (exec_) exec_->set_trace(on);
}

void Trainer::FuseFor(const Arrays& batch) {
  if (fused_) return;
  fused_ = true;
  if (opts_.fuse.mode == FuseMode::kOff) return;
  std::map<std::string, TensorDesc> descs;
  std::map<std::string, const Tensor*> known;
  std::set<const Value*> needed;
  for (const Value* v : ValuesNeededAtPlanTime(*graph_)) needed.insert(v);
  for (const Value* v : graph_->RealInputs()) {
    auto it = batch.find(v->name);
    if (it == batch.end()) continue;  // Executor::Run names the missing input
    descs[v->name] = TensorDesc{it->second.dtype(), it->second.dims(), true};
    if (needed.count(v)) known[v->name] = &it->second;
  }
  // The executor has compiled nothing yet (plans are made on the first run), so the fused graph is what it runs.
  // The epilogue and batch-norm folds make CPU kernels (MatMulEpilogue, ConvEpilogue, BatchNormRelu) that a device
  // has none of: there the GEMMs, convolutions and norms stay as they are (cuBLASLt's own epilogues come from
  // MatMulBias's activation).
  FuseOptions fo = opts_.fuse;
  if (opts_.device) {
    fo.epilogues = false;
    fo.kernel_folds = false;
  }
  fusion_ = FuseForShapes(*graph_, fo, descs, known, opts_.control);
  if (opts_.refuse_over_budget && fusion_.budget_unreachable)
    throw Error("--memory-budget " + FormatBytes(fo.memory_budget) + ": the step's planned peak is " +
                FormatBytes(fusion_.peak_after) + " even with fusion and recomputation (`onnx-train plan` shows " +
                "what it holds)");
}

std::vector<std::string> Trainer::input_names() const {
  std::vector<std::string> r;
  for (const Value* v : graph_->RealInputs()) r.push_back(v->name);
  return r;
}

int64_t Trainer::optimizer_steps() const { return static_cast<int64_t>(info_.step->initializer->GetDouble(0)); }

StepResult Trainer::Step(const std::vector<Arrays>& micro_batches) {
  const int64_t k = opts_.optimizer.accumulate;
  if (static_cast<int64_t>(micro_batches.size()) != k)
    throw Error("a step takes " + std::to_string(k) + " micro-batches (--grad-accum), got " +
                std::to_string(micro_batches.size()));
  const auto t0 = std::chrono::steady_clock::now();
  if (!micro_batches.empty()) FuseFor(micro_batches.front());
  StepResult r;
  r.lr = ScheduledLr(opts_.optimizer, optimizer_steps());
  if (info_.loss_scale) r.loss_scale = info_.loss_scale->initializer->GetDouble(0);
  for (const Arrays& batch : micro_batches) {
    std::vector<Tensor> out = exec_->Run(batch);
    if (opts_.check_numerics)
      if (const Node* bad = exec_->first_nonfinite())
        throw Error("--check-numerics: " + bad->Describe() + " produced a NaN or infinity in step " +
                    std::to_string(optimizer_steps() + 1) +
                    " (no state was updated): " + exec_->first_nonfinite_detail());
    // The update kernel already left everything unchanged on a skipped step; write the next state in place. An
    // output the plan wrote into the state's own storage (Plan::Compile's state_in_place) shares its buffer:
    // nothing to copy.
    for (const auto& [state, idx] : state_outs_) {
      Tensor& s = *state->initializer;
      if (out[idx].nbytes() != s.nbytes()) throw Error("state '" + state->name + "' changed size");
      if (out[idx].raw() != s.raw()) std::memcpy(s.raw(), out[idx].raw(), s.nbytes());
    }
    r.loss += out[loss_out_].GetDouble(0) / static_cast<double>(k);
    r.grad_norm = out[grad_norm_out_].GetDouble(0);
    r.skipped = out[skipped_out_].GetDouble(0) != 0;
    if (param_norm_out_ >= 0) r.param_norm = out[param_norm_out_].GetDouble(0);
    if (zero_frac_out_ >= 0) r.zero_grad_fraction = out[zero_frac_out_].GetDouble(0);
  }
  // Data-parallel: the logged loss is the mean over the ranks (the update already read the ranks' mean gradient,
  // so grad_norm, skipped and the parameters are the same on every rank).
  if (opts_.data_parallel.world > 1) {
    dist::Comm& c = dist::World();
    double loss = r.loss;
    c.AllReduceSum(&loss, 1);
    r.loss = loss / c.size();
  }
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

EvalResult Trainer::Evaluate(const Arrays& data, int64_t batch) const {
  if (!eval_) throw Error("evaluation is not available for a stored training step (train the original model)");
  RequireWholeParameters("Evaluate");
  if (batch < 1) throw Error("evaluation batch must be >= 1");
  std::vector<std::string> names;
  for (const Value* v : eval_->RealInputs()) names.push_back(v->name);
  int64_t n = -1;
  for (const std::string& name : names) {
    auto it = data.find(name);
    if (it == data.end()) throw Error("evaluation data: no array named '" + name + "'");
    if (it->second.dims().empty()) throw Error("evaluation data: array '" + name + "' has no sample axis");
    const int64_t m = it->second.dims()[0];
    if (n >= 0 && m != n)
      throw Error("evaluation data: array '" + name + "' has " + std::to_string(m) + " samples, another has " +
                  std::to_string(n));
    n = m;
  }
  EvalResult res;
  if (n <= 0) return res;
  // A new executor each time: the weights changed since the last evaluation and a plan folds constants.
  Graph& g = *eval_;
  const int loss_out = OutputIndex(g, g.FindValue(info_.loss));
  int logits_out = -1;
  const Value* labels = nullptr;
  const bool ctc = opts_.loss.kind == "ctc";
  if (opts_.loss.kind == "cross_entropy" || ctc) {
    logits_out = OutputIndex(g, g.FindValue(opts_.loss.logits));
    labels = g.FindValue(opts_.loss.labels);
  }
  CtcErrorCounts ctc_errors;
  exec_->SyncStateToHost();
  ExecutorOptions eo;
  eo.device = opts_.device;
  Executor ex(g, eo);
  double loss_sum = 0;
  int64_t correct = 0, counted = 0;
  for (int64_t b = 0; b < n; b += batch) {
    const int64_t e = std::min(n, b + batch);
    Arrays feeds;
    for (const std::string& name : names) feeds[name] = Rows(data.at(name), b, e);
    std::vector<Tensor> out = ex.Run(feeds);
    loss_sum += out[loss_out].GetDouble(0) * static_cast<double>(e - b);
    if (ctc && logits_out >= 0 && labels) {
      ctc_errors.Add(out[logits_out], opts_.loss.logits_layout == "btc", opts_.loss.blank, feeds.at(labels->name),
                     feeds.at(opts_.loss.logit_lengths), feeds.at(opts_.loss.label_lengths), opts_.ctc_vocab);
    } else if (logits_out >= 0 && labels) {
      // Arg-max over the class axis (1) of logits [N, C, d...] against labels [N, d...].
      const Tensor& lg = out[logits_out];
      const Tensor& lb = feeds.at(labels->name);
      const auto& d = lg.dims();
      if (d.size() < 2) continue;
      const int64_t nn = d[0], c = d[1], inner = lg.numel() / std::max<int64_t>(1, nn * c);
      for (int64_t i = 0; i < nn; ++i)
        for (int64_t j = 0; j < inner; ++j) {
          int64_t best = 0;
          double bv = lg.GetDouble((i * c) * inner + j);
          for (int64_t q = 1; q < c; ++q) {
            const double v = lg.GetDouble((i * c + q) * inner + j);
            if (v > bv) bv = v, best = q;
          }
          correct += static_cast<int64_t>(lb.GetDouble(i * inner + j)) == best;
          ++counted;
        }
    }
  }
  res.samples = n;
  res.loss = loss_sum / static_cast<double>(n);
  if (counted) res.accuracy = static_cast<double>(correct) / static_cast<double>(counted);
  res.token_error_rate = ctc_errors.token_error_rate();
  res.word_error_rate = ctc_errors.word_error_rate();
  return res;
}

void Trainer::Save(const std::string& path) const {
  RequireWholeParameters("Save");
  exec_->SyncStateToHost();
  SaveModel(*inference_, path);
}

std::string Trainer::FirstNonFiniteNode(const Arrays& micro_batch) {
  if (!check_exec_) {
    ExecutorOptions eo;
    eo.seed = opts_.seed;
    eo.check_numerics = true;
    eo.device = opts_.device;
    check_exec_ = std::make_unique<Executor>(*graph_, eo);
  }
  exec_->SyncStateToHost();
  check_exec_->set_run_counter(exec_->run_counter() ? exec_->run_counter() - 1 : 0);
  check_exec_->Run(micro_batch);  // its outputs are dropped: no state changes
  const Node* n = check_exec_->first_nonfinite();
  return n ? n->Describe() + " (" + check_exec_->first_nonfinite_detail() + ")" : "";
}

std::map<std::string, Tensor> Trainer::Parameters() const {
  exec_->SyncStateToHost();
  std::map<std::string, Tensor> r;
  for (const Value* p : info_.params)
    if (p && p->initializer) r[p->name] = p->initializer->Clone();
  if (!shard_only_.empty()) {
    const ShardedState sharded(*graph_);
    for (auto& [name, t] : sharded.Gather(sharded.master())) r[name] = std::move(t);
  }
  return r;
}

}  // namespace ot
