// `onnx-train train MODEL --data TRAIN.npz [options]`: trains on the CPU. On a terminal a progress bar (epoch,
// step, loss, samples/s, ETA); otherwise plain lines; --log-json writes one JSON object per step and per
// evaluation. Checkpoints: --checkpoint DIR every --checkpoint-every N steps, at the end and on SIGINT/SIGTERM;
// --resume DIR continues where the checkpoint left off, drawing the same batches and random numbers.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>

#include "dist/comm.h"
#include "executor/cpu_features.h"
#include "graph/error.h"
#include "onnx_import/model_io.h"
#include "onnx_import/tensor_io.h"
#include "tools/cli_checks.h"
#include "tools/commands.h"
#include "tools/data_checks.h"
#include "tools/passes.h"
#include "tools/resume.h"
#include "training/data_loader.h"
#include "training/fusion.h"
#include "training/sharded_state.h"
#include "training/trainer.h"

namespace ot::tools {

namespace {
std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  char b[32];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}
}  // namespace

namespace {

std::atomic<int> g_interrupted{0};  // the signal that asked the run to stop (SIGINT, SIGTERM), 0 while none did
extern "C" void OnSigint(int sig) { g_interrupted = sig; }

// The arrays of an .npz that `names` asks for; a missing one is an error naming the file and the array. The others
// are said once, on stderr (a misspelt name shows up there).
Arrays ReadArrays(const std::string& path, const std::vector<std::string>& names) {
  Arrays arrays;
  std::string unused;
  for (NamedTensor& nt : ReadNpz(path)) {
    if (std::find(names.begin(), names.end(), nt.name) == names.end()) {
      unused += (unused.empty() ? "" : ", ") + nt.name;
      continue;
    }
    arrays[nt.name] = std::move(nt.tensor);
  }
  if (!unused.empty())
    std::fprintf(stderr, "note: %s: arrays the step does not read: %s\n", path.c_str(), unused.c_str());
  for (const std::string& in : names)
    if (!arrays.count(in))
      throw Error(path + ": no array named '" + in + "' (the step needs it as an input)" +
                  (unused.empty() ? std::string() : "; arrays not read: " + unused));
  return arrays;
}

std::string Clock(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  char b[32];
  if (s >= 3600)
    std::snprintf(b, sizeof b, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(b, sizeof b, "%ld:%02ld", s / 60, s % 60);
  return b;
}

// The --loss ctc options (refused without it) and the --ctc-vocab file.
void SetCtcOptions(const TrainOptions& o, TrainerOptions& to) {
  const bool ctc = o.loss == "ctc";
  const std::pair<const char*, bool> given[] = {{"--logit-lengths", !o.logit_lengths.empty()},
                                                {"--label-lengths", !o.label_lengths.empty()},
                                                {"--blank", o.blank != 0},
                                                {"--ctc-reduction", o.ctc_reduction != "mean"},
                                                {"--ctc-zero-infinity", o.ctc_zero_infinity},
                                                {"--logits-layout", o.logits_layout != "tbc"},
                                                {"--ctc-vocab", !o.ctc_vocab.empty()}};
  for (const auto& [flag, set] : given)
    if (set && !ctc) throw Error(std::string(flag) + " needs --loss ctc");
  if (!ctc) return;
  if (o.logit_lengths.empty() || o.label_lengths.empty())
    throw Error("--loss ctc needs --logit-lengths NAME and --label-lengths NAME (the arrays of each sample's lengths)");
  to.loss.logit_lengths = o.logit_lengths;
  to.loss.label_lengths = o.label_lengths;
  to.loss.blank = o.blank;
  to.loss.ctc_reduction = o.ctc_reduction;
  to.loss.zero_infinity = o.ctc_zero_infinity;
  to.loss.logits_layout = o.logits_layout;
  if (o.ctc_vocab.empty()) return;
  std::ifstream f(o.ctc_vocab);
  if (!f) throw Error(o.ctc_vocab + ": cannot open the vocabulary (--ctc-vocab)");
  for (std::string line; std::getline(f, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    to.ctc_vocab.push_back(line);
  }
  if (to.ctc_vocab.empty())
    throw Error(o.ctc_vocab + ": the vocabulary is empty (one symbol per line, line i for id i)");
}

}  // namespace

TrainerOptions MakeTrainerOptions(const TrainOptions& o, int64_t total_steps) {
  TrainerOptions to;
  to.loss = {o.loss_output, o.loss, o.logits, o.labels};
  SetCtcOptions(o, to);
  to.freeze = o.freeze;
  to.optimizer.kind = ParseOptimizerKind(o.optimizer);
  if (o.lr > 0) to.optimizer.lr = o.lr;
  if (o.weight_decay >= 0) to.optimizer.weight_decay = o.weight_decay;
  to.optimizer.clip_grad_norm = o.clip_grad_norm;
  to.optimizer.accumulate = o.grad_accum;
  to.data_parallel.world = o.world_size > 0 ? o.world_size : dist::World().size();
  to.data_parallel.rank = o.world_size > 0 ? 0 : dist::World().rank();  // plan --world-size: rank 0's view
  to.data_parallel.bucket_bytes = static_cast<int64_t>(o.bucket_mb * (1 << 20));
  to.data_parallel.sync_batchnorm = o.sync_batchnorm;
  to.data_parallel.shard_optimizer = o.shard_optimizer;
  to.optimizer.lr_schedule = ParseLrSchedule(o.lr_schedule);
  to.optimizer.warmup = o.warmup;
  to.optimizer.total_steps = total_steps;
  to.device = OpenDevice(o.device, DeviceOptions{o.tf32, o.deterministic, o.cuda_graph, o.streams});
  // Bare --amp: fp16 (with loss scaling) on a GPU, whose tensor cores run it at full rate; bf16 on the CPU.
  if (!o.amp.empty())
    to.amp.half = o.amp == "auto" ? (to.device ? DataType::kFloat16 : DataType::kBFloat16) : ParseAmpDtype(o.amp);
  if (to.amp.half == DataType::kUndefined && (!o.keep_fp32.empty() || !o.keep_fp32_node.empty()))
    throw Error("--keep-fp32 and --keep-fp32-node need --amp");
  to.amp.keep_fp32_ops = o.keep_fp32;
  to.amp.keep_fp32_nodes = o.keep_fp32_node;
  LossScaleOptions& ls = to.loss_scale;
  if (o.loss_scale.empty() || o.loss_scale == "auto") {
    ls.mode = LossScaleMode::kAuto;
  } else if (o.loss_scale == "dynamic" || o.loss_scale == "none") {
    ls.mode = o.loss_scale == "dynamic" ? LossScaleMode::kDynamic : LossScaleMode::kNone;
  } else {
    char* end = nullptr;
    const double v = std::strtod(o.loss_scale.c_str(), &end);
    if (end == o.loss_scale.c_str() || *end || !(v > 0) || !std::isfinite(v))
      throw Error("--loss-scale: '" + o.loss_scale + "' is not dynamic, none or a positive number");
    ls.mode = LossScaleMode::kStatic;
    ls.init = v;
  }
  if (ls.mode != LossScaleMode::kStatic) ls.init = o.loss_scale_init;
  if (!(o.loss_scale_init > 0) || !(o.loss_scale_factor >= 1) ||
      !(o.loss_scale_backoff > 0 && o.loss_scale_backoff < 1))
    throw Error("--loss-scale-init must be > 0, --loss-scale-factor >= 1 and --loss-scale-backoff in (0, 1)");
  ls.factor = o.loss_scale_factor;
  ls.backoff = o.loss_scale_backoff;
  ls.growth_interval = o.loss_scale_growth_interval;
  ls.overflows = o.loss_scale_overflows;
  to.fp16_range.infinity = o.fp16_infinity;
  to.fp16_range.epsilon = o.fp16_epsilon;
  to.seed = o.seed;
  to.check_numerics = o.check_numerics;
  to.profile = o.profile;
  to.trace = !o.profile_trace.empty();
  to.fuse.mode = ParseFuseMode(o.fuse);
  to.control.disabled = o.disable_pass;  // checked where the step is built (BuildStepGraph)
  to.control.verify = o.verify_passes;
  if (std::find(o.disable_pass.begin(), o.disable_pass.end(), "fusion") != o.disable_pass.end())
    to.fuse.mode = FuseMode::kOff;
  to.fuse.memory_budget = o.memory_budget.empty() ? DefaultMemoryBudget() : ParseByteSize(o.memory_budget);
  to.refuse_over_budget = !o.memory_budget.empty();
  return to;
}

namespace {

// --log-json FILE opened for this run. Resuming after `start` steps keeps the lines up to the checkpoint (a run
// killed after it logged more steps would otherwise list them twice); a new run keeps the previous run's log
// beside its own (FILE.prev), so a run that then fails loses nothing.
std::ofstream OpenLog(const std::string& path, int64_t start) {
  if (start > 0) {
    std::ifstream in(path);
    std::string line, kept;
    while (std::getline(in, line)) {
      const size_t at = line.find("\"step\": ");
      if (at != std::string::npos && std::atoll(line.c_str() + at + 8) > start) continue;
      kept += line + "\n";
    }
    in.close();
    std::ofstream(path, std::ios::trunc) << kept;
  }
  std::error_code ec;
  if (start == 0 && std::filesystem::file_size(path, ec) > 0 && !ec) std::filesystem::rename(path, path + ".prev", ec);
  std::ofstream log(path, start > 0 ? std::ios::app : std::ios::trunc);
  if (!log) throw Error(path + ": cannot write");
  return log;
}

// One --log-json line per optimizer step. JSON has no NaN or Infinity: a non-finite loss or norm (a skipped
// step's) is null.
void LogStep(std::ofstream& log, int64_t step, int64_t epoch, const StepResult& r, bool scaling) {
  char line[384];
  char scale[48] = "";
  if (scaling) std::snprintf(scale, sizeof scale, "\"loss_scale\": %s, ", JsonNumber(r.loss_scale).c_str());
  std::snprintf(line, sizeof line,
                "{\"step\": %lld, \"epoch\": %lld, \"loss\": %s, \"lr\": %.9g, \"grad_norm\": %s, "
                "\"param_norm\": %s, \"zero_grad_fraction\": %.6g, %s\"skipped\": %s, \"step_ms\": %.3f}\n",
                static_cast<long long>(step), static_cast<long long>(epoch), JsonNumber(r.loss).c_str(), r.lr,
                JsonNumber(r.grad_norm).c_str(), JsonNumber(r.param_norm).c_str(), r.zero_grad_fraction, scale,
                r.skipped ? "true" : "false", r.ms);
  log << line;
  log.flush();
}

// One --log-json line per evaluation.
void LogEval(std::ofstream& log, int64_t epoch, int64_t step, const EvalResult& e) {
  char line[256];
  std::snprintf(line, sizeof line, "{\"eval\": true, \"epoch\": %lld, \"step\": %lld, \"loss\": %.9g",
                static_cast<long long>(epoch), static_cast<long long>(step), e.loss);
  log << line;
  if (e.accuracy >= 0) log << ", \"accuracy\": " << e.accuracy;
  if (e.token_error_rate >= 0) log << ", \"token_error_rate\": " << e.token_error_rate;
  if (e.word_error_rate >= 0) log << ", \"word_error_rate\": " << e.word_error_rate;
  log << ", \"samples\": " << e.samples << "}\n";
  log.flush();
}

// Dynamic loss scaling that keeps backing off: a warning when the scale went down 5 times within 100 steps (at most
// one per 100 steps, none in the first 100).
class ScaleWatch {
 public:
  void See(int64_t s, double scale) {
    if (prev_ > 0 && scale < prev_) backoffs_.push_back(s);
    prev_ = scale;
    while (!backoffs_.empty() && backoffs_.front() <= s - 100) backoffs_.pop_front();
    if (backoffs_.size() >= 5 && s >= 100 && s - last_warned_ >= 100) {
      last_warned_ = s;
      std::fprintf(stderr,
                   "\nwarning: the loss scale went down %zu times in the last 100 steps (now %g): gradients keep "
                   "overflowing in fp16; try --amp=bf16, a lower --lr, or keep the overflowing ops fp32 "
                   "(--check-numerics names them)\n",
                   backoffs_.size(), scale);
      backoffs_.clear();
    }
  }

 private:
  std::deque<int64_t> backoffs_;  // steps at which the loss scale went down
  double prev_ = 0;
  int64_t last_warned_ = -100;
};

// What the run shows as it goes: on a terminal a bar redrawn at most 10 times a second (and at each epoch's end and
// each skipped step), otherwise (without --quiet) a line per step, or per 1% of a run of more than 200 steps.
class Progress {
 public:
  Progress(const TrainOptions& o, bool bar, int64_t start, int64_t total, int64_t k, int64_t per_epoch, bool scaling)
      : o_(o),
        bar_(bar),
        start_(start),
        total_(total),
        k_(k),
        per_epoch_(per_epoch),
        scaling_(scaling),
        line_every_(total <= 200 ? 1 : (total + 99) / 100),
        t_start_(std::chrono::steady_clock::now()) {}

  // After step s (from 0) of `epoch` (from 0); `eval_s`: the seconds evaluation took so far (not training).
  void Step(int64_t s, int64_t epoch, const StepResult& r, double eval_s) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start_).count() - eval_s;
    const double done = static_cast<double>(s + 1 - start_);
    // Samples of the global batch (data-parallel: every rank's).
    const double rate = done * static_cast<double>(k_ * o_.batch * dist::World().size()) / std::max(elapsed, 1e-9);
    const double eta = elapsed / done * static_cast<double>(total_ - s - 1);
    const bool epoch_last = ((s + 1) * k_) / per_epoch_ > (s * k_) / per_epoch_ || s + 1 == total_;
    if (bar_ && (elapsed - last_draw_ >= 0.1 || epoch_last || r.skipped)) {
      last_draw_ = elapsed;
      const int width = 24;
      const int filled = static_cast<int>(width * (s + 1) / total_);
      std::printf("\r\033[Kepoch %lld [%s%s] %lld/%lld loss %.4f %.0f samples/s ETA %s%s",
                  static_cast<long long>(epoch + 1), std::string(filled, '=').c_str(),
                  std::string(width - filled, ' ').c_str(), static_cast<long long>(s + 1),
                  static_cast<long long>(total_), r.loss, rate, Clock(eta).c_str(), r.skipped ? " (skipped)" : "");
      std::fflush(stdout);
    } else if (!o_.quiet && ((s + 1) % line_every_ == 0 || s + 1 == total_ || r.skipped)) {
      char scale[48] = "";
      if (scaling_) std::snprintf(scale, sizeof scale, " loss_scale %g", r.loss_scale);
      std::printf(
          "epoch %lld step %lld/%lld loss %.6f grad_norm %.4g param_norm %.4g lr %.4g%s%s %.1f ms %.0f "
          "samples/s ETA %s\n",
          static_cast<long long>(epoch + 1), static_cast<long long>(s + 1), static_cast<long long>(total_), r.loss,
          r.grad_norm, r.param_norm, r.lr, scale, r.skipped ? " skipped" : "", r.ms, rate, Clock(eta).c_str());
      std::fflush(stdout);
    }
  }

 private:
  const TrainOptions& o_;
  const bool bar_;
  const int64_t start_, total_, k_, per_epoch_;
  const bool scaling_;
  const int64_t line_every_;
  const std::chrono::steady_clock::time_point t_start_;
  double last_draw_ = -1;
};

}  // namespace

