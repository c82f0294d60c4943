// CUDA kernels of the data-parallel collectives (graph/ops/collective.cc) on NCCL (executor/cuda/nccl_world.h):
//   AllReduceStart packs the bucket's gradients into its output on the kernel's stream, records an event there, and
//     has NCCL's stream wait for it and run ncclAllReduce(ncclAvg) over the bucket, then record a second event;
//   AllReduceWait has its stream wait for that event and copies each gradient's mean out of the bucket;
//   AllReduceSum (--sync-batchnorm's statistics) runs ncclAllReduce(ncclSum) on the kernel's own stream.
// Both events belong to the start node (made when its kernel is made), found by the wait through the bucket's
// producer. Under CUDA-graph capture the waits fork NCCL's stream into the capture and join it back, so a captured
// step replays the all-reduces with the rest; the chain of collectives the data_parallel pass adds makes every rank
// issue them in one order, as NCCL requires. Float32 only (the gradients the update reads).
#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "executor/cuda/cuda_kernels.h"
#include "executor/cuda/nccl_world.h"
#include "graph/graph.h"

namespace ot {

namespace {

// A start node's two events: its bucket packed (on the kernel's stream), and its all-reduce done (on NCCL's).
struct BucketEvents {
  cudaEvent_t packed = nullptr, reduced = nullptr;
  BucketEvents() {
    CudaCheck(cudaEventCreateWithFlags(&packed, cudaEventDisableTiming), "cudaEventCreate");
    CudaCheck(cudaEventCreateWithFlags(&reduced, cudaEventDisableTiming), "cudaEventCreate");
  }
  ~BucketEvents() {
    cudaEventDestroy(packed);
    cudaEventDestroy(reduced);
  }
};

// By start node: a plan's wait finds its start's events through its bucket's producer.
class Events {
 public:
  std::shared_ptr<BucketEvents> For(const Node* start) {
    std::lock_guard<std::mutex> lock(mu_);
    std::shared_ptr<BucketEvents>& e = map_[start];
    if (!e) e = std::make_shared<BucketEvents>();
    return e;
  }

 private:
  std::mutex mu_;
  std::map<const Node*, std::shared_ptr<BucketEvents>> map_;
};

Events& ByStart() {
  static Events e;
  return e;
}

void CheckWorld(const KernelContext& ctx, const nccl::World& w) {
  const int64_t world = ctx.node.attr_int("world", 1);
  if (world != w.size())
    ctx.Fail("the step was built for " + std::to_string(world) + " ranks, this job has " + std::to_string(w.size()));
  if (ctx.node.attr_int("scatter", 0)) ctx.Unsupported("a reduce-scattered bucket (--shard-optimizer) on the GPU");
}

KernelInfo Start(const KernelContext& ctx) {
  const Node& n = ctx.node;
  const int count = static_cast<int>(n.attr_int("count", static_cast<int64_t>(n.inputs.size())));
  if (ctx.in(0).dtype != DataType::kFloat32)
    ctx.Unsupported("an all-reduce of " + DataTypeName(ctx.in(0).dtype) + " gradients on the GPU");
  const nccl::World& w = nccl::World::Get();
  CheckWorld(ctx, w);
  std::vector<size_t> bytes;
  size_t total = 0;
  for (int i = 0; i < count; ++i) {
    bytes.push_back(ctx.in(i).nbytes());
    total += static_cast<size_t>(ctx.in(i).numel());
  }
  std::shared_ptr<BucketEvents> ev = ByStart().For(&n);
  const std::string where = n.Describe();
  return MakeInfo([=, &w](const KernelIO& io) {
    cudaStream_t s = static_cast<cudaStream_t>(io.stream);
    char* out = static_cast<char*>(io.out[0]);
    for (size_t i = 0; i < bytes.size(); ++i) {
      if (bytes[i]) CudaCheck(cudaMemcpyAsync(out, io.in[i], bytes[i], cudaMemcpyDeviceToDevice, s), "bucket pack");
      out += bytes[i];
    }
    CudaCheck(cudaEventRecord(ev->packed, s), "cudaEventRecord");
    CudaCheck(cudaStreamWaitEvent(w.stream(), ev->packed, 0), "cudaStreamWaitEvent");
    RunLauncher(where, [&] { w.AllReduce(io.Out<float>(0), total, true, w.stream()); });
    CudaCheck(cudaEventRecord(ev->reduced, w.stream()), "cudaEventRecord");
  });
}

KernelInfo Wait(const KernelContext& ctx) {
  const Node& n = ctx.node;
  if (ctx.in(0).dtype != DataType::kFloat32)
    ctx.Unsupported("an all-reduce of " + DataTypeName(ctx.in(0).dtype) + " gradients on the GPU");
  const nccl::World& w = nccl::World::Get();
  CheckWorld(ctx, w);
  const Node* start = n.inputs[0] ? n.inputs[0]->producer : nullptr;
  if (!start || start->op_type != "AllReduceStart") ctx.Fail("its bucket is not an AllReduceStart's");
  std::shared_ptr<BucketEvents> ev = ByStart().For(start);
  std::vector<size_t> bytes;
  size_t total = 0;
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    bytes.push_back(ctx.out(static_cast<int>(i)).nbytes());
    total += bytes.back();
  }
  if (total != ctx.in(0).nbytes())
    ctx.Fail("the bucket holds " + std::to_string(ctx.in(0).nbytes()) + " bytes, the outputs " + std::to_string(total));
  return MakeInfo([=](const KernelIO& io) {
    cudaStream_t s = static_cast<cudaStream_t>(io.stream);
    CudaCheck(cudaStreamWaitEvent(s, ev->reduced, 0), "cudaStreamWaitEvent");
    const char* b = static_cast<const char*>(io.in[0]);
    for (size_t i = 0; i < bytes.size(); ++i) {
      if (bytes[i]) CudaCheck(cudaMemcpyAsync(io.out[i], b, bytes[i], cudaMemcpyDeviceToDevice, s), "bucket unpack");
      b += bytes[i];
    }
  });
}

KernelInfo Sum(const KernelContext& ctx) {
  if (ctx.in(0).dtype != DataType::kFloat32)
    ctx.Unsupported("a sum over the ranks of " + DataTypeName(ctx.in(0).dtype) + " on the GPU");
  const nccl::World& w = nccl::World::Get();
  CheckWorld(ctx, w);
  const size_t count = static_cast<size_t>(ctx.in(0).numel());
  const std::string where = ctx.node.Describe();
  KernelInfo info = MakeInfo([=, &w](const KernelIO& io) {
    cudaStream_t s = static_cast<cudaStream_t>(io.stream);
    if (io.out[0] != io.in[0] && count)
      CudaCheck(cudaMemcpyAsync(io.out[0], io.in[0], count * 4, cudaMemcpyDeviceToDevice, s), "copy");
    RunLauncher(where, [&] { w.AllReduce(io.Out<float>(0), count, false, s); });
  });
  info.inplace = {{0, 0}};
  return info;
}

}  // namespace

void RegisterCudaCollectiveKernels(KernelRegistry& r) {
  r.Register("AllReduceStart", Start, kInternalDomain);
  r.Register("AllReduceWait", Wait, kInternalDomain);
  r.Register("AllReduceSum", Sum, kInternalDomain);
}

}  // namespace ot
