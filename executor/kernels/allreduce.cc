// CPU kernels of the data-parallel all-reduce (graph/ops/collective.cc):
//   AllReduceStart packs the bucket's gradients into its output and starts their sum over the ranks in place
//     (dist/comm.h: a communication thread issues MPI_Iallreduce and progresses it); the request is kept under the
//     bucket's address;
//   AllReduceWait takes that request, waits for it, and writes sum / world into each gradient's mean.
// The bucket stays in the arena from the start to the wait (the plan sees it live), so nothing else is placed in
// memory the communication thread still writes. float32 runs asynchronously; float64 (tests) sums when it starts.
#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "dist/comm.h"
#include "executor/kernel_registry.h"
#include "graph/error.h"
#include "graph/graph.h"

namespace ot {

namespace {

// Started collectives by bucket address, from AllReduceStart to its AllReduceWait.
class Pending {
 public:
  void Put(const void* bucket, std::shared_ptr<dist::Request> r) {
    std::lock_guard<std::mutex> lock(mu_);
    map_[bucket] = std::move(r);
  }
  std::shared_ptr<dist::Request> Take(const void* bucket) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(bucket);
    if (it == map_.end()) return nullptr;
    auto r = std::move(it->second);
    map_.erase(it);
    return r;
  }

 private:
  std::mutex mu_;
  std::unordered_map<const void*, std::shared_ptr<dist::Request>> map_;
};

Pending& Started() {
  static Pending p;
  return p;
}

void CheckWorld(int world, const std::string& where) {
  const int n = dist::World().size();
  if (n != world)
    throw Error(where + ": the step was built for " + std::to_string(world) + " ranks, this job has " +
                std::to_string(n));
}

KernelInfo MakeStart(const KernelContext& ctx) {
  const Node& n = ctx.node;
  const int count = static_cast<int>(n.attr_int("count", static_cast<int64_t>(n.inputs.size())));
  const int world = static_cast<int>(n.attr_int("world", 1));
  const bool scatter = n.attr_int("scatter", 0) != 0;
  const DataType dt = ctx.in(0).dtype;
  if (dt != DataType::kFloat32 && dt != DataType::kFloat64)
    ctx.Fail("reduces float32 or float64 gradients, got " + DataTypeName(dt));
  if (scatter && dt != DataType::kFloat32) ctx.Fail("reduce-scatters float32 gradients, got " + DataTypeName(dt));
  std::vector<size_t> bytes;
  int64_t total = 0;
  for (int i = 0; i < count; ++i) {
    bytes.push_back(ctx.in(i).nbytes());
    total += ctx.in(i).numel();
  }
  const std::string where = n.Describe();
  return KernelInfo{[=](const KernelIO& io) {
    CheckWorld(world, where);
    uint8_t* out = static_cast<uint8_t*>(io.out[0]);
    for (size_t i = 0; i < bytes.size(); ++i) {
      std::memcpy(out, io.in[i], bytes[i]);
      out += bytes[i];
    }
    if (scatter) {
      const int64_t padded = (total + world - 1) / world * world;
      std::fill(io.Out<float>(0) + total, io.Out<float>(0) + padded, 0.f);
      Started().Put(io.out[0], dist::World().StartReduceScatterSum(io.Out<float>(0), padded));
    } else if (dt == DataType::kFloat32)
      Started().Put(io.out[0], dist::World().StartAllReduceSum(io.Out<float>(0), total));
    else
      dist::World().AllReduceSum(io.Out<double>(0), total);
  }};
}

template <typename T>
void Unpack(const KernelIO& io, const std::vector<int64_t>& counts, int world) {
  const T* b = io.In<T>(0);
  const T inv = T(1) / static_cast<T>(world);
  for (size_t i = 0; i < counts.size(); ++i) {
    T* o = static_cast<T*>(io.out[i]);
    for (int64_t j = 0; j < counts[i]; ++j) o[j] = b[j] * inv;
    b += counts[i];
  }
}

// Reduce-scattered: this rank's block of the sum is at the bucket's start; it lies at [rank * block, ...) of the
// gradients packed one after another. The mean goes there, zeros everywhere else.
void UnpackBlock(const KernelIO& io, const std::vector<int64_t>& counts, int world, int64_t block) {
  const float* b = io.In<float>(0);
  const float inv = 1.f / static_cast<float>(world);
  const int64_t lo = dist::World().rank() * block, hi = lo + block;
  int64_t start = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    float* o = static_cast<float*>(io.out[i]);
    const int64_t n = counts[i];
    const int64_t s = std::clamp(lo - start, int64_t{0}, n), e = std::clamp(hi - start, int64_t{0}, n);
    std::fill(o, o + s, 0.f);
    for (int64_t j = s; j < e; ++j) o[j] = b[start + j - lo] * inv;
    std::fill(o + e, o + n, 0.f);
    start += n;
  }
}