namespace {

// Every output path is checked before any work: a run must not train for hours and then fail to save.
void CheckOutputs(const TrainOptions& o) {
  if (o.data.empty()) throw Error("--data TRAIN.npz is required");
  if (!o.profile_trace.empty()) CheckOutputFile("--profile", o.profile_trace);
  if (!o.log_json.empty()) CheckOutputFile("--log-json", o.log_json);
  if (!o.save.empty()) CheckOutputFile("--save", o.save);
  if (!o.checkpoint.empty()) {
    CheckOutputDir("--checkpoint", o.checkpoint);
    std::error_code ec;  // made now: a folder that cannot be made must fail before the first step, not after the run
    std::filesystem::create_directories(o.checkpoint, ec);
    if (ec) throw Error("--checkpoint: cannot create '" + o.checkpoint + "' (" + ec.message() + ")");
  }
  ParseLrSchedule(o.lr_schedule);  // a bad choice fails before the data is read
}

// Ctrl-C (SIGINT) and SIGTERM -- what mpirun sends every rank on Ctrl-C, and Slurm before it ends a job -- set
// g_interrupted (the loop checkpoints and stops after the step) while the guard lives.
class SigintGuard {
 public:
  SigintGuard() {
    g_interrupted = 0;
    struct sigaction sa {};
    sa.sa_handler = OnSigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~SigintGuard() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }

