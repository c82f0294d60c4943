#include "executor/cuda/nccl_world.h"

#include <dlfcn.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "dist/comm.h"
#include "executor/cuda/cuda_kernels.h"
#include "graph/error.h"

namespace ot::nccl {

namespace {

// The NCCL entry points this backend calls, resolved from the loaded library (nccl.h gives their types only).
struct Api {
  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
};

const Api& Load() {
  static Api api;
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<std::string> tried;
    const char* env = std::getenv("ONNXTRAIN_NCCL_LIB");
    void* h = nullptr;
    for (const char* path : {env, "libnccl.so.2", "libnccl.so"}) {
      if (!path || !*path) continue;
      h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
      if (h) break;
      tried.push_back(dlerror());
    }
    if (!h) {
      std::string why;
      for (const std::string& t : tried) why += (why.empty() ? "" : "; ") + t;
      throw Error("NCCL could not be loaded (" + why + "): install it or set ONNXTRAIN_NCCL_LIB to libnccl.so.2");
    }
    auto sym = [&](const char* name) {
      void* p = dlsym(h, name);
      if (!p) throw Error(std::string("NCCL: the loaded library has no ") + name);
      return p;
    };
    api.get_version = reinterpret_cast<decltype(api.get_version)>(sym("ncclGetVersion"));
    api.get_unique_id = reinterpret_cast<decltype(api.get_unique_id)>(sym("ncclGetUniqueId"));
    api.comm_init_rank = reinterpret_cast<decltype(api.comm_init_rank)>(sym("ncclCommInitRank"));
    api.all_reduce = reinterpret_cast<decltype(api.all_reduce)>(sym("ncclAllReduce"));
    api.error_string = reinterpret_cast<decltype(api.error_string)>(sym("ncclGetErrorString"));
  });
  if (!api.all_reduce) throw Error("NCCL could not be loaded (an earlier attempt failed)");
  return api;
}

void Check(const Api& api, ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw Error(std::string("NCCL: ") + what + ": " + api.error_string(r));
}

}  // namespace

World::World() {
  const Api& api = Load();
  dist::Comm& group = dist::World();
  rank_ = group.rank();
  size_ = group.size();
  int v = 0;
  Check(api, api.get_version(&v), "ncclGetVersion");
  version_ = "NCCL " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
  // ncclAvg, the mean the gradient buckets take, is NCCL 2.10's.
  if (v < 21000) throw Error(version_ + " is older than 2.10, which data-parallel training on GPUs needs");
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (rank_ == 0) Check(api, api.get_unique_id(&id), "ncclGetUniqueId");
  const std::vector<std::string> all = group.AllGather(std::string(id.internal, sizeof id.internal));
  if (all.empty() || all[0].size() != sizeof id.internal) throw Error("NCCL: rank 0's unique id did not arrive");
  std::memcpy(id.internal, all[0].data(), sizeof id.internal);
  ncclComm_t comm = nullptr;
  Check(api, api.comm_init_rank(&comm, size_, id, rank_), "ncclCommInitRank");
  comm_ = comm;
  CudaCheck(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate (NCCL's stream)");
}

World& World::Get() {
  // Made once and kept to the process's end (NCCL's own teardown at exit; destroying a communicator while a
  // captured graph may still refer to it is not allowed).
  static World* w = new World();
  return *w;
}

void World::AllReduce(float* data, size_t n, bool mean, cudaStream_t stream) const {
  const Api& api = Load();
  Check(api,
        api.all_reduce(data, data, n, ncclFloat32, mean ? ncclAvg : ncclSum, static_cast<ncclComm_t>(comm_), stream),
        "ncclAllReduce");
}

}  // namespace ot::nccl
