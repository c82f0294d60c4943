// CPU kernel of ai.onnxtrain.AllReduce (graph/ops/collective.cc): the bucket's gradients packed into the workspace,
// summed over the ranks in place (dist/comm.h: MPI_Allreduce), divided by the ranks, unpacked into the outputs.
// float32 and float64 (the amp pass keeps the buckets float32).
#include <cstring>
#include <string>
#include <vector>

#include "dist/comm.h"
#include "executor/kernel_registry.h"
#include "graph/error.h"
#include "graph/graph.h"

namespace ot {

namespace {

template <typename T>
void Reduce(const KernelIO& io, const std::vector<int64_t>& counts, int64_t total, T* buf, int world) {
  int64_t off = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    std::memcpy(buf + off, io.in[i], sizeof(T) * static_cast<size_t>(counts[i]));
    off += counts[i];
  }
  dist::World().AllReduceSum(buf, total);
  const T inv = T(1) / static_cast<T>(world);
  off = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    T* o = static_cast<T*>(io.out[i]);
    for (int64_t j = 0; j < counts[i]; ++j) o[j] = buf[off + j] * inv;
    off += counts[i];
  }
}

KernelInfo MakeAllReduce(const KernelContext& ctx) {
  const Node& n = ctx.node;
  const int count = static_cast<int>(n.attr_int("count", static_cast<int64_t>(n.inputs.size())));
  const int world = static_cast<int>(n.attr_int("world", 1));
  const DataType dt = ctx.in(0).dtype;
  if (dt != DataType::kFloat32 && dt != DataType::kFloat64)
    ctx.Fail("reduces float32 or float64 gradients, got " + DataTypeName(dt));
  std::vector<int64_t> counts;
  int64_t total = 0;
  for (int i = 0; i < count; ++i) {
    if (ctx.in(i).dtype != dt) ctx.Fail("every input must be " + DataTypeName(dt));
    counts.push_back(ctx.in(i).numel());
    total += counts.back();
  }
  const std::string where = n.Describe();
  KernelInfo k{[=](const KernelIO& io) {
    dist::Comm& c = dist::World();
    if (c.size() != world)
      throw Error(where + ": the step was built for " + std::to_string(world) + " ranks, this job has " +
                  std::to_string(c.size()));
    std::vector<uint8_t> own;
    void* ws = io.workspace;
    if (!ws) {
      own.resize(static_cast<size_t>(total) * SizeOf(dt));
      ws = own.data();
    }
    if (dt == DataType::kFloat32)
      Reduce(io, counts, total, static_cast<float*>(ws), world);
    else
      Reduce(io, counts, total, static_cast<double*>(ws), world);
  }};
  k.workspace_bytes = static_cast<size_t>(total) * SizeOf(dt);
  return k;
}

}  // namespace

void RegisterCollectiveKernels(KernelRegistry& r) { r.Register("AllReduce", MakeAllReduce, kInternalDomain); }

}  // namespace ot