 private:
  struct sigaction old_int_ {
  }, old_term_{};
};

// What the first steps print: --profile's timeline (the first step's at once, then the second's, which has no
// first-run costs: oneDNN's JIT, TBB's threads; tracing stops after it) and the fusion report's first line.
void ReportFirstSteps(Trainer& trainer, const TrainOptions& o, int64_t s, int64_t start, int64_t total, bool bar) {
  if (!o.profile_trace.empty() && s - start < 2) {
    const DataType half = trainer.options().amp.half;
    const std::string line = WriteProfileTrace(o.profile_trace, trainer.executor().last_trace(), s + 1,
                                               half == DataType::kUndefined ? "fp32" : DataTypeName(half),
                                               FuseModeName(trainer.options().fuse.mode), dist::World().TakeTimings());
    if (s - start == 1 || s + 1 == total) {
      trainer.set_trace(false);
      dist::World().RecordTimings(false);
      if (!o.quiet) std::fprintf(stderr, "%s%s\n", bar ? "\r" : "", line.c_str());
    }
  }
  if (s == start && !o.quiet && trainer.fusion_report().mode != "" && trainer.fusion_report().mode != "off") {
    const std::string f = FormatFusionReport(trainer.fusion_report(), 0);
    std::fprintf(stderr, "%s%s\n", bar ? "\r" : "", f.substr(0, f.find('\n')).c_str());
  }
}

// Stops a run whose gradients stay non-finite, naming the node the first non-finite value comes from. Dynamic scaling
// skips steps on purpose while it finds its scale (2^16 down to what fits); it is stuck only when it keeps skipping at
// its floor.
void CheckSkips(Trainer& trainer, int64_t s, int64_t skipped_in_row, bool dynamic, const StepResult& r,
                const std::vector<Arrays>& micro) {
  if (skipped_in_row < 10 || (dynamic && r.loss_scale > trainer.options().loss_scale.min_scale && skipped_in_row < 40))
    return;
  std::string node;
  for (const Arrays& m : micro)
    if (node.empty()) node = trainer.FirstNonFiniteNode(m);
  throw Error("10 steps in a row had non-finite gradients (steps " + std::to_string(s - 8) + "-" +
              std::to_string(s + 1) + "); the first non-finite value comes from " +
              (node.empty() ? std::string("no node of the step (the non-finite value did not reproduce)") : node));
}

// Rank 0's evaluation (the others have no evaluation data): logged and printed.
void EvaluateAndReport(const Trainer& trainer, const Arrays& eval_arrays, const TrainOptions& o, std::ofstream& log,
                       int64_t epoch, int64_t step) {
  if (eval_arrays.empty()) return;
  const EvalResult e = trainer.Evaluate(eval_arrays, o.batch);
  if (log) LogEval(log, epoch, step, e);
  if (!o.quiet) {
    std::printf("eval epoch %lld: loss %.6f", static_cast<long long>(epoch), e.loss);
    if (e.accuracy >= 0) std::printf(" accuracy %.2f%%", 100 * e.accuracy);
    if (e.token_error_rate >= 0) std::printf(" token errors %.2f%%", 100 * e.token_error_rate);
    if (e.word_error_rate >= 0) std::printf(" word errors %.2f%%", 100 * e.word_error_rate);
    std::printf(" (%lld samples)\n", static_cast<long long>(e.samples));
    std::fflush(stdout);
  }
}

// After the last step: the saved model, --profile-ops' table, the device's peak memory, the skipped steps.
// `any_save`: some rank saves (rank 0; sharded master weights are gathered from every rank for it).
void Finish(Trainer& trainer, const TrainOptions& o, bool any_save, int64_t start, int64_t total, int64_t k,
            int64_t skipped) {
  if (any_save)
    trainer.WithWholeParameters([&] {
      if (o.save.empty()) return;
      trainer.Save(o.save);
      if (!o.quiet) std::printf("saved the trained model to %s\n", o.save.c_str());
    });
  if (dist::World().rank() != 0) return;  // data-parallel: rank 0 reports
  if (o.profile && total > start) {
    const double steps = static_cast<double>(total - start > 1 ? total - start - 1 : 1);
    PrintOpProfile(trainer.executor(), steps * k);
    const dist::CommStats c = dist::World().stats();
    if (dist::World().size() > 1 && c.collectives > 0)
      std::printf(
          "gradient all-reduce (rank 0): %.1f buckets per step, %.2f ms per step from start to completion, %.2f ms "
          "of it waited for: %.0f%% hidden behind the backward\n",
          static_cast<double>(c.collectives) / steps, c.busy_ms / steps, c.waited_ms / steps,
          c.busy_ms > 0 ? 100 * std::max(0.0, 1 - c.waited_ms / c.busy_ms) : 0.0);
  }
  if (const auto& dev = trainer.options().device)
    std::printf("peak device memory: %lld bytes (%.1f MiB) on %s\n",
                static_cast<long long>(dev->peak_allocated_bytes()),
                static_cast<double>(dev->peak_allocated_bytes()) / (1 << 20), dev->name().c_str());
  const bool scaling = trainer.step_info().loss_scale != nullptr;
  if (skipped || scaling) {
    std::printf("%lld steps skipped (non-finite gradients)", static_cast<long long>(skipped));
    if (scaling) std::printf(", final loss scale %g", trainer.step_info().loss_scale->initializer->GetDouble(0));
    std::printf("\n");
  }
}

}  // namespace

