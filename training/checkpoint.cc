// Trainer checkpoints: DIR/checkpoint.npz holds every state tensor of the step graph, the learning rate and a
// metadata array of KEY=VALUE lines (the caller's, the optimizer's name, the executor's run counter). Loading
// checks everything -- names, dtypes, shapes, finite values, the step counter, the optimizer -- before it changes
// anything.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include "graph/error.h"
#include "graph/graph.h"
#include "onnx_import/tensor_io.h"
#include "passes/master_weights.h"
#include "training/sharded_state.h"
#include "training/trainer.h"

namespace ot {

namespace {

constexpr const char* kMetaArray = "__trainer_meta__";
constexpr const char* kRunCounter = "executor.run_counter";
constexpr const char* kOptimizer = "optimizer";

void WriteFileSynced(const std::string& path, const std::function<void(const std::string&)>& write) {
  write(path);
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0 || ::fsync(fd) != 0) {
    if (fd >= 0) ::close(fd);
    throw Error(path + ": cannot sync to disk: " + std::strerror(errno));
  }
  ::close(fd);
}

// The index of the first NaN or infinity of a float tensor, -1 when there is none (or the dtype is not float).
int64_t FirstNonFinite(const Tensor& t) {
  if (!IsFloat(t.dtype())) return -1;
  if (t.dtype() == DataType::kFloat32) {
    const float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i)
      if (!std::isfinite(p[i])) return i;
    return -1;
  }
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(t.GetDouble(i))) return i;
  return -1;
}

// KEY=VALUE lines; anything else is an error naming the line.
std::map<std::string, std::string> ParseMeta(const std::string& path, const Tensor& t) {
  if (t.dtype() != DataType::kUint8 || t.rank() != 1)
    throw Error(path + ": its metadata array is " + DataTypeName(t.dtype()) + DimsToString(t.dims()) +
                ", not uint8 text");
  const std::string text(static_cast<const char*>(t.raw()), t.nbytes());
  std::map<std::string, std::string> meta;
  size_t pos = 0;
  for (int line_no = 1; pos < text.size(); ++line_no) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    const size_t eq = line.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error(path + ": metadata line " + std::to_string(line_no) + " is not KEY=VALUE");
    meta[line.substr(0, eq)] = line.substr(eq + 1);
    pos = end + 1;
  }
  return meta;
}

std::string Num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

const Node* OptimizerNode(const Graph& g) {
  for (const auto& n : g.nodes())
    if (n->op_type == "OptimizerUpdate" && n->domain == kInternalDomain) return n.get();
  return nullptr;
}

}  // namespace

std::string Trainer::optimizer_name() const {
  const Node* n = OptimizerNode(*graph_);
  return n ? n->attr_string("kind", "") : "";
}

void Trainer::set_lr(double lr) {
  if (!(lr >= 0) || !std::isfinite(lr)) throw Error("the learning rate must be a finite number >= 0");
  if (!info_.lr || !info_.lr->initializer) throw Error("this training step has no learning-rate state");
  exec_->SyncStateToHost();
  info_.lr->initializer->SetDouble(0, lr);
  opts_.optimizer.lr = lr;
  exec_->StateChangedOnHost();
}

