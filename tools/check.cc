// `onnx-train check DIR...`: the ONNX backend-test runner. For every directory below DIR holding model.onnx and
// test_data_set_*/{input,output}_*.pb, run the model and compare with the reference outputs by the ONNX
// runner's rule: same output count, dtype and shape; allclose with rtol 1e-3, atol 1e-7 (NaN equals NaN).
// A model using something onnx-train does not implement is a skip with its reason, never a failure or crash.
// --device cuda runs them on a GPU; an op without a GPU kernel is such a skip (the plan names it).
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "executor/device.h"
#include "executor/executor.h"
#include "executor/plan.h"
#include "graph/error.h"
#include "onnx_import/model_io.h"
#include "onnx_import/tensor_io.h"
#include "tools/commands.h"
#include "training/pipeline.h"

namespace fs = std::filesystem;

namespace ot::tools {

namespace {

enum class Outcome { kPass, kFail, kSkip };

struct Result {
  Outcome outcome = Outcome::kFail;
  std::string reason;
};

std::vector<fs::path> SortedFiles(const fs::path& dir, const std::string& prefix) {
  std::vector<std::pair<int, fs::path>> r;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string n = e.path().filename().string();
    if (n.rfind(prefix, 0) == 0 && e.path().extension() == ".pb")
      r.push_back({std::atoi(n.c_str() + prefix.size()), e.path()});
  }
  std::sort(r.begin(), r.end());
  std::vector<fs::path> out;
  for (auto& [i, p] : r) out.push_back(p);
  return out;
}

// Why `actual` differs from `expected` by the runner's rule, or "" when it does not.
std::string Compare(const Tensor& actual, const Tensor& expected) {
  if (actual.dtype() != expected.dtype())
    return "dtype " + DataTypeName(actual.dtype()) + ", expected " + DataTypeName(expected.dtype());
  if (actual.dims() != expected.dims())
    return "shape " + DimsToString(actual.dims()) + ", expected " + DimsToString(expected.dims());
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < actual.numel(); ++i) {
    double a = actual.GetDouble(i), e = expected.GetDouble(i);
    if (std::isnan(a) || std::isnan(e)) {
      if (std::isnan(a) != std::isnan(e)) {
        ++bad;
        if (first < 0) first = i;
      }
      continue;
    }
    if (std::isinf(e) || std::isinf(a)) {
      if (a != e) {
        ++bad;
        if (first < 0) first = i;
      }
      continue;
    }
    if (std::fabs(a - e) > 1e-7 + 1e-3 * std::fabs(e)) {
      ++bad;
      if (first < 0) first = i;
    }
  }
  if (!bad) return "";
  std::ostringstream s;
  s << bad << " of " << actual.numel() << " elements differ; first at " << first << ": got " << actual.GetDouble(first)
    << ", expected " << expected.GetDouble(first);
  return s.str();
}

// Tests of ONNX 1.12's data whose reference contradicts the current ONNX spec or the test's own model; each is
// reported as a skip with the reason (never silently passed).
const std::map<std::string, std::string>& KnownDataDefects() {
  static const std::map<std::string, std::string> m = {
      {"test_cast_FLOAT_to_BFLOAT16",
       "ONNX 1.12's reference truncates float to bfloat16; the spec (and onnx-train) rounds to nearest even"},
      {"test_castlike_FLOAT_to_BFLOAT16", "the test data's 'like' input is [1] but the model declares [3,4]"},
      {"test_castlike_FLOAT_to_BFLOAT16_expanded", "the test data's 'like' input is [1] but the model declares [3,4]"},
      {"test_castlike_BFLOAT16_to_FLOAT", "the test data's 'like' input is [1] but the model declares [3,4]"},
      {"test_castlike_BFLOAT16_to_FLOAT_expanded", "the test data's 'like' input is [1] but the model declares [3,4]"},
      {"test_adam_multiple",
       "ONNX 1.12's reference used epsilon 1e-2 but its model omits the attribute (default 1e-6); the onnx 1.22 "
       "version of this test, whose model sets it, passes"},
  };
  return m;
}

// numpy has no bfloat16, so ONNX 1.12's test data stores bfloat16 tensors as uint16 with the same bits: read
// them as the bfloat16 the model declares.
Tensor AsDeclared(Tensor t, DataType declared) {
  if (declared == DataType::kBFloat16 && t.dtype() == DataType::kUint16) {
    Tensor r(DataType::kBFloat16, t.dims());
    std::memcpy(r.raw(), t.raw(), t.nbytes());
    return r;
  }
  return t;
}