namespace {

// Data-parallel: rank 0 alone prints, logs, evaluates and writes files; the other ranks train silently.
TrainOptions ForThisRank(const TrainOptions& given) {
  TrainOptions o = given;
  const dist::Comm& w = dist::World();
  // On GPUs, a bare --device cuda (or auto) is each rank's own GPU: its local rank modulo the machine's GPUs.
  if (w.size() > 1 && (o.device == "cuda" || (o.device == "auto" && CudaDeviceCount() > 0))) {
    const int gpus = CudaDeviceCount();
    if (gpus == 0) throw Error("--device cuda: this machine has no CUDA device");
    o.device = "cuda:" + std::to_string(dist::LocalRank() % gpus);
  }
  if (w.rank() == 0) return o;
  o.quiet = true;
  o.log_json.clear();
  o.save.clear();
  o.checkpoint.clear();
  o.eval_data.clear();
  o.profile = false;
  o.profile_trace.clear();
  return o;
}

// Data-parallel: every rank must build the same step and read the same data; the first rank that differs from rank
// 0 is named (the same message on every rank).
void CheckRanksAgree(const Trainer& trainer, const Arrays& data, const TrainOptions& o) {
  dist::Comm& w = dist::World();
  if (w.size() <= 1) return;
  const std::string step = StepGraphFingerprint(trainer.step_graph());
  const std::string mine = step + "\n" + DataFingerprint(data) + "\n" + std::to_string(o.batch) + "\n" + o.data;
  const std::vector<std::string> all = w.AllGather(mine);
  for (int r = 1; r < w.size(); ++r) {
    if (all[static_cast<size_t>(r)] == all[0]) continue;
    auto part = [&](int rank, int i) {
      std::string s = all[static_cast<size_t>(rank)];
      for (int k = 0; k < i; ++k) s = s.substr(s.find('\n') + 1);
      return s.substr(0, s.find('\n'));
    };
    if (part(r, 0) != part(0, 0))
      throw Error("rank " + std::to_string(r) + " built another step than rank 0 (another model or other options)");
    if (part(r, 2) != part(0, 2))
      throw Error("rank " + std::to_string(r) + " has --batch " + part(r, 2) + ", rank 0 " + part(0, 2));
    throw Error("rank " + std::to_string(r) + " reads other data than rank 0 (" + part(r, 3) + ": " +
                part(r, 1).substr(0, part(r, 1).find('#')) + "; rank 0's " + part(0, 3) + ": " +
                part(0, 1).substr(0, part(0, 1).find('#')) + ")");
  }
}

}  // namespace

