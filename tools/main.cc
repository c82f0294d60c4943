// onnx-train: the command-line front end. See README.md for the command reference.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <new>
#include <string>

#include "dist/comm.h"
#include "executor/executor.h"
#include "graph/error.h"
#include "tools/command_line.h"
#include "tools/commands.h"

namespace {

// Prints an error, one line per line of the message (an unsupported model names each node on its own line), and
// returns the exit status 1. With more than one rank each line names the rank, and the job ends on every rank
// (MPI_Abort): no rank waits on the failed one.
int Fail(const std::string& msg) {
  ot::dist::Comm& w = ot::dist::World();
  const std::string who = w.size() > 1 ? "rank " + std::to_string(w.rank()) + ": " : "";
  for (size_t start = 0;;) {
    const size_t end = msg.find('\n', start);
    std::fprintf(stderr, "onnx-train: error: %s%s\n", who.c_str(), msg.substr(start, end - start).c_str());
    if (end == std::string::npos) break;
    start = end + 1;
  }
  if (w.size() > 1) w.Abort(1);
  return 1;
}

int RunCommand(int argc, char** argv) {
  std::unique_ptr<ot::tools::CommandLine> cl = ot::tools::MakeCommandLine();
  ot::tools::CommandLine& c = *cl;
  try {
    c.app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return c.app.exit(e);  // --help
    // A bad option is a user error like any other: one line, exit status 1.
    return Fail(e.what());
  }
  try {
    if (*c.check_cmd) {
      // Threads start in each checked model's child process, never in the parent that forks.
      c.check.threads = c.threads;
      return ot::tools::Check(c.check);
    }
    ot::SetThreadCount(c.threads);
    if (*c.run_cmd) return ot::tools::Run(c.run);
    if (*c.train_cmd) return ot::tools::Train(c.train);
    if (*c.passes_cmd) return ot::tools::Passes(c.passes);
    if (*c.plan_cmd) return ot::tools::PlanMemoryReport(c.plan);
    if (*c.info_cmd) return ot::tools::Info(c.info_model);
    if (*c.ops_cmd) return c.gpu ? ot::tools::OpsWithoutGpuKernel() : ot::tools::Ops(c.markdown);
  } catch (const ot::Error& e) {
    return Fail(e.what());
  } catch (const std::bad_alloc&) {
    return Fail("out of memory");
  } catch (const std::exception& e) {
    return Fail(e.what());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // oneDNN's OpenMP wait policy, which libgomp reads only when it loads (so set it and re-execute once; a policy in
  // the environment is kept). ACTIVE: the workers wait spinning, so a oneDNN call soon after the last (a weight
  // reorder after its convolution, the next layer's call) finds them awake instead of waking each from a futex.
  // Measured at 2 threads (bench/RESULTS.md): CNN training steps 3-20% faster (ShuffleNetV2 bf16 75 -> 66 ms,
  // ResNet-18 bf16 144 -> 115), the TBB kernels between the calls no slower (BatchNormGrad 0.9-1.05x), transformers,
  // the tiny LM and `run` of the digits MLP level. PASSIVE was chosen when spinning workers starved a tiny MLP's TBB
  // kernels (0.2 -> 120 ms a step on 2 cores), before oneDNN-calling kernels ran exclusively and tiny GEMMs on one
  // thread; that `run` takes 0.044 ms under either policy now. Under mpirun/srun the ranks share the machine's
  // cores, where a spinning worker takes one from another rank: PASSIVE there.
  if (!std::getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", ot::dist::LaunchedByMpi() ? "PASSIVE" : "ACTIVE", 1);
    execv("/proc/self/exe", argv);  // on failure, carry on with the default policy
  }
  // Under mpirun/srun: MPI's world (data-parallel training), set up before any thread starts; otherwise one process.
  try {
    ot::dist::InitWorld(&argc, &argv);
  } catch (const ot::Error& e) {
    std::fprintf(stderr, "onnx-train: error: %s\n", e.what());
    return 1;
  }
  const int code = RunCommand(argc, argv);
  ot::dist::World().Finalize();
  return code;
}
