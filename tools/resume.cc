#include "tools/resume.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "dist/comm.h"
#include "graph/error.h"
#include "training/sharded_state.h"

namespace ot::tools {

namespace {
struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void Add(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  }
  void Add(const std::string& s) { Add(s.data(), s.size() + 1); }
};
}  // namespace

std::string StepGraphFingerprint(const Graph& g) {
  Fnv f;
  for (const auto& n : g.nodes()) {
    f.Add(n->domain + "." + n->op_type + " " + n->name);
    for (const Value* v : n->inputs) f.Add(v ? v->name : "");
    for (const Value* v : n->outputs) f.Add(v ? v->name : "");
    for (const auto& [name, a] : n->attrs) f.Add(name);
  }
  size_t values = 0;
  const Value* per_rank = ShardedState(g).master();  // each rank's own blocks of the master weights
  for (const auto& v : g.values())
    if (v->initializer) {
      const Tensor& t = *v->initializer;
      f.Add(v->name + ":" + DataTypeName(t.dtype()) + DimsToString(t.dims()));
      if (v.get() != per_rank) f.Add(t.raw(), t.nbytes());
      ++values;
    }
  char hex[64];
  std::snprintf(hex, sizeof hex, "%zu nodes, %zu initializers #%016" PRIx64, g.nodes().size(), values, f.h);
  return hex;
}

std::string DataFingerprint(const Arrays& arrays) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a, 8 bytes at a time (then the tail byte by byte)
  std::string desc;
  for (const auto& [name, t] : arrays) {
    desc += (desc.empty() ? "" : ",") + name + ":" + DataTypeName(t.dtype()) + DimsToString(t.dims());
    const auto* p = static_cast<const uint8_t*>(t.raw());
    const size_t n = t.nbytes(), words = n / 8;
    for (size_t i = 0; i < words; ++i) {
      uint64_t w;
      std::memcpy(&w, p + 8 * i, 8);
      h = (h ^ w) * 1099511628211ull;
    }
    for (size_t i = 8 * words; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  }
  char hex[24];
  std::snprintf(hex, sizeof hex, "#%016" PRIx64, h);
  return desc + hex;
}

std::map<std::string, std::string> CheckpointMeta(const TrainOptions& o, int64_t steps_done, int64_t accum,
                                                  const std::string& data_fingerprint) {
  return {{"step", std::to_string(steps_done)},           {"batch", std::to_string(o.batch)},
          {"grad_accum", std::to_string(accum)},          {"seed", std::to_string(o.seed)},
          {"shuffle", o.no_shuffle ? "0" : "1"},          {"data", data_fingerprint},
          {"ranks", std::to_string(dist::World().size())}};
}

int64_t Resume(Trainer& trainer, const TrainOptions& o, int64_t accum, const std::string& data_fingerprint) {
  // LoadCheckpoint checks the Trainer's own part before it copies a byte; a refusal below stops the run before its
  // first step, and nothing is written back anywhere.
  std::map<std::string, std::string> meta = trainer.LoadCheckpoint(o.resume, o.reset_optimizer);
  const std::string where = o.resume + "/checkpoint.npz";
  auto value = [&](const std::string& key) -> const std::string& {
    auto it = meta.find(key);
    if (it == meta.end()) throw Error(where + ": its metadata has no '" + key + "' (not written by onnx-train train?)");
    return it->second;
  };
  auto expect = [&](const std::string& key, const std::string& want, const char* why) {
    const std::string& have = value(key);
    if (have != want)
      throw Error(o.resume + ": the checkpoint was made with " + key + " " + have + ", this run has " + want + " (" +
                  why + ")");
  };
  expect("batch", std::to_string(o.batch), "the batches would differ");
  expect("grad_accum", std::to_string(accum), "the batches would differ");
  expect("seed", std::to_string(o.seed), "the batches would differ");
  expect("shuffle", o.no_shuffle ? "0" : "1", "the batches would differ");
  const std::string& data = value("data");
  if (data != data_fingerprint && !o.allow_other_data) {
    const bool same_shape = data.substr(0, data.find('#')) == data_fingerprint.substr(0, data_fingerprint.find('#'));
    throw Error(o.resume + ": the checkpoint was made on other data (" +
                (same_shape ? "the same arrays and shapes, other values" : data.substr(0, data.find('#'))) +
                "); --allow-other-data resumes on " + o.data);
  }
  const std::string& step = value("step");
  errno = 0;
  char* end = nullptr;
  const long long start = std::strtoll(step.c_str(), &end, 10);
  if (step.empty() || *end || errno == ERANGE || start < 0)
    throw Error(where + ": its metadata step='" + step + "' is not a step count");
  std::string note;
  // Another number of ranks (the optimizer state is whole on every rank, so any number can take it over): the
  // position in the data is kept, counted in samples, and must be a whole number of this run's global batches.
  const std::string ranks_s = meta.count("ranks") ? meta["ranks"] : "1";  // one process, before data-parallel
  const long long ranks = std::strtoll(ranks_s.c_str(), nullptr, 10), now = dist::World().size();
  if (ranks < 1) throw Error(where + ": its metadata ranks='" + ranks_s + "' is not a rank count");
  long long steps = start;
  if (ranks != now) {
    const long long samples = start * accum * o.batch * ranks, global = accum * o.batch * now;
    if (samples % global != 0)
      throw Error(o.resume + ": the checkpoint's position, " + std::to_string(samples) + " samples (" +
                  std::to_string(start) + " steps of " + std::to_string(ranks) + " ranks x " + std::to_string(accum) +
                  " x " + std::to_string(o.batch) + "), is not a whole number of steps of " + std::to_string(now) +
                  " ranks x " + std::to_string(accum) + " x " + std::to_string(o.batch));
    steps = samples / global;
    note += "; " + std::to_string(ranks) + " ranks then, " + std::to_string(now) + " now: the position, " +
            std::to_string(samples) + " samples, is step " + std::to_string(steps);
  }
  if (o.lr > 0 && o.lr != trainer.options().optimizer.lr) {
    char b[96];
    std::snprintf(b, sizeof b, "; --lr %g replaces the checkpoint's %g", o.lr, trainer.options().optimizer.lr);
    note = b;
    trainer.set_lr(o.lr);
  }
  if (o.reset_optimizer) note += "; --reset-optimizer: " + trainer.optimizer_name() + "'s state starts afresh";
  if (o.allow_other_data && data != data_fingerprint) note += "; --allow-other-data: on " + o.data;
  if (!o.quiet) std::printf("resumed from %s at step %lld%s\n", o.resume.c_str(), steps, note.c_str());
  return steps;
}

}  // namespace ot::tools