void Trainer::SaveCheckpoint(const std::string& dir, const std::map<std::string, std::string>& meta) const {
  exec_->SyncStateToHost();
  // --shard-optimizer: every rank's shard gathered into per-parameter arrays (every rank takes part).
  const ShardedState sharded(*graph_);
  // Half copies are round(master) by construction (the update writes them so, skipped steps too): a checkpoint
  // leaves them out and LoadCheckpoint rounds them again (.npy has no bfloat16; the files are smaller).
  std::set<const Value*> halves;
  for (const auto& [master, half] : HalfCopies(*graph_)) halves.insert(half);
  std::vector<NamedTensor> arrays;
  for (const auto& [state, idx] : state_outs_) {
    if (halves.count(state)) continue;
    if (!sharded.Has(state)) {
      arrays.push_back({state->name, *state->initializer});
      continue;
    }
    for (auto& [name, t] : sharded.Gather(state)) arrays.push_back({name, std::move(t)});
  }
  if (dir.empty()) return;  // another rank's part of a sharded checkpoint
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(dir + ": cannot create the checkpoint directory: " + ec.message());
  if (info_.lr && info_.lr->initializer) arrays.push_back({info_.lr->name, *info_.lr->initializer});
  std::map<std::string, std::string> all = meta;
  all[kRunCounter] = std::to_string(exec_->run_counter());
  all[kOptimizer] = optimizer_name();
  std::string text;
  for (const auto& [k, v] : all) {
    if (k.empty() || k.find_first_of("=\n") != std::string::npos || v.find('\n') != std::string::npos)
      throw Error("checkpoint metadata: key '" + k + "' or its value holds '=' or a line break");
    text += k + "=" + v + "\n";
  }
  Tensor m(DataType::kUint8, {static_cast<int64_t>(text.size())});
  std::memcpy(m.raw(), text.data(), text.size());
  arrays.push_back({kMetaArray, m});
  const std::string final_path = dir + "/checkpoint.npz", tmp = final_path + ".tmp";
  WriteFileSynced(tmp, [&](const std::string& p) { WriteNpz(p, arrays, false); });
  if (std::rename(tmp.c_str(), final_path.c_str()) != 0)
    throw Error(final_path + ": cannot rename the new checkpoint into place: " + std::strerror(errno));
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

std::map<std::string, std::string> Trainer::LoadCheckpoint(const std::string& dir, bool reset_optimizer) {
  const std::string path = dir + "/checkpoint.npz";
  std::error_code ec;
  const bool exists = std::filesystem::exists(path, ec);
  if (ec) throw Error(dir + ": cannot read the checkpoint (" + ec.message() + ")");
  if (!exists) throw Error(dir + ": no checkpoint.npz (not a checkpoint directory)");
  std::map<std::string, Tensor> arrays;
  for (NamedTensor& nt : ReadNpz(path)) arrays[nt.name] = std::move(nt.tensor);

  auto meta_it = arrays.find(kMetaArray);
  if (meta_it == arrays.end()) throw Error(path + ": no training metadata (not a checkpoint written by onnx-train)");
  std::map<std::string, std::string> meta = ParseMeta(path, meta_it->second);
  arrays.erase(meta_it);
  const std::string have = optimizer_name();
  auto opt_it = meta.find(kOptimizer);
  if (opt_it == meta.end()) throw Error(path + ": its metadata names no optimizer");
  if (opt_it->second != have && !reset_optimizer)
    throw Error(path + ": the checkpoint holds " + opt_it->second + "'s state, this run trains with " + have +
                " (--reset-optimizer starts " + have + "'s state afresh from the checkpoint's weights)");
  meta.erase(opt_it);
  uint64_t run_counter = 0;
  if (auto rc = meta.find(kRunCounter); rc != meta.end()) {
    char* end = nullptr;
    errno = 0;
    run_counter = std::strtoull(rc->second.c_str(), &end, 10);
    if (rc->second.empty() || *end || errno == ERANGE || rc->second[0] == '-')
      throw Error(path + ": metadata " + kRunCounter + "='" + rc->second + "' is not a count");
    meta.erase(rc);
  }

  // The optimizer's own state: the update's inputs that are states but not parameters (moments, step, lr, sums).
  // The sharded master weights are the parameters, not optimizer state.
  const ShardedState sharded(*graph_);
  std::set<const Value*> optimizer_state;
  if (const Node* n = OptimizerNode(*graph_)) {
    const std::set<const Value*> params(info_.params.begin(), info_.params.end());
    for (const Value* in : n->inputs)
      if (in && in->initializer && !params.count(in) && in != sharded.master()) optimizer_state.insert(in);
  }
  std::vector<Value*> states;
  for (const auto& [state, idx] : state_outs_) states.push_back(state);
  if (info_.lr) states.push_back(info_.lr);
  // Across precisions: an fp32 checkpoint has no half copies (recomputed from their masters below) and no loss
  // scale (the run's initial scale is kept); an --amp checkpoint's half copies and scale are dropped by an fp32 run.
  std::map<const Value*, const Value*> half_of;  // half copy -> master
  for (const auto& [master, half] : HalfCopies(*graph_)) half_of[half] = master;
  std::set<const Value*> optional;
  for (const auto& [half, master] : half_of) optional.insert(half);
  for (const auto& b : graph_->update_bindings)
    if (b.state->name.rfind("loss_scale", 0) == 0 && info_.loss_scale) optional.insert(b.state);
  std::vector<const Value*> recompute;
  std::vector<Value*> load;
  std::set<std::string> used;
  std::map<Value*, Tensor> shards;  // --shard-optimizer: this rank's shard, cut from the per-parameter arrays
  // Check everything before changing anything.
  for (Value* s : states) {
    if (reset_optimizer && optimizer_state.count(s)) continue;  // keeps its fresh value
    if (sharded.Has(s)) {
      if (const std::string why = sharded.Scatter(s, arrays, &shards[s]); !why.empty())
        throw Error(path + ": " + why + " (a checkpoint of another model, optimizer or option set?)");
      for (const std::string& name : sharded.Names(s)) used.insert(name);
      continue;
    }
    auto it = arrays.find(s->name);
    if (it == arrays.end() && optional.count(s)) {
      if (half_of.count(s)) recompute.push_back(s);
      continue;
    }
    if (it == arrays.end())
      throw Error(path + ": no array '" + s->name + "' (a checkpoint of another model, optimizer or option set?)");
    used.insert(s->name);
    const Tensor& t = it->second;
    if (t.dtype() != s->initializer->dtype() || t.dims() != s->initializer->dims())
      throw Error(path + ": array '" + s->name + "' is " + DataTypeName(t.dtype()) + DimsToString(t.dims()) +
                  ", the training state is " + DataTypeName(s->initializer->dtype()) +
                  DimsToString(s->initializer->dims()));
    if (const int64_t bad = FirstNonFinite(t); bad >= 0)
      throw Error(path + ": array '" + s->name + "' holds " + Num(t.GetDouble(bad)) + " at element " +
                  std::to_string(bad) + " (a checkpoint of a run that diverged?)");
    if (s == info_.step && (t.numel() != 1 || t.GetDouble(0) < 0))
      throw Error(path + ": the optimizer step counter '" + s->name + "' is " + Num(t.GetDouble(0)) +
                  ", not a count >= 0");
    if (s == info_.lr && (t.numel() != 1 || !(t.GetDouble(0) >= 0)))
      throw Error(path + ": the learning rate '" + s->name + "' is " + Num(t.GetDouble(0)) + ", not a number >= 0");
    if (s == info_.loss_scale && (t.numel() != 1 || !(t.GetDouble(0) > 0)))
      throw Error(path + ": the loss scale '" + s->name + "' is " + Num(t.GetDouble(0)) + ", not a number > 0");
    load.push_back(s);
  }
  // An array this run has no state for is another optimizer's (or model's) unless it is a half copy or a loss scale
  // of an --amp run, which an fp32 run may drop.
  for (const auto& [name, t] : arrays) {
    if (used.count(name)) continue;
    const Value* v = graph_->FindValue(name);
    const bool amp_only = name.rfind("loss_scale", 0) == 0 || name.find(".half") != std::string::npos;
    if (reset_optimizer || amp_only || (v && optional.count(v)) || (v && optimizer_state.count(v))) continue;
    throw Error(path + ": array '" + name + "' is not part of this run's training state (a checkpoint of another " +
                "model or optimizer?)");
  }
  exec_->SyncStateToHost();
  for (Value* s : load) std::memcpy(s->initializer->raw(), arrays[s->name].raw(), s->initializer->nbytes());
  for (auto& [s, t] : shards) std::memcpy(s->initializer->raw(), t.raw(), s->initializer->nbytes());
  for (const Value* h : recompute) {
    const Value* m = half_of[h];  // a sharded master has no whole value here: the checkpoint's array has it
    const Tensor rounded = (m->initializer ? *m->initializer : arrays.at(m->name)).CastTo(h->initializer->dtype());
    std::memcpy(h->initializer->raw(), rounded.raw(), rounded.nbytes());
  }
  if (info_.lr && info_.lr->initializer) opts_.optimizer.lr = info_.lr->initializer->GetDouble(0);
  exec_->StateChangedOnHost();
  exec_->set_run_counter(run_counter);
  return meta;
}

}  // namespace ot