// --fuse: clusters sized for the shapes of the first test_data_set (the same graph then runs every set).
// Returns the number of clusters made.
size_t FuseForFirstDataSet(Graph& g, const fs::path& dir, FuseMode mode) {
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
  if (sets.empty()) return 0;
  std::sort(sets.begin(), sets.end());
  const std::vector<fs::path> ins = SortedFiles(sets.front(), "input_");
  const std::vector<Value*> real = g.RealInputs();
  const std::vector<Value*>& targets = ins.size() == real.size() ? real : g.inputs;
  if (ins.size() != targets.size()) return 0;  // RunModelDir reports the mismatch
  std::map<std::string, Tensor> values;
  for (size_t i = 0; i < ins.size(); ++i)
    values[targets[i]->name] = AsDeclared(ReadTensorPb(ins[i].string()).tensor, targets[i]->dtype);
  ForwardOptions fo;
  fo.pattern_fusion = false;  // the node tests run as exported
  fo.fuse.mode = mode;
  return PrepareForward(g, fo, values).clusters.size();
}

Result RunModelDir(const fs::path& dir, const CheckOptions& o) {
  Result res;
  auto defect = KnownDataDefects().find(dir.filename().string());
  if (defect != KnownDataDefects().end()) {
    res.outcome = Outcome::kSkip;
    res.reason = "reference data defect: " + defect->second;
    return res;
  }
  try {
    std::unique_ptr<Graph> g = LoadModel((dir / "model.onnx").string());
    if (o.roundtrip) g = ParseModel(SerializeModel(*g), dir.string(), (dir / "model.onnx").string() + " (re-imported)");
    ExpandTrainingOps(*g);
    std::vector<Value*> real = g->RealInputs();
    const FuseMode mode = ParseFuseMode(o.fuse);
    const size_t clusters = mode != FuseMode::kOff ? FuseForFirstDataSet(*g, dir, mode) : 0;
    ExecutorOptions eo;
    eo.device = OpenDevice(o.device);  // in the model's child process: CUDA does not survive a fork
    Executor ex(*g, eo);
    int sets = 0;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (!e.is_directory() || e.path().filename().string().rfind("test_data_set_", 0) != 0) continue;
      ++sets;
      std::vector<fs::path> ins = SortedFiles(e.path(), "input_");
      std::vector<fs::path> outs = SortedFiles(e.path(), "output_");
      // Inputs are positional over the graph inputs that are not initializers (or over all inputs when the
      // files cover every input, initializers included).
      const std::vector<Value*>& targets = ins.size() == real.size() ? real : g->inputs;
      if (ins.size() != targets.size())
        throw Error(e.path().string() + ": " + std::to_string(ins.size()) + " input files for " +
                    std::to_string(real.size()) + " model inputs");
      std::map<std::string, Tensor> feeds;
      for (size_t i = 0; i < ins.size(); ++i)
        feeds[targets[i]->name] = AsDeclared(ReadTensorPb(ins[i].string()).tensor, targets[i]->dtype);
      std::vector<Tensor> got = ex.Run(feeds);
      if (got.size() != outs.size())
        throw Error(std::to_string(got.size()) + " outputs, expected " + std::to_string(outs.size()));
      for (size_t i = 0; i < outs.size(); ++i) {
        Tensor want = AsDeclared(ReadTensorPb(outs[i].string()).tensor, g->outputs[i]->dtype);
        std::string why = Compare(got[i], want);
        if (!why.empty()) {
          if (ex.last_has_random_kernels()) {
            res.outcome = Outcome::kSkip;
            res.reason = "outputs are random draws (Dropout in training mode); the reference used numpy's RNG";
            return res;
          }
          res.outcome = Outcome::kFail;
          res.reason = e.path().filename().string() + " output " + std::to_string(i) + " ('" + g->outputs[i]->name +
                       "'): " + why;
          return res;
        }
      }
    }
    if (!sets) throw Error("no test_data_set_* directory");
    res.outcome = Outcome::kPass;
    if (clusters) res.reason = "fused: " + std::to_string(clusters) + " cluster" + (clusters > 1 ? "s" : "");
  } catch (const UnsupportedError& e) {
    res.outcome = Outcome::kSkip;
    res.reason = e.what();
  } catch (const std::exception& e) {
    res.outcome = Outcome::kFail;
    res.reason = e.what();
  }
  return res;
}

// What a function run in a child process (fork) wrote back, or why it wrote nothing: `signal` is the signal that
// ended the child (0 when it exited), `exited_badly` an exit without a message; `forked` is false when no child
// could be made (the caller then runs the function itself).
struct ChildResult {
  bool forked = false;
  std::string msg;
  int signal = 0;
  bool exited_badly = false;
};
ChildResult InChild(const std::function<std::string()>& f, int timeout_s) {
  ChildResult r;
  int fds[2];
  if (pipe(fds) != 0) return r;
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return r;
  }
  r.forked = true;
  if (pid == 0) {
    close(fds[0]);
    if (timeout_s > 0) alarm(static_cast<unsigned>(timeout_s));
    const std::string msg = f();
    size_t off = 0;
    while (off < msg.size()) {
      const ssize_t w = write(fds[1], msg.data() + off, msg.size() - off);
      if (w <= 0) break;
      off += static_cast<size_t>(w);
    }
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) r.msg.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status))
    r.signal = WTERMSIG(status);
  else if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
    r.exited_badly = true;
  return r;
}