int Train(const TrainOptions& given) {
  const TrainOptions o = ForThisRank(given);
  CheckOutputs(o);

  // The step's inputs decide which arrays to read; the schedule's length needs the sample count first.
  std::unique_ptr<Graph> model = LoadCheckedModel(o.model);
  const bool stored = !model->training_info.empty();  // an ONNX training model (`passes -o`): its step as stored
  auto trainer = stored ? StoredStepTrainer(std::move(model), o)
                        : std::make_unique<Trainer>(std::move(model), MakeTrainerOptions(o, 0));
  const std::vector<std::string> inputs = trainer->input_names();
  Arrays train_arrays = ReadArrays(o.data, inputs);
  CheckDataFitsStep(trainer->step_graph(), train_arrays, o.data, o);
  // Recorded in checkpoints, checked on --resume (hashing is cheap next to reading the file).
  const std::string fingerprint = o.checkpoint.empty() && o.resume.empty() ? "" : DataFingerprint(train_arrays);
  CheckRanksAgree(*trainer, train_arrays, o);
  const dist::Comm& world = dist::World();
  DataLoader data(std::move(train_arrays), o.batch, !o.no_shuffle, o.seed, o.data, world.size(), world.rank());
  if (!o.profile_trace.empty()) dist::World().RecordTimings(true);  // the trace's communication lane
  if (world.size() > 1 && !o.quiet)
    std::printf("data-parallel: %d ranks (%s), devices: cpu, global batch %d x %lld = %lld\n", world.size(),
                world.description().c_str(), world.size(), static_cast<long long>(o.batch),
                static_cast<long long>(o.batch * world.size()));
  const int64_t k = trainer->options().optimizer.accumulate;  // o.grad_accum, or the stored step's
  const int64_t per_epoch = data.batches_per_epoch();         // micro-batches
  if (per_epoch < k)
    throw Error(o.data + ": " + std::to_string(data.samples()) + " samples do not fill one step of " +
                std::to_string(k) + " x " + std::to_string(o.batch) + " samples");
  const int64_t total = o.steps > 0 ? o.steps : o.epochs * per_epoch / k;
  if (!stored) trainer->set_total_steps(total);  // the schedule needs the run's length

  if (trainer->options().amp.half != DataType::kUndefined && world.rank() == 0) {
    const std::string w = AmpHardwareWarning(trainer->options().amp.half);
    if (!w.empty()) std::fprintf(stderr, "warning: %s\n", w.c_str());
    for (const std::string& c : trainer->step_info().fp16_range_changes)
      std::fprintf(stderr, "fp16-range: %s\n", c.c_str());
  }

  Arrays eval_arrays;
  if (!o.eval_data.empty()) {
    std::vector<std::string> names = inputs;
    eval_arrays = ReadArrays(o.eval_data, names);
    CheckDataFitsStep(trainer->step_graph(), eval_arrays, o.eval_data, o);
    CheckSampleArrays(eval_arrays, o.eval_data);  // at least one sample, every value finite
  }

  const int64_t start = o.resume.empty() ? 0 : Resume(*trainer, o, k, fingerprint);  // optimizer steps done
  auto checkpoint = [&](int64_t steps_done) {
    // A sharded optimizer's state is gathered from every rank; rank 0 alone writes (the others' o.checkpoint is "").
    if (!o.checkpoint.empty() || (!given.checkpoint.empty() && !ShardedState(trainer->step_graph()).empty()))
      trainer->SaveCheckpoint(o.checkpoint, CheckpointMeta(o, steps_done, k, fingerprint));
  };

  std::ofstream log;
  if (!o.log_json.empty()) log = OpenLog(o.log_json, start);
  const bool bar = !o.quiet && isatty(fileno(stdout));
  // Sharded master weights are gathered from every rank for rank 0's evaluation (WithWholeParameters).
  auto evaluate = [&](int64_t epoch, int64_t step) {
    if (given.eval_data.empty()) return;
    trainer->WithWholeParameters([&] { EvaluateAndReport(*trainer, eval_arrays, o, log, epoch, step); });
  };

  SigintGuard sigint;

  int64_t skipped = 0, skipped_in_row = 0;
  const StepGraphInfo& step_info = trainer->step_info();
  const bool scaling = step_info.loss_scale != nullptr;
  const bool dynamic = step_info.loss_scaling == LossScaleMode::kDynamic;
  ScaleWatch scale_watch;
  bool warned_zero_norm = false;
  Progress progress(o, bar, start, total, k, per_epoch, scaling);
  double eval_s = 0;
  auto micro_pos = [&](int64_t m) { return std::make_pair(m / per_epoch, m % per_epoch); };
  // On a GPU each batch starts its upload (pinned memory, the copy stream) as soon as the prefetch task has it.
  if (trainer->options().device) data.set_on_ready([t = trainer.get()](const Batch& b) { t->Stage(b.arrays); });
  if (start < total) {
    auto [e0, i0] = micro_pos(start * k);
    data.Prefetch(e0, i0);
  }
  for (int64_t s = start; s < total; ++s) {
    std::vector<Arrays> micro;
    int64_t epoch = 0;
    for (int64_t j = 0; j < k; ++j) {
      Batch b = data.Take();
      if (j == 0) epoch = b.epoch;
      micro.push_back(std::move(b.arrays));
      const int64_t next = s * k + j + 1;
      if (next < total * k) {
        auto [e, i] = micro_pos(next);
        data.Prefetch(e, i);
      }
    }
    StepResult r = trainer->Step(micro);
    // --profile-ops: times from the second step on (the first makes plans, JITs and sets libraries up), unless
    // there is only one.
    if (o.profile && s == start && total - start > 1) {
      trainer->ResetProfile();
      dist::World().ResetStats();
    }
    ReportFirstSteps(*trainer, o, s, start, total, bar);
    skipped += r.skipped;
    skipped_in_row = r.skipped ? skipped_in_row + 1 : 0;
    if (dynamic) scale_watch.See(s, r.loss_scale);
    if (!r.skipped && r.grad_norm == 0 && !warned_zero_norm) {
      std::fprintf(stderr,
                   "\nwarning: step %lld: the gradient norm is 0 -- no parameter is learning (every gradient element "
                   "is zero%s)\n",
                   static_cast<long long>(s + 1),
                   step_info.amp.half_nodes.empty() ? ""
                                                    : "; in half precision small gradients flush to zero: try "
                                                      "--loss-scale dynamic");
      warned_zero_norm = true;
    }
    if (log) LogStep(log, s + 1, epoch + 1, r, scaling);
    progress.Step(s, epoch, r, eval_s);
    if (!std::isfinite(r.loss) && !r.skipped) throw Error("step " + std::to_string(s + 1) + ": the loss is not finite");
    CheckSkips(*trainer, s, skipped_in_row, dynamic, r, micro);
    const bool epoch_end = ((s + 1) * k) / per_epoch > (s * k) / per_epoch;
    if (epoch_end || s + 1 == total) {
      const auto t0 = std::chrono::steady_clock::now();
      if (bar) std::printf("\n");
      evaluate(epoch_end ? ((s + 1) * k) / per_epoch : epoch + 1, s + 1);
      eval_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    if (o.checkpoint_every > 0 && (s + 1) % o.checkpoint_every == 0 && s + 1 < total) checkpoint(s + 1);
    // Data-parallel: Ctrl-C reaches the ranks at different moments, so they stop after the same step -- the first
    // after any rank saw it -- or one would wait forever in the next step's all-reduce.
    int interrupted = g_interrupted;
    if (world.size() > 1) {
      double any = interrupted;
      dist::World().AllReduceSum(&any, 1);
      if (any > 0 && !interrupted) interrupted = SIGTERM;
    }
    if (interrupted) {
      if (bar) std::printf("\n");
      checkpoint(s + 1);
      if (world.rank() == 0)
        std::fprintf(stderr, "onnx-train: interrupted (%s) after step %lld%s\n",
                     interrupted == SIGINT ? "SIGINT" : "SIGTERM", static_cast<long long>(s + 1),
                     o.checkpoint.empty() ? " (no --checkpoint DIR: the training state was not saved)"
                                          : ("; the training state is in " + o.checkpoint + " (--resume it)").c_str());
      return 128 + interrupted;
    }
  }
  checkpoint(std::max(start, total));
  Finish(*trainer, o, !given.save.empty(), start, total, k, skipped);
  return 0;
}

}  // namespace ot::tools