KernelInfo MakeWait(const KernelContext& ctx) {
  const Node& n = ctx.node;
  const int world = static_cast<int>(n.attr_int("world", 1));
  const bool scatter = n.attr_int("scatter", 0) != 0;
  const DataType dt = ctx.in(0).dtype;
  if (dt != DataType::kFloat32 && dt != DataType::kFloat64)
    ctx.Fail("reduces float32 or float64 gradients, got " + DataTypeName(dt));
  std::vector<int64_t> counts;
  int64_t total = 0;
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    counts.push_back(ctx.out(static_cast<int>(i)).numel());
    total += counts.back();
  }
  const int64_t padded = scatter ? (total + world - 1) / world * world : total;
  if (padded != ctx.in(0).numel())
    ctx.Fail("the bucket holds " + std::to_string(ctx.in(0).numel()) + " values, the outputs " + std::to_string(total));
  if (scatter && dt != DataType::kFloat32) ctx.Fail("reduce-scatters float32 gradients, got " + DataTypeName(dt));
  const std::string where = n.Describe();
  return KernelInfo{[=](const KernelIO& io) {
    if (dt == DataType::kFloat32) {
      std::shared_ptr<dist::Request> r = Started().Take(io.in[0]);
      if (!r) throw Error(where + ": its bucket's all-reduce was never started");
      try {
        r->Wait();
      } catch (const std::exception& e) {
        throw Error(where + ": " + e.what());
      }
      if (scatter)
        UnpackBlock(io, counts, world, padded / world);
      else
        Unpack<float>(io, counts, world);
    } else {
      Unpack<double>(io, counts, world);
    }
  }};
}

// AllReduceSum: the sum over the ranks, in the output (blocking; the communication thread issues it after every
// collective asked for before it).
KernelInfo MakeSum(const KernelContext& ctx) {
  const Node& n = ctx.node;
  const int world = static_cast<int>(n.attr_int("world", 1));
  const DataType dt = ctx.in(0).dtype;
  if (dt != DataType::kFloat32 && dt != DataType::kFloat64)
    ctx.Fail("sums float32 or float64, got " + DataTypeName(dt));
  const int64_t count = ctx.in(0).numel();
  const std::string where = n.Describe();
  KernelInfo k{[=](const KernelIO& io) {
    CheckWorld(world, where);
    if (io.out[0] != io.in[0]) std::memcpy(io.out[0], io.in[0], static_cast<size_t>(count) * SizeOf(dt));
    if (dt == DataType::kFloat32)
      dist::World().AllReduceSum(io.Out<float>(0), count);
    else
      dist::World().AllReduceSum(io.Out<double>(0), count);
  }};
  k.inplace = {{0, 0}};
  return k;
}

}  // namespace

void RegisterCollectiveKernels(KernelRegistry& r) {
  r.Register("AllReduceSum", MakeSum, kInternalDomain);
  r.Register("AllReduceStart", MakeStart, kInternalDomain);
  r.Register("AllReduceWait", MakeWait, kInternalDomain);
}

}  // namespace ot