// Runs one model dir in a child process: a crash, abort or timeout becomes a failure with its signal.
Result RunIsolated(const fs::path& dir, const CheckOptions& o) {
  const ChildResult c = InChild(
      [&] {
        SetThreadCount(o.threads);
        const Result r = RunModelDir(dir, o);
        return std::to_string(static_cast<int>(r.outcome)) + r.reason;
      },
      o.timeout_s);
  if (!c.forked) return RunModelDir(dir, o);
  Result r;
  if (c.signal) {
    r.outcome = Outcome::kFail;
    r.reason = c.signal == SIGALRM ? "timed out after " + std::to_string(o.timeout_s) + " s"
                                   : std::string("crashed with signal ") + strsignal(c.signal);
    return r;
  }
  if (c.msg.empty() || c.exited_badly) {
    r.outcome = Outcome::kFail;
    r.reason = "child exited without a result";
    return r;
  }
  r.outcome = static_cast<Outcome>(c.msg[0] - '0');
  r.reason = c.msg.substr(1);
  return r;
}

// "" when OpenDevice(o.device) succeeds, else its message; in a child process when o.fork (see Check).
std::string ProbeDevice(const CheckOptions& o) {
  auto open = [&]() -> std::string {
    try {
      OpenDevice(o.device);
      return "";
    } catch (const std::exception& e) {
      return e.what();
    }
  };
  if (!o.fork) return open();
  const ChildResult c = InChild(open, 0);
  if (!c.forked) return "";  // no child: let the models report it
  if (c.signal)
    return "--device " + o.device + ": opening the device crashed (signal " + std::to_string(c.signal) + ")";
  return c.msg;
}

void FindModelDirs(const fs::path& root, std::vector<fs::path>& out) {
  if (fs::exists(root / "model.onnx")) {
    out.push_back(root);
    return;
  }
  std::vector<fs::path> subs;
  for (const auto& e : fs::directory_iterator(root)) {
    if (!e.is_directory()) continue;
    if (e.path().filename().string().rfind("test_data_set_", 0) == 0)
      throw Error(root.string() + ": holds " + e.path().filename().string() + " but no model.onnx");
    subs.push_back(e.path());
  }
  std::sort(subs.begin(), subs.end());
  for (const auto& s : subs) FindModelDirs(s, out);
}

}  // namespace

int Check(const CheckOptions& o) {
  if (!o.fork) SetThreadCount(o.threads);
  if (o.device != "cpu") {
    // The device must open before any model runs: otherwise every model would fail with the same message.
    // Probed in a child process, because a CUDA context made before fork() is unusable in the children.
    const std::string why = ProbeDevice(o);
    if (!why.empty()) throw Error(why);
  }
  std::vector<fs::path> dirs;
  for (const std::string& d : o.dirs) {
    if (!fs::is_directory(d)) throw Error(d + ": not a directory");
    const size_t before = dirs.size();
    fs::path root(d);
    if (!root.has_filename() && root.has_parent_path()) root = root.parent_path();  // "test_abs/" names test_abs
    FindModelDirs(root, dirs);
    if (dirs.size() == before)
      throw Error(d + ": no ONNX backend test under it (a folder with model.onnx and test_data_set_*)");
  }
  int passed = 0, failed = 0, skipped = 0, fused = 0;
  std::ofstream plist;
  if (!o.passed_list.empty()) {
    plist.open(o.passed_list);
    if (!plist) throw Error(o.passed_list + ": cannot write");
  }
  for (const fs::path& d : dirs) {
    Result r = o.fork ? RunIsolated(d, o) : RunModelDir(d, o);
    std::string name = d.filename().string();
    switch (r.outcome) {
      case Outcome::kPass:
        ++passed;
        if (!o.quiet) std::cout << "PASS " << name << (r.reason.empty() ? "" : " (" + r.reason + ")") << "\n";
        fused += !r.reason.empty();
        if (plist) plist << name << "\n";
        break;
      case Outcome::kFail:
        ++failed;
        std::cout << "FAIL " << name << ": " << r.reason << "\n";
        break;
      case Outcome::kSkip:
        ++skipped;
        if (!o.quiet) std::cout << "SKIP " << name << ": " << r.reason << "\n";
        break;
    }
    std::cout.flush();
  }
  if (o.fuse != "off") std::cout << "--fuse=" << o.fuse << ": " << fused << " passing models ran fused clusters\n";
  std::cout << passed << " passed, " << failed << " failed, " << skipped << " skipped" << std::endl;
  return failed ? 1 : 0;
}

}  // namespace ot::tools
