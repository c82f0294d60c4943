#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dist/comm.h"
#include "graph/error.h"

namespace ot::dist {

namespace {

class LocalComm final : public Comm {
  struct Done final : Request {
    void Wait() override {}
  };

 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string description() const override { return "one process"; }
  void AllReduceSum(float*, int64_t) override {}
  void AllReduceSum(double*, int64_t) override {}
  std::shared_ptr<Request> StartAllReduceSum(float*, int64_t) override { return std::make_shared<Done>(); }
  std::shared_ptr<Request> StartReduceScatterSum(float*, int64_t) override { return std::make_shared<Done>(); }
  void AllGatherBlocks(float*, int64_t) override {}
  std::vector<std::string> AllGather(const std::string& s) override { return {s}; }
  [[noreturn]] void Abort(int code) override { std::exit(code); }
  void Finalize() override {}
};

LocalComm g_local;
Comm* g_world = &g_local;
std::unique_ptr<Comm> g_mpi;

bool Env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v;
}

// The plugin's candidates: $ONNXTRAIN_MPI_LIB, then next to the executable, its ../lib and ../lib/<multiarch>.
std::vector<std::string> PluginPaths() {
  std::vector<std::string> p;
  if (Env("ONNXTRAIN_MPI_LIB")) p.push_back(std::getenv("ONNXTRAIN_MPI_LIB"));
  char exe[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    std::string dir(exe, static_cast<size_t>(n));
    dir = dir.substr(0, dir.rfind('/'));
    for (const char* rel : {"/", "/../", "/../lib/", "/../lib/x86_64-linux-gnu/", "/../lib/aarch64-linux-gnu/"})
      p.push_back(dir + rel + "libonnxtrain_mpi.so");
  }
  return p;
}

}  // namespace

bool LaunchedByMpi() {
  return Env("OMPI_COMM_WORLD_SIZE") || (Env("SLURM_NTASKS") && (Env("PMIX_RANK") || Env("PMI_RANK")));
}

int LocalRank() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"})
    if (Env(name)) return std::atoi(std::getenv(name));
  return 0;
}

void InitWorld(int* argc, char*** argv) {
  if (g_mpi || !LaunchedByMpi()) return;
  std::string tried;
  for (const std::string& path : PluginPaths()) {
    if (access(path.c_str(), R_OK) != 0) continue;
    // RTLD_GLOBAL: Open MPI's own components (dlopened by MPI_Init) resolve their symbols against libmpi.
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
      tried += std::string(tried.empty() ? "" : "; ") + dlerror();
      continue;
    }
    using Create = Comm* (*)(int*, char***, char*, int);
    auto create = reinterpret_cast<Create>(dlsym(h, "onnxtrain_mpi_create"));
    if (!create) throw Error(path + ": no onnxtrain_mpi_create: not an onnx-train MPI plugin");
    char err[512] = {0};
    Comm* c = create(argc, argv, err, sizeof(err));
    if (!c) throw Error(std::string("MPI did not start: ") + err);
    g_mpi.reset(c);
    g_world = c;
    return;
  }
  throw Error(
      "launched by mpirun/srun, but the MPI plugin libonnxtrain_mpi.so could not be loaded" +
      (tried.empty() ? std::string(" (not found next to the executable; set ONNXTRAIN_MPI_LIB)") : ": " + tried));
}

Comm& World() { return *g_world; }

void SetWorldForTesting(Comm* c) { g_world = c ? c : &g_local; }

}  // namespace ot::dist
